// Riding through what a public endpoint meets: an upstream away for seconds (HTTP 503 from its
// load balancer, or refusing connections while it restarts), the relay's own process killed
// mid-burst and started again on the same state, a waiter behind a nonce that never comes, and a
// chain that was reset under kept relay state. The compiled relay on workerd, anvil behind the
// strict-nonce test proxy (which refuses nonce gaps, as Hedera's consensus nodes do).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { keccak256 } from "viem";
import {
  startAnvil,
  startProxy,
  startRelay,
  stack,
  sendRaw,
  rpc,
  devAccount,
  signTransfer,
  signBurst,
  sendUntilResult,
  minedCounts,
  sleep,
  freePort,
  CAST_BIN,
} from "./support/harness.mjs";

const run = promisify(execFile);

/** Refusals at the strict upstream of transactions it did not already hold (a resend of one it
 * took, after a lost answer, is refused as "nonce too low" and fine). */
function badRefusals(proxy) {
  const accepted = new Set(proxy.seen.filter((r) => r.accepted).map((r) => r.hash));
  return proxy.seen.filter((r) => r.answeredAt && !r.accepted && !accepted.has(r.hash));
}

/**
 * 10 senders x 10 transactions fired at once; once 20 went in, the upstream goes away for `ms` as
 * `kind` says ("503" or "refuse"). Each send takes 30 ms at the upstream, so every sender's
 * holder is mid-burst when the outage begins.
 */
async function outageBurst(kind, ms, vars = {}) {
  const senders = 10;
  const perSender = 10;
  const anvil = await startAnvil({ accounts: senders + 1 });
  const accounts = Array.from({ length: senders }, (_, i) => devAccount(i));
  const senderOfRaw = new Map();
  const proxy = await startProxy({
    upstream: anvil.url,
    latency: (req) => (req?.method === "eth_sendRawTransaction" ? 30 : 0),
    senderOf: (raw) => senderOfRaw.get(raw),
  });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ...vars } });
  try {
    const raws = await signBurst(accounts, perSender, senderOfRaw);
    const started = performance.now();
    const answering = Promise.all(raws.map((raw, i) => sendRaw(relay.url, raw, i)));
    for (let i = 0; i < 1000 && proxy.seen.filter((r) => r.accepted).length < 20; i++) await sleep(5);
    const before = proxy.seen.filter((r) => r.accepted).length;
    await proxy.outage(kind, ms);
    const answers = await answering;
    const wall = performance.now() - started;
    const hashes = answers.filter((a, i) => a.json?.result === keccak256(raws[i])).length;
    const mined = await minedCounts(anvil.url, accounts, perSender);
    const receipts = await Promise.all(raws.map((raw) => rpc(anvil.url, "eth_getTransactionReceipt", [keccak256(raw)])));
    return {
      hashes,
      answers,
      mined,
      minedOnce: receipts.filter((r) => r.result?.status === "0x1").length,
      refusals: badRefusals(proxy),
      before,
      wall,
      accounts,
      seen: proxy.seen,
      outage: proxy.outages[0],
      retried: relay.events("tx_retried").length,
      relay,
    };
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
}

for (const [kind, ms] of [
  ["503", 2000],
  ["503", 8000],
  ["refuse", 2000],
  ["refuse", 8000],
]) {
  const what = kind === "503" ? "answers HTTP 503" : "refuses connections";
  test(`10 senders x 10 transactions while the upstream ${what} for ${ms / 1000} s: 100/100 hashes, each mined once, 0 nonce refusals`, async () => {
    const r = await outageBurst(kind, ms);
    console.log(
      `# ${kind} ${ms} ms: ${r.hashes}/100 first answers the hash, ${r.before} accepted before the outage, ` +
        `${r.retried} retries, wall ${r.wall.toFixed(0)} ms, ${r.refusals.length} refusals`,
    );
    assert.ok(r.before >= 20, `the outage began after ${r.before} were accepted`);
    // Mid-burst for every sender: each still had transactions to send once the upstream was back.
    const after = r.accounts.map((a) => r.seen.filter((x) => x.sender === a.address.toLowerCase() && x.accepted && x.at >= r.outage.to).length);
    assert.ok(after.every((n) => n > 0), `each sender's sends accepted after the outage: ${after.join(",")}`);
    assert.ok(r.retried > 0, "the holders met the outage");
    const wrong = r.answers.filter((a) => !a.json?.result).map((a) => a.text);
    assert.deepEqual(wrong.slice(0, 3), [], `${wrong.length} clients did not get their hash`);
    assert.equal(r.hashes, 100);
    assert.deepEqual(r.mined, Array(10).fill(10), "every sender's 10 mined");
    assert.equal(r.minedOnce, 100, "each transaction mined (once: one hash, one nonce)");
    assert.deepEqual(r.refusals, [], "no nonce refusal at the upstream");
  });
}

test("the same 2 s of HTTP 503 with retries capped by count (UPSTREAM_RETRIES=3, the old budget) costs first answers (what retries to the deadline guard)", async () => {
  const r = await outageBurst("503", 2000, { UPSTREAM_RETRIES: "3" });
  console.log(`# 503 2000 ms, UPSTREAM_RETRIES=3: ${r.hashes}/100 first answers the hash`);
  assert.ok(r.hashes < 100, `with 4 tries, some clients get errors (${r.hashes}/100 hashes)`);
});

test("the relay killed mid-burst and started again on its state: every client ends with its hash, each sender goes on without waiting out a lease or a gap, exactly once, 0 refusals", async () => {
  const senders = 5;
  const perSender = 20;
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const anvil = await startAnvil({ accounts: senders + 1 });
  const accounts = Array.from({ length: senders }, (_, i) => devAccount(i));
  const senderOfRaw = new Map();
  const proxy = await startProxy({
    upstream: anvil.url,
    latency: (req) => (req?.method === "eth_sendRawTransaction" ? 20 : 0),
    senderOf: (raw) => senderOfRaw.get(raw),
  });
  const vars = { UPSTREAM_RPC_URL: proxy.url };
  const current = { relay: await startRelay({ vars, persist }) };
  let second;
  try {
    const raws = await signBurst(accounts, perSender, senderOfRaw);
    // A client that sends its bytes again until it gets an answer with its hash (a lost
    // connection, or an error, is tried again 100 ms later), for at most 30 s.
    let errors = 0;
    const clients = Promise.all(raws.map((raw, i) => sendUntilResult(current, raw, i, { onError: () => (errors += 1) })));
    for (let i = 0; i < 300 && proxy.seen.filter((r) => r.accepted).length < 30; i++) await sleep(10);
    const atKill = proxy.seen.filter((r) => r.accepted).length;
    current.relay.kill();
    await current.relay.stop().catch(() => {});
    const killedAt = performance.now();
    second = await startRelay({ vars, persist });
    const readyAt = performance.now();
    current.relay = second;
    const results = await clients;
    const firstAfter = accounts.map((a) => {
      const sender = a.address.toLowerCase();
      const next = proxy.seen.find((r) => r.sender === sender && r.at >= readyAt);
      return next ? next.at - readyAt : null;
    });
    console.log(
      `# killed with ${atKill}/100 accepted; relay down ${(readyAt - killedAt).toFixed(0)} ms; ` +
        `each sender's next send ${firstAfter.map((ms) => (ms === null ? "-" : ms.toFixed(0))).join(", ")} ms after the relay answered again; ` +
        `${errors} error answers; ${second.events("tx_resubmitted").length} resubmitted`,
    );
    assert.ok(atKill < 100, "killed mid-burst");
    assert.deepEqual(
      results.map((hash, i) => hash === keccak256(raws[i])),
      Array(raws.length).fill(true),
      "every client ends with its hash",
    );
    assert.deepEqual(await minedCounts(anvil.url, accounts, perSender), Array(senders).fill(perSender));
    const accepted = proxy.seen.filter((r) => r.accepted).map((r) => r.hash);
    assert.equal(new Set(accepted).size, accepted.length, "no transaction went in twice");
    assert.equal(accepted.length, senders * perSender);
    assert.deepEqual(badRefusals(proxy), [], "no nonce refusal at the upstream");
    // Each sender went on after the restart without waiting anything out: no lease of a holder
    // the kill lost (force_release), no gap wait for a nonce the restarted object thought missing.
    assert.equal(second.events("force_release").length, 0, "nothing waits out a lease");
    assert.equal(second.events("gap_wait_expired").length, 0, "nothing waits out a gap");
  } finally {
    await second?.stop();
    await proxy.stop();
    anvil.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("nonces n, n+1 and n+3 sent together (n+2 never comes): n+3 goes once its gap wait (NONCE_GAP_WAIT_MS) expires", async () => {
  const s = await stack({ vars: { NONCE_GAP_WAIT_MS: "1000" } });
  try {
    const account = devAccount(5);
    const raws = await Promise.all([0, 1, 3].map((n) => signTransfer(account, n)));
    const started = performance.now();
    const [n, n1, n3] = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
    const answeredAt = performance.now() - started;
    assert.equal(n.json.result, keccak256(raws[0]));
    assert.equal(n1.json.result, keccak256(raws[1]));
    // n+3 went after its gap wait; the strict upstream refuses the gap, in its own words.
    assert.match(n3.json.error?.message ?? "", /Nonce too high/, n3.text);
    // It went because its gap wait expired (not held past it for anything else), after the
    // relay waited NONCE_GAP_WAIT_MS by its own measure; the upstream saw it once, after n+1.
    const gapWaits = s.relay.events("gap_wait_expired");
    assert.deepEqual(gapWaits.map((e) => [e.nonce, e.expected_nonce]), [[3, 2]], s.relay.logs.join("\n"));
    assert.ok(gapWaits[0].waited_ms >= 1000, `the relay's gap wait: ${gapWaits[0].waited_ms} ms`);
    assert.deepEqual(s.proxy.seen.map((r) => r.nonce), [0, 1, 3]);
    assert.equal(s.relay.events("force_release").length, 0);
    console.log(`# n+3 answered after ${n3.ms.toFixed(0)} ms (NONCE_GAP_WAIT_MS 1000); all three in ${answeredAt.toFixed(0)} ms`);
  } finally {
    await s.stop();
  }
});

test("a fresh chain under kept relay state (make dev twice): the relay answers the new chain's nonce, and cast send is mined both times", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const port = await freePort();
  const key = "0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80"; // anvil dev key 0
  const address = "0xf39Fd6e51aad88F6F4ce6aB8827279cffFb92266";
  const castSend = (url) =>
    run(CAST_BIN, ["send", "--rpc-url", url, "--private-key", key, "--json", "--timeout", "20", "0x000000000000000000000000000000000000dEaD", "--value", "1"]);
  let anvil;
  let relay;
  try {
    for (const round of [1, 2]) {
      // Each round a new genesis, as a reset devnet has (two anvils started within one second
      // would share a genesis hash: the relay could not tell them from one node that lost its
      // pool, and rightly sends its stored transaction again).
      anvil = await startAnvil({ port, extraArgs: ["--timestamp", String(1_800_000_000 + round)] });
      relay = await startRelay({ vars: { UPSTREAM_RPC_URL: anvil.url, CHAIN_ID: undefined }, persist });
      const pending = await rpc(relay.url, "eth_getTransactionCount", [address, "pending"]);
      assert.equal(pending.result, "0x0", `round ${round}: the new chain's pending nonce`);
      const { stdout } = await castSend(relay.url);
      assert.equal(JSON.parse(stdout).status, "0x1", `round ${round}: mined`);
      const count = await rpc(anvil.url, "eth_getTransactionCount", [address, "latest"]);
      assert.equal(count.result, "0x1");
      if (round === 2) assert.equal(relay.events("chain_changed").length, 1, relay.logs.join("\n"));
      await relay.stop();
      anvil.stop();
      relay = undefined;
      await sleep(200);
    }
  } finally {
    await relay?.stop();
    anvil?.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
