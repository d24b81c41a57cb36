// A public endpoint: CORS for browser dapps, rate limits per client IP, the method policy,
// request ids, and the upstream URL (with its key) never shown, whatever goes wrong. The compiled
// relay on workerd (miniflare, with its simulated rate limit bindings), anvil behind the test proxy.
import { test } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { stack, startAnvil, startRelay, freePort, post, rpc, sendRaw, devAccount, signTransfer, sleep, oneRateWindow } from "./support/harness.mjs";

const ORIGIN = "https://dapp.example";

test("CORS: a preflight gets 204 with the allowed methods and headers; every answer carries the allow-origin header", async () => {
  const s = await stack({ vars: { MAX_REQUEST_BYTES: "2000" } });
  try {
    const preflight = await fetch(`${s.relay.url}/`, {
      method: "OPTIONS",
      headers: { origin: ORIGIN, "access-control-request-method": "POST", "access-control-request-headers": "content-type" },
    });
    assert.equal(preflight.status, 204);
    assert.equal(preflight.headers.get("access-control-allow-origin"), "*");
    assert.equal(preflight.headers.get("access-control-allow-methods"), "POST, GET, OPTIONS");
    assert.match(preflight.headers.get("access-control-allow-headers"), /content-type/);
    assert.equal(preflight.headers.get("access-control-max-age"), "86400");
    const answers = {
      ok: await fetch(`${s.relay.url}/`, { method: "POST", headers: { origin: ORIGIN, "content-type": "application/json" }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' }),
      parseError: await fetch(`${s.relay.url}/`, { method: "POST", headers: { origin: ORIGIN }, body: "{nope" }),
      tooLarge: await fetch(`${s.relay.url}/`, { method: "POST", headers: { origin: ORIGIN }, body: "x".repeat(3000) }),
      wrongMethod: await fetch(`${s.relay.url}/`, { headers: { origin: ORIGIN } }),
      notFound: await fetch(`${s.relay.url}/nope`, { headers: { origin: ORIGIN } }),
      health: await fetch(`${s.relay.url}/health`, { headers: { origin: ORIGIN } }),
    };
    assert.deepEqual(
      Object.fromEntries(Object.entries(answers).map(([k, r]) => [k, [r.status, r.headers.get("access-control-allow-origin")]])),
      { ok: [200, "*"], parseError: [200, "*"], tooLarge: [413, "*"], wrongMethod: [405, "*"], notFound: [404, "*"], health: [200, "*"] },
    );
    assert.match(answers.ok.headers.get("access-control-expose-headers"), /x-request-id/);
  } finally {
    await s.stop();
  }
});

test("CORS_ORIGINS as a list: a listed origin is echoed with Vary: Origin, another gets no allow-origin", async () => {
  const s = await stack({ vars: { CORS_ORIGINS: `https://other.example, ${ORIGIN}` } });
  try {
    const ask = (origin) => fetch(`${s.relay.url}/`, { method: "POST", headers: { origin }, body: '{"jsonrpc":"2.0","id":1,"method":"eth_chainId"}' });
    const listed = await ask(ORIGIN);
    assert.equal(listed.headers.get("access-control-allow-origin"), ORIGIN);
    assert.equal(listed.headers.get("vary"), "Origin");
    const other = await ask("https://evil.example");
    assert.equal(other.headers.get("access-control-allow-origin"), null);
    assert.equal(other.headers.get("vary"), "Origin");
    const preflight = await fetch(`${s.relay.url}/`, { method: "OPTIONS", headers: { origin: ORIGIN } });
    assert.equal(preflight.headers.get("access-control-allow-origin"), ORIGIN);
  } finally {
    await s.stop();
  }
});

test("rate limits per client IP: over the limit, HTTP 429, -32005 and Retry-After; sends and reads counted apart, each batch member counted", async () => {
  const s = await stack({
    vars: { RATE_LIMIT_PERIOD_S: "60" },
    ratelimits: { RATE_LIMIT_SEND: { simple: { limit: 3, period: 60 } }, RATE_LIMIT_READ: { simple: { limit: 5, period: 60 } } },
  });
  try {
    const account = devAccount(15);
    const from = (ip) => ({ "cf-connecting-ip": ip, origin: ORIGIN });
    const batch = await Promise.all([0, 1, 2].map(async (n) => ({ jsonrpc: "2.0", id: n, method: "eth_sendRawTransaction", params: [await signTransfer(account, n)] })));
    await oneRateWindow(60);
    const three = await post(s.relay.url, batch, from("203.0.113.1"));
    assert.equal(three.status, 200);
    assert.ok(three.json.every((a) => a.result), three.text);
    const fourth = await post(s.relay.url, { jsonrpc: "2.0", id: 9, method: "eth_sendRawTransaction", params: [await signTransfer(account, 3)] }, from("203.0.113.1"));
    assert.equal(fourth.status, 429, fourth.text);
    assert.deepEqual(fourth.json, { jsonrpc: "2.0", id: 9, error: { code: -32005, message: "rate limit exceeded" } });
    const raw = await fetch(`${s.relay.url}/`, { method: "POST", headers: from("203.0.113.1"), body: JSON.stringify({ jsonrpc: "2.0", id: 10, method: "eth_sendRawTransaction", params: ["0x00"] }) });
    assert.equal(raw.status, 429);
    assert.equal(raw.headers.get("retry-after"), "60");
    assert.equal(raw.headers.get("access-control-allow-origin"), "*", "a 429 carries CORS too");
    assert.equal(s.proxy.seen.length, 3, "the refused ones reached nothing");
    // Reads have their own limit; another client has its own budget.
    assert.equal((await post(s.relay.url, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber" }, from("203.0.113.1"))).status, 200);
    const reads = Array.from({ length: 5 }, (_, i) => ({ jsonrpc: "2.0", id: i, method: "eth_blockNumber" }));
    const overReads = await post(s.relay.url, reads, from("203.0.113.1"));
    assert.equal(overReads.status, 429, "1 + 5 reads > 5");
    assert.equal(overReads.json.length, 5);
    const other = await post(s.relay.url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [await signTransfer(account, 3)] }, from("198.51.100.7"));
    assert.equal(other.status, 200, other.text);
  } finally {
    await s.stop();
  }
});

test("method policy: node administration and key-using methods get -32601 and never reach the upstream; METHOD_ALLOWLIST and METHOD_DENYLIST", async () => {
  const s = await stack({ vars: { METHOD_ALLOWLIST: "txpool_status", METHOD_DENYLIST: "eth_getLogs" } });
  try {
    const before = s.proxy.requests.length;
    for (const method of ["admin_peers", "debug_traceTransaction", "personal_listAccounts", "miner_start", "engine_getPayloadV4", "txpool_content", "eth_sign", "eth_signTypedData_v4", "eth_sendTransaction", "eth_getLogs"]) {
      const answer = await rpc(s.relay.url, method, []);
      assert.deepEqual(answer.error, { code: -32601, message: `method not allowed: ${method}` }, method);
    }
    assert.equal(s.proxy.requests.length, before, "nothing refused reached the upstream");
    const allowed = await rpc(s.relay.url, "txpool_status", []);
    assert.ok(allowed.result, JSON.stringify(allowed));
    assert.ok((await rpc(s.relay.url, "eth_blockNumber")).result);
  } finally {
    await s.stop();
  }
});

test("X-Request-Id: a sane one is kept, anything else replaced by a UUID; it is on the answer and in every log line of the request", async () => {
  const s = await stack();
  try {
    const account = devAccount(16);
    const kept = await fetch(`${s.relay.url}/`, {
      method: "POST",
      headers: { "x-request-id": "wallet-7f3a:1" },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [await signTransfer(account, 0)] }),
    });
    assert.equal(kept.headers.get("x-request-id"), "wallet-7f3a:1");
    const lines = s.relay.logs.filter((l) => l.includes('"event"'));
    const forwarded = s.relay.events("tx_forwarded");
    assert.equal(forwarded.length, 1);
    assert.equal(forwarded[0].request_id, "wallet-7f3a:1", lines.join("\n"));
    for (const bad of ["has space", '"},{"event":"forged', "x".repeat(200)]) {
      const replaced = await fetch(`${s.relay.url}/health`, { headers: { "x-request-id": bad } });
      assert.match(replaced.headers.get("x-request-id"), /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    }
    const fresh = await fetch(`${s.relay.url}/health`);
    assert.match(fresh.headers.get("x-request-id"), /^[0-9a-f-]{36}$/);
  } finally {
    await s.stop();
  }
});

/** A local upstream that misbehaves as `how` says, with the key in its own URL's path. */
async function badUpstream(how) {
  const port = await freePort();
  const key = "k3yAbCdEf0123456789";
  const url = `http://127.0.0.1:${port}/v3/${key}`;
  const server = http.createServer(async (req, res) => {
    for await (const _ of req);
    if (how === "slow") return; // never answers
    if (how === "500") {
      res.writeHead(500, { "content-type": "application/json" });
      return res.end(JSON.stringify({ jsonrpc: "2.0", id: 1, error: { code: -32603, message: `internal error calling ${url} (key ${key})` } }));
    }
    if (how === "500-text") {
      res.writeHead(500, { "content-type": "text/plain" });
      return res.end(`upstream ${url} failed`);
    }
    if (how === "redirect") {
      res.writeHead(307, { location: `http://127.0.0.1:${port}/v4/${key}` });
      return res.end(`moved to /v4/${key}`);
    }
  });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  return { url, key, port, stop: () => new Promise((r) => { server.closeAllConnections(); server.close(r); }) };
}

for (const how of ["refused", "slow", "500", "500-text", "redirect"]) {
  test(`the upstream URL and its key never show, in answers or logs, when the upstream ${how === "refused" ? "refuses connections" : how === "slow" ? "times out" : how === "redirect" ? "redirects" : `answers ${how}`}`, async () => {
    const up = await badUpstream(how);
    if (how === "refused") await up.stop();
    const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: up.url, UPSTREAM_TIMEOUT_MS: "300", LOCK_MAX_HOLD_MS: "1500", ADMIN_TOKEN: "t" } });
    try {
      const account = devAccount(17);
      const answers = [
        await sendRaw(relay.url, await signTransfer(account, 0)),
        await post(relay.url, { jsonrpc: "2.0", id: 2, method: "eth_blockNumber" }),
        await post(relay.url, [{ jsonrpc: "2.0", id: 3, method: "eth_gasPrice" }, { jsonrpc: "2.0", id: 4, method: "eth_getTransactionCount", params: [account.address, "pending"] }]),
      ];
      for (const a of answers) assert.ok(a.json, `a JSON-RPC answer: ${a.text}`);
      assert.ok(answers[0].json.error, answers[0].text);
      const view = await fetch(`${relay.url}/senders/${account.address}`, { headers: { authorization: "Bearer t" } });
      const everything = [...answers.map((a) => a.text), await view.text(), ...relay.logs].join("\n");
      for (const secret of [up.key, up.url, `127.0.0.1:${up.port}`]) {
        assert.ok(!everything.includes(secret), `${secret} leaked:\n${everything.split("\n").filter((l) => l.includes(secret)).join("\n")}`);
      }
    } finally {
      await relay.stop();
      if (how !== "refused") await up.stop();
    }
  });
}
