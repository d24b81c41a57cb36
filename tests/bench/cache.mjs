// make bench-e2e: the read cache (issue 43). One anvil (100 blocks mined, no new ones: the head
// stays, so every read here is a finalized block's or the head's), behind a test proxy answering
// every request after LATENCY_MS (a provider's round trip); two relays on workerd, one with the
// cache (default settings but CACHE_MAX_BYTES) and one with CACHE=off. For each read: READS
// reads one after another through each relay, the cached relay warmed by one first; p50 and p99
// of each, and the workerd CPU per read. Then the memory: DISTINCT different reads (balances of
// fresh addresses at the head, which does not move: kept in the isolate's memory only, never in
// the Cache API, whose local stand-in lives in the same workerd process) through each relay, the
// workerd process's resident memory before and after, and the cache's own count of what it holds
// (its `cache` line) against CACHE_MAX_BYTES. Prints Markdown for BENCHMARKS.md. READS (default 1000), LATENCY_MS (20),
// DISTINCT (40000), CACHE_MAX_BYTES (4194304).
import { startAnvil, startProxy, startRelay, post, rpc, cpuMs, rssKb, sleep } from "../support/harness.mjs";

const READS = Number(process.env.READS ?? 1000);
const L = Number(process.env.LATENCY_MS ?? 20);
const DISTINCT = Number(process.env.DISTINCT ?? 40000);
const MAX_BYTES = Number(process.env.CACHE_MAX_BYTES ?? 4 << 20);
const quantile = (xs, q) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(q * xs.length))];
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);

const anvil = await startAnvil({ accounts: 2 });
await rpc(anvil.url, "anvil_mine", ["0x64"]);
const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, latency: () => L });
const cached = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CACHE_MAX_BYTES: String(MAX_BYTES) } });
const uncached = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CACHE: "off" } });
const cpu = (relay) => relay.pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
const rss = (relay) => relay.pids.reduce((sum, pid) => sum + rssKb(pid), 0);

const reads = [
  ["eth_getBlockByNumber, a finalized block", "eth_getBlockByNumber", ["0x5", false]],
  ["eth_getTransactionCount at a finalized block", "eth_getTransactionCount", ["0x000000000000000000000000000000000000c0de", "0x5"]],
  ["eth_chainId", "eth_chainId", []],
  ["eth_blockNumber (the head)", "eth_blockNumber", []],
];

/** READS reads of `method` one after another through `relay`: each one's ms, the CPU per read. */
async function run(relay, method, params) {
  const times = [];
  const before = cpu(relay);
  for (let i = 0; i < READS; i++) {
    const started = performance.now();
    const r = await post(relay.url, { jsonrpc: "2.0", id: i, method, params });
    times.push(performance.now() - started);
    if (r.json?.result === undefined) throw new Error(`${method}: ${r.text}`);
  }
  return { times, cpuPerRead: (cpu(relay) - before) / READS };
}

console.log(`\n| read | relay | p50 (ms) | p99 (ms) | workerd CPU per read (ms) |`);
console.log(`|---|---|---:|---:|---:|`);
for (const [name, method, params] of reads) {
  await post(cached.url, { jsonrpc: "2.0", id: 0, method, params });
  // Alternating which goes first.
  const hit = await run(cached, method, params);
  const miss = await run(uncached, method, params);
  for (const [label, r] of [["cached (HIT)", hit], ["CACHE=off", miss]]) {
    console.log(`| ${name} | ${label} | ${f1(quantile(r.times, 0.5))} | ${f1(quantile(r.times, 0.99))} | ${f2(r.cpuPerRead)} |`);
  }
}

// Memory: DISTINCT different reads at the head through each relay, 20 at a time.
async function fill(relay) {
  const before = rss(relay);
  const cpuBefore = cpu(relay);
  for (let i = 0; i < DISTINCT; i += 20) {
    await Promise.all(
      Array.from({ length: 20 }, (_, j) => {
        const address = `0x${(i + j + 1).toString(16).padStart(40, "0")}`;
        return post(relay.url, { jsonrpc: "2.0", id: i + j, method: "eth_getBalance", params: [address, "latest"] });
      }),
    );
  }
  return { before, after: rss(relay), cpuPerRead: (cpu(relay) - cpuBefore) / DISTINCT };
}
const memCached = await fill(cached);
const memOff = await fill(uncached);
// The cache's own count, in its next `cache` line (every 10 s).
await sleep(10_500);
await post(cached.url, { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] });
await sleep(500);
const line = cached.logs.filter((l) => l.includes('"event":"cache"')).map((l) => JSON.parse(l.slice(l.indexOf("{")))).at(-1);
console.log(`\n| ${DISTINCT} different reads at the head (each a miss) | workerd CPU per read (ms) | workerd RSS before (MB) | after (MB) | growth (MB) | the cache holds (its count) |`);
console.log(`|---|---:|---:|---:|---:|---|`);
const mb = (kb) => (kb / 1024).toFixed(1);
console.log(`| cache on, CACHE_MAX_BYTES=${MAX_BYTES} | ${f2(memCached.cpuPerRead)} | ${mb(memCached.before)} | ${mb(memCached.after)} | ${mb(memCached.after - memCached.before)} | ${line ? `${line.entries} entries, ${line.held_bytes} bytes, ${line.evicted} evicted` : "no line"} |`);
console.log(`| CACHE=off | ${f2(memOff.cpuPerRead)} | ${mb(memOff.before)} | ${mb(memOff.after)} | ${mb(memOff.after - memOff.before)} | |`);
console.log(`\nREADS=${READS} one after another, LATENCY_MS=${L} at the test upstream; anvil not mining.`);
await cached.stop();
await uncached.stop();
await proxy.stop();
anvil.stop();
