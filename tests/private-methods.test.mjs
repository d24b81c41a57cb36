// The private-send methods clients already use (issue 41), and publishing as the sender's choice:
// the compiled relay on workerd, the stand-in private route (tests/support/private-route.mjs,
// which serves `eth_sendPrivateTransaction` and `eth_cancelPrivateTransaction` unless told not to)
// and a recording proxy as the read node, both before one anvil that mines only when the route
// builds a block.
import { test } from "node:test";
import assert from "node:assert/strict";
import WebSocket from "ws";
import { devAccount, minedCount, openSocket, post, rpc, signTransfer, sleep, startAnvil, startProxy, startRelay, until } from "./support/harness.mjs";
import { sendsAt, startPrivateStack, STATUS } from "./support/private-route.mjs";

/** The stack, its relay restarted with the route's status URL and `vars`. */
async function stackWithStatus(vars = {}, route = {}) {
  const s = await startPrivateStack({ route });
  await s.relay.stop();
  s.relay = await startRelay({ vars: { ...s.vars, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "1", ...vars } });
  return s;
}

const sendPrivate = (url, raw, extra = {}, id = 1) =>
  post(url, { jsonrpc: "2.0", id, method: "eth_sendPrivateTransaction", params: [{ tx: raw, ...extra }] });
const cancelPrivate = (url, hash, id = 1) => post(url, { jsonrpc: "2.0", id, method: "eth_cancelPrivateTransaction", params: [{ txHash: hash }] });
const pendingCount = async (url, address) => Number(BigInt((await rpc(url, "eth_getTransactionCount", [address, "pending"])).result));
const headNumber = async (url) => Number(BigInt((await rpc(url, "eth_blockNumber")).result));

test("without a private route, eth_sendPrivateTransaction and eth_cancelPrivateTransaction are refused (-32004) and nothing reaches the read node", async () => {
  const anvil = await startAnvil();
  const read = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: read.url } });
  try {
    const raw = await signTransfer(devAccount(3), 0);
    const sent = await sendPrivate(relay.url, raw);
    assert.equal(sent.json?.error?.code, -32004, sent.text);
    assert.match(sent.json.error.message, /needs a private route/);
    const cancel = await cancelPrivate(relay.url, `0x${"ab".repeat(32)}`);
    assert.equal(cancel.json?.error?.code, -32004, cancel.text);
    assert.equal(sendsAt(read), 0, "nothing reached the read node");
    assert.equal(sent.publicAfter, null, "no route: no word of publishing");
    assert.equal(await minedCount(anvil.url, devAccount(3).address), 0);
  } finally {
    await relay.stop();
    await read.stop();
    anvil.stop();
  }
});

test("eth_sendPrivateTransaction with maxBlockNumber 3 blocks ahead, never included: the route gets that method; past the block it is final (expired), out of the pending count, never sent again or published", async () => {
  // The operator allows publishing, and the client opted in: a maxBlockNumber still wins (the
  // public mempool would keep it past its bound); nonce 0, unbounded, goes public and is mined.
  const s = await stackWithStatus({ SEND_PUBLIC_AFTER_BLOCKS: "1" });
  try {
    const account = devAccount(5);
    const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
    const first = await post(s.relay.url + "/?public_after_blocks=50", { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raws[0]] });
    const max = (await headNumber(s.anvil.url)) + 3;
    const sent = await sendPrivate(s.relay.url + "/?public_after_blocks=50", raws[1], { maxBlockNumber: `0x${max.toString(16)}`, preferences: { fast: true } }, 2);
    const hash = sent.json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/, sent.text);
    assert.equal(first.publicAfter, "1", "the opt-in, at most what the operator allows");
    assert.equal(sent.publicAfter, "never", "bounded by maxBlockNumber: never published");
    const atRoute = s.route.sends.find((r) => r.hash === hash);
    assert.equal(atRoute?.method, "eth_sendPrivateTransaction");
    assert.equal(atRoute?.maxBlock, max);
    assert.equal(await pendingCount(s.relay.url, account.address), 2);
    s.route.holdFor(hash, 1_000);
    s.route.holdFor(first.json.result, 1_000);
    // Blocks past maxBlockNumber, a tracking check in each.
    for (let b = 0; b < 5; b += 1) {
      await sleep(1_100);
      await s.route.buildBlock();
    }
    assert.ok(await until(() => s.relay.events("tx_expired").some((e) => e.tx_hash === hash), 10_000), "final past its maxBlockNumber");
    assert.equal(s.relay.events("tx_expired").find((e) => e.tx_hash === hash).label, "max_block_number");
    assert.equal(s.route.status(hash), STATUS.FAILED, "the route gave it up too");
    await sleep(2_500); // more checks: the route's FAILED sends nothing again
    assert.equal(s.route.sends.filter((r) => r.hash === hash).length, 1, "never sent again");
    assert.ok(
      !s.relay.events("tx_sent_public").some((e) => e.tx_hash === hash),
      "never published, though opted in",
    );
    assert.equal(await pendingCount(s.relay.url, account.address), 1, "not counted");
    const status = await (await fetch(`${s.relay.url}/tx/${hash}?sender=${account.address}`)).json();
    assert.equal(status.status, "expired");
  } finally {
    await s.stop();
  }
});

test("eth_cancelPrivateTransaction: the route cancels it, the answer is true, the pending count drops by one, and it is never sent or mined; a route that does not serve the methods gets plain sends and the client a clear -32004 for a cancel", async () => {
  const s = await stackWithStatus();
  try {
    const account = devAccount(6);
    const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
    const hashes = [];
    for (const [i, raw] of raws.entries()) hashes.push((await sendPrivate(s.relay.url, raw, {}, i + 1)).json?.result);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(hashes));
    assert.equal(await pendingCount(s.relay.url, account.address), 2);
    const cancel = await cancelPrivate(s.relay.url, hashes[1], 7);
    assert.deepEqual(cancel.json, { jsonrpc: "2.0", id: 7, result: true });
    assert.deepEqual(s.route.cancels, [{ hash: hashes[1], answer: true }]);
    assert.equal(await pendingCount(s.relay.url, account.address), 1, "the count drops by one");
    assert.equal(s.relay.events("tx_cancelled").length, 1);
    // Cancelled already: false, the route not asked again.
    assert.equal((await cancelPrivate(s.relay.url, hashes[1], 8)).json?.result, false);
    assert.equal(s.route.cancels.length, 1);
    await sleep(2_500); // tracking checks: nothing sent again
    assert.deepEqual(await s.route.buildBlock(), [hashes[0]]);
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.deepEqual(hashes.map((h) => s.route.sends.filter((r) => r.hash === h).length), [1, 1]);
    assert.equal(sendsAt(s.read), 0, "nothing reached the read node");
  } finally {
    await s.stop();
  }
  const plain = await stackWithStatus({}, { servesPrivateMethods: false });
  try {
    const account = devAccount(7);
    const raw = await signTransfer(account, 0);
    const hash = (await sendPrivate(plain.relay.url, raw)).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    const methods = plain.route.sends.filter((r) => r.hash === hash).map((r) => r.method);
    assert.deepEqual(methods, ["eth_sendRawTransaction"], "the same bytes, as a plain send");
    const cancel = await cancelPrivate(plain.relay.url, hash);
    assert.equal(cancel.json?.error?.code, -32004, cancel.text);
    assert.match(cancel.json.error.message, /same nonce/);
    assert.deepEqual(await plain.route.buildBlock(), [hash]);
    assert.equal(sendsAt(plain.read), 0);
  } finally {
    await plain.stop();
  }
});

test("an opt-in that is not a number of blocks is refused with HTTP 400 before anything is sent", async () => {
  const s = await startPrivateStack();
  try {
    const raw = await signTransfer(devAccount(8), 0);
    const bad = await post(s.relay.url + "/?public_after_blocks=soon", { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    assert.equal(bad.status, 400);
    assert.equal(bad.json?.error?.code, -32600, bad.text);
    assert.match(bad.json.error.message, /public_after_blocks/);
    assert.equal(s.route.sends.length, 0);
    assert.equal(sendsAt(s.read), 0);
  } finally {
    await s.stop();
  }
});

test("a client's copy of a private transaction (a wallet's retry) is sent to the route again only on its word that it dropped it: held, the hash and no send; cancelled at the route, -32000 and never sent again", async () => {
  const s = await stackWithStatus({ TRACK_INTERVAL_S: "600" });
  try {
    const account = devAccount(9);
    const raws = await Promise.all([0, 1, 2].map((n) => signTransfer(account, n)));
    const hashes = [];
    for (const [i, raw] of raws.entries()) hashes.push((await post(s.relay.url, { jsonrpc: "2.0", id: i + 1, method: "eth_sendRawTransaction", params: [raw] })).json?.result);
    assert.ok(hashes.every((h) => /^0x[0-9a-f]{64}$/.test(h ?? "")), JSON.stringify(hashes));
    const copy = (i) => post(s.relay.url, { jsonrpc: "2.0", id: 10 + i, method: "eth_sendRawTransaction", params: [raws[i]] });
    // Held at the route: the hash, nothing sent again.
    assert.equal((await copy(0)).json?.result, hashes[0]);
    // Cancelled at the route (no tracking check between): the copy is refused, never sent.
    s.route.cancel(hashes[1]);
    const refused = await copy(1);
    assert.equal(refused.json?.error?.code, -32000, refused.text);
    assert.match(refused.json.error.message, /cancelled/);
    assert.equal((await copy(1)).json?.error?.code, -32000, "known cancelled: refused at once");
    // Dropped at the route: sent again.
    s.route.forget(hashes[2]);
    assert.equal((await copy(2)).json?.result, hashes[2]);
    const arrivals = hashes.map((h) => s.route.sends.filter((r) => r.hash === h).length);
    assert.deepEqual(arrivals, [1, 1, 2], "only the dropped one again");
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    assert.equal(await pendingCount(s.relay.url, account.address), 1, "the cancelled nonce 1 frees the count above 0");
  } finally {
    await s.stop();
  }
});

test("a route's own cancel (Flashbots Protect: same nonce, to yourself, empty data) through the relay: the route cancels the held one, neither is counted, and the wallet's next transaction at that nonce goes in and is mined", async () => {
  const s = await stackWithStatus({ TRACK_INTERVAL_S: "600" });
  try {
    const account = devAccount(10);
    const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
    const hashes = [];
    for (const [i, raw] of raws.entries()) hashes.push((await post(s.relay.url, { jsonrpc: "2.0", id: i + 1, method: "eth_sendRawTransaction", params: [raw] })).json?.result);
    assert.equal(await pendingCount(s.relay.url, account.address), 2);
    const cancelRaw = await signTransfer(account, 1, { to: account.address, value: 0n, maxFeePerGas: 40_000_000_000n, maxPriorityFeePerGas: 2_000_000_000n });
    const cancel = await post(s.relay.url, { jsonrpc: "2.0", id: 3, method: "eth_sendRawTransaction", params: [cancelRaw] });
    const cancelHash = cancel.json?.result;
    assert.match(cancelHash ?? "", /^0x[0-9a-f]{64}$/, cancel.text);
    assert.equal(s.route.status(hashes[1]), STATUS.CANCELLED, "the route cancelled the held one");
    assert.ok(s.route.sends.find((r) => r.hash === cancelHash)?.cancelTx, "the route took it as its cancel");
    assert.equal(await pendingCount(s.relay.url, account.address), 1, "neither is counted");
    for (const hash of [hashes[1], cancelHash]) {
      const status = await (await fetch(`${s.relay.url}/tx/${hash}?sender=${account.address}`)).json();
      assert.equal(status.status, "cancelled", hash);
    }
    // The wallet's next transaction takes nonce 1.
    const next = await signTransfer(account, 1, { value: 5n });
    const nextHash = (await post(s.relay.url, { jsonrpc: "2.0", id: 4, method: "eth_sendRawTransaction", params: [next] })).json?.result;
    assert.match(nextHash ?? "", /^0x[0-9a-f]{64}$/);
    assert.deepEqual(await s.route.buildBlock(), [hashes[0], nextHash]);
    assert.equal(await minedCount(s.anvil.url, account.address), 2);
    assert.equal(sendsAt(s.read), 0);
  } finally {
    await s.stop();
  }
});

test("over a WebSocket, the opt-in is the URL the client connected to: the upgrade says it (x-public-after-blocks), and the socket's private sends carry it", async () => {
  const s = await stackWithStatus({ SEND_PUBLIC_AFTER_BLOCKS: "10" });
  try {
    const url = `${s.relay.url.replace(/^http/, "ws")}/?public_after_blocks=3`;
    const header = await new Promise((resolve, reject) => {
      const ws = new WebSocket(url);
      ws.on("upgrade", (res) => resolve(res.headers["x-public-after-blocks"]));
      ws.on("open", () => ws.close());
      ws.on("error", reject);
    });
    assert.equal(header, "3");
    const socket = await openSocket(url);
    const account = devAccount(12);
    const sent = await socket.call("eth_sendRawTransaction", [await signTransfer(account, 0)]);
    assert.match(sent.result ?? "", /^0x[0-9a-f]{64}$/, JSON.stringify(sent));
    const status = await (await fetch(`${s.relay.url}/tx/${sent.result}?sender=${account.address}`)).json();
    assert.equal(status.public_after_blocks, 3, JSON.stringify(status));
    socket.ws.close();
    // Without it: never.
    const plain = await openSocket(s.relay.url.replace(/^http/, "ws"));
    const other = await plain.call("eth_sendRawTransaction", [await signTransfer(account, 1)]);
    const otherStatus = await (await fetch(`${s.relay.url}/tx/${other.result}?sender=${account.address}`)).json();
    assert.equal(otherStatus.public_after_blocks, null);
    plain.ws.close();
    // A bad one: HTTP 400, no socket.
    const refused = await new Promise((resolve) => {
      const ws = new WebSocket(`${s.relay.url.replace(/^http/, "ws")}/?public_after_blocks=x`);
      ws.on("unexpected-response", (_req, res) => resolve(res.statusCode));
      ws.on("open", () => resolve("open"));
      ws.on("error", () => {});
    });
    assert.equal(refused, 400);
  } finally {
    await s.stop();
  }
});

test("with ENABLE_NONCE_ORDERING=false, eth_cancelPrivateTransaction goes from the Worker to the route, which cancels the transaction", async () => {
  const s = await stackWithStatus({ ENABLE_NONCE_ORDERING: "false" });
  try {
    const account = devAccount(13);
    const hash = (await sendPrivate(s.relay.url, await signTransfer(account, 0))).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    const cancel = await cancelPrivate(s.relay.url, hash, 5);
    assert.deepEqual(cancel.json, { jsonrpc: "2.0", id: 5, result: true });
    assert.deepEqual(s.route.cancels, [{ hash, answer: true }]);
    assert.equal(s.route.status(hash), STATUS.CANCELLED);
    assert.equal(sendsAt(s.read), 0);
  } finally {
    await s.stop();
  }
});

test("a transaction published by its sender's opt-in, then cancelled at the route: the answer is the route's true, but it stays pending (its public copy can be mined), its status saying both, and it is followed to inclusion", async () => {
  const s = await stackWithStatus({ SEND_PUBLIC_AFTER_BLOCKS: "25" });
  try {
    const account = devAccount(14);
    const raw = await signTransfer(account, 0);
    const sent = await post(`${s.relay.url}/?public_after_blocks=1`, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    const hash = sent.json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/, sent.text);
    s.route.holdFor(hash, 1_000);
    // Blocks (none includes it) until the relay publishes it, one tracking check in each.
    for (let blocks = 0; s.relay.events("tx_public_answer").length === 0 && blocks < 20; blocks += 1) {
      await sleep(1_100);
      await s.route.buildBlock();
    }
    assert.ok(await until(() => s.relay.events("tx_public_answer").length === 1, 5_000), "published");
    assert.equal(sendsAt(s.read), 1);
    const cancel = await cancelPrivate(s.relay.url, hash, 2);
    assert.equal(cancel.json?.result, true, cancel.text);
    const status = await (await fetch(`${s.relay.url}/tx/${hash}?sender=${account.address}`)).json();
    assert.deepEqual([status.status, status.route, status.route_status], ["pending", "private_then_public", "cancelled"], JSON.stringify(status));
    assert.equal(await pendingCount(s.relay.url, account.address), 1, "still counted: its public copy may be mined");
    await s.route.buildBlock(); // the read node's pool is the chain's: the public copy is mined
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.ok(
      await until(async () => (await (await fetch(`${s.relay.url}/tx/${hash}?sender=${account.address}`)).json()).status === "included", 10_000),
      "followed to inclusion",
    );
    assert.equal(s.route.sends.filter((r) => r.hash === hash).length, 1, "never sent to the route again");
  } finally {
    await s.stop();
  }
});

test("an object with nothing stored asks the route's status beside its first nonce lookup: a copy of a transaction cancelled at the route (around the relay, its storage gone) is refused, never sent again; one the route does not know goes", async () => {
  const s = await startPrivateStack();
  let relay;
  try {
    await s.relay.stop();
    const vars = { ...s.vars, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "600" };
    relay = await startRelay({ vars });
    const account = devAccount(15);
    const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
    const hash = (await post(relay.url, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raws[0]] })).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    s.route.cancel(hash); // its sender cancelled it at the route, around the relay
    await relay.stop();
    relay = await startRelay({ vars }); // a relay with none of the sender's storage
    const copy = await post(relay.url, { jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: [raws[0]] });
    assert.equal(copy.json?.error?.code, -32000, copy.text);
    assert.match(copy.json.error.message, /cancelled/);
    assert.equal(s.route.sends.filter((r) => r.hash === hash).length, 1, "never sent to the route again");
    // The sender's next transaction at the freed nonce: not known to the route, so it goes.
    const next = await signTransfer(account, 0, { value: 2n });
    const nextHash = (await post(relay.url, { jsonrpc: "2.0", id: 3, method: "eth_sendRawTransaction", params: [next] })).json?.result;
    assert.match(nextHash ?? "", /^0x[0-9a-f]{64}$/);
    assert.deepEqual(await s.route.buildBlock(), [nextHash]);
  } finally {
    await relay?.stop();
    await s.stop();
  }
});
