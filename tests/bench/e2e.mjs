// make bench-e2e: the relay against the measured serialized limit, side by side with the Redis
// design Hedera's JSON-RPC relay ships, in one run.
//
// One anvil behind the strict-nonce test proxy, which answers every eth_sendRawTransaction after a
// fixed LATENCY_MS over keep-alive. For each S in SENDERS (fresh senders each time):
//  1. the limit: S senders each send their N transactions one after another straight to the test
//     upstream, all S at once (DS; D1 at S = 1): no design can beat a sender's serialized round trips;
//  2. the relay (the compiled worker on workerd through miniflare): all S x N fired at once;
//  3. the Redis design (tests/bench/redis-relay.mjs, a real redis-server): the same burst;
// efficiency = DS / wall. For both: the lock handoff gap (the upstream's answer to a sender's
// transaction k until it receives k+1) and the accounting (every transaction mined exactly once;
// none refused, lost, duplicated, or out of nonce order at the upstream). For the relay, the
// workerd process's CPU per transaction, and a breakdown: the same burst with ENABLE_NONCE_ORDERING
// off (Worker only: decode and forward) and a burst of reads (Worker proxying only).
// Prints Markdown for BENCHMARKS.md. Settings: SENDERS (default 1,20,50), TXS (20), LATENCY_MS (50);
// RELAY_ONLY=1 skips the limit and the Redis design (for quick experiments on the relay);
// UPSTREAM=mempool puts a mempool proxy in front of anvil instead (nonces above a gap pass to anvil,
// which queues them) and gives the relay its default send window (SEND_WINDOW, or as set); the
// strict proxy (the default) gets SEND_WINDOW=1, one at a time. Under mempool the accounting also
// counts the sends that reached the upstream: one per transaction; MAX_QUEUE_PER_SENDER is passed
// to the relay (a burst of one sender above it gets -32005 for the highest nonces);
// CONNECTION_CAP=6 enforces production's six connections waiting for headers at the test upstream
// (see harness.mjs, startProxy's connectionCap); UPSTREAMS=2 gives the relay a second upstream (another test proxy, with the same latency, in front
// of the same anvil) after the first in UPSTREAM_RPC_URL: the cost of the upstream pool when both
// are healthy.
import os from "node:os";
import { spawn } from "node:child_process";
import { Agent, setGlobalDispatcher } from "undici";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, post, cpuMs, freePort, sleep } from "../support/harness.mjs";

const SIZES = (process.env.SENDERS ?? "1,20,50").split(",").map(Number);
const N = Number(process.env.TXS ?? 20);
const L = Number(process.env.LATENCY_MS ?? 50);
const RELAY_ONLY = process.env.RELAY_ONLY === "1";
const MEMPOOL = process.env.UPSTREAM === "mempool";
const WINDOW = process.env.SEND_WINDOW ?? (MEMPOOL ? undefined : "1");
const HERE = path.dirname(fileURLToPath(import.meta.url));
const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const f1 = (x) => x.toFixed(1);
const f2 = (x) => x.toFixed(2);

function child(cmd, args, env, ready) {
  const proc = spawn(cmd, args, { env: { ...process.env, ...env }, stdio: ["ignore", "pipe", "inherit"] });
  return new Promise((resolve, reject) => {
    let out = "";
    proc.stdout.on("data", (d) => {
      out += d;
      if (ready.test(out)) resolve(proc);
    });
    proc.on("exit", (code) => reject(new Error(`${cmd} exited ${code}: ${out}`)));
  });
}

const accountsNeeded = 3 * SIZES.reduce((a, b) => a + b, 0) + Math.max(...SIZES) + 20;
const anvil = await startAnvil({ accounts: accountsNeeded });
// The bench signs every transaction itself, so the proxy looks senders up instead of recovering them.
const senderOfRaw = new Map();
const sign = async (account, nonce) => {
  const raw = await signTransfer(account, nonce);
  senderOfRaw.set(raw, account.address.toLowerCase());
  return raw;
};
// CONNECTION_CAP=6: the test upstream holds a request beyond six waiting for their headers until
// one is answered, as Cloudflare holds a Worker invocation's (or a Durable Object's) seventh
// outgoing connection; local workerd does not.
const CAP = Number(process.env.CONNECTION_CAP ?? Infinity);
const proxy = await startProxy({
  upstream: anvil.url,
  strictNonce: !MEMPOOL,
  connectionCap: CAP,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});
const UPSTREAMS = Number(process.env.UPSTREAMS ?? 1);
const spare =
  UPSTREAMS > 1
    ? await startProxy({
        upstream: anvil.url,
        strictNonce: false,
        latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
        senderOf: (raw) => senderOfRaw.get(raw),
      })
    : null;
const relay = await startRelay({
  vars: { UPSTREAM_RPC_URL: spare ? `${proxy.url},${spare.url}` : proxy.url, CHAIN_ID: "31337", SEND_WINDOW: WINDOW, MAX_QUEUE_PER_SENDER: process.env.MAX_QUEUE_PER_SENDER },
});
const direct = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CHAIN_ID: "31337", ENABLE_NONCE_ORDERING: "false" } });
const redisPort = await freePort();
const redisServer = await child("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {}, /Ready to accept connections/);
const redisRelayPort = await freePort();
const redisRelay = await child(process.execPath, [path.join(HERE, "redis-relay.mjs")], {
  UPSTREAM: proxy.url,
  REDIS_URL: `redis://127.0.0.1:${redisPort}`,
  PORT: String(redisRelayPort),
}, /ready/);
const redisUrl = `http://127.0.0.1:${redisRelayPort}`;

let nextAccount = 0;
const fresh = (count) => Array.from({ length: count }, () => devAccount(nextAccount++));
const signAll = (senders) => Promise.all(senders.map((a) => Promise.all(Array.from({ length: N }, (_, n) => sign(a, n)))));
const workerdCpu = (r) => r.pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
/** CPU (ms) of every process a burst runs on: this one (client and test proxy), anvil, both workerds. */
const allCpu = () => {
  const self = process.cpuUsage();
  return (self.user + self.system) / 1000 + cpuMs(anvil.pid) + workerdCpu(relay) + workerdCpu(direct);
};

/** S streams at once, each sending its transactions one after another; wall time, ms. */
async function streams(url, signed) {
  const started = performance.now();
  const answers = await Promise.all(
    signed.map(async (raws) => {
      const out = [];
      for (const raw of raws) out.push(await sendRaw(url, raw));
      return out;
    }),
  );
  return { wall: performance.now() - started, answers: answers.flat() };
}

/** Every transaction fired at once; wall time, ms. A request that got no HTTP answer at all
 * (connection closed) counts as an answer without a result, and is reported. */
async function burst(url, signed) {
  // Fresh connections: a pooled keep-alive connection that sat idle while the next burst was
  // signed may be closed by the server just as it is reused ("other side closed"), a client-side
  // race that would be counted against the design.
  setGlobalDispatcher(new Agent({ connections: null }));
  const started = performance.now();
  const settled = await Promise.allSettled(signed.flat().map((raw, i) => sendRaw(url, raw, i)));
  const wall = performance.now() - started;
  const failed = settled.filter((r) => r.status === "rejected");
  if (failed.length) console.error(`# ${url}: ${failed.length} requests got no HTTP answer: ${failed[0].reason?.cause?.message ?? failed[0].reason}`);
  return { wall, answers: settled.map((r) => (r.status === "fulfilled" ? r.value : { json: undefined, text: String(r.reason) })) };
}

/** What the upstream and the chain say of these senders' transactions. */
async function accounting(senders, answers) {
  const refused = answers.filter((a) => !a.json?.result).length;
  // Every hash a client got must have a receipt (anvil mines as it accepts; the last blocks may
  // take a moment under load).
  let mined = 0;
  let lost = 0;
  for (const a of answers.filter((x) => x.json?.result)) {
    let receipt = null;
    for (let i = 0; i < 40 && !receipt; i++) {
      receipt = (await rpc(anvil.url, "eth_getTransactionReceipt", [a.json.result])).result;
      if (!receipt) await sleep(50);
    }
    if (receipt?.status === "0x1") mined++;
    else lost++;
  }
  let duplicated = 0;
  let outOfOrder = 0;
  let sends = 0;
  const gaps = [];
  for (const a of senders) {
    const sender = a.address.toLowerCase();
    const seen = proxy.seen.filter((r) => r.sender === sender);
    const accepted = seen.filter((r) => r.accepted);
    sends += seen.length;
    duplicated += accepted.length - new Set(accepted.map((r) => r.nonce)).size;
    outOfOrder += seen.filter((r, i) => i > 0 && r.nonce <= seen[i - 1].nonce).length;
    for (let i = 1; i < seen.length; i++) gaps.push(seen[i].at - seen[i - 1].answeredAt);
    const count = Number((await rpc(anvil.url, "eth_getTransactionCount", [sender, "latest"])).result);
    if (count !== accepted.length) lost += Math.abs(count - accepted.length);
  }
  return { refused, mined, lost, duplicated, outOfOrder, gaps, sends };
}

const rows = [];
try {
  // Warm-up, not measured: both designs and the upstream see a few senders' transactions first
  // (wasm compiled and tiered up, Durable Objects and connections made).
  for (const url of [relay.url, redisUrl, direct.url]) {
    const warm = fresh(5);
    await burst(url, await signAll(warm));
  }
  for (const S of SIZES) {
    // 1. The measured limit.
    const limitSenders = fresh(S);
    const limit = RELAY_ONLY ? { wall: NaN } : await streams(proxy.url, await signAll(limitSenders));
    // 2. The relay.
    const relaySenders = fresh(S);
    const relaySigned = await signAll(relaySenders);
    const cpuBefore = workerdCpu(relay);
    const allBefore = allCpu();
    const cappedBefore = proxy.capStats().capped;
    const viaRelay = await burst(relay.url, relaySigned);
    viaRelay.capped = proxy.capStats().capped - cappedBefore;
    const relayCpu = workerdCpu(relay) - cpuBefore;
    // The wall time this machine's CPU alone needs for the burst: all its processes' CPU / cores.
    const cpuFloor = (allCpu() - allBefore) / os.cpus().length;
    const relayAcc = await accounting(relaySenders, viaRelay.answers);
    // 3. The Redis design.
    const redisSenders = fresh(S);
    const viaRedis = RELAY_ONLY ? { wall: NaN, answers: [] } : await burst(redisUrl, await signAll(redisSenders));
    const redisAcc = RELAY_ONLY ? { gaps: [], mined: 0, refused: 0, lost: 0, duplicated: 0, outOfOrder: 0, sends: 0 } : await accounting(redisSenders, viaRedis.answers);
    rows.push({ S, limit, viaRelay, relayCpu, cpuFloor, relayAcc, viaRedis, redisAcc });
    await sleep(200);
  }

  // Breakdown of the relay's CPU per transaction: the Worker alone (ordering off: decode, send
  // directly) and the Worker proxying a read, against the full relay, on the same S x N.
  const S = Math.max(...SIZES);
  const breakdown = {};
  {
    const senders = fresh(S);
    const signed = await signAll(senders);
    const before = workerdCpu(direct);
    // Ordering off: one sender's transactions would race; send each sender's in order instead.
    await streams(direct.url, signed);
    breakdown.workerOnly = (workerdCpu(direct) - before) / (S * N);
    const reads = Array.from({ length: S * N }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_blockNumber", params: [] }));
    const before2 = workerdCpu(direct);
    for (let k = 0; k < reads.length; k += 100) await Promise.all(reads.slice(k, k + 100).map((r) => post(direct.url, r)));
    breakdown.proxyRead = (workerdCpu(direct) - before2) / (S * N);
  }

  const out = [];
  out.push(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; date ${new Date().toISOString().slice(0, 10)}`);
  out.push(`Command: make bench-e2e (SENDERS=${SIZES.join(",")} TXS=${N} LATENCY_MS=${L} UPSTREAMS=${UPSTREAMS} UPSTREAM=${MEMPOOL ? "mempool" : "strict"} SEND_WINDOW=${WINDOW ?? "default"} CONNECTION_CAP=${CAP})\n`);
  if (CAP !== Infinity) {
    const during = rows.map((r) => `${r.S} x ${N}: ${r.viaRelay.capped}`).join(", ");
    out.push(`Connection cap: requests of the relay's burst that waited for a slot: ${during}; at most ${proxy.capStats().mostWaiting} waiting for headers at once in the whole run.\n`);
  }
  out.push("| S senders x N | limit DS (S streams straight to the upstream) | relay wall | relay efficiency | Redis design wall | Redis design efficiency | relay workerd CPU / tx | CPU floor of the relay burst (all CPU / cores) | handoff gap p50 / p99, relay | handoff gap p50 / p99, Redis design |");
  out.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    out.push(
      `| ${r.S} x ${N} | ${r.limit.wall.toFixed(0)} ms | ${r.viaRelay.wall.toFixed(0)} ms | ${f2(r.limit.wall / r.viaRelay.wall)} | ` +
        `${r.viaRedis.wall.toFixed(0)} ms | ${f2(r.limit.wall / r.viaRedis.wall)} | ${f2(r.relayCpu / (r.S * N))} ms | ${r.cpuFloor.toFixed(0)} ms | ` +
        `${f1(quantile(r.relayAcc.gaps, 0.5))} / ${f1(quantile(r.relayAcc.gaps, 0.99))} ms | ${f1(quantile(r.redisAcc.gaps, 0.5))} / ${f1(quantile(r.redisAcc.gaps, 0.99))} ms |`,
    );
  }
  out.push("\nAccounting (each row: relay / Redis design):\n");
  out.push("| S | mined exactly once | refused | lost | duplicated | out of nonce order at the upstream | sends at the upstream |");
  out.push("|---|---:|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const a = r.relayAcc;
    const b = r.redisAcc;
    out.push(`| ${r.S} | ${a.mined} / ${b.mined} | ${a.refused} / ${b.refused} | ${a.lost} / ${b.lost} | ${a.duplicated} / ${b.duplicated} | ${a.outOfOrder} / ${b.outOfOrder} | ${a.sends} / ${b.sends} |`);
  }
  const last = rows.find((r) => r.S === S);
  out.push(`\nRelay CPU per transaction at S=${S} (workerd, ms): full relay ${f2(last.relayCpu / (S * N))}; Worker only (ENABLE_NONCE_ORDERING=false: parse, decode, recover, forward) ${f2(breakdown.workerOnly)}; Worker proxying a read ${f2(breakdown.proxyRead)}.`);
  console.log(out.join("\n"));
  // Under mempool two sends of a window may cross on the way (the node queues the higher one):
  // what must hold there is one send per transaction.
  const bad = rows.some(
    (r) =>
      r.relayAcc.lost + r.relayAcc.duplicated + r.relayAcc.refused + (MEMPOOL ? 0 : r.relayAcc.outOfOrder) > 0 ||
      r.relayAcc.mined !== r.S * N ||
      (MEMPOOL && r.relayAcc.sends !== r.S * N),
  );
  if (bad) process.exitCode = 1;
} finally {
  redisRelay.kill();
  redisServer.kill();
  await relay.stop();
  await direct.stop();
  await proxy.stop();
  if (spare) await spare.stop();
  anvil.stop();
}
