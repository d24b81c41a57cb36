// The relay's own process killed mid-burst while its sends go to a private route
// (UPSTREAM_SEND_URL), then started again on the same Durable Object storage (issue 34: "the relay
// killed mid-burst with a private route: every client ends with its hash, all mined once").
//
// The compiled relay on workerd, the stand-in private route (tests/support/private-route.mjs) and a
// recording proxy as the read node, both before one anvil that mines only when the route builds a
// block. The read node never sees a private transaction, so after the restart the relay cannot
// learn from it what the route holds: what proves the restart safe is the chain at the end.
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { keccak256 } from "viem";
import { devAccount, minedCount, post, rpc, sendUntilResult, signTransfer, sleep, startRelay, until } from "./support/harness.mjs";
import { sendsAt, startPrivateStack, STATUS } from "./support/private-route.mjs";

/**
 * `startPrivateStack` (tests/support/private-route.mjs) with the relay's Durable Object storage in
 * `persist`, so a second relay on it is the same objects restarted, and the route `routeLatencyMs`
 * away per send, so the burst is still under way when the test kills the relay and a send can be
 * on its way to the route when it dies (it arrives; its answer is lost). The test kills, stops and
 * restarts the relay itself.
 */
const privateStack = ({ persist, routeLatencyMs }) => startPrivateStack({ persist, routeLatencyMs });

/** Every transaction hash in the chain's blocks, in chain order (block 1 on: genesis has none). */
async function minedHashes(url) {
  const latest = Number(BigInt((await rpc(url, "eth_blockNumber")).result));
  const hashes = [];
  for (let n = 1; n <= latest; n++) {
    const block = await rpc(url, "eth_getBlockByNumber", [`0x${n.toString(16)}`, false]);
    hashes.push(...block.result.transactions);
  }
  return hashes;
}

/** The route is 40 ms away per send; each sender's sends go one at a time (a private route). */
const ROUTE_LATENCY_MS = 40;

// Where the kill lands, once a third of the burst reached the route: right as a send arrived there
// (its answer, on its way back, is lost), or halfway through the next sends' trip (they reach the
// route after the relay died, and nobody hears their answer).
const killPoints = [
  { name: "as a send reaches the route", afterMs: 0 },
  { name: "while the next sends are on their way to the route", afterMs: ROUTE_LATENCY_MS / 2 },
];

for (const killPoint of killPoints) test(`the relay killed mid-burst with a private route, ${killPoint.name}, and started again on its state: every client ends with its hash, all mined once, none at the read node`, async () => {
  const perSender = 12;
  const accounts = [devAccount(6), devAccount(7)];
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-private-`);
  const s = await privateStack({ persist, routeLatencyMs: ROUTE_LATENCY_MS });
  const first = s.relay;
  const current = { relay: first };
  let firstStopped = false;
  let second;
  try {
    // Two senders' bursts at once, each nonces 0..perSender-1.
    const raws = [];
    for (const account of accounts) {
      for (let n = 0; n < perSender; n++) raws.push(await signTransfer(account, n));
    }
    const total = raws.length;
    // Each client is a wallet: it sends its bytes again until an answer carries a hash (a lost
    // connection, or an error answer, is tried again 100 ms later), for at most 30 s, asking
    // whichever relay is up.
    let errors = 0;
    const answeredAt = [];
    const clients = Promise.all(
      raws.map((raw, i) =>
        sendUntilResult(current, raw, i + 1, { onError: () => (errors += 1) }).then((hash) => ((answeredAt[i] = performance.now()), hash)),
      ),
    );

    // Kill the runtime (SIGKILL: a crash) once a third of the burst reached the route: the rest is
    // queued in the senders' objects, or on its way to the route.
    const killAfter = Math.ceil(total / 3);
    for (let i = 0; i < 1000 && s.route.sends.length < killAfter; i++) await sleep(5);
    if (killPoint.afterMs) await sleep(killPoint.afterMs);
    const atKill = s.route.sends.length;
    first.kill();
    const killedAt = performance.now();
    await first.stop().catch(() => {});
    firstStopped = true;
    second = await startRelay({ vars: s.vars, persist });
    const readyAt = performance.now();
    current.relay = second;

    const results = await clients;
    assert.ok(atKill >= killAfter && atKill < total, `killed mid-burst (${atKill}/${total} at the route)`);
    // Every client ends with its own transaction's hash, after however many tries it took.
    assert.deepEqual(
      results.map((hash, i) => hash === keccak256(raws[i])),
      Array(total).fill(true),
      `every client ends with its hash: ${JSON.stringify(results)}`,
    );
    const hashes = raws.map((raw) => keccak256(raw));
    // Private all along: no transaction, the clients' sends or the relay's own resends after the
    // restart, reached the read node, and nothing failed open around the senders' objects.
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    assert.deepEqual([...first.events("fail_open"), ...second.events("fail_open")], [], "no fail_open");
    // Started again on its state: the restarted objects knew their senders' next nonces from the
    // stored transactions, so none waited out a gap below the nonces its clients sent again (the
    // read node cannot count what the route holds: a relay on empty storage waits out
    // NONCE_GAP_WAIT_MS for the nonces whose clients already had their hashes), nor a lease.
    assert.equal(second.events("gap_wait_expired").length, 0, "no gap wait after the restart");
    assert.equal(second.events("force_release").length, 0, "no lease waited out");

    // The route builds blocks, nonce by nonce, until every sender's burst is in the chain (the
    // relay may still be resending what the kill lost, so a few blocks, a moment apart).
    let blocks = 0;
    const mined = () => Promise.all(accounts.map((a) => minedCount(s.anvil.url, a.address)));
    while (blocks < 20 && (await mined()).some((count) => count < perSender)) {
      await s.route.buildBlock();
      blocks += 1;
      if ((await mined()).some((count) => count < perSender)) await sleep(250);
    }

    // All mined once: by the chain, each sender's mined count is perSender (its nonces
    // 0..perSender-1 used), and the blocks hold exactly the burst's hashes, each once: a lost
    // transaction would be missing, and anything else mined (another transaction at one of these
    // nonces, a copy) would be extra; nothing else is sent on this chain.
    assert.deepEqual(await mined(), accounts.map(() => perSender), `every sender's ${perSender} mined (${blocks} blocks built)`);
    const inChain = await minedHashes(s.anvil.url);
    assert.deepEqual([...inChain].sort(), [...hashes].sort(), "the blocks hold each transaction of the burst exactly once");
    for (const hash of hashes) assert.equal(s.route.status(hash), STATUS.INCLUDED, `${hash} included`);

    const arrivals = (hash) => s.route.sends.filter((r) => r.hash === hash).length;
    const inFlight = s.route.sends.filter((r) => r.at >= killedAt && r.at < readyAt);
    const afterRestart = s.route.sends.filter((r) => r.at >= readyAt);
    const beforeKill = answeredAt.filter((t) => t < killedAt).length;
    const events = (name) => second.events(name).length;
    console.log(
      `# killed with ${atKill}/${total} at the route, ${beforeKill} clients answered; relay down ${(readyAt - killedAt).toFixed(0)} ms; ` +
        `the last client answered ${(Math.max(...answeredAt) - readyAt).toFixed(0)} ms after the restart, ${errors} error answers on the way; ` +
        `route arrivals ${s.route.sends.length} (${inFlight.length} while the relay was down, ${afterRestart.length} after the restart, ` +
        `${hashes.filter((h) => arrivals(h) > 1).length} transactions more than once, at most ${Math.max(...hashes.map(arrivals))}); ` +
        `${blocks} blocks built; after the restart: ${events("tx_resubmitted")} tx_resubmitted, ${events("tx_deduplicated")} tx_deduplicated, ` +
        `${events("tx_abandoned")} tx_abandoned, ${events("force_release")} force_release, ${events("gap_wait_expired")} gap_wait_expired`,
    );
  } finally {
    if (!firstStopped) await first.stop().catch(() => {});
    await second?.stop();
    await s.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("after a restart (a deploy) behind a private route, the first pending count through the relay already counts what the route holds; all mined once, none at the read node", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-private-`);
  const s = await privateStack({ persist, routeLatencyMs: 0 });
  let second;
  try {
    const account = devAccount(8);
    const raws = await Promise.all(Array.from({ length: 4 }, (_, n) => signTransfer(account, n)));
    const current = { relay: s.relay };
    await Promise.all(raws.map((raw, i) => sendUntilResult(current, raw, i + 1)));
    const count = async (url) => (await rpc(url, "eth_getTransactionCount", [account.address, "pending"])).result;
    assert.equal(await count(s.relay.url), "0x4");
    await s.relay.stop(); // a clean stop, as a deploy restarts every object
    second = await startRelay({ vars: s.vars, persist });
    // The read node cannot see them and counts 0; a wallet asking the relay now must not be told
    // 0, or it signs nonce 0 again (a conflicting transaction).
    assert.equal(await count(s.anvil.url), "0x0");
    assert.equal(await count(second.url), "0x4", "the first count after the restart");
    assert.deepEqual(await s.route.buildBlock(), raws.map((raw) => keccak256(raw)), "all 4, in nonce order");
    assert.equal(await minedCount(s.anvil.url, account.address), 4);
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    assert.equal(await count(second.url), "0x4");
  } finally {
    await second?.stop();
    await s.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("a transaction its sender cancelled at the route, the relay then restarted: never sent again, never at the read node, not in the pending count; the sender's next transaction takes its nonce and is mined", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-private-`);
  const s = await startPrivateStack({ persist });
  let second;
  try {
    // The relay with the route's status URL (the stack's relay has none).
    await s.relay.stop();
    const vars = { ...s.vars, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "1" };
    const first = await startRelay({ vars, persist });
    const account = devAccount(10);
    const raws = await Promise.all(Array.from({ length: 3 }, (_, n) => signTransfer(account, n)));
    const current = { relay: first };
    const hashes = await Promise.all(raws.map((raw, i) => sendUntilResult(current, raw, i + 1)));
    const count = async (url) => (await rpc(url, "eth_getTransactionCount", [account.address, "pending"])).result;
    assert.equal(await count(first.url), "0x3");
    s.route.cancel(hashes[2]);
    assert.ok(await until(() => first.events("tx_cancelled").length === 1, 10_000), "the relay learned it at a tracking check");
    assert.equal(await count(first.url), "0x2", "not counted");
    await first.stop(); // a deploy restarts every object
    second = await startRelay({ vars, persist });
    assert.equal(await count(second.url), "0x2", "after the restart either");
    await sleep(2_500); // two tracking checks of the restarted object
    const arrivals = (hash) => s.route.sends.filter((r) => r.hash === hash).length;
    assert.equal(arrivals(hashes[2]), 1, "the cancelled one never sent again");
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
    // The sender's next transaction takes the free nonce 2.
    const next = await signTransfer(account, 2, { value: 2n });
    const nextHash = await sendUntilResult({ relay: second }, next, 9);
    assert.deepEqual(await s.route.buildBlock(), [hashes[0], hashes[1], nextHash]);
    assert.equal(await minedCount(s.anvil.url, account.address), 3);
  } finally {
    await second?.stop();
    await s.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("a transaction cancelled at the route just before a restart (no tracking check between): the restarted object asks the route first and never sends it again; the one the route lost goes again", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-private-`);
  const s = await startPrivateStack({ persist });
  let second;
  try {
    await s.relay.stop();
    const vars = { ...s.vars, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "600" };
    const first = await startRelay({ vars, persist });
    const account = devAccount(12);
    const raws = await Promise.all(Array.from({ length: 3 }, (_, n) => signTransfer(account, n)));
    const hashes = await Promise.all(raws.map((raw, i) => sendUntilResult({ relay: first }, raw, i + 1)));
    s.route.cancel(hashes[2]);
    s.route.forget(hashes[1]); // lost by the route: FAILED
    await first.stop(); // a deploy, before any tracking check
    second = await startRelay({ vars, persist });
    const count = async (url) => (await rpc(url, "eth_getTransactionCount", [account.address, "pending"])).result;
    await count(second.url); // wakes the object: its restart check asks the read node and the route
    const arrivals = (hash) => s.route.sends.filter((r) => r.hash === hash).length;
    assert.ok(await until(() => arrivals(hashes[1]) === 2, 10_000), "the lost one sent again");
    await sleep(500);
    assert.equal(arrivals(hashes[2]), 1, "the cancelled one never sent again");
    assert.equal(arrivals(hashes[0]), 1, "the held one not sent again");
    assert.equal(second.events("tx_cancelled").length, 1);
    assert.equal(await count(second.url), "0x2", "the cancelled one not counted");
    assert.equal(sendsAt(s.read), 0, "no transaction reached the read node");
  } finally {
    await second?.stop();
    await s.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("a cancel outlasts the idempotency window and a deploy: the same raw bytes again after IDEMPOTENCY_TTL_S and again after a restart get the cancelled answer, and the route got them once; the sender's next transaction at that nonce is mined", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-private-`);
  const s = await startPrivateStack({ persist });
  let first;
  let second;
  try {
    await s.relay.stop();
    const vars = { ...s.vars, SEND_STATUS_URL: s.route.statusUrl, TRACK_INTERVAL_S: "1", IDEMPOTENCY_TTL_S: "1" };
    first = await startRelay({ vars, persist });
    const account = devAccount(13);
    const raw = await signTransfer(account, 0);
    const send = (url, id) => post(url, { jsonrpc: "2.0", id, method: "eth_sendRawTransaction", params: [raw] });
    const hash = (await send(first.url, 1)).json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/);
    const cancel = await post(first.url, { jsonrpc: "2.0", id: 2, method: "eth_cancelPrivateTransaction", params: [{ txHash: hash }] });
    assert.equal(cancel.json?.result, true, cancel.text);
    // Past the idempotency window (1 s), as a wallet's rebroadcast would come.
    await sleep(2_500);
    const late = await send(first.url, 3);
    assert.equal(late.json?.error?.code, -32000, late.text);
    assert.match(late.json.error.message, /cancelled/);
    await first.stop(); // a deploy restarts every object
    first = null;
    second = await startRelay({ vars, persist });
    const again = await send(second.url, 4);
    assert.equal(again.json?.error?.code, -32000, again.text);
    assert.match(again.json.error.message, /cancelled/);
    const status = await (await fetch(`${second.url}/tx/${hash}?sender=${account.address}`)).json();
    assert.equal(status.status, "cancelled", JSON.stringify(status));
    assert.equal(s.route.sends.filter((r) => r.hash === hash).length, 1, "the route got it once");
    assert.equal(sendsAt(s.read), 0, "never at the read node");
    // The sender's next transaction takes nonce 0; once mined, the tombstone has nothing to keep.
    const next = await signTransfer(account, 0, { value: 2n });
    const nextHash = await sendUntilResult({ relay: second }, next, 5);
    assert.deepEqual(await s.route.buildBlock(), [nextHash]);
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
  } finally {
    await first?.stop();
    await second?.stop();
    await s.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
