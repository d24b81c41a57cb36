// make bench-e2e's sustained line (issue 39): one sender at RATE transactions a second for
// DURATION_S on a mempool upstream, the relay with its defaults.
//
// anvil mines each transaction as it comes (automine); a test proxy that passes nonce gaps (a
// mempool upstream) answers each eth_sendRawTransaction after LATENCY_MS. The client signs the
// sender's RATE x DURATION_S transfers first, then sends nonce n at start + n / RATE s, in nonce
// order, with at most IN_FLIGHT requests unanswered (a send waits for a slot, and is late by what
// it waited). It checks that every one was accepted (its hash) and mined (a receipt), and that
// none was refused; it prints how late the sends went out (the client kept its schedule), how long
// each answer took, the relay's per-sender view at the end (what the object still follows, its
// rows written, the isolate's wasm memory), the workerd process's resident memory, and the rows
// written per transaction.
// Settings: RATE (50), DURATION_S (120), LATENCY_MS (50), IN_FLIGHT (32), plus any relay var in
// RELAY_VARS (JSON). Prints Markdown for BENCHMARKS.md; exits 1 when one was refused, lost or not
// mined.
import os from "node:os";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, rssKb, cpuMs, sleep } from "../support/harness.mjs";

const RATE = Number(process.env.RATE ?? 50);
const DURATION_S = Number(process.env.DURATION_S ?? 120);
const L = Number(process.env.LATENCY_MS ?? 50);
const IN_FLIGHT = Number(process.env.IN_FLIGHT ?? 32);
const TOTAL = Math.round(RATE * DURATION_S);
const TOKEN = "sustained-bench";
const quantile = (xs, q) => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const f0 = (x) => x.toFixed(0);
const f1 = (x) => x.toFixed(1);

const anvil = await startAnvil({ accounts: 2 });
const account = devAccount(1);
const sender = account.address.toLowerCase();
const senderOfRaw = new Map();
const proxy = await startProxy({
  upstream: anvil.url,
  strictNonce: false,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});
const relay = await startRelay({
  vars: {
    UPSTREAM_RPC_URL: proxy.url,
    CHAIN_ID: "31337",
    // The relay's defaults (the harness would give SEND_WINDOW=1 otherwise).
    SEND_WINDOW: undefined,
    ADMIN_TOKEN: TOKEN,
    ...JSON.parse(process.env.RELAY_VARS ?? "{}"),
  },
});
const view = async () =>
  (await fetch(`${relay.url}/senders/${account.address}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();

try {
  console.error(`# signing ${TOTAL} transfers`);
  const raws = [];
  for (let n = 0; n < TOTAL; n++) {
    const raw = await signTransfer(account, n);
    senderOfRaw.set(raw, sender);
    raws.push(raw);
  }
  const cpuBefore = relay.pids.reduce((sum, pid) => sum + cpuMs(pid), 0);
  const answers = new Array(TOTAL);
  let inFlight = 0;
  let slotFreed = null;
  const started = performance.now();
  const lateness = [];
  const samples = [];
  const sampler = setInterval(async () => {
    try {
      const v = await view();
      samples.push({ at: performance.now() - started, tracked: v.tracked, outstanding: v.outstanding, remembered: v.remembered });
    } catch {
      /* the relay is busy: next time */
    }
  }, 5_000);
  const pending = [];
  for (let n = 0; n < TOTAL; n++) {
    const due = started + (n * 1000) / RATE;
    const wait = due - performance.now();
    if (wait > 0) await sleep(wait);
    while (inFlight >= IN_FLIGHT) await new Promise((resolve) => (slotFreed = resolve));
    const sentAt = performance.now();
    lateness.push(sentAt - due);
    inFlight += 1;
    pending.push(
      sendRaw(relay.url, raws[n], n)
        .then((a) => (answers[n] = { ...a, sentAt, answeredAt: performance.now() }))
        .catch((e) => (answers[n] = { json: undefined, text: String(e), sentAt, answeredAt: performance.now() }))
        .finally(() => {
          inFlight -= 1;
          slotFreed?.();
          slotFreed = null;
        }),
    );
  }
  await Promise.all(pending);
  const wall = performance.now() - started;
  clearInterval(sampler);
  const relayCpu = relay.pids.reduce((sum, pid) => sum + cpuMs(pid), 0) - cpuBefore;
  const refused = answers.filter((a) => !a.json?.result);
  const latencies = answers.map((a) => a.answeredAt - a.sentAt);

  // Every hash a client got has a receipt; the sender's mined count is TOTAL.
  let mined = 0;
  for (const a of answers.filter((x) => x.json?.result)) {
    const receipt = (await rpc(anvil.url, "eth_getTransactionReceipt", [a.json.result])).result;
    if (receipt?.status === "0x1") mined++;
  }
  const count = Number((await rpc(anvil.url, "eth_getTransactionCount", [sender, "latest"])).result);
  const sendsAtUpstream = proxy.seen.filter((r) => r.sender === sender).length;
  // The object's state once its next tracking check (TRACK_INTERVAL_S, 12 s by default) has seen
  // the last ones mined.
  await sleep(13_000);
  const end = await view();
  const rss = relay.pids.reduce((sum, pid) => sum + rssKb(pid), 0);

  const out = [];
  out.push(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; date ${new Date().toISOString().slice(0, 10)}`);
  out.push(`Command: node tests/bench/sustained.mjs (RATE=${RATE} DURATION_S=${DURATION_S} LATENCY_MS=${L} IN_FLIGHT=${IN_FLIGHT}; anvil automine, mempool test proxy; the relay's defaults)\n`);
  out.push("| one sender | sent | accepted (hash) | mined (receipt) | refused | sends at the upstream | wall | send lateness p50 / p99 / max | answer p50 / p99 / max | workerd CPU / tx |");
  out.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  out.push(
    `| ${RATE}/s x ${DURATION_S} s | ${TOTAL} | ${TOTAL - refused.length} | ${mined} (mined count ${count}) | ${refused.length} | ${sendsAtUpstream} | ${f0(wall)} ms | ` +
      `${f1(quantile(lateness, 0.5))} / ${f1(quantile(lateness, 0.99))} / ${f1(Math.max(...lateness))} ms | ` +
      `${f1(quantile(latencies, 0.5))} / ${f1(quantile(latencies, 0.99))} / ${f1(Math.max(...latencies))} ms | ${(relayCpu / TOTAL).toFixed(2)} ms |`,
  );
  const most = (k) => Math.max(0, ...samples.map((s) => s[k] ?? 0));
  out.push(`\nWhile sending (the per-sender view every 5 s): at most ${most("tracked")} tracked, ${most("outstanding")} outstanding (the bound counts these; it refuses at 1,024), ${most("remembered")} remembered.`);
  const storage = end.storage ?? {};
  out.push(
    `At the end (13 s after the last answer): ${end.tracked} tracked, ${end.remembered} remembered, ${end.counters?.included} included, ${end.counters?.resubmitted} resubmitted, ${end.counters?.above_refused} refused above a hole; ` +
      `storage ${storage.rows} rows (${storage.released} released); rows written ${storage.rows_written}, ${(storage.rows_written / TOTAL).toFixed(3)} per transaction; ` +
      `the isolate's wasm memory ${(end.wasm_memory_bytes / 2 ** 20).toFixed(1)} MiB; workerd resident ${(rss / 1024).toFixed(0)} MiB.`,
  );
  if (refused.length) out.push(`\nFirst refusal: ${refused[0].text.slice(0, 300)}`);
  console.log(out.join("\n"));
  if (refused.length || mined !== TOTAL || count !== TOTAL) process.exitCode = 1;
} finally {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
}
