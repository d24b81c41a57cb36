// JSON-RPC over a WebSocket (issue 18): the compiled relay on workerd, anvil mining a block every
// second behind the strict-nonce test proxy (which passes WebSocket upgrades through to anvil and
// can cut them), and real clients: viem's webSocket transport, ethers' WebSocketProvider, and raw
// sockets (the `ws` package) where a test needs to see frames and close codes.
import { test } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { createPublicClient, webSocket, keccak256, getContractAddress } from "viem";
import { foundry } from "viem/chains";
import { WebSocketProvider } from "ethers";
import { stack, devAccount, signTransfer, minedCounts, sleep, openSocket, rpc, oneRateWindow } from "./support/harness.mjs";

const SENDERS = 10;
const PER_SENDER = 10;

const wsUrl = (relay) => relay.url.replace(/^http/, "ws");

function shuffle(list) {
  const out = [...list];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

/**
 * Waits until `blocks` (block numbers seen) reaches 9 past the first one seen, at most `ms`; the
 * time it took. A count in a fixed time would fail on a slow machine; a block missed would not
 * come back by waiting longer.
 */
async function tenBlocks(blocks, ms = 60_000) {
  const started = performance.now();
  while (!(blocks.size && Math.max(...blocks) >= Math.min(...blocks) + 9) && performance.now() - started < ms) await sleep(100);
  return performance.now() - started;
}

/** Upstream refusals of transactions the relay sent (the strict proxy's "Nonce too low/high"). */
const rejections = (proxy) => proxy.seen.filter((r) => r.answeredAt && !r.accepted);

const blockStack = (vars = {}) => {
  const senderOfRaw = new Map();
  return stack({
    anvil: { accounts: SENDERS + 2, extraArgs: ["--block-time", "1"] },
    proxy: { senderOf: (raw) => senderOfRaw.get(raw) },
    vars,
  }).then((s) => Object.assign(s, { senderOfRaw }));
};

test("viem webSocket transport: watchBlocks sees at least 9 of 10 consecutive blocks, and 10 shuffled sends on the one socket are all mined, 0 upstream rejections", async () => {
  const s = await blockStack();
  const client = createPublicClient({ chain: foundry, transport: webSocket(wsUrl(s.relay)) });
  try {
    const blocks = new Set();
    const unwatch = client.watchBlocks({ onBlock: (b) => blocks.add(Number(b.number)), onError: () => {} });
    const account = devAccount(1);
    const raws = await Promise.all(Array.from({ length: PER_SENDER }, (_, n) => signTransfer(account, n)));
    raws.forEach((raw) => s.senderOfRaw.set(raw, account.address.toLowerCase()));
    const hashes = await Promise.all(shuffle(raws).map((raw) => client.request({ method: "eth_sendRawTransaction", params: [raw] })));
    assert.equal(hashes.length, PER_SENDER);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h)), JSON.stringify(hashes));
    const waited = await tenBlocks(blocks);
    assert.ok(s.proxy.webSocketCount() >= 1, "newHeads came over the upstream's WebSocket");
    unwatch();
    console.log(`viem watchBlocks: ${blocks.size} blocks in ${(waited / 1000).toFixed(1)} s`);
    const start = Math.min(...blocks);
    const inWindow = [...blocks].filter((n) => n < start + 10).length;
    assert.ok(inWindow >= 9, `blocks seen: ${[...blocks].join(",")}`);
    assert.deepEqual(await minedCounts(s.anvil.url, [account], PER_SENDER), [PER_SENDER]);
    assert.deepEqual(rejections(s.proxy), []);
    // Mined in nonce order: each one in a later block than the one before it, or later in the same block.
    const receipts = await Promise.all(raws.map((raw) => client.getTransactionReceipt({ hash: keccak256(raw) })));
    for (let n = 1; n < PER_SENDER; n++) {
      const [a, b] = [receipts[n - 1], receipts[n]];
      assert.ok(b.blockNumber > a.blockNumber || (b.blockNumber === a.blockNumber && b.transactionIndex > a.transactionIndex));
    }
  } finally {
    await client.transport.getRpcClient().then((c) => c.close()).catch(() => {});
    await s.stop();
  }
});

test("ethers WebSocketProvider: on('block') sees at least 9 of 10 consecutive blocks", async () => {
  const s = await blockStack();
  const provider = new WebSocketProvider(wsUrl(s.relay));
  try {
    const blocks = new Set();
    await provider.on("block", (n) => blocks.add(n));
    const waited = await tenBlocks(blocks);
    assert.ok(s.proxy.webSocketCount() >= 1, "newHeads came over the upstream's WebSocket");
    console.log(`ethers on('block'): ${blocks.size} blocks in ${(waited / 1000).toFixed(1)} s`);
    const start = Math.min(...blocks);
    const inWindow = [...blocks].filter((n) => n < start + 10).length;
    assert.ok(inWindow >= 9, `blocks seen: ${[...blocks].join(",")}`);
    assert.equal(Number(await provider.send("eth_chainId", [])), 31337);
  } finally {
    await provider.destroy();
    await s.stop();
  }
});

test("10 sockets, one per sender, 10 shuffled sends each through the strict-nonce upstream: 100/100 hashes, all mined, 0 upstream nonce rejections", async () => {
  const s = await blockStack();
  try {
    const accounts = Array.from({ length: SENDERS }, (_, i) => devAccount(i + 1));
    const sockets = await Promise.all(accounts.map(() => openSocket(wsUrl(s.relay))));
    const bursts = await Promise.all(
      accounts.map(async (a) => {
        const raws = await Promise.all(Array.from({ length: PER_SENDER }, (_, n) => signTransfer(a, n)));
        raws.forEach((raw) => s.senderOfRaw.set(raw, a.address.toLowerCase()));
        return raws;
      }),
    );
    const started = performance.now();
    const answers = await Promise.all(
      sockets.flatMap((socket, i) => shuffle(bursts[i]).map((raw) => socket.call("eth_sendRawTransaction", [raw]))),
    );
    const wall = performance.now() - started;
    const hashes = answers.filter((a) => /^0x[0-9a-f]{64}$/.test(a.result ?? ""));
    assert.equal(hashes.length, SENDERS * PER_SENDER, JSON.stringify(answers.filter((a) => !a.result).slice(0, 3)));
    const mined = await minedCounts(s.anvil.url, accounts, PER_SENDER, 15_000);
    // A sender short of its 10 (seen once, in a loaded run): what reached the upstream of it, and
    // what the node holds, so that a failure says where its transactions stopped.
    const short = await Promise.all(
      accounts
        .map((a, i) => [a, mined[i], i])
        .filter(([, n]) => n !== PER_SENDER)
        .map(async ([a, n, i]) => ({
          sender: a.address,
          mined: n,
          // Slow or lost: 15 s more.
          minedLater: (await minedCounts(s.anvil.url, [a], PER_SENDER, 15_000))[0],
          pending: Number(BigInt((await rpc(s.anvil.url, "eth_getTransactionCount", [a.address, "pending"])).result)),
          atUpstream: s.proxy.seen
            .filter((r) => r.sender === a.address.toLowerCase())
            .map((r) => `${r.nonce}${r.accepted ? "" : r.answeredAt ? " refused" : " unanswered"}${r.dropped ? " dropped" : ""}`),
          answers: answers.slice(i * PER_SENDER, (i + 1) * PER_SENDER).map((x) => x.result ?? x.error?.message),
        })),
    );
    assert.deepEqual(mined, accounts.map(() => PER_SENDER), JSON.stringify(short));
    assert.deepEqual(rejections(s.proxy), []);
    console.log(`10 sockets x 10 sends: wall ${wall.toFixed(0)} ms, ${s.proxy.seen.length} sends upstream`);
    sockets.forEach((socket) => socket.ws.close());
  } finally {
    await s.stop();
  }
});

test("a newHeads subscription survives its upstream socket dropping: same id, no block missed; an upstream gone for longer than WS_UPSTREAM_RECONNECT_MS closes the client's socket with 1013", async () => {
  const s = await blockStack({ WS_UPSTREAM_RECONNECT_MS: "4000" });
  try {
    const socket = await openSocket(wsUrl(s.relay));
    const { result: id } = await socket.call("eth_subscribe", ["newHeads"]);
    assert.match(id, /^0x[0-9a-f]{32}$/);
    const heads = () => socket.inbox.filter((m) => m.method === "eth_subscription").map((m) => m.params);
    await socket.next((m) => m.method === "eth_subscription", 5_000);
    // Dropped for 2.5 s (new upstream sockets refused meanwhile): two or three blocks mined.
    s.proxy.refuseWebSockets(2_500);
    await sleep(6_000);
    // Six heads in all (the drop and more behind them), however long a slow machine takes.
    for (let i = 0; i < 200 && heads().length < 6; i++) await sleep(100);
    const seen = heads();
    assert.ok(seen.every((p) => p.subscription === id), "every notification under the client's id");
    const numbers = seen.map((p) => Number(p.result.number));
    for (let i = 1; i < numbers.length; i++) assert.equal(numbers[i], numbers[i - 1] + 1, `heads ${numbers.join(",")}`);
    assert.ok(numbers.length >= 6, `heads ${numbers.join(",")}`);
    const resumed = s.relay.events("ws_upstream_resumed");
    assert.ok(resumed.length >= 1);
    console.log(`heads ${numbers.join(",")}; upstream socket back after ${resumed[0].after_ms} ms, ${resumed[0].attempts} attempts`);
    // Gone for good (longer than the 3 s budget): an error, then a close with 1013.
    s.proxy.refuseWebSockets(60_000);
    const closed = await Promise.race([socket.closed, sleep(10_000).then(() => null)]);
    assert.ok(closed, "the client's socket was closed");
    assert.equal(closed.code, 1013);
    assert.match(closed.reason, /upstream WebSocket lost/);
    const error = socket.inbox.find((m) => m.id === null && m.error);
    assert.equal(error.error.code, -32002);
  } finally {
    await s.stop();
  }
});

// Init code of a contract whose every call emits one log (LOG0 of no data): runtime 0x60006000a000.
const LOGGER_INIT = "0x6560006000a0006000526006601af3";

test("a logs subscription across a dropped upstream socket: every call's log delivered exactly once, the gap's fetched with eth_getLogs", async () => {
  const s = await blockStack();
  try {
    const account = devAccount(6);
    const socket = await openSocket(wsUrl(s.relay));
    const deploy = await signTransfer(account, 0, { to: null, value: 0n, data: LOGGER_INIT, gas: 100_000n });
    s.senderOfRaw.set(deploy, account.address.toLowerCase());
    assert.match((await socket.call("eth_sendRawTransaction", [deploy])).result, /^0x/);
    const address = getContractAddress({ from: account.address, nonce: 0n });
    for (let i = 0; i < 50 && (await socket.call("eth_getCode", [address, "latest"])).result === "0x"; i++) await sleep(200);
    const { result: id } = await socket.call("eth_subscribe", ["logs", { address }]);
    const calls = [];
    const call = async (nonce) => {
      const raw = await signTransfer(account, nonce, { to: address, value: 0n, gas: 30_000n });
      s.senderOfRaw.set(raw, account.address.toLowerCase());
      calls.push((await socket.call("eth_sendRawTransaction", [raw])).result);
    };
    // A call every 300 ms for 7.5 s; the upstream socket cut and refused for 2.5 s in the middle.
    let nonce = 1;
    const sending = (async () => {
      for (; nonce <= 25; nonce++) {
        await call(nonce);
        await sleep(300);
      }
    })();
    await sleep(2_500);
    s.proxy.refuseWebSockets(2_500);
    await sending;
    assert.deepEqual(await minedCounts(s.anvil.url, [account], 26, 10_000), [26]);
    // The last block's logs on their way: wait for one per call (at most 20 s), then a moment
    // more for any that would come twice.
    const delivered = () => socket.inbox.filter((m) => m.method === "eth_subscription").length;
    for (let i = 0; i < 200 && delivered() < calls.length; i++) await sleep(100);
    await sleep(1_000);
    const logs = socket.inbox.filter((m) => m.method === "eth_subscription").map((m) => m.params);
    assert.ok(logs.every((p) => p.subscription === id));
    const keys = logs.map((p) => `${p.result.blockHash}:${p.result.logIndex}`);
    assert.equal(new Set(keys).size, keys.length, "no log twice");
    const txs = new Set(logs.map((p) => p.result.transactionHash));
    const missing = calls.filter((h) => !txs.has(h));
    const gap = s.relay.events("ws_logs_gap");
    console.log(`logs: ${logs.length} delivered for ${calls.length} calls, missing ${missing.length}; gap fetch: ${JSON.stringify(gap[0])}`);
    assert.deepEqual(missing, []);
    assert.equal(logs.length, calls.length);
    assert.ok(gap.length >= 1 && gap[0].sent >= 1, "the gap's logs came from the fetch");
    socket.ws.close();
  } finally {
    await s.stop();
  }
});

test("limits: a message over WS_MAX_MESSAGE_BYTES gets an error then close 1009; one subscription over WS_MAX_SUBSCRIPTIONS gets an error then close 1008; an idle socket is closed after WS_IDLE_TIMEOUT_S", async () => {
  const s = await blockStack({ WS_MAX_MESSAGE_BYTES: "2000", WS_MAX_SUBSCRIPTIONS: "2", WS_IDLE_TIMEOUT_S: "3" });
  try {
    const big = await openSocket(wsUrl(s.relay));
    big.send(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "eth_call", params: [{ data: `0x${"00".repeat(1_100)}` }, "latest"] }));
    const tooBig = await big.closed;
    assert.equal(tooBig.code, 1009);
    assert.equal(big.inbox[0].error.code, -32005);
    assert.match(big.inbox[0].error.message, /message exceeds 2000 bytes/);

    const subs = await openSocket(wsUrl(s.relay));
    assert.ok((await subs.call("eth_subscribe", ["newHeads"])).result);
    assert.ok((await subs.call("eth_subscribe", ["logs", {}])).result);
    const third = await subs.call("eth_subscribe", ["newPendingTransactions"]);
    assert.equal(third.error.code, -32005);
    const tooMany = await subs.closed;
    assert.equal(tooMany.code, 1008);
    assert.match(tooMany.reason, /more than 2 subscriptions/);

    const idle = await openSocket(wsUrl(s.relay));
    const opened = performance.now();
    const idleClose = await idle.closed;
    const after = idleClose.at - opened;
    console.log(`# idle socket closed after ${after.toFixed(0)} ms (WS_IDLE_TIMEOUT_S 3)`);
    assert.equal(idleClose.code, 1000);
    assert.match(idleClose.reason, /idle for 3 s/);
    assert.equal(idle.inbox[0].error.code, -32005);
    // Closed for being idle, after the timeout by the relay's own measure (its ws_closed line,
    // written once the socket is done; no upper bound on the test's clock).
    let idleLine;
    for (let i = 0; i < 100 && !idleLine; i++) {
      idleLine = s.relay.events("ws_closed").find((e) => e.why === "idle");
      if (!idleLine) await sleep(50);
    }
    assert.ok(idleLine, s.relay.logs.join("\n"));
    assert.equal(idleLine.messages, 0, "nothing came from the client");
    assert.ok(idleLine.duration_ms >= 3_000, `the relay closed it after ${idleLine.duration_ms} ms open`);
  } finally {
    await s.stop();
  }
});

test("one socket: answers by id out of request order, batches mixing subscriptions and reads, bad subscriptions refused, the method policy applies, protocol pings are answered", async () => {
  const s = await blockStack({ METHOD_DENYLIST: "eth_getLogs" });
  try {
    const socket = await openSocket(wsUrl(s.relay));
    const pong = new Promise((resolve) => socket.ws.once("pong", resolve));
    socket.ws.ping();
    await pong;
    socket.send([
      { jsonrpc: "2.0", id: "a", method: "eth_subscribe", params: ["newHeads"] },
      { jsonrpc: "2.0", id: "b", method: "eth_chainId", params: [] },
      { jsonrpc: "2.0", method: "eth_blockNumber", params: [] },
      { jsonrpc: "2.0", id: "c", method: "eth_subscribe", params: ["syncing"] },
      { jsonrpc: "2.0", id: "d", method: "eth_getLogs", params: [{}] },
    ]);
    const batch = await socket.next(Array.isArray);
    assert.deepEqual(batch.map((m) => m.id), ["a", "b", "c", "d"]);
    assert.match(batch[0].result, /^0x[0-9a-f]{32}$/);
    assert.equal(batch[1].result, "0x7a69");
    assert.equal(batch[2].error.code, -32602);
    assert.equal(batch[3].error.code, -32601);
    const unsub = await socket.call("eth_unsubscribe", [batch[0].result]);
    assert.equal(unsub.result, true);
    assert.equal((await socket.call("eth_unsubscribe", [batch[0].result])).result, false);
    // A send waiting for its sender's missing nonce does not hold up a read sent after it.
    const account = devAccount(4);
    const [raw0, raw1] = await Promise.all([signTransfer(account, 0), signTransfer(account, 1)]);
    socket.send({ jsonrpc: "2.0", id: "n1", method: "eth_sendRawTransaction", params: [raw1] });
    socket.send({ jsonrpc: "2.0", id: "read", method: "eth_chainId", params: [] });
    await socket.next((m) => m.id === "read");
    assert.ok(!socket.inbox.some((m) => m.id === "n1"), "the read was answered first");
    socket.send({ jsonrpc: "2.0", id: "n0", method: "eth_sendRawTransaction", params: [raw0] });
    const [n0, n1] = await Promise.all([socket.next((m) => m.id === "n0"), socket.next((m) => m.id === "n1")]);
    assert.match(n0.result, /^0x[0-9a-f]{64}$/);
    assert.match(n1.result, /^0x[0-9a-f]{64}$/);
    assert.deepEqual(rejections(s.proxy), []);
    socket.send("{not json");
    const parseError = await socket.next((m) => m.error?.code === -32700);
    assert.equal(parseError.id, null);
    socket.ws.close();
  } finally {
    await s.stop();
  }
});

test("rate limits and origins: the upgrade counts as a read; over the limit a message gets -32005 and the socket stays open; a page from an origin CORS_ORIGINS does not list gets 403", async () => {
  const senderOfRaw = new Map();
  const s = await stack({
    anvil: { extraArgs: ["--block-time", "1"] },
    proxy: { senderOf: (raw) => senderOfRaw.get(raw) },
    vars: { CORS_ORIGINS: "https://dapp.example" },
    ratelimits: { RATE_LIMIT_SEND: { simple: { limit: 2, period: 60 } }, RATE_LIMIT_READ: { simple: { limit: 4, period: 60 } } },
  });
  try {
    await oneRateWindow(60);
    const refused = await new Promise((resolve) => {
      const ws = new WebSocket(wsUrl(s.relay), { origin: "https://evil.example" });
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode));
      ws.on("open", () => resolve("open"));
      ws.on("error", () => {});
    });
    assert.equal(refused, 403);
    const socket = await openSocket(wsUrl(s.relay)); // read 1 (no Origin: not a page)
    const account = devAccount(5);
    const raws = await Promise.all([0, 1, 2].map((n) => signTransfer(account, n)));
    raws.forEach((raw) => senderOfRaw.set(raw, account.address.toLowerCase()));
    const sends = await Promise.all(raws.slice(0, 2).map((raw) => socket.call("eth_sendRawTransaction", [raw])));
    assert.ok(sends.every((a) => a.result), JSON.stringify(sends));
    const third = await socket.call("eth_sendRawTransaction", [raws[2]]);
    assert.deepEqual(third.error, { code: -32005, message: "rate limit exceeded" });
    assert.equal(s.proxy.seen.length, 2, "the refused send reached nothing");
    for (let i = 0; i < 3; i++) assert.equal((await socket.call("eth_chainId")).result, "0x7a69"); // reads 2-4
    assert.equal((await socket.call("eth_subscribe", ["newHeads"])).error.code, -32005, "a subscription is a read");
    assert.equal(socket.ws.readyState, WebSocket.OPEN, "the socket stays open");
    socket.ws.close();
  } finally {
    await s.stop();
  }
});

test("a socket silent for less than WS_IDLE_TIMEOUT_S stays open and answers (4 s of 8 s; the default, 600 s, is checked natively in src/config/tests.rs)", async () => {
  // A check that something never happens: a bounded wait, tied to a shortened setting (the idle
  // close itself is the limits test's).
  const s = await blockStack({ WS_IDLE_TIMEOUT_S: "8" });
  try {
    const socket = await openSocket(wsUrl(s.relay));
    await sleep(4_000);
    assert.equal(socket.ws.readyState, WebSocket.OPEN, "still open");
    const answer = await socket.call("eth_chainId");
    assert.equal(answer.result, "0x7a69");
    assert.deepEqual(s.relay.events("ws_closed"), [], "nothing closed it");
    socket.ws.close();
  } finally {
    await s.stop();
  }
});
