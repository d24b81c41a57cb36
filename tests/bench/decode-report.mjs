// make bench: the cost of decode + hash + sender recovery per transaction type, natively
// (criterion's estimates, from `cargo bench --bench decode`) and inside the wasm worker on workerd
// (build-bench/, built with the `bench` feature), plus the deployed worker's wasm size
// (build-size/, optimized with wasm-opt). Prints a Markdown table for BENCHMARKS.md.
//
// Inside a Worker the clocks stand still while it computes, so the wasm cost is timed from
// outside: a request that decodes K times against one that decodes 0 times, medians of R rounds.
import { readFileSync, statSync } from "node:fs";
import { gzipSync } from "node:zlib";
import os from "node:os";
import path from "node:path";
import { ROOT, post, startRelay } from "../support/harness.mjs";

const K = Number(process.env.BENCH_ITERATIONS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 15);
const fixtures = JSON.parse(readFileSync(path.join(ROOT, "tests/fixtures/typed-transactions.json"), "utf8"));
const criterionDir = path.join(ROOT, "target/native/criterion/decode+hash+recover");

function nativeMicros(name) {
  const dir = path.join(criterionDir, name);
  try {
    const est = JSON.parse(readFileSync(path.join(dir, "new/estimates.json"), "utf8"));
    return est.median.point_estimate / 1000;
  } catch {
    return NaN;
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: "http://127.0.0.1:9" }, buildDir: "build-bench" });
const url = `${relay.url}/__bench/decode`;
const rows = [];
try {
  for (const f of fixtures) {
    const time = async (iterations) => {
      const r = await post(url, { raw: f.raw, iterations });
      if (r.json?.ok !== iterations) throw new Error(`${f.name}: ${r.text}`);
      return r.ms;
    };
    await time(K); // warm up
    const full = [];
    const empty = [];
    for (let i = 0; i < ROUNDS; i++) {
      empty.push(await time(0));
      full.push(await time(K));
    }
    const wasm = ((median(full) - median(empty)) * 1000) / K;
    const native = nativeMicros(f.name);
    rows.push({ name: f.name, bytes: f.raw.length / 2 - 1, native, wasm });
  }
} finally {
  await relay.stop();
}

const size = (file) => {
  const bytes = readFileSync(file);
  return { raw: bytes.length, gzip: gzipSync(bytes, { level: 9 }).length };
};
const opt = size(path.join(ROOT, "build-size/index_bg.wasm"));
const kb = (n) => (n / 1024).toFixed(1);

console.log(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; ` +
  `${new Date().toISOString().slice(0, 10)}; K=${K}, ${ROUNDS} rounds\n`);
console.log("| transaction | bytes | native µs | wasm (workerd) µs | wasm / native |");
console.log("|---|---:|---:|---:|---:|");
for (const r of rows) {
  console.log(`| ${r.name} | ${r.bytes} | ${r.native.toFixed(1)} | ${r.wasm.toFixed(1)} | ${(r.wasm / r.native).toFixed(2)} |`);
}
console.log(`\nWorker wasm (release, wasm-opt): ${kb(opt.raw)} KiB raw, ${kb(opt.gzip)} KiB gzip`);
