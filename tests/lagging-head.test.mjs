// e2e: alone (scripts/e2e.mjs): it bounds how far behind the chain the relay's head may be, in
// real time, which a busy machine moves.
// Upstreams that lag (split from tests/lagging.test.mjs to run alone): two upstreams, one stuck 39
// blocks back listed first and one with a slow tail, behind the relay with its head watch on the
// proxies' WebSockets, and behind one whose head watch is on a WebSocket that never announces a head:
// eth_blockNumber, polled as a client does, never goes backwards and is never more than
// MAX_HEAD_LAG + 1 behind anvil's head asked just before it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startProxy, startRelay, rpc, sleep } from "./support/harness.mjs";
import { stuck, lagging } from "./support/providers.mjs";
import { HEAD_MS, MAX_HEAD_LAG, LATE_MS, chain, silentWebSocket } from "./support/lagging.mjs";

/**
 * A client polling eth_blockNumber through `url` every 100 ms for `ms`, anvil asked just before each
 * read (the highest head it had when the read began); each head announced is then read by number
 * through the relay. Counts heads that went backwards, the most a head was behind anvil's, heads
 * more than MAX_HEAD_LAG + 1 behind, and nulls for announced blocks.
 */
async function headPoller(url, c, ms) {
  const stats = { polls: 0, backwards: 0, worstLag: 0, tooFar: 0, nulls: 0, failed: 0, lags: {}, far: [], farAt: [], started: performance.now() };
  let highest = -1;
  const end = performance.now() + ms;
  while (performance.now() < end) {
    const real = await c.head();
    const answer = await rpc(url, "eth_blockNumber");
    stats.polls += 1;
    if (!answer?.result) {
      stats.failed += 1;
      continue;
    }
    const n = Number(answer.result);
    if (n < highest) stats.backwards += 1;
    highest = Math.max(highest, n);
    const lag = real - n;
    stats.lags[lag] = (stats.lags[lag] ?? 0) + 1;
    stats.worstLag = Math.max(stats.worstLag, lag);
    if (lag > MAX_HEAD_LAG + 1) {
      const at = performance.now() - stats.started;
      stats.tooFar += 1;
      stats.far.push(`${lag}@${(at / 1000).toFixed(1)}s`);
      stats.farAt.push(at);
    }
    const block = await rpc(url, "eth_getBlockByNumber", [answer.result, false]);
    if (block?.result === null) stats.nulls += 1;
    else if (Number(block?.result?.number) !== n) stats.failed += 1;
    await sleep(100);
  }
  return stats;
}

test("two upstreams, one stuck 39 blocks back listed first, one with a slow tail: eth_blockNumber never goes backwards, is never more than MAX_HEAD_LAG + 1 behind the chain, and each head announced is there (head watch on the nodes' WebSockets, and on one that never announces)", async () => {
  const c = await chain();
  const behind = await startProxy({ upstream: c.anvil.url, profile: stuck({ behind: 39 }) });
  const tail = await startProxy({ upstream: c.anvil.url, profile: lagging({ share: 0.15, lateMs: LATE_MS, seed: 40 }) });
  const silent = await silentWebSocket(c.anvil.url);
  const upstreams = `${behind.url},${tail.url}`;
  const watched = await startRelay({ vars: { UPSTREAM_RPC_URL: upstreams, CACHE: "on" } });
  const deaf = await startRelay({ vars: { UPSTREAM_RPC_URL: upstreams, UPSTREAM_WS_URL: silent.url, CACHE: "on" } });
  try {
    const [a, b] = await Promise.all([headPoller(watched.url, c, 20_000), headPoller(deaf.url, c, 20_000)]);
    const line = (s) =>
      `${s.polls} polls, ${s.backwards} backwards, worst lag ${s.worstLag} (lags ${JSON.stringify(s.lags)}), ${s.tooFar} more than ${MAX_HEAD_LAG + 1} behind${s.far.length ? ` (${s.far.slice(0, 6).join(" ")})` : ""}, ${s.nulls} nulls for announced blocks, ${s.failed} failed`;
    console.log(`# stuck 39 + slow tail, head watch on the proxies (sockets ${behind.webSocketCount() + tail.webSocketCount()}): ${line(a)}`);
    console.log(`# stuck 39 + slow tail, head watch on a silent WebSocket (subscriptions ${silent.subscriptions.length}): ${line(b)}`);
    assert.ok(silent.subscriptions.length >= 1, "the second relay's head watch subscribed on the silent WebSocket");
    for (const [name, s] of [["head watch", a], ["silent head watch", b]]) {
      assert.ok(s.polls >= 15, `${name}: polls (${s.polls}; each waits for the slow tail now and then)`);
      assert.equal(s.failed, 0, `${name}: every read answered`);
      assert.equal(s.backwards, 0, `${name}: eth_blockNumber never went backwards`);
      assert.equal(s.nulls, 0, `${name}: each announced block is there (${s.nulls} nulls of ${s.polls})`);
    }
    // With the head watch on the nodes' sockets: never more than MAX_HEAD_LAG + 1 behind (a fresh
    // isolate's first heads wait for every upstream's answer, so the stuck node's alone never
    // stands for the chain's).
    assert.equal(a.tooFar, 0, `head watch: never more than ${MAX_HEAD_LAG + 1} behind (worst ${a.worstLag}: ${a.far.slice(0, 6).join(" ")})`);
    // On a socket that announces nothing (one URL: the watch is left), the head is asked every
    // CACHE_HEAD_MS, and an ask can wait for the slow tail (LATE_MS) of the one upstream that has
    // the block: never more than MAX_HEAD_LAG + 1 blocks plus those of CACHE_HEAD_MS + LATE_MS
    // behind (a block a second), never the stuck node's 39.
    const bound = MAX_HEAD_LAG + 1 + Math.ceil((HEAD_MS + LATE_MS) / 1000);
    assert.ok(b.worstLag <= bound, `silent head watch: at most ${bound} behind (worst ${b.worstLag}: ${b.far.slice(0, 6).join(" ")})`);
    // The silent socket was found silent and logged so.
    assert.ok(deaf.logs.some((l) => l.includes('"event":"head_watch_silent"')), "head_watch_silent logged");
  } finally {
    await watched.stop();
    await deaf.stop();
    await silent.stop();
    await behind.stop();
    await tail.stop();
    await c.stop();
  }
});
