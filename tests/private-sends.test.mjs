// Sends to a private route (UPSTREAM_SEND_URL) while reads go to an ordinary node: the compiled
// relay on workerd, the stand-in private route (tests/support/private-route.mjs) and a recording
// proxy as the read node, both before one anvil that mines only when the route builds a block.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { devAccount, minedCount, post, rpc, sendRaw, signTransfer, sleep, startProxy, startRelay, until } from "./support/harness.mjs";
import { sendsAt, startPrivateRoute, startPrivateStack, STATUS } from "./support/private-route.mjs";

/** The stack of `startPrivateStack` with the relay's settings `vars`. */
const privateStack = (vars = {}) => startPrivateStack({ vars });

/** Each hash's count of arrivals at the route. */
const arrivals = (route, hash) => route.sends.filter((s) => s.hash === hash).length;

/** The relay's `GET /tx/{hash}` (with `?sender=` for the sender's object). */
const txStatus = async (relayUrl, hash, sender) => (await fetch(`${relayUrl}/tx/${hash}?sender=${sender}`)).json();

test("one sender's 10 at once through a private route: the relay's pending count says n+10 before any block (the read node n), all 10 mined, each reached the route once and none the read node", async () => {
  const s = await privateStack();
  try {
    const account = devAccount(4);
    const raws = await Promise.all(Array.from({ length: 10 }, (_, n) => signTransfer(account, n)));
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i + 1)));
    const hashes = answers.map((a) => a.json?.result);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(answers.map((a) => a.json)));
    const count = (url) => rpc(url, "eth_getTransactionCount", [account.address, "pending"]).then((r) => Number(BigInt(r.result)));
    assert.equal(await count(s.anvil.url), 0, "the read node cannot see them");
    assert.equal(await count(s.relay.url), 10, "the relay counts what the route holds");
    assert.deepEqual(await s.route.buildBlock(), hashes, "all 10, in nonce order");
    assert.equal(await minedCount(s.anvil.url, account.address), 10);
    for (const hash of hashes) assert.equal(arrivals(s.route, hash), 1, `${hash} reached the route once`);
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    assert.deepEqual(s.relay.events("fail_open"), []);
  } finally {
    await s.stop();
  }
});

test("the route fails and forgets one of three: the relay learns it from the status URL and sends it to the route again from its bytes; all mined, none at the read node", async () => {
  const s = await privateStack({ TRACK_INTERVAL_S: "1" });
  try {
    // The status URL is the stand-in's (FAILED, as Protect says of one it gave up).
    await s.relay.stop();
    s.relay = await startRelay({
      vars: { UPSTREAM_RPC_URL: s.read.url, UPSTREAM_SEND_URL: s.route.url, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "1" },
    });
    const account = devAccount(6);
    const raws = await Promise.all([0, 1, 2].map((n) => signTransfer(account, n)));
    const hashes = (await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i + 1)))).map((a) => a.json?.result);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(hashes));
    s.route.forget(hashes[1]);
    assert.deepEqual(await s.route.buildBlock(), [hashes[0]], "nonce 1 is gone from the route: 2 waits behind the gap");
    assert.ok(await until(() => arrivals(s.route, hashes[1]) === 2, 10_000), "the relay sent nonce 1 to the route again");
    assert.equal(s.route.status(hashes[1]), STATUS.PENDING);
    assert.deepEqual(await s.route.buildBlock(), [hashes[1], hashes[2]]);
    assert.equal(await minedCount(s.anvil.url, account.address), 3);
    assert.deepEqual(hashes.map((h) => arrivals(s.route, h)), [1, 2, 1], "only the forgotten one twice");
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    const dropped = s.relay.events("tx_route_dropped");
    assert.ok(dropped.some((e) => e.tx_hash === hashes[1] && e.label === "failed"), JSON.stringify(dropped));
    const status = await txStatus(s.relay.url, hashes[1], account.address);
    assert.equal(status.route, "private");
    assert.equal(status.resubmitted, 1);
    assert.ok(await until(async () => (await txStatus(s.relay.url, hashes[1], account.address)).status === "included", 5_000));
  } finally {
    await s.stop();
  }
});

test("a status URL that answers no status word is logged (upstream_error, method route_status) and sends nothing again", async () => {
  const s = await privateStack({ TRACK_INTERVAL_S: "1" });
  try {
    await s.relay.stop();
    // The stand-in answers only /tx/{hash}; this path gets a JSON-RPC error object.
    s.relay = await startRelay({
      vars: { UPSTREAM_RPC_URL: s.read.url, UPSTREAM_SEND_URL: s.route.url, SEND_STATUS_URL: `${s.route.url}/nope/{hash}`, TRACK_INTERVAL_S: "1" },
    });
    const account = devAccount(9);
    const hash = (await sendRaw(s.relay.url, await signTransfer(account, 0))).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    const logged = () => s.relay.events("upstream_error").filter((e) => e.method === "route_status");
    assert.ok(await until(() => logged().length > 0, 5_000), "the operator hears of it");
    assert.equal(logged()[0].label, "invalid");
    assert.equal(arrivals(s.route, hash), 1, "nothing sent again on a status it could not read");
    assert.equal((await txStatus(s.relay.url, hash, account.address)).route_status, null);
    assert.deepEqual(await s.route.buildBlock(), [hash]);
  } finally {
    await s.stop();
  }
});

test("publishing is the sender's choice: opted in (/?public_after_blocks=2, the operator allowing 25), a transaction the route never includes reaches the read node 2 blocks after the relay first saw it pending and is mined; without the opt-in, another is never published", async () => {
  const s = await privateStack({ TRACK_INTERVAL_S: "1", SEND_PUBLIC_AFTER_BLOCKS: "25" });
  try {
    const account = devAccount(7);
    const raw = await signTransfer(account, 0);
    const opted = await post(`${s.relay.url}/?public_after_blocks=2`, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    const hash = opted.json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    assert.equal(opted.publicAfter, "2", "the answer says it may go public after 2 blocks");
    const other = devAccount(8);
    const kept = await post(s.relay.url, { jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: [await signTransfer(other, 0)] });
    const keptHash = kept.json?.result;
    assert.match(keptHash ?? "", /^0x[0-9a-f]{64}$/);
    assert.equal(kept.publicAfter, "never", "without the opt-in: never");
    s.route.holdFor(hash, 1_000);
    s.route.holdFor(keptHash, 1_000);
    let blocks = 0;
    // Blocks until it reaches the read node (at most 20: a loaded machine delays the relay's
    // checks, never its count of blocks).
    while (sendsAt(s.read) === 0 && blocks < 20) {
      await sleep(1_100); // a tracking check of the relay's in each block
      await s.route.buildBlock();
      blocks += 1;
    }
    assert.equal(sendsAt(s.read), 1, `reached the read node after ${blocks} blocks`);
    // Not before 2 blocks past the first check that saw it: the relay counts blocks, not time.
    assert.ok(blocks >= 2, `2 blocks after the first check that saw it (${blocks} built)`);
    await sleep(500);
    await s.route.buildBlock(); // the read node's pool is the chain's: mined in the next block
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.equal(arrivals(s.route, hash), 1, "not sent to the route again");
    const [decided] = s.relay.events("tx_sent_public");
    assert.equal(decided?.tx_hash, hash);
    assert.ok(await until(() => s.relay.events("tx_public_answer").length === 1, 5_000));
    assert.equal(s.relay.events("tx_public_answer")[0].label, "accepted");
    const status = await txStatus(s.relay.url, hash, account.address);
    assert.equal(status.route, "private_then_public");
    // The other, without the opt-in: more blocks, still never at the read node.
    for (let b = 0; b < 3; b += 1) {
      await sleep(1_100);
      await s.route.buildBlock();
    }
    assert.equal(sendsAt(s.read), 1, "the sender that did not opt in was never published");
    assert.equal(await minedCount(s.anvil.url, other.address), 0);
    assert.equal((await txStatus(s.relay.url, keptHash, other.address)).route, "private");
  } finally {
    await s.stop();
  }
});

test("a transaction the private route keeps pending for 8 blocks is not sent again, nor to the read node: the read node's null is no drop", async () => {
  const s = await privateStack({ TRACK_INTERVAL_S: "1" });
  try {
    const account = devAccount(5);
    const raw = await signTransfer(account, 0);
    const hash = (await sendRaw(s.relay.url, raw)).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    s.route.holdFor(hash, 8);
    for (let block = 0; block < 8; block++) {
      assert.deepEqual(await s.route.buildBlock(), [], `held in block ${block + 1}`);
      await sleep(1_100); // a tracking check of the relay's in each block
    }
    assert.equal(sendsAt(s.read), 0, "without SEND_PUBLIC_AFTER_BLOCKS it never reaches the read node");
    assert.equal(await minedCount(s.anvil.url, account.address), 0);
    const checks = s.read.requests.filter((r) => JSON.stringify(r.body ?? "").includes(hash)).length;
    assert.ok(checks >= 4, `the relay asked the read node about it (${checks} times)`);
    assert.equal(s.route.status(hash), STATUS.PENDING);
    assert.equal(arrivals(s.route, hash), 1, "not sent again");
    assert.deepEqual(await s.route.buildBlock(), [hash]);
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.equal(sendsAt(s.read), 0);
  } finally {
    await s.stop();
  }
});

test("two routes, the first 1.5 s slow and answering no reads: each transaction reaches exactly one route (the first: failover, never hedged), and a route is used though it never answers eth_chainId", async () => {
  const s = await privateStack();
  const isSend = (req) => [req].flat().some((m) => /^eth_sendRawTransaction/.test(m?.method ?? ""));
  // Both links lead to the stand-in route; the first holds each send 1.5 s and answers every
  // other request (eth_chainId included) with a 503, as a route that serves no reads.
  const slow = await startProxy({
    upstream: s.route.url,
    strictNonce: false,
    latency: (req) => (isSend(req) ? 1_500 : 0),
    fault: (req) => (isSend(req) ? null : { status: 503, headers: { "content-type": "text/html" }, body: "<html>503</html>" }),
  });
  const fast = await startProxy({ upstream: s.route.url, strictNonce: false });
  await s.relay.stop();
  s.relay = await startRelay({ vars: { ...s.vars, UPSTREAM_SEND_URL: `${slow.url},${fast.url}` } });
  try {
    const account = devAccount(9);
    const raws = await Promise.all(Array.from({ length: 3 }, (_, n) => signTransfer(account, n)));
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i + 1)));
    const hashes = answers.map((a) => a.json?.result);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(answers.map((a) => a.json)));
    const at = (proxy) => proxy.requests.filter((r) => isSend(r.body)).length;
    console.log(`# two routes: sends at the slow first route ${at(slow)}, at the second ${at(fast)}; wall ${Math.max(...answers.map((a) => a.ms)).toFixed(0)} ms`);
    assert.equal(at(slow), 3, "each at the first route");
    const atFast = fast.requests.filter((r) => isSend(r.body)).map((r) => [r.body].flat().map((m) => keccak256(m.params[0]).slice(0, 10)));
    assert.equal(at(fast), 0, `none at the second: not hedged (there: ${JSON.stringify(atFast)}; ours ${hashes.map((h) => h.slice(0, 10))}; ${JSON.stringify(s.relay.logs.filter((l) => /upstream_|fail_open|route/.test(l)).slice(-5))})`);
    for (const hash of hashes) assert.equal(arrivals(s.route, hash), 1, `${hash} at the route once`);
    assert.deepEqual(await s.route.buildBlock(), hashes);
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
  } finally {
    await s.stop();
    await Promise.all([slow.stop(), fast.stop()]);
  }
});

test("five at once behind a route whose nonce cache is written after it answers (Flashbots Protect): every client its hash, all mined, 0 refusals", async () => {
  const s = await startPrivateStack({ route: { nonceCacheLagMs: 40 } });
  try {
    const account = devAccount(11);
    const raws = await Promise.all(Array.from({ length: 5 }, (_, n) => signTransfer(account, n)));
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i + 1)));
    const hashes = answers.map((a) => a.json?.result);
    console.log(`# racing nonce cache: ${s.route.refusals.length} sends refused "invalid nonce" by the route; answers ${answers.map((a) => a.json?.result ? "hash" : a.json?.error?.code).join(", ")}`);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(answers.map((a) => a.json)));
    assert.ok(s.route.refusals.length >= 1, "the race happened");
    assert.deepEqual(await s.route.buildBlock(), hashes);
    assert.equal(await minedCount(s.anvil.url, account.address), 5);
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
  } finally {
    await s.stop();
  }
});

test("two routes, each with its own status URL: a transaction the first route refused went to the second, whose status is asked (the first says UNKNOWN): held there, never sent again while it holds it; once it drops it, sent again", async () => {
  const s = await privateStack();
  const second = await startPrivateRoute({ chain: s.anvil.url });
  const isSend = (req) => [req].flat().some((m) => /^eth_sendRawTransaction/.test(m?.method ?? ""));
  // The first route refuses every send with a 503 (down for sends); its status endpoint answers.
  const first = await startProxy({
    upstream: s.route.url,
    strictNonce: false,
    fault: (req) => (isSend(req) ? { status: 503, headers: { "content-type": "text/html" }, body: "<html>503</html>" } : null),
  });
  await s.relay.stop();
  s.relay = await startRelay({
    vars: {
      ...s.vars,
      UPSTREAM_SEND_URL: `${first.url},${second.url}`,
      SEND_STATUS_URL: `${s.route.statusUrl},${second.statusUrl}`,
      TRACK_INTERVAL_S: "1",
    },
  });
  try {
    const account = devAccount(11);
    const raw = await signTransfer(account, 0);
    const hash = (await sendRaw(s.relay.url, raw)).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    assert.equal(arrivals(second, hash), 1, "at the second route");
    assert.equal(arrivals(s.route, hash), 0, "the first never took it");
    await sleep(3_500); // tracking checks: the first says UNKNOWN, the second PENDING
    assert.equal(arrivals(second, hash), 1, "held at the second: not sent again");
    second.forget(hash);
    assert.ok(await until(() => arrivals(second, hash) === 2, 10_000), "dropped at the second: sent again");
    assert.deepEqual(await second.buildBlock(), [hash]);
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
  } finally {
    await s.stop();
    await Promise.all([first.stop(), second.stop()]);
  }
});

test("two routes, the first timing out once on a send (its answer lost, the send arrived) so the second takes it, then reporting FAILED: the status is asked of the second first (held there), nothing is sent to the first again, and a cancel goes to both (true: the second cancelled it)", async () => {
  const s = await privateStack();
  const second = await startPrivateRoute({ chain: s.anvil.url });
  const isSend = (req) => [req].flat().some((m) => /^eth_sendRawTransaction/.test(m?.method ?? ""));
  let slowed = 0;
  // The first route's link holds its first send 2.5 s: the relay's attempt times out (1 s), and
  // the send still reaches the route.
  const first = await startProxy({
    upstream: s.route.url,
    strictNonce: false,
    latency: (req) => (isSend(req) && slowed++ === 0 ? 2_500 : 0),
  });
  await s.relay.stop();
  s.relay = await startRelay({
    vars: {
      ...s.vars,
      UPSTREAM_SEND_URL: `${first.url},${second.url}`,
      SEND_STATUS_URL: `${s.route.statusUrl},${second.statusUrl}`,
      UPSTREAM_TIMEOUT_MS: "1000",
      TRACK_INTERVAL_S: "1",
    },
  });
  try {
    const account = devAccount(16);
    const raw = await signTransfer(account, 0);
    const hash = (await sendRaw(s.relay.url, raw)).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    assert.equal(arrivals(second, hash), 1, "the second took it");
    assert.ok(await until(() => arrivals(s.route, hash) === 1, 5_000), "the first got it too, its answer lost");
    s.route.forget(hash); // the first gives it up: FAILED there
    await sleep(3_500); // tracking checks: asked of the second first, which holds it
    assert.equal(arrivals(s.route, hash), 1, "never sent to the first again");
    assert.equal(arrivals(second, hash), 1, "nor to the second: it holds it");
    // Its cancel goes to both routes that may hold it: the first says false (it gave it up),
    // the second, which took it, true.
    const cancel = await post(s.relay.url, { jsonrpc: "2.0", id: 2, method: "eth_cancelPrivateTransaction", params: [{ txHash: hash }] });
    assert.equal(cancel.json?.result, true, cancel.text);
    assert.deepEqual(s.route.cancels, [{ hash, answer: false }], "asked of the first");
    assert.deepEqual(second.cancels, [{ hash, answer: true }], "and of the second");
    assert.deepEqual(await second.buildBlock(), [], "cancelled: never mined");
    assert.equal(await minedCount(s.anvil.url, account.address), 0);
  } finally {
    await s.stop();
    await Promise.all([first.stop(), second.stop()]);
  }
});
