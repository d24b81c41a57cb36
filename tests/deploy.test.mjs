// `wrangler deploy --dry-run` on the release build (wasm-opt), as `wrangler deploy` would upload
// it: the configuration is valid (bindings, vars, the Durable Object migration, the rate limits)
// and the bundle fits the Workers size limits (3 MiB gzip on the free plan, 10 MiB on paid).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { ROOT } from "./support/harness.mjs";

const FREE_PLAN_GZIP = 3 * 1024 * 1024;

test("wrangler deploy --dry-run: the release bundle is valid and fits the free plan's 3 MiB (gzip)", async () => {
  const out = await mkdtemp(path.join(tmpdir(), "nonce-relay-deploy-"));
  try {
    const { stdout } = await promisify(execFile)(
      // wrangler on this test's node (scripts/env.sh's NODE_BIN), whatever node PATH has first.
      process.execPath,
      [path.join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--outdir", out],
      { cwd: ROOT, env: { ...process.env, WASM_OPT: "1" }, maxBuffer: 16 << 20 },
    );
    assert.match(stdout, /env\.SENDER_LOCK \(SenderLock\)\s+Durable Object/);
    assert.match(stdout, /env\.RATE_LIMIT_SEND \(\d+ requests\/\d+s\)\s+Rate Limit/);
    assert.match(stdout, /env\.RATE_LIMIT_READ \(\d+ requests\/\d+s\)\s+Rate Limit/);
    const files = (await readdir(out)).filter((f) => !f.endsWith(".map") && f !== "README.md");
    assert.ok(files.some((f) => f.endsWith(".wasm")), `${files}`);
    let raw = 0;
    let gzip = 0;
    for (const f of files) {
      const bytes = await readFile(path.join(out, f));
      raw += bytes.length;
      gzip += gzipSync(bytes, { level: 9 }).length;
    }
    const reported = /Total Upload: ([\d.]+) KiB \/ gzip: ([\d.]+) KiB/.exec(stdout);
    console.log(`# bundle ${(raw / 1024).toFixed(1)} KiB, gzip ${(gzip / 1024).toFixed(1)} KiB (wrangler: ${reported?.[1]} / ${reported?.[2]} KiB); free plan limit 3072 KiB gzip`);
    assert.ok(gzip < FREE_PLAN_GZIP, `gzip ${gzip} bytes`);
    assert.ok(reported && Number(reported[2]) * 1024 < FREE_PLAN_GZIP, stdout);
  } finally {
    await rm(out, { recursive: true, force: true });
  }
});
