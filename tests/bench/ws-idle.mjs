// What idle WebSocket connections cost on workerd: SOCKETS connections (default 100) open and
// idle for IDLE_S seconds (default 60), measured as workerd CPU time and resident memory.
//  - relay: the compiled relay, which holds each socket in the Worker (one eth_chainId answered
//    first, so each connection is in use);
//  - relay + newHeads: the same with one newHeads subscription each on a chain that mines no
//    block meanwhile (each connection then holds an upstream WebSocket too);
//  - hibernation: a Durable Object per connection that accepts it with the hibernation API
//    (ctx.acceptWebSocket), the design the relay did not take, for comparison.
// Run by `make bench-e2e` (after tests/bench/e2e.mjs); results in BENCHMARKS.md.
import { readFileSync } from "node:fs";
import WebSocket from "ws";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { COMPATIBILITY_DATE, startAnvil, startRelay, cpuMs, childPids, sleep } from "../support/harness.mjs";

const SOCKETS = Number(process.env.SOCKETS ?? 100);
const IDLE_S = Number(process.env.IDLE_S ?? 60);

const rssKb = (pids) =>
  pids.reduce((sum, pid) => {
    try {
      return sum + Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
    } catch {
      return sum;
    }
  }, 0);
const cpu = (pids) => pids.reduce((sum, pid) => sum + cpuMs(pid), 0);

async function open(url, first) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
  if (first) {
    const answered = new Promise((resolve) => ws.once("message", resolve));
    ws.send(JSON.stringify(first));
    await answered;
  }
  return ws;
}

async function measure(name, url, pids, first) {
  // Warm: the isolate (and the wasm instance) made by a first connection, not counted per socket.
  (await open(url(SOCKETS), first)).close();
  await sleep(2_000);
  const rss0 = rssKb(pids);
  const sockets = [];
  for (let i = 0; i < SOCKETS; i++) sockets.push(await open(url(i), first));
  await sleep(2_000);
  const rss1 = rssKb(pids);
  const cpu0 = cpu(pids);
  await sleep(IDLE_S * 1_000);
  const cpu1 = cpu(pids);
  const rss2 = rssKb(pids);
  const alive = sockets.filter((ws) => ws.readyState === WebSocket.OPEN).length;
  sockets.forEach((ws) => ws.close());
  const row = {
    design: name,
    sockets: SOCKETS,
    open_after: alive,
    idle_s: IDLE_S,
    workerd_cpu_ms_idle: Math.round(cpu1 - cpu0),
    cpu_ms_per_socket_minute: +((cpu1 - cpu0) / SOCKETS / (IDLE_S / 60)).toFixed(3),
    rss_kb_per_socket_open: Math.round((rss1 - rss0) / SOCKETS),
    rss_kb_per_socket_after_idle: Math.round((rss2 - rss0) / SOCKETS),
  };
  console.log(JSON.stringify(row));
  await sleep(500);
  return row;
}

const HIBERNATION = `
export class Conn {
  constructor(ctx) { this.ctx = ctx; }
  async fetch() {
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1]);
    return new Response(null, { status: 101, webSocket: pair[0] });
  }
  webSocketMessage(ws, message) { ws.send(message); }
  webSocketClose(ws, code) { ws.close(code, "bye"); }
}
export default {
  fetch(req, env) {
    const name = new URL(req.url).searchParams.get("n") ?? "0";
    return env.CONN.get(env.CONN.idFromName(name)).fetch(req);
  },
};`;

const rows = [];
const anvil = await startAnvil();
const chainId = { jsonrpc: "2.0", id: 1, method: "eth_chainId", params: [] };
const newHeads = { jsonrpc: "2.0", id: 1, method: "eth_subscribe", params: ["newHeads"] };
for (const [name, first] of [["relay (socket in the Worker)", chainId], ["relay, one newHeads subscription each", newHeads]]) {
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: anvil.url } });
  rows.push(await measure(name, () => relay.url.replace(/^http/, "ws"), relay.pids, first));
  await relay.stop();
}
const before = childPids();
const mf = new Miniflare(convertV4MiniflareOptions({
  modules: true,
  script: HIBERNATION,
  compatibilityDate: COMPATIBILITY_DATE,
  durableObjects: { CONN: { className: "Conn", useSQLite: true } },
  host: "127.0.0.1",
}));
const url = (await mf.ready).toString().replace(/^http/, "ws").replace(/\/$/, "");
const pids = childPids().filter((pid) => !before.includes(pid));
rows.push(await measure("hibernation API, one Durable Object per socket", (i) => `${url}/?n=${i}`, pids, { ping: 1 }));
await mf.dispose();
anvil.stop();
console.table(rows);
