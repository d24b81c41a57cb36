// The every-fault-at-once soak (issue 39): seeds SEED_FROM .. SEED_FROM + SEEDS - 1 (default 1..20)
// of tests/support/every-fault.mjs, one after another; a line per seed (seed, hashes, mined once,
// resubmitted, faults, time), what happened to any sender that lost transactions, and a summary.
// Exits 1 if any seed failed. SENDERS and TXS change the size (default 10 x 30); RELAY_BUILD_DIR
// the worker build; KEEP_DIR keeps a failed seed's relay logs, upstream records and storage there.
import { everyFault, summaryLine } from "../support/every-fault.mjs";

const from = Number(process.env.SEED_FROM ?? 1);
const seeds = Number(process.env.SEEDS ?? 20);
const senders = Number(process.env.SENDERS ?? 10);
const perSender = Number(process.env.TXS ?? 30);
console.log(`every fault at once: seeds ${from}..${from + seeds - 1}, ${senders} senders x ${perSender}, build ${process.env.RELAY_BUILD_DIR ?? "build"}`);
const results = [];
for (let seed = from; seed < from + seeds; seed++) {
  const r = await everyFault({ seed, senders, perSender, keepDir: process.env.KEEP_DIR });
  results.push(r);
  console.log(summaryLine(r));
  if (!r.ok) {
    if (r.error) console.log(`  error: ${r.error}`);
    if (r.kept) console.log(`  kept in ${r.kept}`);
    for (const line of r.diagnosis ?? []) console.log(`  ${line}`);
  }
}
const failed = results.filter((r) => !r.ok);
const lost = results.reduce((n, r) => n + (r.total - (r.minedOnce ?? 0)), 0);
const noHash = results.reduce((n, r) => n + ((r.clients?.count ?? 0) - (r.clients?.withHash ?? 0)), 0);
const secs = results.map((r) => r.ms / 1000);
console.log(
  `summary: ${results.length - failed.length}/${results.length} seeds ok` +
    (failed.length ? ` (failed: ${failed.map((r) => r.seed).join(", ")})` : "") +
    `; ${lost} transactions not mined once, ${noHash} clients without their hash; ` +
    `resubmitted ${results.reduce((n, r) => n + (r.resubmitted ?? 0), 0)} in all; ` +
    `time per seed ${Math.min(...secs).toFixed(1)}-${Math.max(...secs).toFixed(1)} s, ${secs.reduce((a, b) => a + b, 0).toFixed(0)} s in all`,
);
process.exit(failed.length ? 1 : 0);
