// The README's client examples, run as they are against a local relay (anvil behind the
// strict-nonce test proxy): cast, viem, ethers v6, and a page in headless Chromium that reads and
// sends through the relay cross-origin (so only CORS lets it read the answers).
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile, mkdtemp, writeFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import http from "node:http";
import path from "node:path";
import { promisify } from "node:util";
import { ROOT, stack, rpc, freePort } from "./support/harness.mjs";

const run = promisify(execFile);
// The examples run on this test's node, and its folder is on PATH for what they start.
const env = (relay) => ({
  ...process.env,
  RELAY_URL: relay,
  PATH: [path.join(ROOT, "node_modules/.bin"), path.dirname(process.execPath), process.env.PATH].join(path.delimiter),
});

test("every example file is in the README as it is", async () => {
  const readme = await readFile(path.join(ROOT, "README.md"), "utf8");
  for (const file of ["examples/cast.sh", "examples/viem.mjs", "examples/ethers.mjs", "examples/viem-websocket.mjs", "examples/ethers-websocket.mjs", "examples/browser/app.mjs", "examples/browser/index.html"]) {
    const text = (await readFile(path.join(ROOT, file), "utf8")).trim();
    assert.ok(readme.includes(text), `${file} is in the README verbatim`);
  }
});

test("cast: chain id, block number, a transaction with its receipt", async () => {
  const s = await stack();
  try {
    const { stdout } = await run("bash", [path.join(ROOT, "examples/cast.sh")], { env: env(s.relay.url) });
    const lines = stdout.trim().split("\n");
    assert.equal(lines[0], "31337");
    assert.match(lines[1], /^\d+$/);
    const receipt = JSON.parse(lines.slice(2).join("\n"));
    assert.equal(receipt.status, "0x1");
    assert.equal(s.proxy.seen.filter((r) => r.accepted).length, 1);
  } finally {
    await s.stop();
  }
});

test("viem: a read, a transaction, and a burst of five sent at once, all mined in order", async () => {
  const s = await stack();
  try {
    const { stdout } = await run(process.execPath, [path.join(ROOT, "examples/viem.mjs")], { env: env(s.relay.url) });
    assert.match(stdout, /^block \d+$/m);
    assert.match(stdout, /^sent 0x[0-9a-f]{64} success$/m);
    assert.match(stdout, /^burst 5 mined$/m);
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "the strict upstream refused none");
    assert.deepEqual(s.proxy.seen.map((r) => r.nonce), [0, 1, 2, 3, 4, 5]);
  } finally {
    await s.stop();
  }
});

test("ethers v6: network, block, balance, a transaction mined", async () => {
  const s = await stack();
  try {
    const { stdout } = await run(process.execPath, [path.join(ROOT, "examples/ethers.mjs")], { env: env(s.relay.url) });
    assert.match(stdout, /^chain 31337 block \d+$/m);
    assert.match(stdout, /^balance \d+$/m);
    assert.match(stdout, /^sent 0x[0-9a-f]{64} 1$/m);
  } finally {
    await s.stop();
  }
});

test("viem over the WebSocket: watchBlockNumber, and a burst of three on the same socket, mined in order", async () => {
  const s = await stack({ anvil: { extraArgs: ["--block-time", "1"] } });
  try {
    const started = performance.now();
    // It ends on its own: it watches block numbers (watchBlocks' fetch of a block, cut off by
    // close(), was retried by viem on a second socket that kept the script alive, 2 of 8 full
    // suites before 2026-11-28). The lines below say what the relay saw if it ever does not end.
    const { stdout } = await run(process.execPath, [path.join(ROOT, "examples/viem-websocket.mjs")], { env: env(s.relay.url), timeout: 60_000 }).catch((e) => {
      console.log(`# viem-websocket did not end after ${(performance.now() - started).toFixed(0)} ms; relay's socket lines:`);
      for (const line of s.relay.logs.filter((l) => /"event":"ws_/.test(l))) console.log(`# ${line.slice(0, 300)}`);
      throw e;
    });
    assert.match(stdout, /^burst 3 mined$/m);
    assert.match(stdout, /^watched \d+ blocks$/m);
    assert.equal(s.proxy.seen.filter((r) => !r.accepted).length, 0, "the strict upstream refused none");
    assert.deepEqual(s.proxy.seen.map((r) => r.nonce), [0, 1, 2]);
  } finally {
    await s.stop();
  }
});

test("ethers v6 over the WebSocket: on('block'), and a transaction mined", async () => {
  const s = await stack({ anvil: { extraArgs: ["--block-time", "1"] } });
  try {
    const { stdout } = await run(process.execPath, [path.join(ROOT, "examples/ethers-websocket.mjs")], { env: env(s.relay.url), timeout: 30_000 });
    assert.match(stdout, /^block \d+$/m);
    assert.match(stdout, /^sent 0x[0-9a-f]{64} 1$/m);
    assert.equal(s.proxy.seen.filter((r) => r.accepted).length, 1);
  } finally {
    await s.stop();
  }
});

/** Serves examples/browser with app.mjs bundled (viem included) by esbuild, on its own origin. */
async function servePage() {
  const dir = await mkdtemp(path.join(tmpdir(), "nonce-relay-page-"));
  const esbuild = process.env.ESBUILD_BIN ?? path.join(ROOT, "node_modules/.bin/esbuild");
  await run(esbuild, [path.join(ROOT, "examples/browser/app.mjs"), "--bundle", "--format=esm", "--target=es2022", `--outfile=${path.join(dir, "app.js")}`]);
  await writeFile(path.join(dir, "index.html"), await readFile(path.join(ROOT, "examples/browser/index.html")));
  const port = await freePort();
  const server = http.createServer(async (req, res) => {
    const file = new URL(req.url, "http://x").pathname.replace(/^\//, "") || "index.html";
    try {
      const body = await readFile(path.join(dir, path.basename(file)));
      res.writeHead(200, { "content-type": file.endsWith(".js") ? "text/javascript" : "text/html" });
      res.end(body);
    } catch {
      res.writeHead(404);
      res.end();
    }
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return {
    url: `http://127.0.0.1:${port}/index.html`,
    stop: async () => {
      server.closeAllConnections();
      await new Promise((r) => server.close(r));
      await rm(dir, { recursive: true, force: true });
    },
  };
}

/** Opens the page in headless Chromium and returns what it wrote into #result. */
async function openPage(pageUrl) {
  const { chromium } = await import("playwright-core");
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM_BIN ?? "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage();
    const console = [];
    page.on("console", (m) => console.push(m.text()));
    await page.goto(pageUrl);
    await page.waitForFunction(() => document.getElementById("result").textContent !== "running…", null, { timeout: 30000 });
    return { result: JSON.parse(await page.textContent("#result")), console };
  } finally {
    await browser.close();
  }
}

const DEV_KEY_3 = "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6";

test("a page in headless Chromium reads and sends a transaction through the relay, cross-origin", async () => {
  const s = await stack();
  const page = await servePage();
  try {
    const { result, console } = await openPage(`${page.url}?relay=${encodeURIComponent(s.relay.url)}&key=${DEV_KEY_3}`);
    assert.equal(result.status, "success", `${JSON.stringify(result)}\n${console.join("\n")}`);
    const receipt = await rpc(s.anvil.url, "eth_getTransactionReceipt", [result.hash]);
    assert.equal(receipt.result.status, "0x1");
  } finally {
    await page.stop();
    await s.stop();
  }
});

test("the same page against a relay that allows only another origin: the browser refuses the answers", async () => {
  const s = await stack({ vars: { CORS_ORIGINS: "https://elsewhere.example" } });
  const page = await servePage();
  try {
    const { result } = await openPage(`${page.url}?relay=${encodeURIComponent(s.relay.url)}&key=${DEV_KEY_3}`);
    assert.ok(result.error, `the page could not read the relay: ${JSON.stringify(result)}`);
    assert.equal(s.proxy.seen.length, 0, "nothing was sent");
  } finally {
    await page.stop();
    await s.stop();
  }
});
