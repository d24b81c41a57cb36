// The read cache through a reorg (issue 43), split from tests/cache.test.mjs so the two run side by
// side (scripts/e2e.mjs): the compiled relay on workerd in front of anvil mining a block a second,
// a dapp's read trace (1,000 reads over 30 s) through an `anvil_reorg` of depth 3: no answer names
// a block that was not canonical when it was given, with the relay's head watch and without it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { rpc, until } from "./support/harness.mjs";
import { quantity, chain, watch, trace, check, blockOf, numbersNamed, HEAD_MS, MARGIN_MS } from "./support/dapp-trace.mjs";

async function reorgTrace(vars, windowMs) {
  const c = await chain(vars);
  const watcher = watch(c);
  try {
    await until(() => watcher.heads.length > 0, 5000);
    let before;
    let reorgAt;
    const { done, upstream } = await trace(c, watcher, {
      midway: async () => {
        const head = Number(await c.ask("eth_blockNumber", []));
        before = new Map();
        for (let n = head - 8; n <= head; n++) before.set(n, (await c.ask("eth_getBlockByNumber", [quantity(n), false])).hash);
        const started = performance.now();
        await c.ask("anvil_reorg", [3, []]);
        reorgAt = { started, done: performance.now(), fork: head - 2 };
        return reorgAt;
      },
    });
    await watcher.stop();
    const after = new Map();
    for (const n of numbersNamed(done)) after.set(n, (await rpc(c.anvil.url, "eth_getBlockByNumber", [quantity(n), false])).result?.hash);
    // Canonical when the answer was given: before the reorg began, the old chain's (where it
    // differs); once the relay had to know of it (`windowMs` after the reorg), the node's now;
    // between, either.
    const learned = () => reorgAt.done + windowMs;
    const canonicalAt = (number, start, end) => {
      const old = before.get(number) ?? after.get(number);
      if (end < reorgAt.started) return [old];
      if (start > learned()) return [after.get(number)];
      return [old, after.get(number)];
    };
    const replaced = [...before.entries()].filter(([n, h]) => after.has(n) && after.get(n) !== h).map(([n]) => n);
    const wrong = await check(c, watcher.heads, done, canonicalAt);
    const afterReorg = done.filter((d) => d.start > reorgAt.done);
    const replacedBlock = (d) => {
      const b = blockOf(d.json?.result);
      return b && b.number >= reorgAt.fork && before.get(b.number) === b.hash && after.get(b.number) !== b.hash;
    };
    const stale = afterReorg.filter((d) => d.start > learned()).filter(replacedBlock);
    const window = afterReorg.filter((d) => d.start <= learned()).filter(replacedBlock);
    const lastInWindow = Math.max(0, ...window.map((d) => d.end - reorgAt.done));
    const reorgLines = c.relay.logs.filter((l) => l.includes('"event":"cache_reorg"'));
    const heard = c.relay.logs.filter((l) => l.includes('"event":"cache"')).reduce((a, l) => a + JSON.parse(l.slice(l.indexOf("{"))).heads_heard, 0);
    console.log(`cache reorg trace (${JSON.stringify(vars)}): ${done.length} reads, ${upstream} upstream, fork ${reorgAt.fork}, blocks replaced ${replaced}, ${afterReorg.length} reads after it, ${window.length} of them naming a replaced block within ${windowMs} ms (the last ${lastInWindow.toFixed(0)} ms after the reorg), ${stale.length} after, cache_reorg lines ${reorgLines.length}, heads heard ${heard}`);
    assert.ok(replaced.length >= 1, "the reorg replaced blocks the trace read");
    // Each wrong answer with its timing: when it began (ms since the trace's start), how long it
    // took, and the heads the watcher saw within 3 s of it (number, ms from the read's start,
    // the recipient's balance then), to tell a relay that believed a head too long from a late one.
    const t0 = Math.min(...done.map((d) => d.start)); // `done` is in the order reads were answered
    const detail = wrong.slice(0, 5).map((w) => {
      const d = done.find((x) => x.req === w.req);
      if (!d) return w;
      const near = watcher.heads.filter((h) => Math.abs(h.seen - d.start) < 3000);
      return { ...w, beganMs: Math.round(d.start - t0), tookMs: Math.round(d.end - d.start), cache: d.cache, heads: near.map((h) => `${h.number}@${Math.round(h.seen - d.start)}ms balance ${BigInt(h.balance)}`) };
    });
    assert.deepEqual(detail, [], `${wrong.length} answers not canonical or not the node's`);
    assert.deepEqual(stale, [], `no answer from before the reorg above the fork point once the relay knew of it`);
    assert.ok(reorgLines.length >= 1, "the relay saw the reorg");
    return { heard };
  } finally {
    await watcher.stop();
    await c.stop();
  }
}

test("a reorg of depth 3 while the trace runs: the relay hears it on its own newHeads socket, and no read begun after the reorg names a block it replaced", async () => {
  // A window of 0: every read begun after anvil_reorg answered is checked as the node answers now.
  const { heard } = await reorgTrace({}, 0);
  // The `cache` lines of the first 20 s at least (written every 10 s while reads come).
  assert.ok(heard >= 10, `the head watch heard the chain's heads: ${heard}`);
});

test("the same with CACHE_HEAD_WATCH=off: the head is only asked, so reads within CACHE_HEAD_MS of the reorg may name a replaced block, none after", async () => {
  const { heard } = await reorgTrace({ CACHE_HEAD_WATCH: "off" }, HEAD_MS + MARGIN_MS);
  assert.equal(heard, 0, "no head heard without the watch");
});
