// End-to-end tests: the compiled wasm relay on workerd (miniflare), a real anvil behind a
// latency-injecting, strict-nonce test proxy, transactions signed with anvil's dev keys.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import {
  stack,
  rpc,
  post,
  sendRaw,
  devAccount,
  signTransfer,
  sleep,
  minedCounts,
  freePort,
  startRelay,
  startAnvil,
  mostAtOnce,
  CAST_BIN,
} from "./support/harness.mjs";

const run = promisify(execFile);
const random = (max) => () => Math.random() * max;

async function receipt(url, hash) {
  for (let i = 0; i < 100; i++) {
    const r = await rpc(url, "eth_getTransactionReceipt", [hash]);
    if (r.result) return r.result;
    await sleep(20);
  }
  return null;
}

/** Fires `count` transactions of one sender at once (in `order`), returns the answers. */
async function burst(s, account, count, order = (xs) => xs) {
  const raws = await Promise.all(Array.from({ length: count }, (_, n) => signTransfer(account, n)));
  const indexes = order([...raws.keys()]);
  const answers = await Promise.all(indexes.map((n) => sendRaw(s.relay.url, raws[n], n)));
  return answers.sort((a, b) => a.json.id - b.json.id);
}

function inNonceOrder(seen, sender) {
  const nonces = seen.filter((r) => r.sender === sender).map((r) => r.nonce);
  return nonces.every((n, i) => i === 0 || n > nonces[i - 1]);
}

test("racing upstream: 30 transactions of one sender, ordered, all accepted and mined", async () => {
  const s = await stack({ proxy: { latency: random(50) } });
  try {
    const account = devAccount(1);
    const sender = account.address.toLowerCase();
    const answers = await burst(s, account, 30);
    const errors = answers.filter((a) => a.json.error);
    assert.deepEqual(errors.map((a) => a.json.error), [], "no transaction refused");
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "zero rejections at the proxy");
    assert.ok(inNonceOrder(s.proxy.seen, sender), "the proxy saw them in nonce order");
    assert.equal(s.proxy.seen.length, 30);
    for (const a of answers) assert.ok(await receipt(s.anvil.url, a.json.result), "mined");
    const count = await rpc(s.anvil.url, "eth_getTransactionCount", [sender, "latest"]);
    assert.equal(Number(count.result), 30);
  } finally {
    await s.stop();
  }
});

test("racing upstream without ordering (ENABLE_NONCE_ORDERING=false) shows rejections", async () => {
  const s = await stack({ proxy: { latency: random(50) }, vars: { ENABLE_NONCE_ORDERING: "false" } });
  try {
    const answers = await burst(s, devAccount(1), 30);
    const refused = answers.filter((a) => a.json.error).length;
    assert.ok(refused > 0, `expected wrong-nonce rejections without ordering, got ${refused}`);
    assert.ok(s.proxy.seen.some((r) => !r.accepted));
  } finally {
    await s.stop();
  }
});

test("an unset CHAIN_ID is learned once; a burst that arrives during the lookup keeps its order", async () => {
  // eth_chainId answers after 100-500 ms, each request differently. Were every early request to
  // look the chain id up itself, the burst would reach the Durable Object shuffled by up to
  // 400 ms, past the 100 ms gap wait, and the strict proxy would refuse some.
  const s = await stack({
    proxy: { latency: (req) => (req?.method === "eth_chainId" ? 100 + Math.random() * 400 : 0) },
    vars: { CHAIN_ID: undefined, NONCE_GAP_WAIT_MS: "100" },
  });
  try {
    const account = devAccount(1);
    const answers = await burst(s, account, 20);
    const lookups = s.proxy.requests.filter((r) => r.body?.method === "eth_chainId").length;
    assert.deepEqual(answers.filter((a) => a.json.error).map((a) => a.json.error), [], "no transaction refused");
    assert.equal(lookups, 1, "one eth_chainId lookup for the whole burst");
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "zero rejections at the proxy");
    assert.ok(inNonceOrder(s.proxy.seen, account.address.toLowerCase()));
  } finally {
    await s.stop();
  }
});

test("a chain id lookup that times out: it and its waiters get a clear error, the next request learns it", async () => {
  let slow = true;
  const s = await stack({
    proxy: { latency: (req) => (req?.method === "eth_chainId" && slow ? ((slow = false), 4000) : 0) },
    vars: { CHAIN_ID: undefined, UPSTREAM_TIMEOUT_MS: "1500" },
  });
  try {
    const account = devAccount(1);
    const raw = await signTransfer(account, 0);
    const [a, b] = await Promise.all([sendRaw(s.relay.url, raw, 1), sendRaw(s.relay.url, raw, 2)]);
    for (const answer of [a, b]) {
      assert.equal(answer.json?.error?.code, -32002, answer.text);
      // The relay's own word that it gave up at UPSTREAM_TIMEOUT_MS: had it waited for the
      // upstream's answer (4 s), the lookup would have succeeded and the send gone on.
      assert.equal(answer.json.error.message, "cannot learn the chain id: upstream did not answer within 1500 ms");
      console.log(`# chain id lookup timed out: answered after ${answer.ms.toFixed(0)} ms`);
    }
    assert.equal(s.proxy.seen.length, 0, "no transaction went on without a chain id");
    const c = await sendRaw(s.relay.url, raw, 3);
    assert.ok(c.json?.result, c.text);
    assert.equal(s.proxy.requests.filter((r) => r.body?.method === "eth_chainId").length, 2, "one lookup each time");
  } finally {
    await s.stop();
  }
});

test("transactions that arrive in reverse nonce order still leave in nonce order", async () => {
  const s = await stack({ proxy: { latency: random(10) } });
  try {
    const account = devAccount(2);
    const answers = await burst(s, account, 10, (xs) => xs.reverse());
    assert.deepEqual(answers.filter((a) => a.json.error).map((a) => a.json.error), []);
    assert.ok(inNonceOrder(s.proxy.seen, account.address.toLowerCase()));
    assert.equal(s.proxy.seen.filter((r) => r.accepted).length, 10);
  } finally {
    await s.stop();
  }
});

test("10 senders x 10 transactions: senders do not serialize each other", async () => {
  const latency = 50;
  const s = await stack({ proxy: { latency: () => latency } });
  try {
    const accounts = Array.from({ length: 10 }, (_, i) => devAccount(3 + i));
    const raws = await Promise.all(
      accounts.flatMap((a) => Array.from({ length: 10 }, (_, n) => signTransfer(a, n))),
    );
    const started = performance.now();
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
    const wall = performance.now() - started;
    assert.deepEqual(answers.filter((a) => a.json.error).map((a) => a.json.error), []);
    const serializedAll = 10 * 10 * latency;
    // What the upstream saw: while one sender's transaction was at the upstream (between its
    // arrival and its answer), other senders' arrived there; and the arrivals are not one
    // sender's ten, then the next sender's ten.
    const seen = s.proxy.seen;
    const sendersAtOnce = mostAtOnce(seen, (r) => r.sender);
    const arrivals = seen.map((r) => r.sender);
    const switches = arrivals.filter((sender, i) => i > 0 && sender !== arrivals[i - 1]).length;
    console.log(
      `# 10x10 wall ${wall.toFixed(0)} ms; all serialized would be >= ${serializedAll} ms; ` +
        `up to ${sendersAtOnce} senders at the upstream at once; ${switches} sender switches in ${seen.length} arrivals`,
    );
    assert.equal(seen.length, 100);
    assert.ok(sendersAtOnce >= 2, "another sender's transaction reached the upstream while one was there");
    assert.ok(switches > accounts.length - 1, `the senders' sends interleaved at the upstream: ${arrivals.join(",")}`);
    for (const a of accounts) assert.ok(inNonceOrder(s.proxy.seen, a.address.toLowerCase()));
  } finally {
    await s.stop();
  }
});

test("a transaction the upstream hangs on: its client gets -32002 at LOCK_MAX_HOLD_MS, the relay sends it again twice then gives it up, the sender's next goes after a gap wait, others not at all", async () => {
  const a = devAccount(13);
  const b = devAccount(14);
  const hungSender = a.address.toLowerCase();
  const s = await stack({
    proxy: { strictNonce: false, hang: (tx) => tx.sender === hungSender && tx.nonce === 0 },
    // Every attempt is cut to the holder's deadline, so it gives up by itself at 500 ms. The
    // outcome is unknown and the upstream does not have it: the relay sends the stored bytes
    // again (at most twice, each cut at 500 ms), then gives it up; nonce 1 then waits
    // NONCE_GAP_WAIT_MS for a resend of 0 before it goes.
    vars: { LOCK_MAX_HOLD_MS: "500", UPSTREAM_TIMEOUT_MS: "3000", NONCE_GAP_WAIT_MS: "300" },
  });
  try {
    const hung = sendRaw(s.relay.url, await signTransfer(a, 0));
    for (let i = 0; i < 200 && !s.proxy.seen.some((r) => r.sender === hungSender); i++) await sleep(10);
    const t0 = s.proxy.seen.find((r) => r.sender === hungSender)?.at;
    assert.ok(t0, "the first transaction reached the proxy");
    const [next, other] = await Promise.all([
      sendRaw(s.relay.url, await signTransfer(a, 1)),
      sendRaw(s.relay.url, await signTransfer(b, 0)),
    ]);
    assert.ok(next.json.result && other.json.result, JSON.stringify([next.json, other.json]));
    const otherSender = b.address.toLowerCase();
    const nextAt = s.proxy.seen.find((r) => r.sender === hungSender && r.nonce === 1).at;
    const otherAt = s.proxy.seen.find((r) => r.sender === otherSender).at;
    const zeroSends = s.proxy.seen.filter((r) => r.sender === hungSender && r.nonce === 0);
    console.log(`# next of the hung sender forwarded ${(nextAt - t0).toFixed(0)} ms after the hung one; another sender ${(otherAt - t0).toFixed(0)} ms`);
    // The hung sender's next went only once its nonce 0 was given up (after its third send), and
    // after a gap wait the relay measured at NONCE_GAP_WAIT_MS or more.
    assert.equal(zeroSends.length, 3, "sent, then twice again, before the next went");
    assert.ok(zeroSends.every((r) => r.at < nextAt), "nonce 1 reached the upstream after every send of nonce 0");
    const gapWaits = s.relay.events("gap_wait_expired");
    assert.deepEqual(gapWaits.map((e) => [e.sender, e.nonce]), [[hungSender, 1]], s.relay.logs.join("\n"));
    assert.ok(gapWaits[0].waited_ms >= 300, `the relay's own gap wait: ${gapWaits[0].waited_ms} ms`);
    // The other sender did not wait for the hung one: it reached the upstream while the hung
    // sender's nonce 0 still held its turn (before its last resend), and waited out nothing.
    assert.ok(otherAt < zeroSends[2].at, "the other sender went while the hung one still held nonce 0");
    for (const event of ["gap_wait_expired", "force_release"]) {
      assert.equal(s.relay.events(event).filter((e) => e.sender === otherSender).length, 0, `no ${event} for the other sender`);
    }
    const late = await hung;
    assert.equal(late.json.error?.code, -32002, "the hung client gets an error, not silence");
    assert.match(late.json.error.message, /did not answer within \d+ ms; a transaction may still be processed/);
    assert.equal(s.proxy.seen.filter((r) => r.sender === hungSender && r.nonce === 0).length, 3, "sent, then twice again");
    assert.equal(s.relay.events("tx_abandoned").length, 1, s.relay.logs.join("\n"));
    assert.equal(s.relay.events("gap_wait_expired").length, 1, "1 went after its gap wait");
  } finally {
    await s.stop();
  }
});

test("fail-open: the Durable Object unreachable, the transaction still reaches anvil and is logged", async () => {
  const lockHost = `
    export class SenderLock {
      constructor() { throw new Error("Durable Object unavailable (test host refuses to start)"); }
    }
    export default { fetch() { return new Response("lock host"); } };`;
  const s = await stack({ lockHost });
  try {
    const account = devAccount(15);
    const answer = await sendRaw(s.relay.url, await signTransfer(account, 0));
    assert.ok(answer.json.result, JSON.stringify(answer.json));
    assert.ok(await receipt(s.anvil.url, answer.json.result), "mined");
    const lines = s.relay.events("fail_open");
    assert.equal(lines.length, 1, s.relay.logs.join("\n"));
    assert.equal(lines[0].sender, account.address.toLowerCase());
    assert.equal(lines[0].tx_hash, answer.json.result);
    assert.ok(lines[0].error.length > 0);
    assert.ok(!s.relay.logs.join("\n").includes(s.proxy.url), "no upstream URL in logs");
  } finally {
    await s.stop();
  }
});

test("a real client: cast send through the relay gets a receipt", async () => {
  const s = await stack({ proxy: { latency: random(5) } });
  try {
    const { stdout } = await run(CAST_BIN, [
      "send",
      "--rpc-url",
      s.relay.url,
      "--private-key",
      "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", // anvil dev key 2
      "--json",
      "0x000000000000000000000000000000000000dEaD",
      "--value",
      "1",
    ]);
    const rcpt = JSON.parse(stdout);
    assert.equal(rcpt.status, "0x1");
    assert.equal(s.proxy.seen.length, 1);
    assert.equal(s.proxy.seen[0].hash, rcpt.transactionHash);
  } finally {
    await s.stop();
  }
});

test("errors: each has its code, keeps its id, and nothing invalid reaches the upstream", async () => {
  const s = await stack();
  try {
    const account = devAccount(16);
    const good = await signTransfer(account, 0);
    const before = s.proxy.requests.length;
    const cases = [
      ["-32700 unparsable JSON", "{not json", -32700],
      ["-32600 wrong version", { jsonrpc: "1.0", id: 1, method: "eth_chainId" }, -32600],
      ["-32600 empty batch", [], -32600],
      ["-32602 not hex", { jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: ["0xzz"] }, -32602],
      ["-32602 no params", { jsonrpc: "2.0", id: 3, method: "eth_sendRawTransaction", params: [] }, -32602],
      ["-32602 RLP error", { jsonrpc: "2.0", id: 4, method: "eth_sendRawTransaction", params: ["0x02c3010203"] }, -32602],
      ["-32602 trailing bytes", { jsonrpc: "2.0", id: 5, method: "eth_sendRawTransaction", params: [good + "00"] }, -32602],
      ["-32602 unknown type", { jsonrpc: "2.0", id: 6, method: "eth_sendRawTransaction", params: ["0x05c0"] }, -32602],
    ];
    // A bad signature: r zeroed in an otherwise valid legacy transaction.
    const legacy = await account.signTransaction({
      type: "legacy", chainId: 31337, nonce: 0, to: "0x000000000000000000000000000000000000dEaD",
      value: 1n, gas: 21000n, gasPrice: 10n ** 10n,
    });
    const badSig = legacy.replace(/a0[0-9a-f]{64}(a0[0-9a-f]{64})$/, "80$1");
    assert.notEqual(badSig, legacy);
    cases.push(["-32602 bad signature", { jsonrpc: "2.0", id: 7, method: "eth_sendRawTransaction", params: [badSig] }, -32602]);
    const otherChain = await signTransfer(account, 0, { chainId: 1 });
    cases.push(["-32000 wrong chain id", { jsonrpc: "2.0", id: 8, method: "eth_sendRawTransaction", params: [otherChain] }, -32000]);
    const unprotected = await account.signTransaction({
      type: "legacy", nonce: 0, to: "0x000000000000000000000000000000000000dEaD", value: 1n, gas: 21000n, gasPrice: 10n ** 10n,
    });
    cases.push(["-32000 unprotected", { jsonrpc: "2.0", id: 9, method: "eth_sendRawTransaction", params: [unprotected] }, -32000]);

    for (const [name, body, code] of cases) {
      const r = await post(s.relay.url, body);
      assert.equal(r.json?.error?.code, code, `${name}: ${r.text}`);
      assert.ok(r.json.error.message.length > 5, name);
      if (typeof body === "object" && !Array.isArray(body)) assert.equal(r.json.id, body.id, `${name}: id kept`);
    }
    const wrongChain = await post(s.relay.url, cases.find((c) => c[0].includes("wrong chain"))[1]);
    assert.match(wrongChain.json.error.message, /want 31337/);
    assert.equal(s.proxy.requests.length, before, "nothing reached the upstream");

    // The upstream's own error comes back unchanged: nonce 5 is not next, the proxy refuses it.
    const gap = await sendRaw(s.relay.url, await signTransfer(account, 5));
    assert.deepEqual(gap.json.error, { code: -32000, message: "Nonce too high. Provided nonce: 5, current nonce: 0" });

    // A batch keeps request order and ids; its invalid member goes nowhere.
    const batch = await post(s.relay.url, [
      { jsonrpc: "2.0", id: "a", method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", id: "b", method: "eth_sendRawTransaction", params: ["0x1234"] },
      { jsonrpc: "2.0", id: "c", method: "eth_sendRawTransaction", params: [good] },
      { jsonrpc: "2.0", id: "d", method: "eth_blockNumber", params: [] },
    ]);
    assert.deepEqual(batch.json.map((r) => r.id), ["a", "b", "c", "d"]);
    assert.equal(batch.json[0].result, "0x7a69");
    assert.equal(batch.json[1].error.code, -32602);
    assert.match(batch.json[2].result, /^0x[0-9a-f]{64}$/);
    assert.ok(batch.json[3].result);
  } finally {
    await s.stop();
  }
});

test("an unreachable upstream: a clear error without its URL at LOCK_MAX_HOLD_MS, and nothing is sent on a guessed nonce", async () => {
  const anvil = await startAnvil();
  const closedPort = await freePort();
  const upstream = `http://127.0.0.1:${closedPort}/secret-path`;
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: upstream, LOCK_MAX_HOLD_MS: "1000" } });
  try {
    const account = devAccount(17);
    const first = await sendRaw(relay.url, await signTransfer(account, 0));
    assert.equal(first.json.error.code, -32002, first.text);
    assert.match(first.json.error.message, /not sent/, "the next nonce could not be learned");
    // It waited LOCK_MAX_HOLD_MS for the next nonce, by the relay's own measure.
    const waited = Number(/within (\d+) ms/.exec(first.json.error.message)?.[1]);
    assert.ok(waited >= 1000, `the relay waited ${waited} ms: ${first.json.error.message}`);
    const second = await sendRaw(relay.url, await signTransfer(account, 1));
    assert.equal(second.json.error.code, -32002, "the next transaction is not held for good either");
    console.log(`# unreachable upstream: first answered after ${first.ms.toFixed(0)} ms, second after ${second.ms.toFixed(0)} ms`);
    const proxied = await rpc(relay.url, "eth_blockNumber");
    assert.equal(proxied.error.code, -32002);
    const everything = [first.text, second.text, JSON.stringify(proxied), ...relay.logs].join("\n");
    assert.ok(!everything.includes(String(closedPort)) && !everything.includes("secret-path"), "no upstream URL");
  } finally {
    await relay.stop();
    anvil.stop();
  }
});

test("GET /health answers 200; other paths and methods are refused", async () => {
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: "http://127.0.0.1:9" } });
  try {
    assert.equal((await fetch(`${relay.url}/health`)).status, 200);
    assert.equal((await fetch(`${relay.url}/`)).status, 405);
    assert.equal((await fetch(`${relay.url}/nope`)).status, 404);
  } finally {
    await relay.stop();
  }
});

test("restart with transactions queued: clients of lost requests get errors; the restarted object finds the stored holder, resends it at once, and the sender goes on", async () => {
  const { mkdtemp, rm } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const anvil = await startAnvil();
  const a = devAccount(18);
  const sender = a.address.toLowerCase();
  const { startProxy } = await import("./support/harness.mjs");
  // Nonce 0's first send hangs (the runtime is killed while it does); later sends behave.
  let hangs = 1;
  const proxy = await startProxy({
    upstream: anvil.url,
    strictNonce: false,
    hang: (tx) => tx.sender === sender && tx.nonce === 0 && hangs-- > 0,
  });
  const vars = { UPSTREAM_RPC_URL: proxy.url, LOCK_MAX_HOLD_MS: "2000", NONCE_GAP_WAIT_MS: "500" };
  let second;
  try {
    const first = await startRelay({ vars, persist });
    const settle = (p) => p.then((r) => r, (e) => ({ failed: e }));
    const lost = [settle(sendRaw(first.url, await signTransfer(a, 0)))];
    for (let i = 0; i < 100 && !proxy.seen.length; i++) await sleep(10);
    // Two more queue behind the hung one.
    lost.push(settle(sendRaw(first.url, await signTransfer(a, 1))), settle(sendRaw(first.url, await signTransfer(a, 2))));
    await sleep(100);
    first.kill(); // the runtime crashes holding the lock, with transactions queued
    await first.stop().catch(() => {});
    for (const answer of await Promise.all(lost)) {
      assert.ok(answer.failed || answer.json?.error, "every lost request's client gets an error, not silence");
    }
    assert.equal(proxy.seen.length, 1, "the queued ones never reached the upstream");

    second = await startRelay({ vars, persist });
    const restarted = performance.now();
    const next = await sendRaw(second.url, await signTransfer(a, 1)); // resent by its client
    assert.ok(next.json.result, next.text);
    const zero = proxy.seen.filter((r) => r.nonce === 0);
    const one = proxy.seen.find((r) => r.nonce === 1);
    console.log(`# after restart, the stored nonce 0 was resent ${(zero[1].at - restarted).toFixed(0)} ms and nonce 1 forwarded ${(one.at - restarted).toFixed(0)} ms after the relay answered again`);
    assert.equal(zero.length, 2, "the stored holder was resent once, from storage");
    assert.ok(zero[1].at < one.at, "in nonce order");
    assert.equal(second.events("tx_resubmitted").length, 1, second.logs.join("\n"));
    // Nonce 1 went on without waiting: not for the lost holder's lease, not for a gap.
    assert.equal(second.events("force_release").length, 0);
    assert.equal(second.events("gap_wait_expired").length, 0, second.logs.join("\n"));
    assert.deepEqual(await minedCounts(anvil.url, [a], 2, 10_000), [2], "0 and 1 mined, once each (within 10 s: anvil's instant miner may lag, foundry-rs/foundry#10122)");
  } finally {
    await second?.stop();
    await proxy.stop();
    anvil.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
