// Issue 52: an idle sender's object keeps no timer, so in production it hibernates between its
// checks and its memory is discarded ("Lifecycle of a Durable Object"); local workerd never
// hibernates an object without a WebSocket. With TEST_HIBERNATE=1 the test build's object loses
// its memory whenever it was idle and eligible for hibernation before an event (no request or
// alarm served, no timer, no I/O: src/edge/sender_lock/mod.rs), so every check meets a new
// instance on the same storage. Through that, on the compiled relay (workerd) and anvil:
// - a lone transaction is tracked to inclusion, and the object's storage goes afterwards;
// - a transaction the pool drops is sent again at the next check, and mined once;
// - one the pool drops after each resend is sent again at most MAX_RESENDS (2) times in all,
//   counted from its row across the lost memories, then abandoned;
// - behind a private route, what the route took is not sent to it again, and a sender's opt-in to
//   the public mempool counts its blocks from the head its row kept.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, sendRaw, post, rpc, devAccount, signTransfer, minedCount, sleep, until } from "./support/harness.mjs";
import { sendsAt, startPrivateStack } from "./support/private-route.mjs";

const TOKEN = "hibernation";

/** How many of the sends of `hash` that reached `proxy` the node has answered. */
const inPool = (proxy, hash) => proxy.seen.filter((r) => r.hash === hash && r.answeredAt !== undefined).length;

async function stack() {
  const anvil = await startAnvil({ accounts: 6, extraArgs: ["--no-mining"] });
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
  const relay = await startRelay({
    buildDir: "build-faults",
    vars: { UPSTREAM_RPC_URL: proxy.url, TRACK_INTERVAL_S: "1", ADMIN_TOKEN: TOKEN, TEST_HIBERNATE: "1" },
  });
  const view = async (address) =>
    (await fetch(`${relay.url}/senders/${address}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();
  const stop = async () => {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  };
  return { anvil, proxy, relay, view, stop };
}

test("memory lost before every check: a dropped transaction is sent again at the next check, a lone one tracked to inclusion, each mined once", async () => {
  const s = await stack();
  try {
    const account = devAccount(2);
    const sender = account.address.toLowerCase();
    const raw = await signTransfer(account, 0);
    const hash = keccak256(raw);
    assert.equal((await sendRaw(s.relay.url, raw)).json.result, hash);
    const sends = () => s.proxy.seen.filter((r) => r.hash === hash).length;
    assert.equal(sends(), 1);
    await rpc(s.anvil.url, "anvil_dropTransaction", [hash]);
    // The next check (the alarm, a new instance on the row) finds it missing and sends it again;
    // the block is mined once anvil answered the resend (the proxy records a send on arrival).
    assert.ok(await until(() => inPool(s.proxy, hash) === 2, 10_000), `sent ${sends()} times`);
    await rpc(s.anvil.url, "evm_mine");
    assert.ok(
      await until(async () => {
        const v = await s.view(sender);
        return v.tracked === 0 && v.storage.rows === 0;
      }, 10_000),
      `${JSON.stringify(await s.view(sender))}\nmined ${await minedCount(s.anvil.url, account.address)}\nrequests ${s.proxy.requests.slice(-3).map((r) => JSON.stringify(r.body) + " answered " + r.answeredAt).join("\n")}\n${s.relay.logs.slice(-30).join("\n")}`,
    );
    assert.equal(await minedCount(s.anvil.url, account.address), 1);
    assert.equal(sends(), 2, "sent again once");
    const lines = s.relay.events("tx_included").filter((e) => e.tx_hash === hash);
    assert.ok(lines.length <= 1, "included once");
  } finally {
    await s.stop();
  }
});

test("memory lost before every check: a transaction the pool drops after each resend is sent again at most twice in all, then abandoned", async () => {
  const s = await stack();
  try {
    const account = devAccount(3);
    const raw = await signTransfer(account, 0);
    const hash = keccak256(raw);
    assert.equal((await sendRaw(s.relay.url, raw)).json.result, hash);
    const sends = () => s.proxy.seen.filter((r) => r.hash === hash).length;
    // Dropped each time it is in the pool (anvil answered the send: the proxy records a send on
    // its arrival, and a drop before anvil has it would drop nothing); each check is a new
    // instance.
    for (let n = 1; n <= 3; n++) {
      assert.ok(await until(() => inPool(s.proxy, hash) >= n, 10_000), `send ${n}: ${sends()}`);
      await rpc(s.anvil.url, "anvil_dropTransaction", [hash]);
    }
    const abandoned = () => s.relay.events("tx_abandoned").filter((e) => e.tx_hash === hash);
    assert.ok(await until(() => abandoned().length === 1, 10_000), "abandoned");
    // Several more checks' time: never sent again.
    await sleep(3_000);
    console.log(`# hibernating object: sent ${sends()} times in all (the cap: 1 + 2), abandoned ${abandoned().length}`);
    assert.equal(sends(), 3, "the first send and two resends, counted from the row");
    assert.equal(abandoned().length, 1);
  } finally {
    await s.stop();
  }
});

test("memory lost before every check, behind a private route: a transaction the route took is not sent to it again, and one opted in to the public mempool (/?public_after_blocks=2) reaches the read node 2 blocks after the first check that saw it pending, counted from its row", async () => {
  const s = await startPrivateStack();
  await s.relay.stop();
  s.relay = await startRelay({
    buildDir: "build-faults",
    vars: { ...s.vars, TRACK_INTERVAL_S: "1", SEND_PUBLIC_AFTER_BLOCKS: "25", TEST_HIBERNATE: "1" },
  });
  try {
    const account = devAccount(7);
    const raw = await signTransfer(account, 0);
    const opted = await post(`${s.relay.url}/?public_after_blocks=2`, { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] });
    const hash = opted.json?.result;
    assert.match(hash ?? "", /^0x[0-9a-f]{64}$/, opted.text);
    s.route.holdFor(hash, 1_000);
    let blocks = 0;
    while (sendsAt(s.read) === 0 && blocks < 12) {
      await sleep(1_100); // a check of the relay's (a new instance each time) in each block
      await s.route.buildBlock();
      blocks += 1;
    }
    const atRoute = s.route.sends.filter((r) => r.hash === hash).length;
    console.log(`# hibernating object behind a private route: published after ${blocks} blocks; at the route ${atRoute} time(s)`);
    assert.equal(sendsAt(s.read), 1, `reached the read node after ${blocks} blocks`);
    assert.ok(blocks >= 2, `not before 2 blocks (${blocks})`);
    assert.equal(atRoute, 1, "the route's acceptance is in the row: never sent to it again");
  } finally {
    await s.stop();
  }
});
