// What hostile WebSocket clients can make one Worker isolate keep (issue 26): workerd's resident
// memory before and after
//  - padded: SUBS subscriptions (default 100) whose `logs` filter is a ~990 kB address list each,
//    on one connection (the relay refuses them: more than geth's 1,000 addresses);
//  - flood: SUBS subscriptions to every log on another connection, then LOGS logs (default 4,500,
//    100 a transaction) delivered to each: every subscription remembers the logs it delivered,
//    to deliver each once across a dropped upstream socket.
// RELAY_BUILD_DIR runs another build (the harness's). Run by `make bench-e2e`; results in
// BENCHMARKS.md.
import WebSocket from "ws";
import { stack, devAccount, signTransfer, sleep, rssKb } from "../support/harness.mjs";

const SUBS = Number(process.env.SUBS ?? 100);
const LOGS = Number(process.env.LOGS ?? 4_500);
const PER_TX = 100;

const rss = (pids) => pids.reduce((sum, pid) => sum + (rssKb(pid) || 0), 0);
const mb = (kb) => +(kb / 1024).toFixed(1);

async function open(url) {
  const ws = new WebSocket(url, { maxPayload: 64 << 20 });
  let received = 0;
  const answers = new Map();
  ws.on("message", (data) => {
    const message = JSON.parse(String(data));
    if (message.method === "eth_subscription") received += 1;
    else if (message.id !== undefined) answers.get(message.id)?.(message);
  });
  await new Promise((resolve, reject) => (ws.once("open", resolve), ws.once("error", reject)));
  let id = 0;
  const call = (method, params) =>
    new Promise((resolve) => {
      const want = ++id;
      answers.set(want, resolve);
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: want, method, params }));
    });
  return { ws, call, received: () => received };
}

// Init code that emits PER_TX logs (LOG1, topic 1, no data) and deploys nothing.
const FLOOD_INIT = `0x${"600160006000a1".repeat(PER_TX)}00`;

const s = await stack({ anvil: { extraArgs: ["--block-time", "1", "--gas-limit", "300000000"] }, proxy: { strictNonce: false } });
try {
  const url = s.relay.url.replace(/^http/, "ws");
  const warm = await open(url);
  await warm.call("eth_chainId", []);
  warm.ws.close();
  await sleep(2_000);
  const rows = [];
  const before = rss(s.relay.pids);

  // Padded filters.
  const padded = await open(url);
  const addresses = Array.from({ length: 22_000 }, (_, i) => `0x${i.toString(16).padStart(40, "0")}`);
  let accepted = 0;
  for (let i = 0; i < SUBS; i++) {
    const answer = await padded.call("eth_subscribe", ["logs", { address: addresses }]);
    if (answer.result) accepted += 1;
  }
  await sleep(2_000);
  const afterPadded = rss(s.relay.pids);
  rows.push({ phase: "padded", subscriptions: SUBS, accepted, message_kb: Math.round(JSON.stringify(addresses).length / 1024), rss_before_mb: mb(before), rss_after_mb: mb(afterPadded) });

  // A logs flood.
  const flood = await open(url);
  for (let i = 0; i < SUBS; i++) await flood.call("eth_subscribe", ["logs"]);
  const account = devAccount(7);
  const txs = Math.ceil(LOGS / PER_TX);
  const started = performance.now();
  for (let n = 0; n < txs; n++) {
    const raw = await signTransfer(account, n, { to: null, value: 0n, data: FLOOD_INIT, gas: 2_000_000n });
    await flood.call("eth_sendRawTransaction", [raw]);
  }
  const want = txs * PER_TX * SUBS;
  while (flood.received() < want && performance.now() - started < 180_000) await sleep(500);
  await sleep(2_000);
  const afterFlood = rss(s.relay.pids);
  rows.push({
    phase: "flood",
    subscriptions: SUBS,
    logs: txs * PER_TX,
    notifications: flood.received(),
    of: want,
    seconds: +((performance.now() - started) / 1000).toFixed(1),
    rss_before_mb: mb(afterPadded),
    rss_after_mb: mb(afterFlood),
  });
  padded.ws.close();
  flood.ws.close();
  await sleep(3_000);
  const wasm = s.relay.events("ws_closed").map((e) => e.wasm_memory_bytes).filter(Boolean);
  rows.push({ phase: "closed", rss_mb: mb(rss(s.relay.pids)), wasm_memory_mb: wasm.length ? mb(Math.max(...wasm) / 1024) : "n/a" });
  console.log(`build: ${process.env.RELAY_BUILD_DIR ?? "build"}`);
  console.table(rows);
  for (const row of rows) console.log(JSON.stringify(row));
} finally {
  await s.stop();
}
