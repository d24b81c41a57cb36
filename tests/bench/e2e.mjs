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
// RELAY_ONLY=1 skips the Redis design (for quick experiments on the relay; the limit, one stream per
// sender, is still measured: efficiency needs it);
// KEY=1 sends every burst through an API key's /k/{key} path (keys on, a local KV);
// UPSTREAM=mempool puts a mempool proxy in front of anvil instead (nonces above a gap pass to anvil,
// which queues them) and gives the relay its default send window (SEND_WINDOW, or as set); the
// strict proxy (the default) gets SEND_WINDOW=1, one at a time. Under mempool the accounting also
// counts the sends that reached the upstream: one per transaction; MAX_QUEUE_PER_SENDER is passed
// to the relay (a burst of one sender above it gets -32005 for the highest nonces);
// CONNECTION_CAP=6 enforces production's six connections waiting for headers at the test upstream
// (see harness.mjs, startProxy's connectionCap); UPSTREAMS=2 gives the relay a second upstream (another test proxy, with the same latency, in front
// of the same anvil) after the first in UPSTREAM_RPC_URL: the cost of the upstream pool when both
// are healthy.
// ROUTE=private sends through a private route (issue 34): anvil runs with `--no-mining`, the relay
// gets UPSTREAM_SEND_URL = the stand-in route (tests/support/private-route.mjs: it holds every send,
// answers it after the same LATENCY_MS, and puts what it holds in a block when asked) and
// UPSTREAM_RPC_URL = a recording test proxy (not strict) in front of anvil as the read node, and no
// SEND_WINDOW (unless set): behind a route the relay sends one at a time by itself. The limit is
// each sender's transactions one after another straight to the route. After each burst the bench
// builds blocks until every held transaction is in one, then counts as for the strict proxy (every
// transaction mined exactly once, in nonce order at the route, each sent there once), and also the
// sends that reached the read node (none may) and the most of one sender's at the route at once (1).
// No Redis design (the comparison is the relay with and without a route); not with UPSTREAM,
// UPSTREAMS or CONNECTION_CAP.
import os from "node:os";
import { spawn } from "node:child_process";
import { Agent, setGlobalDispatcher } from "undici";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, post, cpuMs, freePort, sleep, mostAtOnce } from "../support/harness.mjs";
import { startPrivateRoute, STATUS } from "../support/private-route.mjs";

const SIZES = (process.env.SENDERS ?? "1,20,50").split(",").map(Number);
const N = Number(process.env.TXS ?? 20);
const L = Number(process.env.LATENCY_MS ?? 50);
const RELAY_ONLY = process.env.RELAY_ONLY === "1";
const MEMPOOL = process.env.UPSTREAM === "mempool";
const PRIVATE = process.env.ROUTE === "private";
if (process.env.ROUTE && !PRIVATE) throw new Error(`ROUTE=${process.env.ROUTE}: only ROUTE=private is known`);
if (PRIVATE && (MEMPOOL || process.env.UPSTREAMS || process.env.CONNECTION_CAP)) throw new Error("ROUTE=private does not go with UPSTREAM, UPSTREAMS or CONNECTION_CAP");
// Behind a private route the relay sends one at a time by itself: no SEND_WINDOW unless set.
const WINDOW = process.env.SEND_WINDOW ?? (MEMPOOL || PRIVATE ? undefined : "1");
const SKIP_REDIS = RELAY_ONLY || PRIVATE;
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
// Behind a private route nothing reaches anvil's pool until the route builds a block.
const anvil = await startAnvil({ accounts: accountsNeeded, extraArgs: PRIVATE ? ["--no-mining"] : [] });
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
// Under ROUTE=private this proxy is the read node: none of the relay's sends may reach it (it would
// forward one to anvil's pool).
const proxy = await startProxy({
  upstream: anvil.url,
  strictNonce: !MEMPOOL && !PRIVATE,
  connectionCap: CAP,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});
const route = PRIVATE ? await startPrivateRoute({ chain: anvil.url, latencyMs: L, senderOf: (raw) => senderOfRaw.get(raw) }) : null;
/** Where transactions go: the route, or the test proxy. */
const sendUpstream = route ? route.url : proxy.url;
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
// KEY=1: the relay with API keys on (a local KV, issue 55), every send through /k/{key} of a key
// made by the admin API (a daily budget far above the bench's use): what a key costs a send.
const KEYED = process.env.KEY === "1";
const relay = await startRelay({
  keys: KEYED,
  vars: {
    UPSTREAM_RPC_URL: spare ? `${proxy.url},${spare.url}` : proxy.url,
    UPSTREAM_SEND_URL: route?.url,
    CHAIN_ID: "31337",
    SEND_WINDOW: WINDOW,
    MAX_QUEUE_PER_SENDER: process.env.MAX_QUEUE_PER_SENDER,
    ...(KEYED ? { RELAY_SECRET: "bench-secret", ADMIN_TOKEN: "bench-token" } : {}),
  },
});
/** Where the bursts go: the relay's root, or its /k/{key} path. */
const relayUrl = KEYED
  ? `${relay.url}/k/${(await post(`${relay.url}/admin/keys`, { quota: { per_day: 100_000_000 } }, { authorization: "Bearer bench-token" })).json.key}`
  : relay.url;
const direct = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, UPSTREAM_SEND_URL: route?.url, CHAIN_ID: "31337", ENABLE_NONCE_ORDERING: "false" } });
// The Redis design (not started under ROUTE=private).
const redisPort = await freePort();
const redisServer = PRIVATE ? null : await child("redis-server", ["--port", String(redisPort), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {}, /Ready to accept connections/);
const redisRelayPort = await freePort();
const redisRelay = PRIVATE
  ? null
  : await child(process.execPath, [path.join(HERE, "redis-relay.mjs")], {
      UPSTREAM: proxy.url,
      REDIS_URL: `redis://127.0.0.1:${redisPort}`,
      PORT: String(redisRelayPort),
    }, /ready/);
const redisUrl = PRIVATE ? null : `http://127.0.0.1:${redisRelayPort}`;

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

/** ROUTE=private: builds blocks until these senders' transactions the route holds are all in one
 * (at most 10 blocks, and no longer than two blocks that include none of theirs). */
async function include(senders) {
  if (!route) return;
  const want = new Set(senders.map((a) => a.address.toLowerCase()));
  let idle = 0;
  for (let block = 0; block < 10 && idle < 2; block++) {
    const held = route.sends.filter((r) => want.has(r.sender) && route.status(r.hash) === STATUS.PENDING);
    if (!held.length) return;
    const included = await route.buildBlock();
    idle = included.some((h) => held.some((r) => r.hash === h)) ? 0 : idle + 1;
  }
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
  return { started, wall, answers: settled.map((r) => (r.status === "fulfilled" ? r.value : { json: undefined, text: String(r.reason) })) };
}

/** What the upstream and the chain say of these senders' transactions. */
async function accounting(senders, answers) {
  const refused = answers.filter((a) => !a.json?.result).length;
  // Behind the route: blocks first, with everything it holds of these senders.
  await include(senders);
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
  let atReadNode = 0;
  let mostAtRoute = 0;
  const gaps = [];
  // Where each sender's wall went (summed over senders): burst start to its first arrival at the
  // upstream, its sends at the upstream (arrival to answer), its handoff gaps.
  const parts = { first: 0, atUpstream: 0, gaps: 0, lastAnswered: 0 };
  for (const a of senders) {
    const sender = a.address.toLowerCase();
    // The route answers every send with its hash (it holds it): all are accepted there.
    const seen = route ? route.sends.filter((r) => r.sender === sender).map((r) => ({ ...r, accepted: true })) : proxy.seen.filter((r) => r.sender === sender);
    const accepted = seen.filter((r) => r.accepted);
    sends += seen.length;
    if (route) {
      atReadNode += proxy.seen.filter((r) => r.sender === sender).length;
      mostAtRoute = Math.max(mostAtRoute, mostAtOnce(seen));
    }
    const acceptedNonces = new Set(accepted.map((r) => r.nonce)).size;
    duplicated += accepted.length - acceptedNonces;
    outOfOrder += seen.filter((r, i) => i > 0 && r.nonce <= seen[i - 1].nonce).length;
    for (let i = 1; i < seen.length; i++) gaps.push(seen[i].at - seen[i - 1].answeredAt);
    if (seen.length) {
      parts.first += seen[0].at;
      parts.lastAnswered += seen[seen.length - 1].answeredAt;
      for (let i = 0; i < seen.length; i++) parts.atUpstream += seen[i].answeredAt - seen[i].at;
      for (let i = 1; i < seen.length; i++) parts.gaps += seen[i].at - seen[i - 1].answeredAt;
    }
    const count = Number((await rpc(anvil.url, "eth_getTransactionCount", [sender, "latest"])).result);
    if (count !== acceptedNonces) lost += Math.abs(count - acceptedNonces);
  }
  for (const k of Object.keys(parts)) parts[k] /= senders.length;
  return { refused, mined, lost, duplicated, outOfOrder, gaps, sends, atReadNode, mostAtRoute, parts };
}

const rows = [];
try {
  // Warm-up, not measured: both designs and the upstream see a few senders' transactions first
  // (wasm compiled and tiered up, Durable Objects and connections made).
  for (const url of [relayUrl, redisUrl, direct.url].filter(Boolean)) {
    const warm = fresh(5);
    await burst(url, await signAll(warm));
    await include(warm);
  }
  for (const S of SIZES) {
    // 1. The measured limit.
    const limitSenders = fresh(S);
    const limit = await streams(sendUpstream, await signAll(limitSenders));
    await include(limitSenders);
    // 2. The relay.
    const relaySenders = fresh(S);
    const relaySigned = await signAll(relaySenders);
    const cpuBefore = workerdCpu(relay);
    const allBefore = allCpu();
    const cappedBefore = proxy.capStats().capped;
    const viaRelay = await burst(relayUrl, relaySigned);
    viaRelay.capped = proxy.capStats().capped - cappedBefore;
    const relayCpu = workerdCpu(relay) - cpuBefore;
    // The wall time this machine's CPU alone needs for the burst: all its processes' CPU / cores.
    const cpuFloor = (allCpu() - allBefore) / os.cpus().length;
    const relayAcc = await accounting(relaySenders, viaRelay.answers);
    // 3. The Redis design.
    const redisSenders = fresh(S);
    const viaRedis = SKIP_REDIS ? { wall: NaN, answers: [] } : await burst(redisUrl, await signAll(redisSenders));
    const redisAcc = SKIP_REDIS ? { gaps: [], mined: 0, refused: 0, lost: 0, duplicated: 0, outOfOrder: 0, sends: 0 } : await accounting(redisSenders, viaRedis.answers);
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
  const upstreamName = PRIVATE ? "private route (ROUTE=private)" : MEMPOOL ? "mempool" : "strict";
  out.push(`Command: make bench-e2e (SENDERS=${SIZES.join(",")} TXS=${N} LATENCY_MS=${L} UPSTREAMS=${UPSTREAMS} UPSTREAM=${upstreamName} SEND_WINDOW=${WINDOW ?? "default"} CONNECTION_CAP=${CAP}${RELAY_ONLY ? " RELAY_ONLY=1" : ""})\n`);
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
  out.push(`| S | mined exactly once | refused | lost | duplicated | out of nonce order at the upstream | sends at the upstream |${PRIVATE ? " sends at the read node (relay) | most of one sender's at the route at once (relay) |" : ""}`);
  out.push(`|---|---:|---:|---:|---:|---:|---:|${PRIVATE ? "---:|---:|" : ""}`);
  for (const r of rows) {
    const a = r.relayAcc;
    const b = r.redisAcc;
    out.push(`| ${r.S} | ${a.mined} / ${b.mined} | ${a.refused} / ${b.refused} | ${a.lost} / ${b.lost} | ${a.duplicated} / ${b.duplicated} | ${a.outOfOrder} / ${b.outOfOrder} | ${a.sends} / ${b.sends} |${PRIVATE ? ` ${a.atReadNode} | ${a.mostAtRoute} |` : ""}`);
  }
  out.push("\nWhere the relay's wall went (per sender, mean over senders): burst start to the first send at the upstream; the sends at the upstream (arrival to answer, summed); the handoff gaps (summed); the upstream's last answer to the last client answer.\n");
  out.push("| S x N | relay wall | to the first send | at the upstream | handoff gaps | last answer to the client |");
  out.push("|---|---:|---:|---:|---:|---:|");
  for (const r of rows) {
    const p = r.relayAcc.parts;
    const first = p.first - r.viaRelay.started;
    const tail = r.viaRelay.started + r.viaRelay.wall - p.lastAnswered;
    out.push(`| ${r.S} x ${N} | ${r.viaRelay.wall.toFixed(0)} ms | ${first.toFixed(0)} ms | ${p.atUpstream.toFixed(0)} ms | ${p.gaps.toFixed(0)} ms | ${tail.toFixed(0)} ms |`);
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
      ((MEMPOOL || PRIVATE) && r.relayAcc.sends !== r.S * N) ||
      (PRIVATE && (r.relayAcc.atReadNode > 0 || r.relayAcc.mostAtRoute > 1)),
  );
  if (bad) process.exitCode = 1;
} finally {
  redisRelay?.kill();
  redisServer?.kill();
  await relay.stop();
  await direct.stop();
  await proxy.stop();
  if (route) await route.stop();
  if (spare) await spare.stop();
  anvil.stop();
}
