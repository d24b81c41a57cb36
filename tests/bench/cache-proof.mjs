// The read cache's proofs, measured (three issues' numbers for BENCHMARKS.md), on workerd + anvil.
// PART=blooms | large | trace | all (default all). Prints Markdown; measures and reports, asserts
// nothing; exits 1 only when the setup fails (anvil, a contract that does not log what it should).
//
// Run: `BASE_BUILD=../base/build node tests/bench/cache-proof.mjs` (tables labelled NEW/BASE by dir).
// - blooms: blocks dense with other contracts' logs (their blooms mostly set) beside sparse ones.
//   anvil mining a block a second (100 blocks mined first, so `finalized` exists); in each block a
//   call to a log emitter A (one LOG1), and in the dense run DENSE_CONTRACTS more calls, each to
//   its own contract that loops DENSE_LOGS times emitting LOG2 with topics varied by the counter,
//   the block and the contract. A relay (build-new, CACHE=on) behind a recording proxy over anvil
//   ("plain") and one behind a load-balanced URL over nodes a block apart ("load-balanced",
//   tests/support/providers.mjs), side by side, each polled as viem's watchEvent polls
//   (eth_blockNumber every 250 ms, eth_getLogs {address, fromBlock: n, toBlock: n} for each new
//   block) for A's logs and for a filter that never matches (an address with no code); each
//   block's logs asked a second time AGAIN_MS later. Per run and filter: blocks polled, the
//   blocks' bloom bits set, X-Cache HIT shares, the upstream's eth_getLogs per client eth_getLogs,
//   answers not anvil's own, and the relay's `cache` lines' suspect counters. RUN_MS (30000),
//   AGAIN_MS (4000), DENSE_CONTRACTS (4), DENSE_LOGS (250).
// - large: an eth_getLogs answer of about TARGET_MB (12) MB of JSON through a fresh relay: the
//   workerd processes' resident memory before, after it and after a second identical read, for
//   build-new with the cache on (a finalized range, RELAY_SECRET set: the Cache API may keep it;
//   and a range above the finalized block, which must be neither parsed nor copied), build-new
//   with CACHE=off (both ranges), and build-base with the cache on (both ranges). REPS (3) fresh
//   relays each, interleaved; medians.
// - trace: the dapp read trace of tests/cache.test.mjs (1,000 reads over 30 s; its chain(),
//   watch(), reads() and trace(), copied) through build-base and build-new alternately, TRACE_RUNS
//   (5) each, each with a fresh anvil, proxy and relay; each run's upstream share and the medians.
import { isDeepStrictEqual } from "node:util";
import { readFileSync } from "node:fs";
import { keccak256, stringToHex } from "viem";
import { startAnvil, startProxy, startRelay, post, rpc, rssKb, cpuMs, sleep, until, devAccount, followBlocks } from "../support/harness.mjs";
import { loadBalanced } from "../support/providers.mjs";
import { chain as traceChain, watch, trace } from "../support/dapp-trace.mjs";

const PART = process.env.PART ?? "all";
// The builds compared: NEW_BUILD (default build/, this checkout's) and BASE_BUILD (a build of the
// commit compared with, e.g. a worktree's; unset: the parts that compare builds compare NEW with
// itself).
const NEW = process.env.NEW_BUILD ?? "build";
const BASE = process.env.BASE_BUILD ?? NEW;
const PARTS = PART === "all" ? ["blooms", "large", "trace", "followers"] : PART.split(",");
const call = (method, params = [], id = 1) => ({ jsonrpc: "2.0", id, method, params });
const quantity = (n) => `0x${n.toString(16)}`;
const median = (xs) => {
  const s = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!s.length) return NaN;
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
const pct = (a, b) => (b ? `${((100 * a) / b).toFixed(1)}%` : "-");
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : "-");
const f1 = (x) => (Number.isFinite(x) ? x.toFixed(1) : "-");
const MB = 1024 * 1024;
const from = devAccount(0).address;
/** An address with no code: no log ever comes from it. */
const NOWHERE = "0x000000000000000000000000000000000000dead";
/** A setup failure: the only thing that exits 1. */
class SetupError extends Error {}

// Everything started, stopped at the end whatever happens.
const live = new Set();
const track = (thing, stop) => {
  const entry = { stop: async () => (live.delete(entry), await stop(thing)) };
  live.add(entry);
  return entry;
};
async function stopAll() {
  for (const entry of [...live].reverse()) await entry.stop().catch(() => {});
}

// ---- contracts ------------------------------------------------------------------------------------

/** tests/lagging.test.mjs's emitter: LOG1 with topic Ping() and no data, on every call. */
const TOPIC = keccak256(stringToHex("Ping()"));
const EMITTER_INIT = `0x60258060095f395ff37f${TOPIC.slice(2)}5f5fa100`;
/** Init code returning `runtime` (PUSH1 len PUSH1 10 PUSH0 CODECOPY PUSH1 len PUSH0 RETURN). */
const initOf = (runtime) => {
  const len = (runtime.length / 2).toString(16).padStart(2, "0");
  return `0x60${len}600a5f3960${len}5ff3${runtime}`;
};
// Loops c = calldata[0..32] down to 1, each time LOG1(topic c, 32 zero bytes of data):
// PUSH0 CALLDATALOAD; 2: JUMPDEST DUP1 ISZERO PUSH1 20 JUMPI DUP1 PUSH1 32 PUSH0 LOG1
// PUSH1 1 SWAP1 SUB PUSH1 2 JUMP; 20: JUMPDEST STOP.
const LOG1_LOOP = initOf("5f355b80156014578060205fa1600190036002565b00");
// Loops c = calldata[0..32] down to 1, each time LOG2(topic1 = c + ADDRESS, topic2 = c + ADDRESS
// + NUMBER * 65536, 32 zero bytes): every log's topics differ within a block, from block to block
// and from contract to contract, so the block's bloom fills up.
// PUSH0 CALLDATALOAD; 2: JUMPDEST DUP1 ISZERO PUSH1 32 JUMPI ADDRESS PUSH3 65536 NUMBER MUL ADD
// DUP2 ADD ADDRESS DUP3 ADD PUSH1 32 PUSH0 LOG2 PUSH1 1 SWAP1 SUB PUSH1 2 JUMP; 32: JUMPDEST STOP.
const LOG2_LOOP = initOf("5f355b8015602057306201000043020181013082016020" + "5fa2600190036002565b00");
const countData = (n) => `0x${n.toString(16).padStart(64, "0")}`;

/** Asks `url` and throws a SetupError on an error answer. */
const asker = (url) => async (method, params = []) => {
  const r = await rpc(url, method, params);
  if (!r || r.error) throw new SetupError(`${method}: ${JSON.stringify(r?.error ?? r)}`);
  return r.result;
};
/** A mined transaction's receipt (anvil mines a sent transaction a moment later). */
async function receiptOf(ask, hash, ms = 10_000) {
  let receipt = null;
  await until(async () => (receipt = await ask("eth_getTransactionReceipt", [hash])) !== null, ms, 50);
  if (!receipt) throw new SetupError(`no receipt for ${hash}`);
  return receipt;
}
const popcount = (hex) => [...Buffer.from(hex.replace(/^0x/, ""), "hex")].reduce((s, b) => s + (b.toString(2).match(/1/g)?.length ?? 0), 0);

// ---- part blooms -------------------------------------------------------------------------------------

const RUN_MS = Number(process.env.RUN_MS ?? 30_000);
const AGAIN_MS = Number(process.env.AGAIN_MS ?? 4000);
const DENSE_CONTRACTS = Number(process.env.DENSE_CONTRACTS ?? 4);
const DENSE_LOGS = Number(process.env.DENSE_LOGS ?? 250);

/** anvil a block a second, A and the dense contracts deployed and checked, 100 blocks mined, then
 * about every block a call to A (and, `dense`, one to each dense contract), until stop(). */
async function bloomChain({ dense }) {
  const anvil = await startAnvil({ accounts: 2, extraArgs: ["--block-time", "1"] });
  track(anvil, (a) => a.stop());
  const ask = asker(anvil.url);
  const a = await receiptOf(ask, await ask("eth_sendTransaction", [{ from, data: EMITTER_INIT }]));
  const denseAddrs = [];
  for (let i = 0; i < DENSE_CONTRACTS; i++) {
    denseAddrs.push((await receiptOf(ask, await ask("eth_sendTransaction", [{ from, data: LOG2_LOOP }]))).contractAddress);
  }
  // The contracts do what they should: A logs once, a dense one logs as often as asked.
  const one = await receiptOf(ask, await ask("eth_sendTransaction", [{ from, to: a.contractAddress, gas: "0xc350" }]));
  if (one.logs.length !== 1 || one.logs[0].topics[0] !== TOPIC) throw new SetupError(`emitter A logged ${one.logs.length}`);
  for (const to of denseAddrs) {
    const r = await receiptOf(ask, await ask("eth_sendTransaction", [{ from, to, data: countData(DENSE_LOGS), gas: quantity(DENSE_LOGS * 1600 + 60_000) }]));
    if (r.status !== "0x1" || r.logs.length !== DENSE_LOGS || new Set(r.logs.map((l) => l.topics[1])).size !== DENSE_LOGS) {
      throw new SetupError(`dense contract ${to}: status ${r.status}, ${r.logs.length} logs of ${DENSE_LOGS}`);
    }
  }
  await ask("anvil_mine", ["0x64"]);
  let going = true;
  const sending = (async () => {
    while (going) {
      const started = performance.now();
      await ask("eth_sendTransaction", [{ from, to: a.contractAddress, gas: "0xc350" }]);
      if (dense) {
        for (const to of denseAddrs) await ask("eth_sendTransaction", [{ from, to, data: countData(DENSE_LOGS), gas: quantity(DENSE_LOGS * 1600 + 60_000) }]);
      }
      await sleep(Math.max(0, 900 - (performance.now() - started)));
    }
  })();
  return {
    anvil,
    ask,
    emitter: a.contractAddress,
    head: async () => Number(await ask("eth_blockNumber")),
    stopSending: async () => ((going = false), await sending),
  };
}

/** An eth_getLogs of block `n` for `address` through `url`: its answer, X-Cache and time span. */
async function logsOf(url, address, n) {
  const start = performance.now();
  const r = await post(url, call("eth_getLogs", [{ address, fromBlock: quantity(n), toBlock: quantity(n) }]));
  return { n, address, start, end: performance.now(), result: r.json?.result, error: r.json?.error, cache: r.cache };
}

/**
 * The poller (as tests/lagging.test.mjs's, viem's watchEvent): every 250 ms eth_blockNumber; for
 * each new block n, eth_getLogs of n for each of `addresses`, one after another; each block's
 * reads asked again `againMs` later (beside the polling). For `ms`.
 */
async function pollWithAgain(url, addresses, ms, againMs) {
  const firsts = [];
  const seconds = [];
  const later = [];
  const backwards = await followBlocks(url, ms, async (n) => {
    for (const address of addresses) firsts.push(await logsOf(url, address, n));
    later.push(
      sleep(againMs).then(async () => {
        for (const address of addresses) seconds.push(await logsOf(url, address, n));
      }),
    );
  });
  await Promise.all(later);
  return { firsts, seconds, backwards };
}

/** The eth_getLogs requests that reached `proxy` (a batch's members each), with their arrival. */
const upstreamLogs = (proxy) =>
  proxy.requests.flatMap((r) => [r.body].flat().filter((m) => m?.method === "eth_getLogs").map((m) => ({ at: r.at, filter: m.params?.[0] ?? {} })));
/** The upstream eth_getLogs for the read `ask` (the same address and block, by number or hash, during it). */
function upstreamFor(ups, ask, hashOf) {
  return ups.filter(({ at, filter }) => {
    if (at < ask.start || at > ask.end) return false;
    if (String(filter.address ?? "").toLowerCase() !== ask.address.toLowerCase()) return false;
    if (filter.blockHash) return filter.blockHash === hashOf.get(ask.n);
    const f = filter.fromBlock === undefined ? NaN : Number(filter.fromBlock);
    const t = filter.toBlock === undefined ? NaN : Number(filter.toBlock);
    return f <= ask.n && ask.n <= t;
  }).length;
}
/** The sums of the relay's `cache` lines' counters. */
function cacheSums(relay) {
  const lines = relay.logs.filter((l) => l.includes('"event":"cache"')).map((l) => {
    try {
      return JSON.parse(l.slice(l.indexOf("{")));
    } catch {
      return null;
    }
  }).filter(Boolean);
  const sum = (k) => lines.reduce((s, l) => s + (Number(l[k]) || 0), 0);
  return { lines: lines.length, ...Object.fromEntries(["hits", "misses", "suspect", "suspect_asked_again", "suspect_kept", "suspect_unkept"].map((k) => [k, sum(k)])) };
}

async function bloomRun(dense) {
  const c = await bloomChain({ dense });
  const profile = loadBalanced({ lags: [0, 1], seed: 51 });
  const upstreams = [
    ["plain", await startProxy({ upstream: c.anvil.url, strictNonce: false })],
    ["load-balanced [0, 1]", await startProxy({ upstream: c.anvil.url, profile })],
  ];
  for (const [, p] of upstreams) track(p, (x) => x.stop());
  const relays = [];
  for (const [, p] of upstreams) {
    const relay = await startRelay({ buildDir: NEW, vars: { UPSTREAM_RPC_URL: p.url, CACHE: "on" } });
    track(relay, (x) => x.stop());
    relays.push(relay);
  }
  const addresses = [c.emitter, NOWHERE];
  // Warm: the chain check and the first head, so that the runs start alike.
  for (const relay of relays) await post(relay.url, call("eth_blockNumber"));
  const runs = await Promise.all(relays.map((relay) => pollWithAgain(relay.url, addresses, RUN_MS, AGAIN_MS)));
  await c.stopSending();
  // The `cache` lines come every 10 s while reads come: one more read once 10 s passed.
  await sleep(10_500);
  for (const relay of relays) await post(relay.url, call("eth_chainId"));
  await sleep(700);
  // anvil's own answers, blooms and hashes for every block polled.
  const numbers = [...new Set(runs.flatMap((r) => r.firsts.map((a) => a.n)))].sort((a, b) => a - b);
  const truth = new Map();
  const hashOf = new Map();
  const blooms = [];
  const txs = [];
  for (const n of numbers) {
    const block = await c.ask("eth_getBlockByNumber", [quantity(n), false]);
    hashOf.set(n, block.hash);
    blooms.push(popcount(block.logsBloom) / 2048);
    txs.push(block.transactions.length);
    for (const address of addresses) truth.set(`${n}:${address}`, await c.ask("eth_getLogs", [{ address, fromBlock: quantity(n), toBlock: quantity(n) }]));
  }
  const rows = [];
  for (const [k, [name, proxy]] of upstreams.entries()) {
    const run = runs[k];
    const ups = upstreamLogs(proxy);
    for (const [i, address] of addresses.entries()) {
      const mine = (list) => list.filter((a) => a.address === address);
      const [first, second] = [mine(run.firsts), mine(run.seconds)];
      const wrong = (list) => list.filter((a) => !isDeepStrictEqual(a.result, truth.get(`${a.n}:${address}`))).length;
      const upCount = (list) => list.reduce((s, a) => s + upstreamFor(ups, a, hashOf), 0);
      rows.push({
        upstream: name,
        filter: i === 0 ? "A's logs" : "never matches",
        polled: first.length,
        withLogs: first.filter((a) => truth.get(`${a.n}:${address}`).length > 0).length,
        firstHit: pct(first.filter((a) => a.cache === "HIT").length, first.length),
        secondHit: pct(second.filter((a) => a.cache === "HIT").length, second.length),
        firstUp: upCount(first) / (first.length || NaN),
        secondUp: upCount(second) / (second.length || NaN),
        firstWrong: wrong(first),
        secondWrong: wrong(second),
        backwards: run.backwards,
      });
    }
    // Every upstream eth_getLogs, attributed or not (the relay asks none of its own).
    rows.at(-1).allUp = `${ups.length} / ${run.firsts.length + run.seconds.length}`;
  }
  const sums = relays.map((r) => cacheSums(r));
  const picks = [...profile.picks];
  await stopAll();
  return { rows, sums, blooms, txs, numbers, picks, upstreams: upstreams.map(([n]) => n) };
}

async function blooms() {
  console.log(`\n### Blocks dense with other contracts' logs: a poller's re-asks and hits beside sparse blocks\n`);
  const results = [];
  for (const dense of [false, true]) results.push([dense ? "dense" : "sparse", await bloomRun(dense)]);
  console.log(`| blocks | bloom bits set per block (mean, min-max) | transactions per block (mean) |`);
  console.log(`|---|---:|---:|`);
  for (const [name, r] of results) {
    const mean = r.blooms.reduce((s, x) => s + x, 0) / (r.blooms.length || NaN);
    const txMean = r.txs.reduce((s, x) => s + x, 0) / (r.txs.length || NaN);
    console.log(`| ${name} | ${pct(mean, 1)} (${pct(Math.min(...r.blooms), 1)}-${pct(Math.max(...r.blooms), 1)}) | ${f1(txMean)} |`);
  }
  console.log(`\n| blocks | upstream | filter | blocks polled (with logs) | first asks HIT | second asks HIT | upstream eth_getLogs per client eth_getLogs (first / second asks) | answers not anvil's (first / second) |`);
  console.log(`|---|---|---|---:|---:|---:|---:|---:|`);
  for (const [name, r] of results) {
    for (const row of r.rows) {
      console.log(`| ${name} | ${row.upstream} | ${row.filter} | ${row.polled} (${row.withLogs}) | ${row.firstHit} | ${row.secondHit} | ${f2(row.firstUp)} / ${f2(row.secondUp)} | ${row.firstWrong} / ${row.secondWrong} |`);
    }
  }
  console.log(`\n| blocks | upstream | \`cache\` lines | hits | misses | suspect | suspect_asked_again | suspect_kept | suspect_unkept | upstream eth_getLogs / client eth_getLogs (all) |`);
  console.log(`|---|---|---:|---:|---:|---:|---:|---:|---:|---:|`);
  for (const [name, r] of results) {
    r.sums.forEach((s, k) => {
      const all = r.rows.filter((row) => row.upstream === r.upstreams[k]).at(-1).allUp;
      console.log(`| ${name} | ${r.upstreams[k]} | ${s.lines} | ${s.hits} | ${s.misses} | ${s.suspect} | ${s.suspect_asked_again} | ${s.suspect_kept} | ${s.suspect_unkept} | ${all} |`);
    });
  }
  console.log(
    `\nbuild-new, CACHE=on, default settings; anvil --block-time 1; each run ${RUN_MS / 1000} s, the plain and the load-balanced relays side by side on one chain; ` +
      `second asks ${AGAIN_MS / 1000} s after the first; dense blocks: ${DENSE_CONTRACTS} contracts x ${DENSE_LOGS} LOG2 each beside A's LOG1; ` +
      `load-balanced picks per node: sparse ${results[0][1].picks}, dense ${results[1][1].picks}. "Not anvil's": the answer differs from anvil's own eth_getLogs of that block.`,
  );
}

// ---- part large -------------------------------------------------------------------------------------

const TARGET_MB = Number(process.env.TARGET_MB ?? 12);
const REPS = Number(process.env.REPS ?? 3);
const LOGS_PER_TX = 4000;
const MAX_UPSTREAM = String(64 * MB);

const hwmKb = (pid) => {
  try {
    return Number(/VmHWM:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
  } catch {
    return NaN;
  }
};

/** anvil (automine), the LOG1 loop deployed and checked, about TARGET_MB of logs in an old range
 * (then 100 blocks mined: finalized) and as much in a new one (above the finalized block). */
async function largeChain() {
  const anvil = await startAnvil({ accounts: 2 });
  track(anvil, (a) => a.stop());
  const ask = asker(anvil.url);
  const emitter = (await receiptOf(ask, await ask("eth_sendTransaction", [{ from, data: LOG1_LOOP }]))).contractAddress;
  const emit = async (n) => {
    const r = await receiptOf(ask, await ask("eth_sendTransaction", [{ from, to: emitter, data: countData(n), gas: quantity(n * 1100 + 60_000) }]));
    if (r.status !== "0x1" || r.logs.length !== n) throw new SetupError(`the emitter logged ${r.logs.length} of ${n} (status ${r.status})`);
    return Number(r.blockNumber);
  };
  const sample = await emit(1000);
  const sampleBytes = Buffer.byteLength((await post(anvil.url, call("eth_getLogs", [{ address: emitter, fromBlock: quantity(sample), toBlock: quantity(sample) }]))).text);
  const txs = Math.max(1, Math.round((TARGET_MB * 1e6) / ((sampleBytes / 1000) * LOGS_PER_TX)));
  const range = async () => {
    const blocks = [];
    for (let i = 0; i < txs; i++) blocks.push(await emit(LOGS_PER_TX));
    return { fromBlock: quantity(blocks[0]), toBlock: quantity(blocks.at(-1)) };
  };
  const old = await range();
  await ask("anvil_mine", ["0x64"]);
  const recent = await range();
  const finalized = Number((await ask("eth_getBlockByNumber", ["finalized", false])).number);
  const sized = async (r) => {
    const answer = await post(anvil.url, call("eth_getLogs", [{ address: emitter, ...r }]));
    return { filter: { address: emitter, ...r }, bytes: Buffer.byteLength(answer.text), logs: answer.json.result.length, result: JSON.stringify(answer.json.result) };
  };
  const ranges = { finalized: await sized(old), unfinalized: await sized(recent) };
  if (!(Number(old.toBlock) <= finalized && Number(recent.fromBlock) > finalized)) throw new SetupError(`ranges vs finalized ${finalized}: ${JSON.stringify([old, recent])}`);
  return { anvil, emitter, ranges, finalized, head: Number(await ask("eth_blockNumber")) };
}

/** One fresh relay: its workerd processes' RSS before, after one read of `range` and after a second. */
async function largeOnce(c, { build, cache, range, secret }) {
  const vars = { UPSTREAM_RPC_URL: c.anvil.url, CACHE: cache, MAX_UPSTREAM_RESPONSE_BYTES: MAX_UPSTREAM };
  if (cache === "on" && range === "finalized" && secret !== false) vars.RELAY_SECRET = "a-bench-secret-of-the-deployment";
  const relay = await startRelay({ buildDir: build, vars });
  const entry = track(relay, (x) => x.stop());
  try {
    const rss = () => relay.pids.reduce((s, pid) => s + rssKb(pid), 0);
    const hwm = () => relay.pids.reduce((s, pid) => s + hwmKb(pid), 0);
    // Warm: the isolate, the chain check, the head, a small eth_getLogs.
    await post(relay.url, call("eth_chainId"));
    await post(relay.url, call("eth_blockNumber"));
    await post(relay.url, call("eth_getLogs", [{ address: c.emitter, fromBlock: "0x1", toBlock: "0x2" }]));
    await sleep(1000);
    const want = c.ranges[range];
    const before = rss();
    const read = async () => {
      const r = await post(relay.url, call("eth_getLogs", [want.filter]));
      const ok = r.json?.result !== undefined && JSON.stringify(r.json.result) === want.result;
      await sleep(500);
      return { ms: r.ms, cache: r.cache ?? "none", ok, error: r.json?.error?.message, rss: rss() };
    };
    const first = await read();
    const second = await read();
    return { before, first, second, hwm: hwm(), pids: relay.pids.length };
  } finally {
    await entry.stop();
  }
}

async function large() {
  const c = await largeChain();
  const configs = [
    { build: NEW, cache: "on", range: "finalized", note: "RELAY_SECRET set" },
    { build: NEW, cache: "on", range: "unfinalized" },
    { build: NEW, cache: "off", range: "finalized" },
    { build: NEW, cache: "on", range: "finalized", note: "no RELAY_SECRET", secret: false },
    { build: NEW, cache: "off", range: "unfinalized" },
    { build: BASE, cache: "on", range: "finalized", note: "RELAY_SECRET set" },
    { build: BASE, cache: "on", range: "unfinalized" },
  ];
  const results = configs.map(() => []);
  for (let rep = 0; rep < REPS; rep++) {
    for (const [i, config] of configs.entries()) results[i].push(await largeOnce(c, config));
  }
  const { finalized: fin, unfinalized: unfin } = c.ranges;
  console.log(`\n### A ${TARGET_MB} MB eth_getLogs answer: the workerd processes' memory, cache on and off\n`);
  console.log(
    `The answers: finalized range ${fin.filter.fromBlock}-${fin.filter.toBlock} (at or below the finalized block ${quantity(c.finalized)}), ${fin.logs} logs, ${(fin.bytes / MB).toFixed(2)} MiB (${fin.bytes} bytes); ` +
      `unfinalized range ${unfin.filter.fromBlock}-${unfin.filter.toBlock} (above it; head ${quantity(c.head)}), ${unfin.logs} logs, ${(unfin.bytes / MB).toFixed(2)} MiB (${unfin.bytes} bytes).\n`,
  );
  console.log(`| build | CACHE | range | X-Cache (1st, 2nd read) | answers right | read 1 (ms) | read 2 (ms) | RSS before (MB) | growth after read 1 (MB) | / answer | growth after read 2 (MB) | / answer | peak RSS (VmHWM) - before (MB) |`);
  console.log(`|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|`);
  const medians = [];
  for (const [i, config] of configs.entries()) {
    const rs = results[i];
    const size = c.ranges[config.range].bytes;
    const m = {
      before: median(rs.map((r) => r.before)) / 1024,
      g1: median(rs.map((r) => r.first.rss - r.before)) / 1024,
      g2: median(rs.map((r) => r.second.rss - r.before)) / 1024,
      peak: median(rs.map((r) => r.hwm - r.before)) / 1024,
      ms1: median(rs.map((r) => r.first.ms)),
      ms2: median(rs.map((r) => r.second.ms)),
    };
    medians.push(m);
    const xc = [...new Set(rs.map((r) => `${r.first.cache}, ${r.second.cache}`))].join(" / ");
    const right = `${rs.filter((r) => r.first.ok).length + rs.filter((r) => r.second.ok).length}/${2 * rs.length}`;
    const errors = [...new Set(rs.flatMap((r) => [r.first.error, r.second.error]).filter(Boolean))];
    console.log(
      `| ${config.build} | ${config.cache}${config.note ? ` (${config.note})` : ""} | ${config.range} | ${xc} | ${right}${errors.length ? ` (${errors.join("; ")})` : ""} | ${f1(m.ms1)} | ${f1(m.ms2)} | ${f1(m.before)} | ${f1(m.g1)} | ${f2((m.g1 * MB) / size)} | ${f1(m.g2)} | ${f2((m.g2 * MB) / size)} | ${f1(m.peak)} |`,
    );
  }
  console.log(`\n| the same read | cache on, build-new: growth after read 2 (MB) | CACHE=off: growth (MB) | on - off (MB) | (on - off) / answer | build-base, cache on: growth (MB) |`);
  console.log(`|---|---:|---:|---:|---:|---:|`);
  for (const [label, range, on, off, base] of [
    ["finalized range, RELAY_SECRET set", "finalized", 0, 2, 5],
    ["finalized range, no RELAY_SECRET", "finalized", 3, 2, null],
    ["unfinalized range", "unfinalized", 1, 4, 6],
  ]) {
    const size = c.ranges[range].bytes;
    const diff = medians[on].g2 - medians[off].g2;
    console.log(`| ${label} | ${f1(medians[on].g2)} | ${f1(medians[off].g2)} | ${f1(diff)} | ${f2((diff * MB) / size)} | ${base === null ? "-" : f1(medians[base].g2)} |`);
  }
  console.log(
    `\nMedians of ${REPS} fresh relays per row (rows interleaved), each warmed (eth_chainId, eth_blockNumber, a small eth_getLogs) before "RSS before"; RSS is every workerd process of the relay ` +
      `(${results[0][0].pids}), sampled 0.5 s after each answer. The relay asks anvil directly; MAX_UPSTREAM_RESPONSE_BYTES=${MAX_UPSTREAM}. ` +
      `The Cache API's local stand-in lives in the same workerd process: with RELAY_SECRET its copy of a finalized answer counts here. Peak: VmHWM after read 2 less RSS before.`,
  );
}

// ---- part trace (tests/cache.test.mjs's trace, copied) -------------------------------------------

const TRACE_RUNS = Number(process.env.TRACE_RUNS ?? 5);
async function traceRun(buildDir) {
  const c = await traceChain({}, buildDir);
  track(c, (x) => x.stop());
  const watcher = watch(c);
  try {
    if (!(await until(() => watcher.heads.length > 0, 5000))) throw new SetupError("the watcher saw no head");
    const started = performance.now();
    const { done, upstream } = await trace(c, watcher);
    const seconds = (performance.now() - started) / 1000;
    await watcher.stop();
    return {
      buildDir,
      reads: done.length,
      upstream,
      share: upstream / done.length,
      hits: done.filter((d) => d.cache === "HIT").length,
      failed: done.filter((d) => d.json?.result === undefined).length,
      blocks: watcher.heads.length,
      seconds,
    };
  } finally {
    await watcher.stop();
    await c.stop();
  }
}

async function traceParts() {
  const runs = [];
  for (let i = 0; i < TRACE_RUNS; i++) {
    for (const build of [BASE, NEW]) runs.push(await traceRun(build));
  }
  console.log(`\n### The dapp trace's upstream share: this issue's base (68714d7) and the new build, alternating\n`);
  console.log(`| run | build | reads | upstream requests | upstream share | X-Cache HIT | no result | blocks | s |`);
  console.log(`|---:|---|---:|---:|---:|---:|---:|---:|---:|`);
  runs.forEach((r, i) => console.log(`| ${i + 1} | ${r.buildDir} | ${r.reads} | ${r.upstream} | ${pct(r.upstream, r.reads)} | ${r.hits} | ${r.failed} | ${r.blocks} | ${f1(r.seconds)} |`));
  const of = (b) => runs.filter((r) => r.buildDir === b).map((r) => 100 * r.share);
  const [base, next] = [median(of(BASE)), median(of(NEW))];
  console.log(`\n| build | runs | upstream share, each (%) | median (%) |`);
  console.log(`|---|---:|---|---:|`);
  console.log(`| ${BASE} (base) | ${of(BASE).length} | ${of(BASE).map(f1).join(", ")} | ${f1(base)} |`);
  console.log(`| ${NEW} | ${of(NEW).length} | ${of(NEW).map(f1).join(", ")} | ${f1(next)} |`);
  console.log(`\n${NEW}'s median minus ${BASE}'s: ${(next - base >= 0 ? "+" : "") + f1(next - base)} points (the trace of tests/cache.test.mjs: 1,000 reads, one every 30 ms; CACHE=on, default settings; a fresh anvil --block-time 1, recording proxy and relay per run).`);
}

// ---- followers: identical reads in flight, on a signal or a poll -----------------------------------

/** ROUNDS (10) rounds of 10 identical reads (eth_getCode of a new address each round) behind an
 * upstream answering eth_getCode after 300 ms, through a fresh relay of each build, alternating,
 * twice: the workerd process's CPU over the rounds, wrong answers, upstream requests. */
async function followers() {
  const rounds = Number(process.env.ROUNDS ?? 10);
  const anvil = await startAnvil({ accounts: 2 });
  const slow = await startProxy({ upstream: anvil.url, strictNonce: false, latency: (req) => (req?.method === "eth_getCode" ? 300 : 0) });
  const rows = [];
  try {
    for (const buildDir of [BASE, NEW, BASE, NEW]) {
      const relay = await startRelay({ buildDir, vars: { UPSTREAM_RPC_URL: slow.url, CACHE: "on" } });
      try {
        const asked = slow.requests.length;
        const cpu0 = relay.pids.reduce((a, pid) => a + cpuMs(pid), 0);
        let wrong = 0;
        for (let r = 0; r < rounds; r++) {
          const address = `0x${(rows.length * 1000 + r + 1).toString(16).padStart(40, "0")}`;
          const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => post(relay.url, call("eth_getCode", [address, "latest"], 100 + i))));
          wrong += answers.filter((a, i) => a.status !== 200 || a.json?.id !== 100 + i || a.json?.result !== "0x").length;
        }
        const cpu = relay.pids.reduce((a, pid) => a + cpuMs(pid), 0) - cpu0;
        const upstream = slow.requests.slice(asked).filter((q) => q.body?.method === "eth_getCode").length;
        const crossed = relay.logs.filter((l) => l.includes("different request")).length;
        rows.push({ buildDir, cpu, wrong, upstream, crossed });
      } finally {
        await relay.stop();
      }
    }
  } finally {
    await slow.stop();
    anvil.stop();
  }
  console.log(`\n### Identical reads in flight: ${rounds} rounds of 10 behind a 300 ms upstream\n`);
  console.log(`| build | workerd CPU (ms) | answers wrong | upstream eth_getCode | cross-request I/O errors |`);
  console.log(`|---|---:|---:|---:|---:|`);
  rows.forEach((r) => console.log(`| ${r.buildDir} | ${r.cpu} | ${r.wrong} | ${r.upstream} | ${r.crossed} |`));
}

// ---- main --------------------------------------------------------------------------------------------

const PARTS_RUN = { blooms, large, trace: traceParts, followers };
let code = 0;
try {
  for (const part of PARTS) {
    if (!PARTS_RUN[part]) throw new SetupError(`PART=${part}: blooms, large, trace, followers or all`);
    await PARTS_RUN[part]();
    await stopAll();
  }
} catch (e) {
  console.error(`setup failed: ${e instanceof SetupError ? e.message : e?.stack ?? e}`);
  code = 1;
} finally {
  await stopAll();
}
process.exit(code);
