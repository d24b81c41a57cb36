// Reads answered at the edge (issue 43): the compiled relay on workerd in front of anvil mining a
// block a second, behind a recording test proxy. A dapp's read trace (1,000 reads of the head, of
// old blocks, receipts and logs, over 30 s): the upstream gets at most a quarter, and every answer
// is the node's for a block it had then (a watcher asks anvil straight every 100 ms and keeps each
// head's answers); the same through a reorg is tests/cache-reorg.test.mjs. Then what is never kept, the bypass, identical reads
// in flight, and CACHE=off.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startProxy, startRelay, post, rpc, sleep, until, devAccount, signTransfer, sendRaw } from "./support/harness.mjs";

import { call, from, recipient, quantity, chain, watch, trace, check, noReorg, numbersNamed } from "./support/dapp-trace.mjs";

test("a dapp's read trace, 1,000 reads over 30 s through the relay: the upstream gets at most a quarter, and every answer is the node's for its block", async () => {
  const c = await chain();
  const watcher = watch(c);
  try {
    await until(() => watcher.heads.length > 0, 5000);
    const { done, upstream } = await trace(c, watcher);
    await watcher.stop();
    const canonical = noReorg(c);
    await canonical.load(numbersNamed(done));
    const wrong = await check(c, watcher.heads, done, canonical.at);
    const hits = done.filter((d) => d.cache === "HIT").length;
    console.log(`cache trace: ${done.length} reads, ${upstream} upstream requests (${((100 * upstream) / done.length).toFixed(1)}%), ${hits} hits, ${watcher.heads.length} blocks`);
    assert.equal(done.length, 1000);
    assert.deepEqual(wrong.slice(0, 5), [], `${wrong.length} answers not the node's`);
    assert.ok(upstream <= 250, `the upstream got ${upstream} of 1000 reads`);
    // A read at a recent block by number went to the upstream by that block's hash (EIP-1898).
    const pinned = c.proxy.requests.filter((r) => r.body?.method === "eth_call" && r.body.params?.[1]?.blockHash);
    assert.ok(pinned.length > 0, "eth_call at a recent number asked by its block's hash");
    assert.ok(done.every((d) => d.cache === "HIT" || d.cache === "MISS"), "every read says X-Cache");
    // The isolate's counters, written every 10 s.
    const lines = c.relay.logs.filter((l) => l.includes('"event":"cache"')).map((l) => JSON.parse(l.slice(l.indexOf("{"))));
    assert.ok(lines.length >= 2, "cache lines");
    const counted = lines.reduce((a, l) => a + l.hits + l.misses, 0);
    assert.ok(counted > 500 && counted <= 1000, `counted ${counted}`);
    assert.ok(lines.every((l) => l.held_bytes <= 16 * 1024 * 1024 && l.entries > 0));
  } finally {
    await watcher.stop();
    await c.stop();
  }
});

/**
 * The trace through an `anvil_reorg` of depth 3 midway, on a relay with `vars`: every answer is
 * canonical when it was given, where a read begun up to `windowMs` after the reorg returned may
 * still be answered from the old chain (the relay cannot know of it sooner), counted; none begun
 * later names a replaced block.
 */
test("what is never kept (errors, null, pending), Cache-Control: no-cache, identical reads in flight as one, and CACHE=off", async () => {
  const c = await chain();
  try {
    const reached = (method) => c.proxy.requests.filter((r) => r.body?.method === method).length;
    const twice = async (req, headers) => [await post(c.relay.url, req, headers), await post(c.relay.url, req, headers)];
    // A block by number, old: the second is a hit, and the upstream got one.
    const [a, b] = await twice(call("eth_getBlockByHash", [(await c.ask("eth_getBlockByNumber", ["0x5", false])).hash, false]));
    assert.deepEqual([a.cache, b.cache, reached("eth_getBlockByHash")], ["MISS", "HIT", 1]);
    assert.deepEqual(a.json.result, b.json.result);
    // A null (a transaction the chain may still get) is asked each time.
    const unknown = "0x" + "ab".repeat(32);
    const nulls = await twice(call("eth_getTransactionReceipt", [unknown]));
    assert.deepEqual(nulls.map((r) => [r.json.result, r.cache]), [[null, "MISS"], [null, "MISS"]]);
    assert.equal(reached("eth_getTransactionReceipt"), 2);
    // An error is asked each time.
    const errors = await twice(call("eth_getBalance", ["not an address", "latest"]));
    assert.ok(errors.every((r) => r.json.error && r.cache === "MISS"));
    // `pending` is never the cache's: no X-Cache, asked each time.
    const pending = await twice(call("eth_getBalance", [recipient, "pending"]));
    assert.deepEqual(pending.map((r) => r.cache), [null, null]);
    // Each asked once (the malformed ones by the head's hash, refused for their params: the one
    // probe of the form, the zero address's balance, says the upstream reads it), not again.
    const probe = (r) => r.body?.params?.[0] === "0x0000000000000000000000000000000000000000";
    assert.equal(c.proxy.requests.filter((r) => r.body?.method === "eth_getBalance" && !probe(r)).length, 4);
    assert.ok(c.proxy.requests.filter(probe).length <= 1, "one probe at most");
    // Cache-Control: no-cache: asked of the upstream, MISS.
    const chainId = await twice(call("eth_chainId"));
    assert.deepEqual(chainId.map((r) => r.cache), ["MISS", "HIT"]);
    const bypassed = await post(c.relay.url, call("eth_chainId"), { "cache-control": "no-cache" });
    assert.deepEqual([bypassed.cache, bypassed.json.result, reached("eth_chainId")], ["MISS", "0x7a69", 2]);
    // A batch: HIT only when every read in it was.
    const batch = await post(c.relay.url, [call("eth_chainId", [], 1), call("eth_getBlockByNumber", ["0x6", false], 2)]);
    assert.equal(batch.cache, "MISS");
    const again = await post(c.relay.url, [call("eth_chainId", [], 1), call("eth_getBlockByNumber", ["0x6", false], 2)]);
    assert.deepEqual([again.cache, again.json.map((r) => r.id)], ["HIT", [1, 2]]);
    // Ten identical reads at once: one upstream request, each its own id.
    const slow = await startProxy({ upstream: c.anvil.url, strictNonce: false, latency: (req) => (req?.method === "eth_getCode" ? 300 : 0) });
    const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: slow.url, CACHE: "on" } });
    try {
      const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post(relay.url, call("eth_getCode", [c.contract, "0x3"], 100 + i))));
      assert.deepEqual(answers.map((r) => r.json.id), Array.from({ length: 10 }, (_, i) => 100 + i));
      assert.ok(answers.every((r) => r.json.result === answers[0].json.result));
      assert.equal(slow.requests.filter((r) => r.body?.method === "eth_getCode").length, 1);
    } finally {
      await relay.stop();
      await slow.stop();
    }
  } finally {
    await c.stop();
  }
});

test("an answer about a block finalized before its ask is kept though the head moved while it was asked (a block a second, the ask 2.5 s)", async () => {
  const c = await chain();
  const slowly = (req) => req?.method === "eth_getBlockByNumber" && req.params?.[0] === "0x8";
  const slow = await startProxy({ upstream: c.anvil.url, strictNonce: false, latency: (req) => (slowly(req) ? 2_500 : 0) });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: slow.url, CACHE: "on" } });
  try {
    const number = async () => Number((await post(relay.url, call("eth_blockNumber"))).json.result);
    // The head, genesis and finalized block learned first (block 9 is far below finalized).
    assert.equal((await post(relay.url, call("eth_getBlockByNumber", ["0x9", false]))).cache, "MISS");
    const before = await number();
    const old = call("eth_getBlockByNumber", ["0x8", true]);
    // Reads of the head while block 8 is asked: the cache's head moves on under the ask.
    let asking = true;
    const first = post(relay.url, old).finally(() => (asking = false));
    const heads = [];
    while (asking) {
      heads.push(await number());
      await sleep(300);
    }
    assert.ok(heads.at(-1) >= before + 2, `the head moved during the ask: ${before} then ${heads}`);
    const second = await post(relay.url, old);
    const answered = await first;
    assert.deepEqual([answered.cache, second.cache], ["MISS", "HIT"]);
    assert.deepEqual(second.json.result, answered.json.result);
    assert.equal(slow.requests.filter((r) => r.body?.method === "eth_getBlockByNumber" && r.body.params?.[0] === "0x8").length, 1, "block 8 asked once");
  } finally {
    await relay.stop();
    await slow.stop();
    await c.stop();
  }
});

test("the data centre's cache (Cache API) keeps answers that hold for good, beyond the isolate's bound, only under RELAY_SECRET; never one at the head", async () => {
  // Without RELAY_SECRET the Cache API is not used: an answer too large for the isolate's
  // memory is asked again.
  const bare = await chain({ CACHE_MAX_BYTES: "1024" });
  try {
    const old = call("eth_getBlockByNumber", ["0x7", false]);
    const [a, b] = [await post(bare.relay.url, old), await post(bare.relay.url, old)];
    assert.deepEqual([a.cache, b.cache], ["MISS", "MISS"]);
  } finally {
    await bare.stop();
  }
  // CACHE_MAX_BYTES=1024: no answer over 64 bytes fits the isolate's memory.
  const c = await chain({ CACHE_MAX_BYTES: "1024", RELAY_SECRET: "a-test-secret-of-the-deployment" });
  try {
    const reached = (method) => c.proxy.requests.filter((r) => r.body?.method === method).length;
    const old = call("eth_getBlockByNumber", ["0x7", false]);
    const [a, b] = [await post(c.relay.url, old), await post(c.relay.url, old)];
    assert.deepEqual([a.cache, b.cache], ["MISS", "HIT"]);
    assert.deepEqual(b.json.result, (await rpc(c.anvil.url, "eth_getBlockByNumber", ["0x7", false])).result);
    // Asked once: the block (the head ask's own latest, finalized and genesis are the relay's).
    assert.equal(c.proxy.requests.filter((r) => r.body?.method === "eth_getBlockByNumber" && r.body.params[0] === "0x7").length, 1);
    const receipt = call("eth_getTransactionReceipt", [c.old[0]]);
    const [r1, r2] = [await post(c.relay.url, receipt), await post(c.relay.url, receipt)];
    assert.deepEqual([r1.cache, r2.cache, reached("eth_getTransactionReceipt")], ["MISS", "HIT", 1]);
    // The head's block is never the shared cache's: asked again once the head moved.
    const latest = call("eth_getBlockByNumber", ["latest", true]);
    await post(c.relay.url, latest);
    await sleep(2_200);
    await post(c.relay.url, latest);
    assert.equal(c.proxy.requests.filter((r) => r.body?.method === "eth_getBlockByNumber" && r.body.params[1] === true).length, 2);
  } finally {
    await c.stop();
  }
});

test("a client's newHeads moves the cache's head: with CACHE_HEAD_MS=60000 eth_blockNumber stays, then follows the chain once a WebSocket hears it; a send makes the head asked again", async () => {
  // Without the relay's own head watch: the client's socket is the only one.
  const c = await chain({ CACHE_HEAD_MS: "60000", CACHE_HEAD_WATCH: "off" });
  try {
    const number = async () => Number((await post(c.relay.url, call("eth_blockNumber"))).json.result);
    const first = await number();
    await sleep(2_500);
    assert.equal(await number(), first, "the head asked is believed CACHE_HEAD_MS");
    const socket = new WebSocket(c.relay.url.replace(/^http/, "ws"));
    const heads = [];
    socket.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.method === "eth_subscription") heads.push(Number(m.params.result.number));
    };
    await new Promise((resolve, reject) => ((socket.onopen = resolve), (socket.onerror = reject)));
    socket.send(JSON.stringify(call("eth_subscribe", ["newHeads"], 7)));
    assert.ok(await until(() => heads.length >= 3, 10_000), "three heads heard");
    const said = await number();
    socket.close();
    console.log(`# eth_blockNumber ${first} before, ${said} after the heads ${heads}`);
    assert.ok(said >= heads.at(-2) && said > first, `eth_blockNumber ${said} follows the heads heard ${heads}`);
    // A send through the relay: the next read asks the head (anvil mines it at once, here
    // within the second).
    const before = await number();
    const account = devAccount(1);
    const raw = await signTransfer(account, 0);
    assert.ok((await sendRaw(c.relay.url, raw)).json.result);
    await until(async () => (await rpc(c.anvil.url, "eth_getTransactionCount", [account.address, "latest"])).result === "0x1", 5_000);
    const count = (await post(c.relay.url, call("eth_getTransactionCount", [account.address, "latest"]))).json.result;
    assert.equal(count, "0x1", `its count at latest right after its send (the head was ${before})`);
  } finally {
    await c.stop();
  }
});

test("the head watch: with CACHE_HEAD_MS=60000 eth_blockNumber follows the chain on the relay's own newHeads socket, one per isolate and chain; an upstream refusing WebSockets leaves the head asked, with one head_watch_failed line", async () => {
  const number = async (c) => Number((await post(c.relay.url, call("eth_blockNumber"))).json.result);
  const c = await chain({ CACHE_HEAD_MS: "60000" });
  try {
    const first = await number(c);
    assert.ok(await until(() => c.proxy.webSocketCount() === 1, 5_000), "the relay's head watch connected");
    const heads = c.proxy.requests.filter((r) => r.body?.method === "eth_getBlockByNumber").length;
    for (let i = 0; i < 10; i++) {
      await sleep(300);
      await number(c);
    }
    const later = await number(c);
    assert.ok(later >= first + 2, `eth_blockNumber ${later} follows the chain from ${first} with the head believed 60 s`);
    assert.equal(c.proxy.webSocketCount(), 1, "one watch for the isolate's chain, whatever the reads");
    const asked = c.proxy.requests.filter((r) => r.body?.method === "eth_getBlockByNumber").length - heads;
    assert.ok(asked <= 1, `the head followed without being asked again (${asked} asks)`);
    assert.ok(!c.relay.logs.some((l) => l.includes('"event":"head_watch_failed"')));
  } finally {
    await c.stop();
  }
  const d = await chain();
  try {
    d.proxy.refuseWebSockets(60_000);
    const first = await number(d);
    for (let i = 0; i < 10; i++) {
      await sleep(300);
      await number(d);
    }
    const later = await number(d);
    assert.ok(later >= first + 2, `eth_blockNumber ${later} follows the chain from ${first} by the head asked every CACHE_HEAD_MS`);
    const failed = d.relay.logs.filter((l) => l.includes('"event":"head_watch_failed"'));
    assert.equal(failed.length, 1, `one failure, then none tried for 30 s: ${failed}`);
    const line = JSON.parse(failed[0].slice(failed[0].indexOf("{")));
    assert.equal(line.retry_ms, 30000);
    assert.match(line.why, /^ws#1 /, "the upstream named as in every log");
  } finally {
    await d.stop();
  }
});

test("a client's malformed params do not switch off reads by block hash: three refused reads, each probed with good params (answered), then a good read at a recent number is still asked by its block's hash", async () => {
  const c = await chain();
  try {
    // A recent block the relay's view holds: a head it asked, once the chain moved past it.
    const number = async () => Number((await post(c.relay.url, call("eth_blockNumber"))).json.result);
    const head = await number();
    assert.ok(await until(async () => (await number()) > head, 5_000), "the chain moved");
    const at = quantity(head);
    for (let i = 0; i < 3; i++) {
      const bad = await post(c.relay.url, call("eth_getBalance", ["0xnot-an-address", at], i));
      assert.ok(bad.json.error, `refused: ${bad.text.slice(0, 120)}`);
    }
    const asked = c.proxy.requests.length;
    const good = await post(c.relay.url, call("eth_getBalance", [recipient, at], 9));
    assert.ok(good.json.result, good.text);
    const pinned = c.proxy.requests.slice(asked).filter((r) => r.body?.method === "eth_getBalance" && r.body.params?.[0] === recipient);
    assert.ok(pinned.length >= 1 && pinned.every((r) => r.body.params[1]?.blockHash), `asked by its block's hash: ${JSON.stringify(pinned.map((r) => r.body.params))}`);
    // The probes: the zero address at the head's hash, at most one per 10 s.
    const probes = c.proxy.requests.filter((r) => r.body?.method === "eth_getBalance" && r.body.params?.[0] === "0x0000000000000000000000000000000000000000");
    assert.equal(probes.length, 1, "one probe for the three refusals");
  } finally {
    await c.stop();
  }
});

test("CACHE=off: every read goes to the upstream and no answer says X-Cache", async () => {
  const c = await chain({ CACHE: "off" });
  try {
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push(await post(c.relay.url, call("eth_chainId")), await post(c.relay.url, call("eth_getBlockByNumber", ["0x5", false])));
    assert.ok(answers.every((r) => r.cache === null && r.json.result));
    assert.equal(c.proxy.requests.length, 6);
  } finally {
    await c.stop();
  }
});

after(() => {});
