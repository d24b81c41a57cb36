// `wrangler deploy --dry-run` on the release build (wasm-opt), as `wrangler deploy` would upload
// it: the configuration is valid (bindings, vars, the Durable Object migration, the rate limits)
// and the bundle fits the Workers size limits (3 MiB gzip on the free plan, 10 MiB on paid).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { promisify } from "node:util";
import { gzipSync } from "node:zlib";
import { ROOT } from "./support/harness.mjs";

const FREE_PLAN_GZIP = 3 * 1024 * 1024;

/**
 * wrangler.toml as it is, but for its build's folder: build-deploy/ instead of build/, so that the
 * optimized build this test makes never replaces the build/ that the other end-to-end files, run
 * beside it (scripts/e2e.mjs), are starting relays from. (Its cargo build is the one that made
 * build/, last in scripts/test.sh: cargo has nothing to do, wasm-opt does the rest.) Written beside wrangler.toml (its paths are
 * read from the config's folder), removed after.
 */
async function deployConfig() {
  const toml = await readFile(path.join(ROOT, "wrangler.toml"), "utf8");
  const main = 'main = "build/worker/shim.mjs"';
  const command = 'command = "bash scripts/build.sh"';
  assert.ok(toml.includes(main) && toml.includes(command), "wrangler.toml's main and build command as this test knows them");
  const file = path.join(ROOT, ".wrangler-deploy-test.toml");
  await writeFile(file, toml.replace(main, 'main = "build-deploy/worker/shim.mjs"').replace(command, 'command = "bash scripts/build.sh --out-dir build-deploy"'));
  return file;
}

test("wrangler deploy --dry-run: the release bundle is valid and fits the free plan's 3 MiB (gzip)", async () => {
  const out = await mkdtemp(path.join(tmpdir(), "nonce-relay-deploy-"));
  const config = await deployConfig();
  try {
    const { stdout } = await promisify(execFile)(
      // wrangler on this test's node (scripts/env.sh's NODE_BIN), whatever node PATH has first.
      process.execPath,
      [path.join(ROOT, "node_modules/wrangler/bin/wrangler.js"), "deploy", "--dry-run", "--config", config, "--outdir", out],
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
    await rm(config, { force: true });
  }
});
