// The public surface against hostile clients (issue 26): what reaches the upstream is what the
// relay checked, a client cannot take an upstream out of the rotation, filters and requests that
// may not be repeated stay on one node, a refusal waits for every node that has the bytes, reads
// leave no storage, the admin route is rate limited. The compiled relay on workerd, real anvils
// behind recording test proxies (one of them reading bodies the way a Go node does).
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync } from "node:fs";
import os from "node:os";
import path from "node:path";
import {
  stack,
  startAnvil,
  startProxy,
  startRelay,
  post,
  rpc,
  devAccount,
  signTransfer,
  minedCounts,
  objectDatabases,
  oneRateWindow,
  sleep,
} from "./support/harness.mjs";

/** Every request object the proxy received (batch members one by one), as it read them. */
const received = (proxy, from = 0) => proxy.requests.slice(from).flatMap((r) => (Array.isArray(r.body) ? r.body : [r.body]));

test("what reaches a Go node is what the relay checked: a case-variant member is refused (-32600), unknown members and escapes never go upstream", async () => {
  const s = await stack({ proxy: { goJson: true, strictNonce: false } });
  try {
    const account = devAccount(17);
    const [a, b] = await Promise.all([signTransfer(account, 0), signTransfer(account, 0, { value: 2n })]);
    const before = s.proxy.requests.length;
    // The method policy reads eth_chainId; a Go node would run debug_setHead.
    const bypass = await post(s.relay.url, '{"jsonrpc":"2.0","id":1,"method":"eth_chainId","Method":"debug_setHead","params":["0x0"]}');
    // The relay would decode and order A; a Go node would receive B.
    const swap = await post(s.relay.url, JSON.stringify({ jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: [a], Params: [b] }));
    const methods = received(s.proxy, before).map((r) => r?.method);
    assert.ok(!methods.includes("debug_setHead"), `the node ran ${methods.join(", ")}`);
    assert.deepEqual(s.proxy.seen.map((r) => r.hash), [], "no transaction reached the node");
    assert.equal(bypass.json.error?.code, -32600, bypass.text);
    assert.match(bypass.json.error.message, /"Method"/);
    assert.equal(swap.json.error?.code, -32600, swap.text);
    // A good request with an escaped method name and a member the relay does not know: the node
    // gets the four members the relay read, nothing else.
    const escaped = await post(
      s.relay.url,
      `{"jsonrpc":"2.0","id":3,"method":"eth_sendRawTransactio\\u006e","params":["${a}"],"extra":{"pad":"${"x".repeat(64)}"}}`,
    );
    assert.match(escaped.json.result, /^0x[0-9a-f]{64}$/, escaped.text);
    const sends = s.proxy.requests.filter((r) => r.body?.method === "eth_sendRawTransaction");
    assert.equal(sends.length, 1);
    assert.deepEqual(Object.keys(JSON.parse(sends[0].text)), ["jsonrpc", "id", "method", "params"], sends[0].text);
    assert.ok(!sends[0].text.includes("\\u006e") && !sends[0].text.includes("extra"), sends[0].text);
    assert.deepEqual(s.proxy.seen.map((r) => r.hash), [escaped.json.result]);
    const read = await post(s.relay.url, '{"jsonrpc":"2.0","id":4,"method":"eth_blockNumber","params":[],"padding":"xyz"}');
    assert.match(read.json.result, /^0x/);
    assert.ok(!s.proxy.requests.at(-1).text.includes("padding"), s.proxy.requests.at(-1).text);
  } finally {
    await s.stop();
  }
});

test("a send is known by its parsed method wherever it is routed: with SEND_BROADCAST=all an escaped method name still reaches every upstream", async () => {
  const anvil = await startAnvil();
  const [a, b] = await Promise.all([0, 1].map(() => startProxy({ upstream: anvil.url, strictNonce: false })));
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}`, SEND_BROADCAST: "all" } });
  try {
    const account = devAccount(18);
    const raw = await signTransfer(account, 0);
    const answer = await post(relay.url, `{"jsonrpc":"2.0","id":1,"method":"eth_sendRawTransactio\\u006e","params":["${raw}"]}`);
    assert.match(answer.json.result, /^0x/, answer.text);
    for (let i = 0; i < 40 && a.seen.length + b.seen.length < 2; i++) await sleep(50);
    assert.deepEqual([a.seen.length, b.seen.length], [1, 1], "broadcast to both");
    assert.deepEqual(await minedCounts(anvil.url, [account], 1), [1]);
  } finally {
    await relay.stop();
    await Promise.all([a.stop(), b.stop()]);
    anvil.stop();
  }
});

// Init code that reverts with Error("busy"): CODECOPY 100 bytes of revert data (at offset 12) to
// memory and REVERT them. eth_call of it answers "execution reverted: busy".
const REVERT_BUSY = `0x6064600c60003960646000fd08c379a0${"0".repeat(62)}20${"0".repeat(62)}04${Buffer.from("busy").toString("hex")}${"0".repeat(56)}`;

test("a client cannot take an upstream out of the rotation: reverts saying busy are answers, the preferred upstream keeps serving", async () => {
  const anvil = await startAnvil();
  const [a, b] = await Promise.all([0, 1].map(() => startProxy({ upstream: anvil.url, strictNonce: false })));
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}` } });
  try {
    for (let i = 0; i < 8; i++) {
      const answer = await rpc(relay.url, "eth_call", [{ data: REVERT_BUSY }, "latest"]);
      assert.match(answer.error?.message ?? "", /busy/, JSON.stringify(answer));
    }
    // geth's wording for a method it lacks contains "busy" too.
    const missing = await rpc(relay.url, "the_method_busy_does_not_exist", []);
    assert.ok(missing.error, JSON.stringify(missing));
    assert.deepEqual(relay.events("upstream_cooling"), [], "no upstream cooled down");
    const before = a.requests.length;
    await rpc(relay.url, "eth_getBalance", ["0x000000000000000000000000000000000000dEaD", "latest"]);
    assert.equal(a.requests.length, before + 1, "the preferred upstream still answers");
    // Not a move: a call the preferred was not asked at all (the first, when the other
    // upstream's chain check ended first), and a hedge (the preferred had not answered within its
    // hedge delay). An eth_call moved on reaches the second upstream after the preferred's answer.
    const atA = a.requests.filter((r) => r.body?.method === "eth_call");
    const moved = b.requests
      .filter((r) => r.body?.method === "eth_call")
      .filter((r) => atA.some((q) => q.at <= r.at))
      .filter((r) => !atA.some((q) => q.at <= r.at && r.at < (q.answeredAt ?? Infinity))).length;
    assert.equal(moved, 0, `the second upstream got ${moved} eth_call after the preferred's answer: none was moved on`);
  } finally {
    await relay.stop();
    await Promise.all([a.stop(), b.stop()]);
    anvil.stop();
  }
});

test("reads leave no storage: 1,000 random senders' pending counts and transaction statuses leave no more Durable Object databases than before", async () => {
  const persist = mkdtempSync(path.join(os.tmpdir(), "relay-reads-"));
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
  let relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url }, persist });
  try {
    // One sender that did send: its storage is the "before".
    const account = devAccount(19);
    const sent = await post(relay.url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [await signTransfer(account, 0)] });
    assert.match(sent.json.result, /^0x/);
    await relay.stop();
    const before = objectDatabases(persist);
    relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url }, persist });
    const random = () => `0x${Buffer.from(crypto.getRandomValues(new Uint8Array(20))).toString("hex")}`;
    const senders = Array.from({ length: 1_000 }, random);
    for (let i = 0; i < senders.length; i += 25) {
      await Promise.all(
        senders.slice(i, i + 25).map(async (sender) => {
          const count = await rpc(relay.url, "eth_getTransactionCount", [sender, "pending"]);
          assert.equal(count.result, "0x0", JSON.stringify(count));
          const status = await fetch(`${relay.url}/tx/0x${"ab".repeat(32)}?sender=${sender}`);
          assert.equal(status.status, 404);
          await status.text();
        }),
      );
    }
    await relay.stop();
    relay = null;
    const after = objectDatabases(persist);
    console.log(`object databases: ${before.length} before, ${after.length} after 1,000 senders read`);
    // The sender that sent may have settled and emptied its own storage meanwhile (its check's
    // alarm runs on the restarted relay): fewer is fine, a database no one had before is not.
    const made = after.filter((f) => !before.includes(f));
    assert.deepEqual(made, [], `databases made by reads: ${made.join(", ")}`);
  } finally {
    await relay?.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("a refusal waits for every upstream that was sent the bytes: a slow upstream's acceptance wins over a fast one's refusal", async () => {
  const anvil = await startAnvil();
  const isSend = (req) => req?.method === "eth_sendRawTransaction";
  const slow = await startProxy({ upstream: anvil.url, strictNonce: false, latency: (req) => (isSend(req) ? 2_500 : 0) });
  const refusing = await startProxy({
    upstream: anvil.url,
    strictNonce: false,
    fault: (req) => (isSend(req) ? { body: JSON.stringify({ jsonrpc: "2.0", id: req.id, error: { code: -32000, message: "transaction underpriced" } }) } : null),
  });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${slow.url},${refusing.url}` } });
  try {
    const account = devAccount(11);
    const raw = await signTransfer(account, 0);
    const answer = await post(relay.url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    assert.ok(refusing.requests.some((r) => isSend(r.body)), "the send was hedged to the refusing upstream");
    assert.match(answer.json.result ?? "", /^0x[0-9a-f]{64}$/, `the client got ${answer.text}`);
    assert.deepEqual(await minedCounts(anvil.url, [account], 1), [1]);
    const disagreement = relay.events("upstream_disagreement");
    assert.equal(disagreement[0]?.label, "accepted_after_refusal", JSON.stringify(disagreement));
  } finally {
    await relay.stop();
    await Promise.all([slow.stop(), refusing.stop()]);
    anvil.stop();
  }
});

test("filters stay on the preferred upstream and a method that may not be repeated is never hedged: eth_getFilterChanges finds its filter", async () => {
  // Two nodes of one chain id with a state of their own each: a filter lives on the one that made it.
  const anvils = await Promise.all([0, 1].map(() => startAnvil({ extraArgs: ["--block-time", "1"] })));
  const slowly = new Set(["eth_newBlockFilter", "anvil_mine"]);
  const a = await startProxy({ upstream: anvils[0].url, strictNonce: false, latency: (req) => (slowly.has(req?.method) ? 1_500 : 0) });
  const b = await startProxy({ upstream: anvils[1].url, strictNonce: false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}` } });
  try {
    for (let i = 0; i < 5; i++) await rpc(relay.url, "eth_blockNumber"); // the hedge delay learns a's speed
    const { result: filter } = await rpc(relay.url, "eth_newBlockFilter");
    assert.match(filter, /^0x/);
    await sleep(2_200);
    const changes = await rpc(relay.url, "eth_getFilterChanges", [filter]);
    assert.ok(Array.isArray(changes.result), `eth_getFilterChanges: ${JSON.stringify(changes)}`);
    assert.ok(changes.result.length >= 1, "new blocks seen");
    const mined = await rpc(relay.url, "anvil_mine", ["0x1"]);
    assert.ok(!mined.error, JSON.stringify(mined));
    const filterCalls = received(b).filter((r) => /Filter/.test(r?.method ?? "")).map((r) => r.method);
    assert.deepEqual(filterCalls, [], "no filter call reached the second upstream");
    assert.equal(received(b).filter((r) => r?.method === "anvil_mine").length, 0, "anvil_mine went to one node only");
  } finally {
    await relay.stop();
    await Promise.all([a.stop(), b.stop()]);
    anvils.forEach((x) => x.stop());
  }
});

test("GET /senders/{address} counts against the read rate limit: token guesses cost the guesser", async () => {
  const s = await stack({
    vars: { ADMIN_TOKEN: "s3cret-token", RATE_LIMIT_PERIOD_S: "60" },
    ratelimits: { RATE_LIMIT_READ: { simple: { limit: 3, period: 60 } } },
  });
  try {
    await oneRateWindow(60);
    const statuses = [];
    for (const token of ["guess-1", "guess-2", "guess-3", "s3cret-token", "guess-5"]) {
      const r = await fetch(`${s.relay.url}/senders/0x000000000000000000000000000000000000dEaD`, {
        headers: { authorization: `Bearer ${token}`, "cf-connecting-ip": "203.0.113.9" },
      });
      await r.text();
      statuses.push(r.status);
    }
    assert.deepEqual(statuses, [401, 401, 401, 429, 429]);
    const other = await fetch(`${s.relay.url}/senders/0x000000000000000000000000000000000000dEaD`, {
      headers: { authorization: "Bearer s3cret-token", "cf-connecting-ip": "198.51.100.1" },
    });
    assert.equal(other.status, 200, await other.text());
  } finally {
    await s.stop();
  }
});
