// The edges of issue 32 that are the platform's: what a client asks cannot cool an upstream (six
// wide eth_getLogs outlasting UPSTREAM_TIMEOUT_MS on both of two upstreams), a broadcast leaves
// a cooling upstream out, a chunked request body is refused at MAX_REQUEST_BYTES without being
// read to its end, and an id beyond 64 bits comes back as the client wrote it. The compiled relay
// on workerd, a real anvil behind recording test proxies.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import WebSocket from "ws";
import { keccak256 } from "viem";
import { stack, startAnvil, startProxy, startRelay, rpc, post, sleep, signTransfer, devAccount } from "./support/harness.mjs";

/** Every request object the proxy received (batch members one by one). */
const received = (proxy, from = 0) => proxy.requests.slice(from).flatMap((r) => (Array.isArray(r.body) ? r.body : [r.body]));

test("six wide eth_getLogs slower than UPSTREAM_TIMEOUT_MS on both upstreams: each client gets its error, no upstream cools, the preferred keeps serving", async () => {
  const anvil = await startAnvil();
  // Both nodes are healthy; only a client's wide query is slow on them.
  const slowLogs = (req) => (req?.method === "eth_getLogs" ? 2_000 : 0);
  const [a, b] = await Promise.all([0, 1].map(() => startProxy({ upstream: anvil.url, strictNonce: false, latency: slowLogs })));
  // CACHE=off: every read here must reach the upstreams, as it is their race that is tested.
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}`, UPSTREAM_TIMEOUT_MS: "500", CACHE: "off" } });
  try {
    for (let i = 0; i < 3; i++) await rpc(relay.url, "eth_blockNumber"); // both chains checked
    const logs = await Promise.all(
      Array.from({ length: 6 }, () => rpc(relay.url, "eth_getLogs", [{ fromBlock: "0x0", toBlock: "latest" }])),
    );
    for (const answer of logs) assert.equal(answer.error?.code, -32002, JSON.stringify(answer));
    const tried = [a, b].map((p) => received(p).filter((r) => r?.method === "eth_getLogs").length);
    assert.deepEqual(tried, [6, 6], "each wide query was tried on both upstreams (moved on, as before)");
    await sleep(300); // the background probes of each upstream's health answer
    assert.deepEqual(relay.events("upstream_cooling"), [], "no upstream cooled down");
    const probes = [a, b].map((p) => received(p).filter((r) => r?.method === "eth_chainId").length);
    assert.ok(probes.every((n) => n >= 2), `each upstream was asked a question of the relay's own after the timeouts: ${probes}`);
    // The preferred one still takes the next read.
    const before = a.requests.length;
    const balance = await rpc(relay.url, "eth_getBalance", ["0x000000000000000000000000000000000000dEaD", "latest"]);
    assert.match(balance.result ?? "", /^0x/, JSON.stringify(balance));
    assert.equal(a.requests.length, before + 1, "the preferred upstream answered it");
  } finally {
    await relay.stop();
    await Promise.all([a.stop(), b.stop()]);
    anvil.stop();
  }
});

test("SEND_BROADCAST=all leaves a cooling upstream out: one that swallows sends does not turn a refusal into -32002", async () => {
  const anvil = await startAnvil();
  const isSend = (req) => req?.method === "eth_sendRawTransaction";
  let broken = false;
  // The preferred upstream, once broken: HTTP 503 to everything but sends, which it swallows.
  const swallowing = await startProxy({
    upstream: anvil.url,
    strictNonce: false,
    hang: () => broken,
    fault: (req) => (broken && !isSend(req) ? { status: 503, headers: { "content-type": "text/html" }, body: "<html>503</html>" } : null),
  });
  const good = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({
    vars: {
      UPSTREAM_RPC_URL: `${swallowing.url},${good.url}`,
      SEND_BROADCAST: "all",
      ENABLE_NONCE_ORDERING: "false",
      UPSTREAM_TIMEOUT_MS: "3000",
      // The counts below must each reach both upstreams (the cache would answer the second).
      CACHE: "off",
    },
  });
  try {
    for (let i = 0; i < 3; i++) await rpc(relay.url, "eth_blockNumber"); // both chains checked
    broken = true;
    // A count is asked of every healthy upstream at once: the broken one fails each time.
    for (let i = 0; i < 6 && relay.events("upstream_cooling").length === 0; i++) {
      const read = await rpc(relay.url, "eth_getTransactionCount", ["0x000000000000000000000000000000000000dEaD", "latest"]);
      assert.match(read.result ?? "", /^0x/, JSON.stringify(read)); // the good one answered
    }
    assert.match(relay.events("upstream_cooling")[0]?.upstream ?? "", /^#1 /, "the swallowing upstream cooled down");
    // A transaction the good upstream refuses: its nonce is already mined.
    const account = devAccount(5);
    const mined = await post(anvil.url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [await signTransfer(account, 0)] });
    assert.match(mined.json.result, /^0x/);
    const stale = await post(relay.url, { jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: [await signTransfer(account, 0, { value: 2n })] });
    assert.equal(swallowing.seen.length, 0, "nothing was broadcast to the cooling upstream");
    assert.equal(good.seen.length, 1);
    assert.match(stale.json.error?.message ?? "", /nonce too low/i, `the good upstream's refusal: ${stale.text}`);
  } finally {
    await relay.stop();
    await Promise.all([swallowing.stop(), good.stop()]);
    anvil.stop();
  }
});

/**
 * POSTs a chunked body (no Content-Length) to `url`: `chunks` (strings) one every `everyMs`, then
 * the end unless `end` is false; after the chunks, a body that does not end stays open. Resolves
 * with { status, json, written, ended } when the answer comes (`written`: the bytes sent by then;
 * `ended`: whether the body had been ended), or { timedOut: true } after `ms`.
 */
function chunkedPost(url, chunks, { everyMs = 20, end = true, ms = 20_000 } = {}) {
  return new Promise((resolve, reject) => {
    let written = 0;
    let ended = false;
    let answered = false;
    const req = http.request(url, { method: "POST", headers: { "content-type": "application/json" } }, (res) => {
      answered = true;
      let text = "";
      res.on("data", (d) => (text += d));
      res.on("end", () => {
        clearTimeout(timer);
        let json;
        try {
          json = JSON.parse(text);
        } catch {
          json = undefined;
        }
        resolve({ status: res.statusCode, json, text, written, ended });
        req.destroy();
      });
    });
    req.on("error", (e) => (answered ? undefined : reject(e)));
    const timer = setTimeout(() => {
      answered = true;
      req.destroy();
      resolve({ timedOut: true, written, ended });
    }, ms);
    (async () => {
      for (const chunk of chunks) {
        if (answered) return;
        req.write(chunk);
        written += Buffer.byteLength(chunk);
        await sleep(everyMs);
      }
      if (end && !answered) {
        ended = true;
        req.end();
      }
    })();
  });
}

test("a chunked body over MAX_REQUEST_BYTES gets HTTP 413 (-32005) while the client is still sending it; one within the limit is answered", async () => {
  const limit = 65_536;
  const s = await stack({ vars: { MAX_REQUEST_BYTES: String(limit) }, proxy: { strictNonce: false } });
  try {
    // Within the limit, in three chunks: relayed as before.
    const body = JSON.stringify({ jsonrpc: "2.0", id: 7, method: "eth_chainId", params: [] });
    const small = await chunkedPost(s.relay.url, [body.slice(0, 10), body.slice(10, 30), body.slice(30)]);
    assert.equal(small.status, 200, small.text);
    assert.equal(small.json?.result, "0x7a69", small.text);
    // A client that sends 8 KiB chunks slowly, up to 4 times the limit, and never ends its body.
    const chunk = "x".repeat(8_192);
    const slow = await chunkedPost(s.relay.url, Array.from({ length: (4 * limit) / chunk.length }, () => chunk), { everyMs: 50, end: false });
    assert.ok(!slow.timedOut, `no answer while the body was open (${slow.written} bytes sent)`);
    assert.equal(slow.ended, false, "the body never ended");
    assert.ok(slow.written < 4 * limit, `answered before the client had sent all it had: ${slow.written} bytes`);
    assert.equal(slow.status, 413, slow.text);
    assert.equal(slow.json?.error?.code, -32005, slow.text);
    assert.match(slow.json.error.message, /exceeds 65536 bytes/);
    // The relay still serves.
    const after = await post(s.relay.url, body);
    assert.equal(after.json?.result, "0x7a69", after.text);
  } finally {
    await s.stop();
  }
});

test("an id beyond 64 bits comes back exactly: a read relayed to anvil (which refuses such an id), a send, an error, a batch, and over a WebSocket", async () => {
  const s = await stack({ proxy: { strictNonce: false } });
  try {
    const big = "12345678901234567890123";
    const read = await post(s.relay.url, `{"jsonrpc":"2.0","id":${big},"method":"eth_chainId","params":[]}`);
    assert.match(read.text, new RegExp(`"id":${big},"result":"0x7a69"`), read.text);
    const raw = await signTransfer(devAccount(3), 0);
    const batch = await post(
      s.relay.url,
      `[{"jsonrpc":"2.0","id":${big}1,"method":"eth_sendRawTransaction","params":["${raw}"]},` +
        `{"jsonrpc":"2.0","id":-${big},"method":"eth_sendRawTransaction","params":["0x1234"]},` +
        `{"jsonrpc":"2.0","id":1.5e40,"method":"eth_blockNumber","params":[]}]`,
    );
    for (const id of [`${big}1`, `-${big}`, "1.5e40"]) assert.ok(batch.text.includes(`"id":${id},`), `${id}: ${batch.text}`);
    assert.match(batch.text, new RegExp(`"id":${big}1,"result":"${keccak256(raw)}"`), batch.text);
    // Over a WebSocket: the raw message text.
    const ws = new WebSocket(s.relay.url.replace(/^http/, "ws"));
    await new Promise((resolve, reject) => (ws.on("open", resolve), ws.on("error", reject)));
    const message = new Promise((resolve) => ws.once("message", (data) => resolve(String(data))));
    ws.send(`{"jsonrpc":"2.0","id":${big},"method":"eth_chainId","params":[]}`);
    const text = await message;
    ws.close();
    assert.match(text, new RegExp(`"id":${big},"result":"0x7a69"`), text);
  } finally {
    await s.stop();
  }
});
