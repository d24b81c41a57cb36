// Upstreams that lag must not poison the read cache. The compiled relay on workerd in front of anvil
// mining a block a second, behind the provider profiles of tests/support/providers.mjs: a
// load-balanced URL over nodes a block apart (one answering eth_getLogs past its head with `[]`, as
// Erigon does), Hedera's relay before a mirror node two blocks behind, and the head watch's own cases (the
// two upstreams, one stuck 39 blocks back and one with a slow tail, are
// tests/lagging-head.test.mjs, which runs alone). A log emitter is called about every
// block; an event poller does what viem's watchEvent and ethers' polling subscriber do
// (eth_blockNumber, then the logs of each new block); its first answers and the same reads asked
// again once every node has the blocks ("late answers") are compared with anvil's, through a relay
// with the cache on and one with it off over the same upstream. Each test prints its numbers
// first (`#` lines); what is asserted is what must hold of a relay that keeps no lagging answer.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { isDeepStrictEqual } from "node:util";
import { startProxy, startRelay, post, rpc, sleep, until, openSocket, followBlocks } from "./support/harness.mjs";
import { loadBalanced, hederaMirror, stuck, lagging } from "./support/providers.mjs";
import { call, quantity, from, NOWHERE, chain, silentWebSocket } from "./support/lagging.mjs";

/**
 * An event poller on `url`, as viem's watchEvent and ethers' polling subscriber: every 250 ms
 * eth_blockNumber; for each block n from the last seen to the new head, eth_getLogs {address,
 * fromBlock: n, toBlock: n} for each of `addresses` (they ask last+1..head as one range: at four
 * polls a block that is one block nearly always; asked one by one here, each block is counted).
 * For `ms`; returns each block's first answers ({ result, error, cache } per address) and how
 * often the head went backwards.
 */
async function poll(url, addresses, ms) {
  const blocks = [];
  const backwards = await followBlocks(url, ms, async (n) => {
    const answers = [];
    for (const address of addresses) {
      const r = await post(url, call("eth_getLogs", [{ address, fromBlock: quantity(n), toBlock: quantity(n) }]));
      answers.push({ result: r.json?.result, error: r.json?.error, cache: r.cache });
    }
    blocks.push({ n, answers });
  });
  return { blocks, backwards };
}

/** The same reads asked again through `url` (the late answers), in the order polled. */
async function askAgain(url, addresses, blocks) {
  const late = [];
  for (const { n } of blocks) {
    const answers = [];
    for (const address of addresses) {
      const r = await post(url, call("eth_getLogs", [{ address, fromBlock: quantity(n), toBlock: quantity(n) }]));
      answers.push({ result: r.json?.result, error: r.json?.error, cache: r.cache });
    }
    late.push({ n, answers });
  }
  return late;
}

/** anvil's own answers for every block polled, per address: `truth.get(n)[i]`. */
async function chainAnswers(c, addresses, ...runs) {
  const truth = new Map();
  for (const n of new Set(runs.flatMap((r) => r.blocks.map((b) => b.n)))) {
    const answers = [];
    for (const address of addresses) answers.push((await rpc(c.anvil.url, "eth_getLogs", [{ address, fromBlock: quantity(n), toBlock: quantity(n) }])).result);
    truth.set(n, answers);
  }
  return truth;
}

/** The answers for address `i` that are not the chain's, and how they came (X-Cache). */
const wrong = (list, truth, i) => list.filter((b) => !isDeepStrictEqual(b.answers[i].result, truth.get(b.n)[i]));
const caches = (list, i) => Object.entries(list.reduce((m, b) => ((m[b.answers[i].cache ?? "none"] = (m[b.answers[i].cache ?? "none"] ?? 0) + 1), m), {})).map(([k, v]) => `${v} ${k}`).join(", ") || "-";

/**
 * An indexer as ponder's realtime sync over a WebSocket (ponder-sh/ponder
 * packages/core/src/sync-realtime/index.ts: each new block's logs by `_eth_getLogs({ blockHash:
 * block.hash })`, "Protect against RPCs returning empty logs. Known to happen near chain tip."):
 * newHeads through the relay's WebSocket, eth_getLogs {blockHash} of each head over HTTP, for
 * `ms`. Each block's first answer, in the shape `poll` gives.
 */
async function followHeads(url, ms) {
  const socket = await openSocket(url.replace(/^http/, "ws"));
  const blocks = [];
  const asked = [];
  socket.ws.on("message", (data) => {
    const message = JSON.parse(String(data));
    if (message.method !== "eth_subscription") return;
    const { number, hash } = message.params.result;
    asked.push(
      post(url, call("eth_getLogs", [{ blockHash: hash }])).then((r) =>
        blocks.push({ n: Number(number), hash, answers: [{ result: r.json?.result, error: r.json?.error, cache: r.cache }] }),
      ),
    );
  });
  await socket.call("eth_subscribe", ["newHeads"]);
  await sleep(ms);
  socket.ws.close();
  await Promise.all(asked);
  return blocks.sort((a, b) => a.n - b.n);
}

/** The by-hash reads again through `url` (late), and anvil's answers (`truth.get(n)[0]`). */
async function byHashAgain(c, url, blocks) {
  const late = [];
  const truth = new Map();
  for (const { n, hash } of blocks) {
    const r = await post(url, call("eth_getLogs", [{ blockHash: hash }]));
    late.push({ n, hash, answers: [{ result: r.json?.result, error: r.json?.error, cache: r.cache }] });
    truth.set(n, [(await rpc(c.anvil.url, "eth_getLogs", [{ blockHash: hash }])).result]);
  }
  return { late, truth };
}

/**
 * The poller through a relay with the cache on and one with it off, both over `proxy`, for `ms`
 * (with `byHash`, the newHeads indexer beside it on each); then, once every node has the last
 * block polled (`caughtUp(head, last)`), each block's logs again.
 * Returns per relay: first answers wrong, late answers wrong (with their X-Cache), the never-matching
 * filter's answers, and its late hit rate; with `byHash`, the indexer's first and late answers wrong.
 */
async function pollerRun(c, proxy, { ms, caughtUp, vars = {}, byHash = false }) {
  const addresses = [c.emitter, NOWHERE];
  const cached = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CACHE: "on", ...vars } });
  const plain = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CACHE: "off", ...vars } });
  try {
    const [on, off, onHeads, offHeads] = await Promise.all([
      poll(cached.url, addresses, ms),
      poll(plain.url, addresses, ms),
      byHash ? followHeads(cached.url, ms) : [],
      byHash ? followHeads(plain.url, ms) : [],
    ]);
    const sockets = proxy.webSocketCount();
    const last = Math.max(0, ...[on, off, { blocks: onHeads }, { blocks: offHeads }].flatMap((r) => r.blocks.map((b) => b.n)));
    const waited = await until(async () => caughtUp(await c.head(), last), 15_000, 200);
    const [onLate, offLate] = [await askAgain(cached.url, addresses, on.blocks), await askAgain(plain.url, addresses, off.blocks)];
    const truth = await chainAnswers(c, addresses, on, off);
    const indexer = async (url, blocks) => {
      const { late, truth: byHashTruth } = await byHashAgain(c, url, blocks);
      return { seen: blocks.length, firstWrong: wrong(blocks, byHashTruth, 0), lateWrong: wrong(late, byHashTruth, 0) };
    };
    const report = (run, late) => ({
      polled: run.blocks.length,
      withLogs: run.blocks.filter((b) => truth.get(b.n)[0].length > 0).length,
      backwards: run.backwards,
      firstWrong: wrong(run.blocks, truth, 0),
      lateWrong: wrong(late, truth, 0),
      // The filter that never matches: wrong answers (first or late), and its late hits.
      nowhereWrong: wrong(run.blocks, truth, 1).length + wrong(late, truth, 1).length,
      nowhereHits: late.filter((b) => b.answers[1].cache === "HIT").length,
      late,
    });
    return {
      on: { ...report(on, onLate), ...(byHash ? { heads: await indexer(cached.url, onHeads) } : {}) },
      off: { ...report(off, offLate), ...(byHash ? { heads: await indexer(plain.url, offHeads) } : {}) },
      waited,
      sockets,
    };
  } finally {
    await cached.stop();
    await plain.stop();
  }
}

const summary = (name, r) =>
  `${name}: ${r.polled} blocks polled (${r.withLogs} with logs), first answers wrong ${r.firstWrong.length} (${caches(r.firstWrong, 0)}), ` +
  `late answers wrong ${r.lateWrong.length} (${caches(r.lateWrong, 0)}), the never-matching filter: ${r.nowhereWrong} wrong, late HIT ${r.nowhereHits}/${r.polled}` +
  (r.backwards ? `, head backwards ${r.backwards}` : "") +
  (r.heads ? `; the newHeads indexer (by blockHash): ${r.heads.seen} heads, first wrong ${r.heads.firstWrong.length} (${caches(r.heads.firstWrong, 0)}), late wrong ${r.heads.lateWrong.length} (${caches(r.heads.lateWrong, 0)})` : "");

// ---- the profiles themselves, asked straight (no relay) -------------------------------------------

test("profiles: loadBalanced answers as of two heads a block apart (Erigon's [] past its head), hederaMirror as of a mirror two behind, a silent WebSocket never announces", async () => {
  const c = await chain({ instant: true });
  const proxies = [];
  try {
    // Logs in the head block, and the block below it with none.
    await c.ask("anvil_mine", ["0x1"]);
    const sent = await c.ask("eth_sendTransaction", [{ from, to: c.emitter }]);
    // Mined first: anvil's instant miner now and then leaves a ready transaction for later
    // (foundry-rs/foundry#10122; the harness's mendPool mines it within about 500 ms).
    assert.ok(await until(async () => (await c.ask("eth_getTransactionReceipt", [sent])) !== null, 10_000), "the emitter's call mined");
    const real = await c.head();
    const headBlock = await c.ask("eth_getBlockByNumber", [quantity(real), false]);
    const atHead = { address: c.emitter, fromBlock: quantity(real), toBlock: quantity(real) };
    const logs = await c.ask("eth_getLogs", [atHead]);
    assert.equal(logs.length, 1, "the emitter's call logged once in the head block");

    const lb = loadBalanced({ lags: [0, 1], seed: 51 });
    const p = await startProxy({ upstream: c.anvil.url, profile: lb });
    proxies.push(p);
    const many = async (req, n = 20) => Promise.all(Array.from({ length: n }, (_, i) => post(p.url, { ...req, id: i }).then((r) => r.json)));
    const heads = new Set((await many(call("eth_blockNumber"))).map((a) => Number(a.result)));
    assert.deepEqual([...heads].sort(), [real - 1, real], "both heads over 20 asks");
    assert.ok(lb.picks.every((n) => n > 0), `both nodes picked: ${lb.picks}`);
    const batch = await post(p.url, [call("eth_blockNumber", [], 1), call("eth_blockNumber", [], 2)]);
    assert.equal(batch.json[0].result, batch.json[1].result, "a batch goes whole to one node");
    const got = await many(call("eth_getLogs", [atHead]));
    assert.ok(got.some((a) => isDeepStrictEqual(a.result, [])), "the node a block behind: [] past its head");
    assert.ok(got.some((a) => isDeepStrictEqual(a.result, logs)), "the node at the head: the logs");
    assert.ok(got.every((a) => isDeepStrictEqual(a.result, []) || isDeepStrictEqual(a.result, logs)));
    const byHash = await many(call("eth_getLogs", [{ blockHash: headBlock.hash }]));
    assert.ok(byHash.some((a) => a.error?.message === `block not found: ${headBlock.hash.slice(2)}` && a.error.code === -32000), "Erigon: block not found for a hash past its head");
    const blocks = await many(call("eth_getBlockByNumber", [quantity(real), false]));
    assert.ok(blocks.some((a) => a.result === null) && blocks.some((a) => a.result?.hash === headBlock.hash));
    const balances = await many(call("eth_getBalance", [from, quantity(real)]));
    assert.ok(balances.some((a) => a.error?.message === "header not found"));
    const range = await many(call("eth_getLogs", [{ address: c.emitter, fromBlock: quantity(real - 1), toBlock: quantity(real + 5) }]));
    assert.ok(range.every((a) => Array.isArray(a.result)), "a toBlock past its head is taken up to its head");

    const hm = hederaMirror({ lag: 2 });
    const h = await startProxy({ upstream: c.anvil.url, profile: hm });
    proxies.push(h);
    const ask = async (method, params) => (await post(h.url, call(method, params))).json;
    assert.equal(Number((await ask("eth_blockNumber")).result), real - 2);
    for (const tag of ["latest", "safe", "finalized"]) assert.equal(Number((await ask("eth_getBlockByNumber", [tag, false])).result.number), real - 2, tag);
    assert.deepEqual((await ask("eth_getLogs", [atHead])).result, [], "Hedera: [] for blocks the mirror lacks");
    assert.deepEqual((await ask("eth_getLogs", [{ blockHash: headBlock.hash }])).result, [], "Hedera: [] for a hash the mirror lacks");
    assert.equal((await ask("eth_getBlockByNumber", [quantity(real), false])).result, null);
    assert.equal((await ask("eth_getBlockByHash", [headBlock.hash, false])).result, null);
    assert.match((await ask("eth_getBlockReceipts", [quantity(real)])).error?.message ?? "", /^\[Request ID: [0-9a-f-]{36}\] Requested resource not found\. Block: 0x/);
    const old = quantity(real - 10);
    assert.deepEqual((await ask("eth_getLogs", [{ address: c.emitter, fromBlock: old, toBlock: quantity(real - 2) }])).result, await c.ask("eth_getLogs", [{ address: c.emitter, fromBlock: old, toBlock: quantity(real - 2) }]));

    // A WebSocket that accepts newHeads and never says a word.
    const silent = await silentWebSocket(c.anvil.url);
    try {
      const s = await openSocket(silent.url);
      const sub = await s.call("eth_subscribe", ["newHeads"]);
      assert.match(sub.result, /^0x[0-9a-f]{32}$/);
      await c.ask("anvil_mine", ["0x2"]);
      await sleep(1000);
      assert.equal(s.inbox.filter((m) => m.method === "eth_subscription").length, 0, "no head announced");
      assert.equal((await s.call("eth_chainId")).result, "0x7a69");
      s.ws.close();
    } finally {
      await silent.stop();
    }
  } finally {
    for (const p of proxies) await p.stop();
    await c.stop();
  }
});

// ---- the relay --------------------------------------------------------------------------------

test("behind a load-balanced URL over nodes a block apart (Erigon's [] past its head): an event poller's logs, asked again once both nodes have the blocks, are the chain's through the cache; the never-matching filter is right and kept", async () => {
  const c = await chain();
  const profile = loadBalanced({ lags: [0, 1], seed: 51 });
  const proxy = await startProxy({ upstream: c.anvil.url, profile });
  try {
    const lagMost = Math.max(...profile.lags);
    const r = await pollerRun(c, proxy, { ms: 30_000, caughtUp: (real, last) => real - lagMost >= last + 1 });
    // The head watch of the cached relay: the proxy passes WebSockets to anvil (the real head)
    // while HTTP answers through the nodes behind it (case (d): a provider's WebSocket node ahead
    // of its HTTP ones).
    console.log(`# load-balanced ${profile.lags}: picks ${profile.picks}; head watch sockets at the proxy ${r.sockets}; nodes caught up: ${r.waited}`);
    console.log(`# ${summary("cache on ", r.on)}`);
    console.log(`# ${summary("cache off", r.off)}`);
    console.log(`# cache on, late wrong blocks: ${r.on.lateWrong.slice(0, 12).map((b) => `${b.n}:${b.answers[0].cache}`).join(" ")}`);
    assert.ok(r.waited, "both nodes passed the last block polled");
    assert.ok(profile.picks.every((n) => n > 0), `both nodes were used: ${profile.picks}`);
    assert.ok(r.on.polled >= 20 && r.off.polled >= 20, "the pollers saw the chain move");
    // The test itself: through the relay without a cache, once the nodes caught up, every answer is
    // the chain's, and the filter that never matches is always [].
    assert.equal(r.off.lateWrong.length, 0, "late answers without the cache are the chain's");
    assert.equal(r.on.nowhereWrong + r.off.nowhereWrong, 0, "the never-matching filter answers [] throughout");
    // What the cache must not do: keep a lagging node's [] for a block it did not have.
    const poisoned = r.on.lateWrong.map((b) => `${b.n}:${b.answers[0].cache}`);
    assert.equal(poisoned.length, 0, `late answers through the cache not the chain's: ${poisoned.length} of ${r.on.polled} (${poisoned.slice(0, 12).join(" ")})`);
    // First answers: not worse with the cache. Each relay's first answer for a block goes to a node
    // drawn at random (a half chance of the one without it), so the two counts differ by chance:
    // allowed two standard deviations of that difference, sqrt(2 x polled x 1/4).
    const slack = Math.ceil(2 * Math.sqrt(r.on.polled / 2));
    assert.ok(r.on.firstWrong.length <= r.off.firstWrong.length + slack, `first answers wrong with the cache ${r.on.firstWrong.length}, without ${r.off.firstWrong.length} (+${slack})`);
  } finally {
    await proxy.stop();
    await c.stop();
  }
});

test("behind Hedera's relay before a mirror node two blocks behind (chain 296: [] for blocks and hashes it lacks, `finalized` its head): the poller's logs, and a newHeads indexer's logs by blockHash, asked again are the chain's through the cache", async () => {
  const c = await chain({ chainId: 296 });
  const profile = hederaMirror({ lag: 2 });
  const proxy = await startProxy({ upstream: c.anvil.url, profile });
  try {
    const r = await pollerRun(c, proxy, { ms: 12_000, caughtUp: (real, last) => profile.head(real) >= last + 1, vars: { CHAIN_ID: "296" }, byHash: true });
    console.log(`# hedera mirror ${profile.lag} behind: head watch sockets at the proxy ${r.sockets}; mirror caught up: ${r.waited}`);
    console.log(`# ${summary("cache on ", r.on)}`);
    console.log(`# ${summary("cache off", r.off)}`);
    assert.ok(r.waited, "the mirror passed the last block polled");
    assert.ok(r.on.polled >= 6 && r.off.polled >= 6, "the pollers saw the chain move");
    assert.equal(r.off.lateWrong.length, 0, "late answers without the cache are the chain's");
    assert.equal(r.on.nowhereWrong + r.off.nowhereWrong, 0, "the never-matching filter answers [] throughout");
    assert.equal(r.off.heads.lateWrong.length, 0, "the indexer's late answers without the cache are the chain's");
    assert.equal(r.on.lateWrong.length, 0, `late answers through the cache not the chain's: ${r.on.lateWrong.length} of ${r.on.polled}`);
    const poisoned = r.on.heads.lateWrong.map((b) => `${b.n}:${b.answers[0].cache}`);
    assert.equal(poisoned.length, 0, `the indexer's late answers by blockHash through the cache not the chain's: ${poisoned.length} of ${r.on.heads.seen} (${poisoned.slice(0, 12).join(" ")})`);
  } finally {
    await proxy.stop();
    await c.stop();
  }
});

test("two healthy upstreams, the head watch off, an idle spell of several blocks: the cache's head moves again and serves the head (helper-3's finding: a head learned from the head ask's own eth_blockNumber raised a suspicion that made the ask adopt nothing, for good)", async () => {
  const c = await chain();
  const a = await startProxy({ upstream: c.anvil.url, strictNonce: false });
  const b = await startProxy({ upstream: c.anvil.url, strictNonce: false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}`, CACHE: "on", CACHE_HEAD_WATCH: "off" } });
  try {
    const number = async () => {
      const r = await post(relay.url, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] });
      return { n: Number(r.json.result), cache: r.cache };
    };
    const first = await number();
    await sleep(4_500);
    const after = [];
    for (let i = 0; i < 8; i++) {
      after.push(await number());
      await sleep(100);
    }
    console.log(`# idle spell: ${first.n} before, after: ${after.map((x) => `${x.n}:${x.cache}`).join(" ")}`);
    assert.ok(after.at(-1).n >= first.n + 3, "the head moved on");
    assert.ok(after.filter((x) => x.cache === "HIT").length >= 4, "the head is served from the cache again");
  } finally {
    await relay.stop();
    await a.stop();
    await b.stop();
    await c.stop();
  }
});

test("a head watch whose socket announces nothing while the chain moves hands over to the next UPSTREAM_WS_URL at once, and follows the chain there", async () => {
  const c = await chain();
  const proxy = await startProxy({ upstream: c.anvil.url, strictNonce: false });
  const silent = await silentWebSocket(c.anvil.url);
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, UPSTREAM_WS_URL: `${silent.url},${proxy.url.replace(/^http/, "ws")}`, CACHE: "on" } });
  try {
    const until = performance.now() + 12_000;
    while (performance.now() < until && proxy.webSocketCount() === 0) {
      await rpc(relay.url, "eth_blockNumber");
      await sleep(200);
    }
    const silentLines = relay.events("head_watch_silent");
    console.log(`# silent, then the next URL: ${silent.subscriptions.length} subscriptions on the silent socket, ${proxy.webSocketCount()} at the node, lines ${JSON.stringify(silentLines)}`);
    assert.ok(silent.subscriptions.length >= 1, "the first watch subscribed on the silent socket");
    assert.equal(silentLines.length, 1, "found silent once");
    assert.equal(silentLines[0].retry_ms, 0, "the next URL at once");
    assert.match(silentLines[0].upstream, /^ws#1 /);
    assert.equal(proxy.webSocketCount(), 1, "the next watch is on the second URL");
    // It follows the chain there: heads heard (the `cache` line's count, written every 10 s).
    const heard = async () => relay.events("cache").reduce((a, l) => a + l.heads_heard, 0);
    const later = performance.now() + 12_000;
    while (performance.now() < later && (await heard()) === 0) {
      await rpc(relay.url, "eth_blockNumber");
      await sleep(250);
    }
    assert.ok((await heard()) > 0, "heads heard on the second URL");
  } finally {
    await relay.stop();
    await silent.stop();
    await proxy.stop();
    await c.stop();
  }
});

after(() => {});
