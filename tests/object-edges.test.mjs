// The edges of issue 32 at a sender's Durable Object, on the compiled relay (workerd) and anvil:
//
// - a strict sender stays strict after a restart: an object that restarts with stored
//   transactions and no client request knows its chain (kept with its rows) before it sends, so
//   the relay's own resends on Hedera's chain id go one at a time, never as a window;
// - a valid transaction too large to store is refused locally with a named error, and its sender
//   goes on at once (no supersession, no fail-open);
// - (issue 39) an object that restarts on storage it cannot read leaves it untouched and fails
//   open; once it reads it, its stored transactions are followed as before.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, sendRaw, post, rpc, devAccount, signTransfer, minedCount, mostAtOnce, until } from "./support/harness.mjs";


test("strict after a restart: chain 296 (CHAIN_ID unset), n..n+4 accepted, the pool drops them, the relay restarts, no client sends: the relay's resends go one at a time, and all 5 are mined once", async () => {
  const anvil = await startAnvil({ extraArgs: ["--chain-id", "296", "--no-mining"] });
  // Sends take 300 ms at the upstream, so that a window of them would be seen there at once.
  const proxy = await startProxy({
    upstream: anvil.url,
    strictNonce: false,
    latency: (req) => (req?.method === "eth_sendRawTransaction" ? 300 : 0),
  });
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  // As wrangler.toml ships it: CHAIN_ID unset, UPSTREAM_POOL=auto, SEND_WINDOW 16. The first
  // tracking check (the storage alarm) comes 5 s after the sends, so the relay is stopped before
  // it, and the restarted relay's alarm is the only thing that wakes the object.
  const vars = { UPSTREAM_RPC_URL: proxy.url, CHAIN_ID: undefined, SEND_WINDOW: "16", TRACK_INTERVAL_S: "5", ADMIN_TOKEN: "t" };
  let relay = await startRelay({ vars, persist });
  try {
    const account = devAccount(4);
    const sender = account.address.toLowerCase();
    const raws = await Promise.all([0, 1, 2, 3, 4].map((n) => signTransfer(account, n, { chainId: 296 })));
    const hashes = raws.map((raw) => keccak256(raw));
    for (const raw of raws) assert.ok((await sendRaw(relay.url, raw)).json.result);
    await relay.stop();
    await rpc(anvil.url, "anvil_dropAllTransactions");
    assert.equal((await rpc(anvil.url, "eth_getTransactionByHash", [hashes[0]])).result, null, "dropped");
    const restartedAt = performance.now();
    relay = await startRelay({ vars, persist });
    // No client request: the storage alarm brings the object back, and it sends what the pool lost.
    const resent = () => proxy.seen.filter((r) => r.sender === sender && r.at > restartedAt);
    assert.ok(await until(() => resent().filter((r) => r.accepted).length >= 5, 30_000), `resent: ${resent().length}`);
    const atOnce = mostAtOnce(resent());
    console.log(`# strict after a restart: ${resent().length} resends, at most ${atOnce} at the upstream at once`);
    assert.equal(atOnce, 1, "one at a time, as on a strict upstream (a window would have them there together)");
    assert.deepEqual(resent().map((r) => r.nonce), [0, 1, 2, 3, 4], "in nonce order, each once");
    const view = await (await fetch(`${relay.url}/senders/${sender}`, { headers: { authorization: "Bearer t" } })).json();
    assert.equal(view.upstream_pool, "strict", "auto resolved from chain id 296, kept with the rows");
    await rpc(anvil.url, "evm_mine");
    assert.equal(await minedCount(anvil.url, account.address), 5);
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

/** A transfer of `account` at `nonce` with `bytes` zero bytes of calldata (gas at the EIP-7623 floor and some). */
const withCalldata = (account, nonce, bytes) =>
  signTransfer(account, nonce, { data: `0x${"00".repeat(bytes)}`, gas: BigInt(21_000 + 10 * bytes + 50_000) });

/** The relay's own trouble in its log: a storage error, a superseded object, a fail-open. */
const trouble = (relay) => ["storage_error", "object_superseded", "fail_open"].flatMap((e) => relay.events(e));

test("a valid transaction with 1.1 MB of calldata (osaka) is stored and goes to the upstream; the sender's next transfer goes at once, through its object, and is mined", async () => {
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url } });
  try {
    const account = devAccount(5);
    const big = await withCalldata(account, 0, 1_100_000);
    const answer = await sendRaw(relay.url, big);
    console.log(`# 1.1 MB calldata: ${JSON.stringify(answer.json).slice(0, 160)}`);
    assert.ok(proxy.seen.some((r) => r.hash === keccak256(big)), "its bytes reached the upstream");
    // anvil refuses a body past its own limit (-32600); what matters is that the relay stored it,
    // sent it from its object and answered, and that the sender goes on.
    const next = await signTransfer(account, answer.json.result ? 1 : 0);
    const started = performance.now();
    const second = await sendRaw(relay.url, next);
    const ms = performance.now() - started;
    console.log(`# the next transfer answered in ${ms.toFixed(0)} ms`);
    assert.equal(second.json.result, keccak256(next), JSON.stringify(second.json));
    assert.deepEqual(trouble(relay), [], "no storage error, no superseded object, no fail-open");
    assert.ok(await until(async () => (await minedCount(anvil.url, account.address)) >= (answer.json.result ? 2 : 1), 10_000), "mined");
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("a valid transaction too large to store (2.05 MB of calldata, HARDFORK=cancun) is refused with a named error, never sent; the sender's next transfer goes at once and is mined", async () => {
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, HARDFORK: "cancun" } });
  try {
    const account = devAccount(6);
    const big = await signTransfer(account, 0, { data: `0x${"00".repeat(2_050_000)}`, gas: BigInt(21_000 + 4 * 2_050_000 + 50_000) });
    const answer = await sendRaw(relay.url, big);
    assert.equal(answer.json.error?.code, -32005, JSON.stringify(answer.json));
    assert.match(answer.json.error.message, /^transaction too large for the relay to store: \d+ bytes, at most \d+/);
    assert.ok(!proxy.seen.some((r) => r.hash === keccak256(big)), "never reached the upstream");
    const next = await signTransfer(account, 0);
    const second = await sendRaw(relay.url, next);
    assert.equal(second.json.result, keccak256(next), JSON.stringify(second.json));
    assert.deepEqual(trouble(relay), [], "no storage error, no superseded object, no fail-open");
    assert.equal(relay.events("tx_refused").filter((e) => e.label === "too_large").length, 1);
    assert.ok(await until(async () => (await minedCount(anvil.url, account.address)) >= 1, 10_000), "mined");
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("storage that cannot be read is never taken for none (issue 39): the restarted object fails open twice, leaves its rows, then reads them and resends the two the pool dropped; all 5 mined once", async () => {
  const anvil = await startAnvil({ extraArgs: ["--no-mining"] });
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({
    vars: { UPSTREAM_RPC_URL: proxy.url, TRACK_INTERVAL_S: "30", ADMIN_TOKEN: "t", SEND_WINDOW: "16" },
    buildDir: "build-faults",
  });
  try {
    const account = devAccount(9);
    const sender = account.address.toLowerCase();
    const raws = await Promise.all([0, 1, 2, 3, 4].map((n) => signTransfer(account, n)));
    const hashes = raws.map((raw) => keccak256(raw));
    // 0 and 1 accepted and stored; the pool then drops them (no block yet).
    for (const raw of raws.slice(0, 2)) assert.ok((await sendRaw(relay.url, raw)).json.result);
    await rpc(anvil.url, "anvil_dropAllTransactions");
    // The object restarts on storage whose next reads fail: 2 and 3 are answered all the same,
    // sent by the Worker itself (fail-open), and nothing of the storage goes.
    const two = await post(
      relay.url,
      { jsonrpc: "2.0", id: 2, method: "eth_sendRawTransaction", params: [raws[2]] },
      { "x-test-fault": "unreadable-restart" },
    );
    const three = await sendRaw(relay.url, raws[3], 3);
    assert.equal(two.json.result, hashes[2], two.text);
    assert.equal(three.json.result, hashes[3], three.text);
    const unusable = relay.events("storage_unusable");
    assert.equal(unusable.length, 2, relay.logs.join("\n"));
    assert.ok(unusable.every((e) => e.label === "unreadable"));
    const failOpen = relay.events("fail_open");
    assert.deepEqual(failOpen.map((e) => e.nonce), [2, 3]);
    assert.match(failOpen[0].error, /storage could not be read/);
    // The next request reads it: 0 and 1 are there, checked, and sent again from their rows.
    assert.equal((await sendRaw(relay.url, raws[4], 4)).json.result, hashes[4]);
    const view = async () =>
      (await fetch(`${relay.url}/senders/${account.address}`, { headers: { authorization: "Bearer t" } })).json();
    assert.ok(await until(async () => proxy.seen.filter((r) => r.sender === sender && r.nonce <= 1).length >= 4, 10_000), "0 and 1 sent again");
    await rpc(anvil.url, "anvil_mine", ["0x1"]);
    assert.ok(await until(async () => (await minedCount(anvil.url, account.address)) === 5, 10_000), "all 5 mined");
    for (const h of hashes) assert.equal((await rpc(anvil.url, "eth_getTransactionReceipt", [h])).result?.status, "0x1");
    const v = await view();
    console.log(`# storage unusable twice, ${failOpen.length} sent by the Worker, then resubmitted ${v.counters.resubmitted}; rows written ${v.storage.rows_written}`);
    assert.equal(v.counters.resubmitted, 2);
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});
