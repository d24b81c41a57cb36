// Tracking to inclusion and the send-and-wait methods, on workerd + anvil: a pool that drops what
// it accepted (anvil_dropTransaction), a nonce taken by a transaction sent straight to the node, a
// chain reset under tracked state, EIP-7966's eth_sendRawTransactionSync in bursts, copies and
// mixes, viem's sendTransactionSync, and GET /tx/{hash} in each state.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { createWalletClient, http, keccak256, parseGwei } from "viem";
import { stack, startAnvil, startProxy, startRelay, sendRaw, rpc, post, devAccount, signTransfer, sleep, minedCount, CHAIN_ID } from "./support/harness.mjs";

const ADMIN = { ADMIN_TOKEN: "t" };

/** anvil that mines only when told, a recording proxy that lets every nonce through (the pool decides), the relay. */
const pool = (vars = {}, { persist } = {}) =>
  stack({ anvil: { extraArgs: ["--no-mining"] }, proxy: { strictNonce: false }, vars: { ...ADMIN, ...vars }, persist });

const txStatus = async (relayUrl, hash, sender) => {
  const res = await fetch(`${relayUrl}/tx/${hash}${sender ? `?sender=${sender}` : ""}`);
  return { status: res.status, body: await res.json() };
};
const view = async (relayUrl, address) =>
  (await fetch(`${relayUrl}/senders/${address}`, { headers: { authorization: "Bearer t" } })).json();

/** Polls until `check()` is true or `ms` pass; returns the time it took, or null. */
async function until(check, ms, every = 50) {
  const start = performance.now();
  while (performance.now() - start < ms) {
    if (await check()) return performance.now() - start;
    await sleep(every);
  }
  return null;
}

/**
 * n..n+4 sent through the relay into a pool that does not mine, then n+1 dropped (anvil drops the
 * ones behind it too); `alone` puts n+2..n+4 back straight into the node, so only n+1 is missing.
 * Then a block every second. Returns what happened.
 */
async function evicted({ alone, vars }) {
  const s = await pool(vars);
  try {
    const account = devAccount(1);
    const raws = await Promise.all([0, 1, 2, 3, 4].map((n) => signTransfer(account, n)));
    const hashes = raws.map((raw) => keccak256(raw));
    for (const raw of raws) assert.ok((await sendRaw(s.relay.url, raw)).json.result);
    await rpc(s.anvil.url, "anvil_dropTransaction", [hashes[1]]);
    assert.equal((await rpc(s.anvil.url, "eth_getTransactionByHash", [hashes[2]])).result, null, "anvil drops those behind it");
    if (alone) for (const raw of raws.slice(2)) assert.ok((await rpc(s.anvil.url, "eth_sendRawTransaction", [raw])).result);
    const droppedAt = performance.now();
    await rpc(s.anvil.url, "evm_setIntervalMining", [1]);
    const allMinedMs = await until(async () => (await minedCount(s.anvil.url, account.address)) === 5, 8000, 100);
    const sends = hashes.map((h) => s.proxy.sendsOf(h));
    const receipts = await Promise.all(hashes.map(async (h) => (await rpc(s.anvil.url, "eth_getTransactionReceipt", [h])).result));
    const status = await Promise.all(hashes.map(async (h) => (await txStatus(s.relay.url, h, account.address)).body));
    return { s, account, hashes, raws, droppedAt, allMinedMs, sends, receipts, status, resubmitted: s.relay.events("tx_resubmitted") };
  } catch (e) {
    await s.stop();
    throw e;
  }
}

for (const alone of [false, true]) {
  const what = alone ? "n+1 alone" : "n+1 with n+2..n+4 behind it";
  test(`the pool drops ${what}: the relay sends the original bytes again at the first or second tracking check, all 5 mined, each once`, async () => {
    const r = await evicted({ alone, vars: { TRACK_INTERVAL_S: "2" } });
    try {
      console.log(
        `# dropped ${what}: all 5 mined ${r.allMinedMs?.toFixed(0)} ms after the drop (TRACK_INTERVAL_S 2); ` +
          `sends per hash ${r.sends.join(", ")}; ${r.resubmitted.length} resubmitted`,
      );
      assert.ok(r.allMinedMs !== null, "all 5 mined");
      // Within two tracking intervals, counted in checks rather than by the clock: the tracking
      // checks that reached the upstream after the drop and before the first resend. A tracking
      // check is a batch asking eth_getTransactionByHash of every tracked hash (here several);
      // the check of one hash just before its resend is not one.
      const resentAt = Math.min(...r.hashes.map((h) => r.s.proxy.seen.filter((x) => x.hash === h)[1]?.at ?? Infinity));
      const byHash = (q) => (Array.isArray(q.body) ? q.body.filter((m) => m?.method === "eth_getTransactionByHash").length : 0);
      const checks = r.s.proxy.requests.filter((q) => byHash(q) >= 2 && q.at > r.droppedAt && q.at < resentAt).length;
      console.log(`# dropped ${what}: ${checks} tracking checks between the drop and the first resend`);
      assert.ok(resentAt !== Infinity, "sent again");
      assert.ok(checks <= 2, `sent again at the first or second check after the drop (${checks} checks before it)`);
      assert.ok(r.receipts.every((x) => x?.status === "0x1"), "each of the 5 hashes has its receipt (one per nonce: mined once)");
      const expected = alone ? [1, 2, 1, 1, 1] : [1, 2, 2, 2, 2];
      assert.deepEqual(r.sends, expected, "only the missing ones sent again, once each");
      assert.equal(r.resubmitted.length, alone ? 1 : 4);
      // Stays in the tracker until a check sees it in a block.
      await until(async () => (await txStatus(r.s.relay.url, r.hashes[1], r.account.address)).body.status === "included", 3000);
      const one = (await txStatus(r.s.relay.url, r.hashes[1])).body;
      assert.equal(one.status, "included", JSON.stringify(one));
      assert.equal(one.resubmitted, 1);
      assert.equal(typeof one.block, "number");
      assert.ok(r.s.relay.events("tx_included").length >= 1);
    } finally {
      await r.s.stop();
    }
  });
}

test("the same drop with tracking off (TRACK_INTERVAL_S=0): the four stay missing (what tracking guards); the client's own resend then goes upstream again", async () => {
  const r = await evicted({ alone: false, vars: { TRACK_INTERVAL_S: "0" } });
  try {
    console.log(`# tracking off: ${await minedCount(r.s.anvil.url, r.account.address)}/5 mined 8 s after the drop`);
    assert.equal(r.allMinedMs, null, "not all mined");
    assert.equal(await minedCount(r.s.anvil.url, r.account.address), 1);
    // The upstream is the truth: a resend of an accepted hash the node no longer has is sent.
    const again = await Promise.all(r.raws.slice(1).map((raw, i) => sendRaw(r.s.relay.url, raw, i)));
    assert.deepEqual(again.map((a) => a.json.result), r.hashes.slice(1));
    assert.deepEqual(r.hashes.map((h) => r.s.proxy.sendsOf(h)), [1, 2, 2, 2, 2]);
    assert.ok(await until(async () => (await minedCount(r.s.anvil.url, r.account.address)) === 5, 4000));
    // One the node still has costs nothing: answered after a look by hash, not sent.
    assert.equal((await sendRaw(r.s.relay.url, r.raws[4])).json.result, r.hashes[4]);
    assert.equal(r.s.proxy.sendsOf(r.hashes[4]), 2);
  } finally {
    await r.s.stop();
  }
});

test("a replacement of a tracked nonce sent straight to the node: the relay's transaction ends as replaced (by that hash), never sent again", async () => {
  const s = await pool({ TRACK_INTERVAL_S: "1" });
  try {
    const account = devAccount(2);
    const mine = await signTransfer(account, 0);
    const other = await signTransfer(account, 0, { maxFeePerGas: parseGwei("40"), maxPriorityFeePerGas: parseGwei("4") });
    assert.equal((await sendRaw(s.relay.url, mine)).json.result, keccak256(mine));
    assert.equal((await txStatus(s.relay.url, keccak256(mine))).body.status, "pending");
    assert.ok((await rpc(s.anvil.url, "eth_sendRawTransaction", [other])).result, "the speed-up goes around the relay");
    await rpc(s.anvil.url, "evm_mine");
    // Replaced first, then (one lookup later) by which transaction.
    const ms = await until(async () => {
      const body = (await txStatus(s.relay.url, keccak256(mine), account.address)).body;
      return body.status === "replaced" && body.replaced_by !== null;
    }, 4000);
    const st = (await txStatus(s.relay.url, keccak256(mine), account.address)).body;
    console.log(`# replaced seen ${ms?.toFixed(0)} ms after the block: ${JSON.stringify(st)}`);
    assert.equal(st.status, "replaced", JSON.stringify(st));
    assert.equal(st.replaced_by, keccak256(other), "anvil answers eth_getTransactionBySenderAndNonce");
    await sleep(2500);
    assert.equal(s.proxy.sendsOf(keccak256(mine)), 1, "no resend");
    const replaced = s.relay.events("tx_replaced");
    assert.equal(replaced.length, 1);
    assert.equal(replaced[0].replaced_by, keccak256(other));
    assert.equal((await view(s.relay.url, account.address)).tracked, 0);
  } finally {
    await s.stop();
  }
});

test("a fresh chain under tracked state: nothing is stuck, the sender's next transactions through the relay are mined", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const s = await pool({ TRACK_INTERVAL_S: "1" }, { persist });
  let fresh;
  try {
    const account = devAccount(3);
    for (const n of [0, 1, 2]) assert.ok((await sendRaw(s.relay.url, await signTransfer(account, n))).json.result);
    assert.equal((await view(s.relay.url, account.address)).tracked, 3);
    // The node is replaced by a fresh one (a devnet reset), at the same address, mining again.
    const port = Number(new URL(s.anvil.url).port);
    s.anvil.stop();
    await sleep(300);
    fresh = await startAnvil({ port });
    // The relay's pending nonce for the sender follows the new chain; a wallet's loop works.
    const outcome = await until(async () => {
      const v = await view(s.relay.url, account.address);
      return v.tracked === 0 && v.queue_depth === 0 && !v.holder;
    }, 8000, 200);
    const mined = await minedCount(fresh.url, account.address);
    const pending = Number(BigInt((await rpc(s.relay.url, "eth_getTransactionCount", [account.address, "pending"])).result));
    console.log(`# after the reset: tracked state settled in ${outcome?.toFixed(0)} ms; new chain has ${mined} of the 3 mined; relay's pending nonce ${pending}`);
    assert.ok(outcome !== null, "the tracked state settles");
    assert.equal(pending, mined, "the relay answers the new chain's pending nonce");
    const next = await signTransfer(account, pending);
    assert.equal((await sendRaw(s.relay.url, next)).json.result, keccak256(next));
    // Mined within 10 s (anvil's instant miner may leave a sent transaction for a moment: foundry-rs/foundry#10122).
    assert.ok(await until(async () => (await rpc(fresh.url, "eth_getTransactionReceipt", [keccak256(next)])).result?.status === "0x1", 10_000), "mined on the new chain");
  } finally {
    await s.stop();
    fresh?.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

const sync = (url, raw, id, timeout) =>
  post(url, { jsonrpc: "2.0", id, method: "eth_sendRawTransactionSync", params: timeout === undefined ? [raw] : [raw, timeout] });

test("eth_sendRawTransactionSync: a shuffled burst of 10 through a strict-nonce upstream gets 10/10 receipts, 0 rejections; three copies of one reach the upstream once, all get the receipt", async () => {
  const s = await stack({ vars: ADMIN });
  try {
    const account = devAccount(4);
    const raws = await Promise.all([...Array(10).keys()].map((n) => signTransfer(account, n)));
    const order = [7, 2, 9, 0, 5, 3, 8, 1, 6, 4];
    const started = performance.now();
    const answers = await Promise.all(order.map((n) => sync(s.relay.url, raws[n], n, 10_000)));
    const wall = performance.now() - started;
    const receipts = answers.filter((a) => a.json.result?.transactionHash === keccak256(raws[a.json.id]) && a.json.result.status === "0x1");
    const refused = s.proxy.seen.filter((r) => !r.accepted).length;
    console.log(`# sync burst: ${receipts.length}/10 receipts in ${wall.toFixed(0)} ms, ${refused} upstream rejections`);
    assert.equal(receipts.length, 10, answers.filter((a) => !a.json.result).map((a) => a.text).join("\n"));
    assert.equal(refused, 0);
    assert.ok(!s.proxy.requests.some((r) => JSON.stringify(r.body).includes("eth_sendRawTransactionSync")), "sent upstream as a plain send");

    const copy = await signTransfer(account, 10);
    const copies = await Promise.all([1, 2, 3].map((id) => sync(s.relay.url, copy, id, 10_000)));
    assert.deepEqual(copies.map((a) => a.json.result?.transactionHash), Array(3).fill(keccak256(copy)));
    assert.equal(s.proxy.sendsOf(keccak256(copy)), 1, "the upstream saw it once");
  } finally {
    await s.stop();
  }
});

test("sync and plain sends mixed, shuffled: 6/6 mined in nonce order; a sync call over a nonce gap gets code 6 with the expected nonce", async () => {
  const s = await stack({ vars: { NONCE_GAP_WAIT_MS: "500" } });
  try {
    const account = devAccount(5);
    const raws = await Promise.all([0, 1, 2, 3, 4, 5].map((n) => signTransfer(account, n)));
    const answers = await Promise.all(
      [3, 0, 5, 1, 4, 2].map((n) => (n % 2 ? sync(s.relay.url, raws[n], n, 10_000) : sendRaw(s.relay.url, raws[n], n))),
    );
    for (const a of answers) {
      const want = keccak256(raws[a.json.id]);
      const upstream = s.proxy.seen.map((r) => [r.nonce, r.hash.slice(0, 10), r.accepted]);
      assert.equal(a.json.id % 2 ? a.json.result?.transactionHash : a.json.result, want, `${a.text} | at the upstream: ${JSON.stringify(upstream)}`);
    }
    assert.equal(await minedCount(s.anvil.url, account.address), 6);
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0);
    const gap = await sync(s.relay.url, await signTransfer(account, 8), 9);
    assert.equal(gap.json.error?.code, 6, gap.text);
    assert.equal(gap.json.error?.data, "0x6", "the expected nonce");
    assert.equal(s.proxy.seen.filter((r) => r.nonce === 8).length, 0, "not sent");
  } finally {
    await s.stop();
  }
});

test("a sync call whose transaction is not mined in time: code 4 with the hash (EIP-7966), the transaction stays pending and tracked", async () => {
  const s = await pool({ TRACK_INTERVAL_S: "1" });
  try {
    const account = devAccount(6);
    const raw = await signTransfer(account, 0);
    const started = performance.now();
    const answer = await sync(s.relay.url, raw, 1, 700);
    const ms = performance.now() - started;
    assert.equal(answer.json.error?.code, 4, answer.text);
    assert.equal(answer.json.error?.data, keccak256(raw));
    // It waited the call's own timeout (700 ms, not SYNC_TIMEOUT_MS), in the relay's words.
    assert.match(answer.json.error.message, /not included within 700 ms/, answer.text);
    console.log(`# sync timeout 700 ms: code 4 after ${ms.toFixed(0)} ms`);
    assert.equal((await txStatus(s.relay.url, keccak256(raw))).body.status, "pending");
  } finally {
    await s.stop();
  }
});

test("viem sendTransactionSync end to end: the receipt, through the relay", async () => {
  const anvil = await startAnvil();
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: anvil.url } });
  try {
    const account = devAccount(7);
    const chain = { id: CHAIN_ID, name: "anvil", nativeCurrency: { name: "Ether", symbol: "ETH", decimals: 18 }, rpcUrls: { default: { http: [relay.url] } } };
    const wallet = createWalletClient({ account, chain, transport: http(relay.url) });
    const receipt = await wallet.sendTransactionSync({ to: "0x000000000000000000000000000000000000dEaD", value: 1n });
    assert.equal(receipt.status, "success");
    assert.equal(relay.events("tx_forwarded").length, 1, "through the sender's object");
  } finally {
    await relay.stop();
    anvil.stop();
  }
});

test("GET /tx/{hash} in each state (queued, sent, pending, included, expired, failed, unknown); an idle sender leaves no alarm set", async () => {
  const anvil = await startAnvil({ extraArgs: ["--no-mining"] });
  const account = devAccount(8);
  const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, hang: (r) => r.hash === keccak256(raws[0]) && r.first !== false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, LOCK_MAX_HOLD_MS: "1500", TRACK_INTERVAL_S: "1", TRACK_TTL_S: "3", ...ADMIN } });
  try {
    const [h0, h1] = raws.map((raw) => keccak256(raw));
    const held = sendRaw(relay.url, raws[0], 1);
    await until(() => proxy.sendsOf(h0) === 1, 2000);
    const waiting = sendRaw(relay.url, raws[1], 2);
    await sleep(100);
    assert.equal((await txStatus(relay.url, h0, account.address)).body.status, "sent");
    assert.equal((await txStatus(relay.url, h1, account.address)).body.status, "queued");
    assert.equal((await held).json.error?.code, -32002, "the upstream never answered n");
    await waiting;
    // Unknown: neither the relay nor the upstream; a malformed hash.
    const unknown = await txStatus(relay.url, `0x${"11".repeat(32)}`);
    assert.equal(unknown.status, 404);
    assert.equal(unknown.body.status, "unknown");
    assert.equal((await fetch(`${relay.url}/tx/0x12`)).status, 400);
    // Failed: a transaction from an account without funds.
    const { privateKeyToAccount } = await import("viem/accounts");
    const poor = privateKeyToAccount(`0x${"42".repeat(32)}`);
    const broke = await signTransfer(poor, 0);
    const refused = await sendRaw(relay.url, broke);
    assert.ok(refused.json.error, refused.text);
    const failed = (await txStatus(relay.url, keccak256(broke), poor.address)).body;
    assert.equal(failed.status, "failed");
    assert.match(failed.error, /funds/i);
    // Pending, then expired after TRACK_TTL_S (the pool never mines).
    const pendingNow = (await txStatus(relay.url, h1)).body;
    assert.equal(pendingNow.status, "pending", JSON.stringify(pendingNow));
    assert.ok(await until(async () => (await txStatus(relay.url, h1, account.address)).body.status === "expired", 6000, 200));
    assert.ok(relay.events("tx_expired").length >= 1);
    // Included: a block, then the next check.
    const other = devAccount(9);
    const raw = await signTransfer(other, 0);
    assert.ok((await sendRaw(relay.url, raw)).json.result);
    await rpc(anvil.url, "evm_mine");
    assert.ok(await until(async () => (await txStatus(relay.url, keccak256(raw))).body.status === "included", 4000, 100));
    const included = relay.events("tx_included").find((e) => e.tx_hash === keccak256(raw));
    assert.ok(included && included.time_to_inclusion_ms >= 0);
    // Idle: nothing tracked, no alarm in storage.
    const idle = await view(relay.url, other.address);
    assert.equal(idle.tracked, 0);
    assert.equal(idle.alarm_ms, null);
    assert.equal(idle.storage_alarm_ms, null, JSON.stringify(idle));
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});
