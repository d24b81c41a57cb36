// make bench-e2e: the relay under load, as its users and operators judge it, in one run.
//
// Starts anvil, the latency-injecting strict-nonce test proxy and the relay on workerd, then:
//  1. burst: S senders x N transactions, all fired at once; wall time against the serialized limit
//     N x L (efficiency = N*L / wall), the lock handoff gap (the proxy's answer to transaction k
//     to its receipt of k+1 of the same sender), and the accounting (every transaction mined
//     exactly once or refused with an explicit error; none lost, duplicated or out of nonce order);
//  2. added latency: one transaction at a time per sender, through the relay and straight to the
//     proxy, p50/p99 of each and their ratio.
// Prints a Markdown table for BENCHMARKS.md. Settings: SENDERS, TXS, LATENCY_MS.
import os from "node:os";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, cpuMs } from "../support/harness.mjs";

const S = Number(process.env.SENDERS ?? 50);
const N = Number(process.env.TXS ?? 20);
const L = Number(process.env.LATENCY_MS ?? 50);
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))];
};
const f1 = (x) => x.toFixed(1);

const anvil = await startAnvil({ accounts: 2 * S + 2 });
// The bench signs every transaction itself, so the proxy looks senders up instead of recovering
// them (a JS recovery costs the proxy milliseconds of CPU per transaction on this machine).
const senderOfRaw = new Map();
const sign = async (account, nonce) => {
  const raw = await signTransfer(account, nonce);
  senderOfRaw.set(raw, account.address.toLowerCase());
  return raw;
};
const proxy = await startProxy({
  upstream: anvil.url,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});
const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, CHAIN_ID: "31337" } });
const out = [];
try {
  // 1. The burst.
  const senders = Array.from({ length: S }, (_, i) => devAccount(i));
  const signed = await Promise.all(senders.map((a) => Promise.all(Array.from({ length: N }, (_, n) => sign(a, n)))));
  const cpu = () => ({
    relay: relay.pids.reduce((sum, pid) => sum + cpuMs(pid), 0),
    anvil: cpuMs(anvil.pid),
    harness: (process.cpuUsage().user + process.cpuUsage().system) / 1000,
  });
  const cpuBefore = cpu();
  const started = performance.now();
  const answers = await Promise.all(signed.flat().map((raw, i) => sendRaw(relay.url, raw, i)));
  const wall = performance.now() - started;
  const cpuAfter = cpu();
  const used = Object.fromEntries(Object.keys(cpuAfter).map((k) => [k, cpuAfter[k] - cpuBefore[k]]));
  const cores = os.cpus().length;
  const refused = answers.filter((a) => a.json?.error);
  const hashes = answers.map((a) => a.json?.result).filter(Boolean);

  // Accounting against the chain.
  let mined = 0;
  let lost = 0;
  for (const h of hashes) {
    const r = await rpc(anvil.url, "eth_getTransactionReceipt", [h]);
    if (r.result?.status === "0x1") mined++;
    else lost++;
  }
  const silent = answers.filter((a) => !a.json?.result && !a.json?.error).length;
  let outOfOrder = 0;
  let duplicated = 0;
  const gaps = [];
  for (const a of senders) {
    const sender = a.address.toLowerCase();
    const seen = proxy.seen.filter((r) => r.sender === sender);
    const accepted = seen.filter((r) => r.accepted);
    duplicated += accepted.length - new Set(accepted.map((r) => r.nonce)).size;
    outOfOrder += seen.filter((r, i) => i > 0 && r.nonce <= seen[i - 1].nonce).length;
    for (let i = 1; i < seen.length; i++) gaps.push(seen[i].at - seen[i - 1].answeredAt);
    const count = await rpc(anvil.url, "eth_getTransactionCount", [sender, "latest"]);
    if (Number(count.result) !== accepted.length) lost += Math.abs(Number(count.result) - accepted.length);
  }
  const serialized = N * L;

  // 2. Added latency, one at a time per sender (fresh senders, so nonces start at 0).
  const through = [];
  const direct = [];
  const probes = Math.min(S, 20);
  await Promise.all(
    Array.from({ length: probes }, async (_, i) => {
      const viaRelay = devAccount(S + 1 + i);
      const viaProxy = devAccount(S + 1 + probes + i);
      for (let n = 0; n < 10; n++) {
        const r = await sendRaw(relay.url, await sign(viaRelay, n));
        if (r.json?.result) through.push(r.ms);
        const d = await sendRaw(proxy.url, await sign(viaProxy, n));
        if (d.json?.result) direct.push(d.ms);
      }
    }),
  );

  const model = os.cpus()[0].model;
  out.push(`Machine: ${model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; date ${new Date().toISOString().slice(0, 10)}`);
  out.push(`Command: make bench-e2e (SENDERS=${S} TXS=${N} LATENCY_MS=${L})\n`);
  out.push("| measure | value | goal |");
  out.push("|---|---:|---|");
  out.push(`| transactions sent | ${S * N} | |`);
  out.push(`| wall time of the burst | ${wall.toFixed(0)} ms | |`);
  out.push(`| serialized limit N x L | ${serialized} ms | |`);
  out.push(`| efficiency N*L / wall | ${(serialized / wall).toFixed(2)} | >= 0.9 |`);
  out.push(`| CPU during the burst: relay (workerd) / anvil / client + proxy | ${(used.relay / 1000).toFixed(2)} / ${(used.anvil / 1000).toFixed(2)} / ${(used.harness / 1000).toFixed(2)} s | |`);
  out.push(`| CPU floor of the wall time (all CPU / ${cores} cores) | ${((used.relay + used.anvil + used.harness) / cores).toFixed(0)} ms | |`);
  out.push(`| relay CPU per transaction | ${(used.relay / (S * N)).toFixed(2)} ms | |`);
  out.push(`| lock handoff gap p50 / p99 | ${f1(quantile(gaps, 0.5))} / ${f1(quantile(gaps, 0.99))} ms | p99 < 2 ms |`);
  out.push(`| latency through the relay p50 / p99 | ${f1(quantile(through, 0.5))} / ${f1(quantile(through, 0.99))} ms | |`);
  out.push(`| latency straight to the proxy p50 / p99 | ${f1(quantile(direct, 0.5))} / ${f1(quantile(direct, 0.99))} ms | |`);
  out.push(`| added by the relay p50 / p99 | ${f1(quantile(through, 0.5) - quantile(direct, 0.5))} / ${f1(quantile(through, 0.99) - quantile(direct, 0.99))} ms | |`);
  out.push(`| ratio relay / direct p50 / p99 | ${(quantile(through, 0.5) / quantile(direct, 0.5)).toFixed(2)} / ${(quantile(through, 0.99) / quantile(direct, 0.99)).toFixed(2)} | |`);
  out.push(`| mined exactly once | ${mined} | all |`);
  out.push(`| refused with an explicit error | ${refused.length} | 0 |`);
  out.push(`| lost (no answer, or answered but not mined) | ${lost + silent} | 0 |`);
  out.push(`| duplicated | ${duplicated} | 0 |`);
  out.push(`| out of nonce order at the upstream | ${outOfOrder} | 0 |`);
  console.log(out.join("\n"));
  if (lost + silent + duplicated + outOfOrder > 0 || mined + refused.length !== S * N) process.exitCode = 1;
} finally {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
}
