// Runs the end-to-end test files (tests/*.test.mjs), several at once, and prints each file's time.
//
//   node scripts/e2e.mjs [file ...]      (make test-e2e; default: every tests/*.test.mjs)
//
// Each file is its own `node --test` process with its own anvil, workerd, ports and state
// directories, so files share nothing and run side by side: E2E_JOBS of them at a time
// (default 5; the files wait on chains, timers and sockets far more than they compute: at 4 the
// whole ran in 315-334 s using 1.4 of 2 cores, at 5 in 287 s, each file 7 % slower). A file
// whose first lines carry the marker `e2e: alone` asserts something about timing that a busy
// machine could move, and runs by itself, after the others. Files start longest first, by the
// times of the last run (target/e2e-times.json), else of a measured one (tests/e2e-times.json),
// else by size. A file's output is printed whole when it ends, so the files' lines never
// interleave. Exit status 1 when any file failed.
//
// Ports: each file gets a block of its own (`E2E_PORTS=first-last`, the harness's freePort takes
// them in turn and never twice), all below the kernel's ephemeral range, so a port one file's
// test stopped listening on (an upstream made to refuse, an outage) is never another file's
// server: a relay still calling it reaches nothing, never another file's chain. (With ports the
// kernel picked, a file's stale upstream URL could land on another file's proxy or anvil, whose
// dev accounts and chain id are the same: a foreign transaction taking a nonce.)
import { spawn } from "node:child_process";
import { mkdirSync, readFileSync, readdirSync, statSync, writeFileSync } from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const TIMES = path.join(ROOT, "target", "e2e-times.json");
const JOBS = Math.max(1, Number(process.env.E2E_JOBS ?? 5));

const files = process.argv.length > 2
  ? process.argv.slice(2).map((f) => path.relative(ROOT, path.resolve(f)))
  : readdirSync(path.join(ROOT, "tests")).filter((f) => f.endsWith(".test.mjs")).sort().map((f) => path.join("tests", f));

/** Whether a file asks to run alone: the marker `e2e: alone` in its first 10 lines. */
function alone(file) {
  return readFileSync(path.join(ROOT, file), "utf8").split("\n").slice(0, 10).some((l) => l.includes("e2e: alone"));
}

/** Seconds each file took in this checkout's last full run (target/e2e-times.json), else {}. */
function lastTimes() {
  try {
    return JSON.parse(readFileSync(TIMES, "utf8"));
  } catch {
    return {};
  }
}

/** Seconds each file took in a measured fresh-clone run (tests/e2e-times.json, kept in the
 * repository), so that a fresh clone (CI's) starts the longest first too: ordered by size instead,
 * short files of long waits (deploy.test, cache-reorg.test) started last: a fresh clone's files
 * took 308 s, where the same files' times, longest first, come to 271 s. */
const KEPT = JSON.parse(readFileSync(path.join(ROOT, "tests", "e2e-times.json"), "utf8"));

const last = { ...KEPT, ...lastTimes() };
/** Longest first: the last run's seconds, else the kept ones, else the file's size in bytes as its
 * stand-in (scaled down: a new file). */
const weight = (f) => last[f] ?? statSync(path.join(ROOT, f)).size / 1000;
const byWeight = (a, b) => weight(b) - weight(a);
const solo = files.filter(alone).sort(byWeight);
const shared = files.filter((f) => !solo.includes(f)).sort(byWeight);

/** The first port of the blocks, and the end of the range they share (below Linux's ephemeral
 * range, 32768-60999 by default, which outgoing connections take their ports from). */
const PORTS_FROM = 10_000;
const PORTS_TO = 32_000;
/** Each file's block of ports, by its place in `files`: `first-last`. */
const PORT_BLOCK = Math.min(1_000, Math.floor((PORTS_TO - PORTS_FROM) / Math.max(1, files.length)));
const portsOf = (file) => {
  const first = PORTS_FROM + files.indexOf(file) * PORT_BLOCK;
  return `${first}-${first + PORT_BLOCK - 1}`;
};

/** One file in its own `node --test` process: { file, seconds, ok, code, tests, output }. */
function runFile(file) {
  return new Promise((resolve) => {
    const started = performance.now();
    const child = spawn(process.execPath, ["--test", "--test-reporter=spec", "--test-concurrency=1", file], {
      cwd: ROOT,
      env: { ...process.env, E2E_PORTS: portsOf(file) },
      stdio: ["ignore", "pipe", "pipe"],
    });
    const chunks = [];
    child.stdout.on("data", (c) => chunks.push(c));
    child.stderr.on("data", (c) => chunks.push(c));
    child.on("close", (code, signal) => {
      const output = Buffer.concat(chunks).toString("utf8");
      const count = (label) => Number(new RegExp(`^ℹ ${label} (\\d+)$`, "m").exec(output)?.[1] ?? 0);
      resolve({
        file,
        seconds: (performance.now() - started) / 1000,
        ok: code === 0,
        code: code ?? signal,
        tests: count("tests"),
        output,
      });
    });
  });
}

/** A failed file's failing tests, from the spec reporter's "failing tests" section at its end:
 * one line each, "file: test name: the error's first lines" (the file's exit code when the
 * section is missing: it crashed or was killed). */
function failures(r) {
  const section = r.output.split("\u2716 failing tests:")[1];
  if (!section) return [`  ${r.file}: exited ${r.code}, no failing test named`];
  const lines = section.split("\n");
  const out = [];
  lines.forEach((line, i) => {
    const name = /^\u2716 (.*) \([\d.]+ms\)$/.exec(line);
    if (!name) return;
    // The error's first lines up to the stack (an assertion's message may carry what the test
    // saw), on one line.
    const after = lines.slice(i + 1);
    const end = after.findIndex((l, j) => j > 0 && (/^\s+at /.test(l) || /^\u2716 /.test(l) || /^\s+(generatedMessage|code|actual|expected|operator):/.test(l)));
    const error = after.slice(0, end < 0 ? 8 : Math.min(end, 8)).map((l) => l.trim()).filter(Boolean).join(" | ");
    out.push(`  ${r.file}: ${name[1].slice(0, 100)}: ${error.slice(0, 600)}`);
  });
  return out.length ? out : [`  ${r.file}: exited ${r.code}`];
}

/** Runs `list` with at most `jobs` at a time, printing each file's output as it ends. */
async function pool(list, jobs) {
  const results = [];
  const queue = [...list];
  const worker = async () => {
    for (let file = queue.shift(); file; file = queue.shift()) {
      const r = await runFile(file);
      process.stdout.write(`\n━━ ${r.file}: ${r.ok ? "pass" : `FAIL (${r.code})`}, ${r.tests} tests, ${r.seconds.toFixed(1)} s\n${r.output}`);
      results.push(r);
    }
  };
  await Promise.all(Array.from({ length: Math.min(jobs, list.length) }, worker));
  return results;
}

const started = performance.now();
console.log(`end-to-end: ${shared.length} files, ${JOBS} at a time; then ${solo.length} alone (${solo.join(", ") || "none"})`);
const results = [...(await pool(shared, JOBS)), ...(await pool(solo, 1))];
const wall = (performance.now() - started) / 1000;

const rows = [...results].sort((a, b) => b.seconds - a.seconds);
const width = Math.max(...rows.map((r) => r.file.length));
console.log(`\nend-to-end file times (${JOBS} at a time${solo.length ? `; ${solo.length} alone` : ""}):`);
for (const r of rows) {
  console.log(`  ${r.file.padEnd(width)}  ${r.seconds.toFixed(1).padStart(6)} s  ${String(r.tests).padStart(3)} tests  ${r.ok ? "pass" : "FAIL"}${solo.includes(r.file) ? "  (alone)" : ""}`);
}
const tests = results.reduce((n, r) => n + r.tests, 0);
const failedFiles = results.filter((r) => !r.ok);
console.log(`  ${"total".padEnd(width)}  ${wall.toFixed(1).padStart(6)} s  ${String(tests).padStart(3)} tests  ${failedFiles.length ? `${failedFiles.length} files FAILED: ${failedFiles.map((r) => r.file).join(", ")}` : "pass"}`);

// What failed, short (each failing test's name and the first line of its error), last, and in
// target/e2e-failures.txt (scripts/test.sh prints it again after its step times): a log cut to
// its tail still says what failed.
const FAILURES = path.join(ROOT, "target", "e2e-failures.txt");
const summary = failedFiles.flatMap((r) => failures(r));
mkdirSync(path.dirname(FAILURES), { recursive: true });
writeFileSync(FAILURES, summary.length ? `end-to-end failures:\n${summary.join("\n")}\n` : "");
if (summary.length) console.log(`\nend-to-end failures:\n${summary.join("\n")}`);

if (process.argv.length <= 2) {
  mkdirSync(path.dirname(TIMES), { recursive: true });
  writeFileSync(TIMES, `${JSON.stringify(Object.fromEntries(results.map((r) => [r.file, Math.round(r.seconds)])), null, 1)}\n`);
}
process.exit(failedFiles.length ? 1 : 0);
