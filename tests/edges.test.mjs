// The edges of issue 32 that are the platform's: what a client asks cannot cool an upstream (six
// wide eth_getLogs outlasting UPSTREAM_TIMEOUT_MS on both of two upstreams), and a broadcast
// leaves a cooling upstream out. The compiled relay on workerd, a real anvil behind recording
// test proxies.
import { test } from "node:test";
import assert from "node:assert/strict";
import { startAnvil, startProxy, startRelay, rpc, post, sleep, signTransfer, devAccount } from "./support/harness.mjs";

/** Every request object the proxy received (batch members one by one). */
const received = (proxy, from = 0) => proxy.requests.slice(from).flatMap((r) => (Array.isArray(r.body) ? r.body : [r.body]));

test("six wide eth_getLogs slower than UPSTREAM_TIMEOUT_MS on both upstreams: each client gets its error, no upstream cools, the preferred keeps serving", async () => {
  const anvil = await startAnvil();
  // Both nodes are healthy; only a client's wide query is slow on them.
  const slowLogs = (req) => (req?.method === "eth_getLogs" ? 2_000 : 0);
  const [a, b] = await Promise.all([0, 1].map(() => startProxy({ upstream: anvil.url, strictNonce: false, latency: slowLogs })));
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}`, UPSTREAM_TIMEOUT_MS: "500" } });
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
