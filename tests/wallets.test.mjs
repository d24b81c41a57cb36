// What wallets and bots send: stale nonces, replacements, the pending nonce before each send,
// shuffled batches, more than the queue holds, and the operators' per-sender view. The compiled
// relay on workerd, anvil behind the strict-nonce test proxy (or anvil directly where a pool
// must keep a pending transaction).
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256, parseGwei } from "viem";
import { stack, startAnvil, startProxy, startRelay, sendRaw, rpc, post, devAccount, signTransfer, sleep, minedCounts } from "./support/harness.mjs";

const sendsIn = (proxy) => proxy.requests.filter((r) => r.body?.method === "eth_sendRawTransaction" || r.body?.[0]?.method === "eth_sendRawTransaction");

test("a resend of a mined transaction gets its hash; another transaction with a mined nonce is refused with geth's wording; neither is sent", async () => {
  const s = await stack();
  try {
    const account = devAccount(7);
    // Nonces 0 and 1 went in elsewhere (straight to the node), long ago.
    const old = [await signTransfer(account, 0), await signTransfer(account, 1)];
    for (const raw of old) assert.ok((await sendRaw(s.anvil.url, raw)).json.result);
    const before = sendsIn(s.proxy).length;
    // The same bytes again: the upstream has them (asked by hash), so the client gets the hash.
    const resend = await sendRaw(s.relay.url, old[0], 4);
    assert.deepEqual(resend.json, { jsonrpc: "2.0", id: 4, result: keccak256(old[0]) });
    const stale = await sendRaw(s.relay.url, await signTransfer(account, 0, { value: 3n }), 5);
    assert.deepEqual(stale.json, { jsonrpc: "2.0", id: 5, error: { code: -32000, message: "nonce too low: next nonce 2, tx nonce 0" } });
    // Through the relay: 2 goes in; then a different transaction with nonce 2, after 2 was mined.
    const two = await sendRaw(s.relay.url, await signTransfer(account, 2));
    assert.ok(two.json.result, two.text);
    const late = await sendRaw(s.relay.url, await signTransfer(account, 2, { value: 2n }), 6);
    assert.equal(late.json.error?.message, "nonce too low: next nonce 3, tx nonce 2", late.text);
    assert.equal(sendsIn(s.proxy).length, before + 1, "only nonce 2 itself was sent");
    assert.equal(s.relay.events("tx_refused").filter((e) => e.label === "stale_nonce").length, 2);
  } finally {
    await s.stop();
  }
});

/** Anvil that mines only on evm_mine (so a transaction stays pending), with the relay in front. */
async function pendingPool(vars = {}) {
  const anvil = await startAnvil({ extraArgs: ["--no-mining"] });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: anvil.url, ...vars } });
  return { anvil, relay, stop: async () => { await relay.stop(); anvil.stop(); } };
}

test("REPLACEMENT_POLICY=forward: a speed-up with a higher fee is forwarded and mined instead of the original", async () => {
  const s = await pendingPool();
  try {
    const account = devAccount(8);
    const original = await signTransfer(account, 0);
    const speedUp = await signTransfer(account, 0, { maxFeePerGas: parseGwei("40"), maxPriorityFeePerGas: parseGwei("4") });
    assert.equal((await sendRaw(s.relay.url, original)).json.result, keccak256(original));
    const replaced = await sendRaw(s.relay.url, speedUp);
    assert.equal(replaced.json.result, keccak256(speedUp), replaced.text);
    await rpc(s.anvil.url, "evm_mine");
    const mined = await rpc(s.anvil.url, "eth_getTransactionReceipt", [keccak256(speedUp)]);
    assert.equal(mined.result?.status, "0x1", "the replacement is mined");
    assert.equal((await rpc(s.anvil.url, "eth_getTransactionReceipt", [keccak256(original)])).result, null, "the original is not");
    const state = s.relay.events("tx_forwarded").map((e) => e.label);
    assert.deepEqual(state, ["accepted", "accepted"]);
  } finally {
    await s.stop();
  }
});

test("REPLACEMENT_POLICY=reject: a different transaction with an accepted nonce is refused locally, naming the nonce and the hash", async () => {
  const s = await pendingPool({ REPLACEMENT_POLICY: "reject" });
  try {
    const account = devAccount(9);
    const original = await signTransfer(account, 0);
    const speedUp = await signTransfer(account, 0, { maxFeePerGas: parseGwei("40"), maxPriorityFeePerGas: parseGwei("4") });
    assert.ok((await sendRaw(s.relay.url, original)).json.result);
    const refused = await sendRaw(s.relay.url, speedUp);
    assert.equal(refused.json.error?.code, -32000, refused.text);
    assert.match(refused.json.error.message, new RegExp(`nonce 0 is already used by ${keccak256(original)}`));
    const pool = await rpc(s.anvil.url, "eth_getTransactionByHash", [keccak256(speedUp)]);
    assert.equal(pool.result, null, "it never reached the node");
    assert.equal(s.relay.events("tx_forwarded").length, 1);
  } finally {
    await s.stop();
  }
});

/** A wallet's loop: ask the pending nonce, sign, send; `count` times, one after the other. */
async function walletLoop(url, account, count) {
  const answers = [];
  for (let i = 0; i < count; i++) {
    const nonce = Number((await rpc(url, "eth_getTransactionCount", [account.address, "pending"])).result);
    answers.push({ nonce, answer: await sendRaw(url, await signTransfer(account, nonce)) });
  }
  return answers;
}

test("the pending nonce through the relay is right even when the upstream's lags 2 s; straight to it the wallet collides", async () => {
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url, lagPendingMs: 2000 });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url } });
  try {
    const viaRelay = await walletLoop(relay.url, devAccount(10), 10);
    assert.deepEqual(viaRelay.map((r) => r.nonce), [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
    assert.deepEqual(viaRelay.filter((r) => !r.answer.json.result).map((r) => r.answer.text), [], "all 10 accepted");
    assert.ok(relay.events("pending_nonce_raised").length >= 8, "the relay raised the lagging count");
    const direct = await walletLoop(proxy.url, devAccount(11), 10);
    const collided = direct.filter((r) => !r.answer.json.result).length;
    console.log(`# straight to the lagging upstream: ${collided} of 10 sends refused`);
    assert.ok(collided > 0, "without the relay the same wallet collides with itself");
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("a batch of 8 transactions of one sender in shuffled order: all accepted, none waits out the gap wait", async () => {
  const s = await stack({ vars: { NONCE_GAP_WAIT_MS: "3000" } });
  try {
    const account = devAccount(12);
    const sender = account.address.toLowerCase();
    const raws = await Promise.all(Array.from({ length: 8 }, (_, n) => signTransfer(account, n)));
    const order = [5, 2, 7, 0, 3, 6, 1, 4];
    const batch = order.map((n) => ({ jsonrpc: "2.0", id: n, method: "eth_sendRawTransaction", params: [raws[n]] }));
    const started = performance.now();
    const answer = await post(s.relay.url, batch);
    const wall = performance.now() - started;
    console.log(`# shuffled batch of 8: ${wall.toFixed(0)} ms`);
    assert.deepEqual(answer.json.map((a) => a.id), order, "the answer keeps the request order");
    assert.deepEqual(answer.json.map((a) => a.result), order.map((n) => keccak256(raws[n])));
    assert.deepEqual(s.proxy.seen.filter((r) => r.sender === sender).map((r) => r.nonce), [0, 1, 2, 3, 4, 5, 6, 7]);
    // Each went as soon as the one below it was in: no gap wait ran out, no lease either.
    assert.equal(s.relay.events("gap_wait_expired").length, 0);
    assert.equal(s.relay.events("force_release").length, 0);
  } finally {
    await s.stop();
  }
});

test("MAX_QUEUE_PER_SENDER: one more than the queue holds gets -32005 at once, and nothing else changes", async () => {
  const account = devAccount(13);
  const sender = account.address.toLowerCase();
  const first = await signTransfer(account, 0);
  // Nonce 0 takes 1.5 s at the upstream, so 1..4 wait behind it.
  const s = await stack({
    vars: { MAX_QUEUE_PER_SENDER: "4" },
    proxy: { latency: (req) => (req?.method === "eth_sendRawTransaction" && req.params[0] === first ? 1500 : 0) },
  });
  try {
    const holder = sendRaw(s.relay.url, first, 0);
    for (let i = 0; i < 100 && !s.proxy.requests.some((r) => r.body?.params?.[0] === first); i++) await sleep(10);
    const waiting = [1, 2, 3, 4].map(async (n) => sendRaw(s.relay.url, await signTransfer(account, n), n));
    await sleep(200);
    const started = performance.now();
    const extra = await sendRaw(s.relay.url, await signTransfer(account, 5), 5);
    const ms = performance.now() - started;
    // At once: refused while nonce 0 was still at the upstream (its answer not yet given), so
    // it did not wait for room in the queue.
    const holderAnswered = s.proxy.seen.some((r) => r.hash === keccak256(first) && r.answeredAt !== undefined);
    assert.equal(extra.json.error?.code, -32005, extra.text);
    assert.equal(extra.json.error.message, `too many queued transactions for sender ${sender} (at most 4 wait); retry after 1 s`);
    assert.equal(extra.retryAfter, "1", "Retry-After");
    assert.equal(holderAnswered, false, "refused before the upstream answered nonce 0");
    assert.equal(s.proxy.seen.filter((r) => r.sender === sender && r.nonce === 5).length, 0, "not sent");
    console.log(`# queue full: refused after ${ms.toFixed(0)} ms`);
    const all = await Promise.all([holder, ...waiting]);
    assert.deepEqual(all.map((a) => Boolean(a.json.result)), [true, true, true, true, true], "the others all went in");
    assert.equal(s.relay.events("tx_refused").filter((e) => e.label === "queue_full").length, 1);
    // Room again: nonce 5 goes now.
    assert.ok((await sendRaw(s.relay.url, await signTransfer(account, 5))).json.result);
  } finally {
    await s.stop();
  }
});

test("MAX_QUEUE_PER_SENDER=3 behind a strict upstream: n+3, n+2, n+1 park, then n comes: n gets its hash, n..n+2 are mined, n+3 is refused, 0 upstream refusals", async () => {
  const s = await stack({ vars: { MAX_QUEUE_PER_SENDER: "3" } });
  try {
    const account = devAccount(11);
    // n = 1: the sender's object knows its next nonce once 0 went in.
    assert.ok((await sendRaw(s.relay.url, await signTransfer(account, 0))).json.result);
    const raws = await Promise.all([1, 2, 3, 4].map((n) => signTransfer(account, n)));
    const parked = [];
    for (const n of [4, 3, 2]) {
      parked.push(sendRaw(s.relay.url, raws[n - 1], n));
      await sleep(50); // each arrives and parks behind the missing 1
    }
    const one = await sendRaw(s.relay.url, raws[0], 1);
    assert.equal(one.json.result, keccak256(raws[0]), "n is never refused for the bound");
    const [four, three, two] = await Promise.all(parked);
    assert.equal(four.json.error?.code, -32005, four.text);
    assert.equal(four.retryAfter, "1", "with Retry-After");
    assert.equal(three.json.result, keccak256(raws[2]));
    assert.equal(two.json.result, keccak256(raws[1]));
    assert.deepEqual(await minedCounts(s.anvil.url, [account], 4, 10_000), [4], "0..3 mined (within 10 s: anvil's instant miner may lag, foundry-rs/foundry#10122)");
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "no refusal at the upstream");
    assert.equal(s.proxy.seen.filter((r) => r.nonce === 4).length, 0, "n+3 never sent");

    // One batch of n+4..n (five, above the bound of three): n..n+2 go, n+4 and n+3 are refused.
    const batch = await Promise.all([8, 7, 6, 5, 4].map((n) => signTransfer(account, n)));
    const answers = await post(
      s.relay.url,
      batch.map((raw, i) => ({ jsonrpc: "2.0", id: i, method: "eth_sendRawTransaction", params: [raw] })),
    );
    const byNonce = Object.fromEntries(answers.json.map((a) => [8 - a.id, a]));
    assert.equal(byNonce[8].error?.code, -32005);
    assert.equal(byNonce[7].error?.code, -32005);
    for (const n of [4, 5, 6]) assert.ok(byNonce[n].result, JSON.stringify(byNonce[n]));
    assert.equal(answers.retryAfter, "1");
    assert.deepEqual(await minedCounts(s.anvil.url, [account], 7, 10_000), [7], "4..6 mined (within 10 s: anvil's instant miner may lag, foundry-rs/foundry#10122)");
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "still no refusal at the upstream");
  } finally {
    await s.stop();
  }
});

test("GET /senders/{address}: the per-sender view with the right token; 401 with a wrong one; no route without ADMIN_TOKEN", async () => {
  const s = await stack({ vars: { ADMIN_TOKEN: "correct horse battery staple" } });
  const account = devAccount(14);
  const sender = account.address.toLowerCase();
  try {
    const raws = [await signTransfer(account, 0), await signTransfer(account, 1)];
    for (const raw of raws) assert.ok((await sendRaw(s.relay.url, raw)).json.result);
    await sendRaw(s.relay.url, raws[1]); // a copy
    const url = `${s.relay.url}/senders/${account.address}`;
    const ok = await fetch(url, { headers: { authorization: "Bearer correct horse battery staple" } });
    assert.equal(ok.status, 200);
    const view = await ok.json();
    assert.equal(view.sender, sender);
    assert.equal(view.holder, null);
    assert.equal(view.queue_depth, 0);
    assert.deepEqual(view.queued_nonces, []);
    assert.equal(view.next_nonce, 2);
    assert.equal(view.mined_nonce, 0);
    assert.deepEqual(view.accepted.map((a) => [a.hash, a.nonce]), [[keccak256(raws[1]), 1], [keccak256(raws[0]), 0]]);
    assert.equal(view.counters.forwarded, 2);
    assert.equal(view.counters.deduplicated, 1);
    for (const key of ["retried", "stale_refused", "replacements", "gap_waits_expired", "force_releases"]) assert.equal(view.counters[key], 0, key);
    for (const authorization of ["Bearer wrong", "Bearer correct horse battery stapl", "Basic x", undefined]) {
      const denied = await fetch(url, { headers: authorization ? { authorization } : {} });
      assert.equal(denied.status, 401, String(authorization));
      assert.equal(denied.headers.get("www-authenticate"), "Bearer");
    }
    const bad = await fetch(`${s.relay.url}/senders/0x1234`, { headers: { authorization: "Bearer correct horse battery staple" } });
    assert.equal(bad.status, 400);
  } finally {
    await s.stop();
  }
  const plain = await stack();
  try {
    const none = await fetch(`${plain.relay.url}/senders/${account.address}`, { headers: { authorization: "Bearer anything" } });
    assert.equal(none.status, 404, "without ADMIN_TOKEN the route does not exist");
  } finally {
    await plain.stop();
  }
});
