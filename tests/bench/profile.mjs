// Where the relay's CPU goes: a V8 CPU profile of the relay Worker's isolate on workerd (through
// miniflare's inspector), taken while S senders x N transactions go through it, then while the
// same number of reads are proxied. Prints the self time per function (wasm functions by their
// Rust names) and per part of the code, per transaction.
//   node tests/bench/profile.mjs            (SENDERS 50, TXS 20, LATENCY_MS 50)
import WebSocket from "ws";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, post, freePort, sleep } from "../support/harness.mjs";

const S = Number(process.env.SENDERS ?? 50);
const N = Number(process.env.TXS ?? 20);
const L = Number(process.env.LATENCY_MS ?? 50);

/** A Chrome DevTools Protocol session on the inspector target whose title matches `name`. */
async function inspect(port, name) {
  let targets = [];
  for (let i = 0; i < 50 && !targets.length; i++) {
    targets = (await (await fetch(`http://127.0.0.1:${port}/json`)).json()).filter((t) => t.title?.includes(name) || t.url?.includes(name));
    if (!targets.length) await sleep(100);
  }
  if (!targets.length) throw new Error(`no inspector target ${name}`);
  const ws = new WebSocket(targets[0].webSocketDebuggerUrl);
  await new Promise((r, j) => { ws.on("open", r); ws.on("error", j); });
  let id = 0;
  const pending = new Map();
  ws.on("message", (m) => {
    const msg = JSON.parse(m);
    if (msg.id && pending.has(msg.id)) {
      pending.get(msg.id)(msg);
      pending.delete(msg.id);
    }
  });
  const send = (method, params = {}) => new Promise((r) => { const i = ++id; pending.set(i, r); ws.send(JSON.stringify({ id: i, method, params })); });
  return { send, close: () => ws.close(), title: targets[0].title };
}

/** Self time (ms) per function and per code area from a V8 CPU profile. */
function summarize(profile) {
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const self = new Map();
  const deltas = profile.timeDeltas;
  for (let i = 0; i < profile.samples.length; i++) {
    const node = byNode.get(profile.samples[i]);
    const dt = (deltas[i + 1] ?? 0) / 1000;
    const f = node.callFrame;
    const key = `${f.functionName || "(anonymous)"} ${f.url ? f.url.split("/").pop() : ""}`.trim();
    self.set(key, (self.get(key) ?? 0) + dt);
  }
  return [...self.entries()].sort((a, b) => b[1] - a[1]);
}

function area(key) {
  if (/^\(idle\)|^\(program\)|^\(garbage collector\)|^\(root\)/.test(key)) return key.split(" ")[0];
  if (/wasm|\$|nonce_relay|k256|serde|sha3|alloc|core::|std::|futures|worker::/.test(key)) return "wasm (the relay's Rust code)";
  if (/shim|index\.js/.test(key)) return "wasm-bindgen glue (JS)";
  return "runtime JS (miniflare, workerd built-ins)";
}

const anvil = await startAnvil({ accounts: S + 2 });
const senderOfRaw = new Map();
const proxy = await startProxy({
  upstream: anvil.url,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});
const inspectorPort = await freePort();
const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CHAIN_ID: "31337" }, inspectorPort });
try {
  const warm = devAccount(S + 1);
  for (let n = 0; n < 5; n++) await sendRaw(relay.url, await signTransfer(warm, n));
  const senders = Array.from({ length: S }, (_, i) => devAccount(i));
  const signed = [];
  for (const a of senders) for (let n = 0; n < N; n++) {
    const raw = await signTransfer(a, n);
    senderOfRaw.set(raw, a.address.toLowerCase());
    signed.push(raw);
  }
  const session = await inspect(inspectorPort, "relay");
  for (const [label, work] of [
    ["transactions", () => Promise.all(signed.map((raw, i) => sendRaw(relay.url, raw, i)))],
    ["reads", async () => {
      // 100 at a time: a thousand connections at once overwhelm the inspected runtime.
      for (let k = 0; k < signed.length; k += 100) {
        await Promise.all(signed.slice(k, k + 100).map((_, i) => post(relay.url, { jsonrpc: "2.0", id: k + i, method: "eth_blockNumber", params: [] })));
      }
    }],
  ]) {
    await session.send("Profiler.enable");
    await session.send("Profiler.setSamplingInterval", { interval: 100 });
    await session.send("Profiler.start");
    await work();
    const { result } = await session.send("Profiler.stop");
    const rows = summarize(result.profile);
    const total = rows.filter(([k]) => !k.startsWith("(idle)")).reduce((s, [, v]) => s + v, 0);
    console.log(`\n## ${label}: ${S * N} requests, relay isolate busy ${total.toFixed(0)} ms = ${(total / (S * N)).toFixed(3)} ms each`);
    const areas = new Map();
    for (const [k, v] of rows) areas.set(area(k), (areas.get(area(k)) ?? 0) + v);
    for (const [k, v] of [...areas.entries()].sort((a, b) => b[1] - a[1])) console.log(`| ${k} | ${(v / (S * N)).toFixed(3)} ms |`);
    console.log("\ntop functions (self ms per request):");
    for (const [k, v] of rows.filter(([k]) => !k.startsWith("(idle)")).slice(0, 25)) console.log(`  ${(v / (S * N)).toFixed(4)}  ${k}`);
  }
  session.close();
} finally {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
}
