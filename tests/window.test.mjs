// End-to-end tests of the send window (SEND_WINDOW, docs/design.md "Send window"): the compiled relay on
// workerd, a real anvil behind a mempool test proxy (nonces above a gap pass to anvil, which queues
// them) with a fixed hop, transactions signed with anvil's dev keys. What is asserted is what the
// upstream and the chain saw, never a wall time (the speed-up is measured in make bench-e2e).
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import {
  stack,
  sendRaw,
  sendUntilResult,
  devAccount,
  signTransfer,
  sleep,
  startAnvil,
  startProxy,
  startRelay,
  minedCounts,
  mostAtOnce,
  post,
} from "./support/harness.mjs";

/** The sender's mined count, once it reaches `want` (or after 10 s). anvil sometimes leaves
 * transactions it promoted from its queued pool unmined until the next block: when the count
 * stalls, what its pool holds is printed and one block is mined; if that mines nothing, the run
 * of nonces its pool holds is counted on top. What is counted is what the node holds, not when
 * anvil mines it: a nonce the relay never delivered still fails the count. */
const minedCount = async (url, address, want) => {
  const count = (await minedCounts(url, [{ address }], want, 10_000))[0];
  if (count >= want) return count;
  const pool = await post(url, { jsonrpc: "2.0", id: 1, method: "txpool_status", params: [] });
  console.log(`# mined ${count} of ${want} after 10 s; anvil's pool: ${JSON.stringify(pool.json?.result)}; mining a block`);
  await post(url, { jsonrpc: "2.0", id: 1, method: "evm_mine", params: [] });
  const mined = (await minedCounts(url, [{ address }], want, 5_000))[0];
  if (mined >= want) return mined;
  // anvil may also leave transactions queued after the gap before them was mined (seen once in
  // a fresh-clone run: 2 mined, 18 queued, 0 pending, and a block mined nothing). The relay's
  // part is that the node holds each nonce: count the run of nonces from the mined count that
  // anvil's pool holds for the sender.
  const content = await post(url, { jsonrpc: "2.0", id: 1, method: "txpool_content", params: [] });
  const held = new Set();
  for (const part of ["pending", "queued"]) {
    for (const [from, byNonce] of Object.entries(content.json?.result?.[part] ?? {})) {
      if (from.toLowerCase() === address.toLowerCase()) Object.keys(byNonce).forEach((n) => held.add(Number(n)));
    }
  }
  let run = mined;
  while (held.has(run)) run += 1;
  console.log(`# still ${mined} mined after a block; anvil's pool holds the run up to ${run}`);
  return run;
};

/** The upstream's records of one sender's transactions. */
const seenOf = (s, account) => s.proxy.seen.filter((r) => r.sender === account.address.toLowerCase());

/** `a`'s 40 transactions fired at once through `s`: each client gets its hash, all are mined, each
 * nonce reached the upstream once; the upstream's records of them. */
async function fortyAtOnce(s, a) {
  const raws = await Promise.all(Array.from({ length: 40 }, (_, n) => signTransfer(a, n)));
  const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
  assert.deepEqual(
    answers.map((x) => x.json.result),
    raws.map((raw) => keccak256(raw)),
    JSON.stringify(answers.find((x) => !x.json.result)?.json),
  );
  assert.equal(await minedCount(s.anvil.url, a.address, 40), 40, "all mined");
  const seen = seenOf(s, a);
  assert.equal(seen.length, 40, "each nonce reached the upstream once");
  assert.equal(new Set(seen.map((r) => r.nonce)).size, 40);
  return seen;
}

test("one sender's 40 transactions fired at once over a 50 ms hop go out together: all mined, each nonce reaching the upstream once, at most SEND_WINDOW (16) at the upstream at a time", async () => {
  const s = await stack({ proxy: { strictNonce: false, latency: () => 50 }, vars: { SEND_WINDOW: undefined } });
  try {
    const seen = await fortyAtOnce(s, devAccount(1));
    const most = mostAtOnce(seen);
    console.log(`# at most ${most} of the sender's transactions at the upstream at once`);
    assert.ok(most > 1, "sent together, not one per round trip");
    assert.ok(most <= 16, `${most} at once, over the window`);
    assert.equal(s.relay.events("gap_wait_expired").length, 0);
  } finally {
    await s.stop();
  }
});

test("under production's six-connection cap (the test upstream holds a seventh request until one is answered), one sender's 40 go out as batches in nonce order: all mined, each nonce reaching the upstream once", async () => {
  const s = await stack({ proxy: { strictNonce: false, latency: () => 50, connectionCap: 6 }, vars: { SEND_WINDOW: undefined } });
  try {
    const seen = await fortyAtOnce(s, devAccount(9));
    // Sends that share a request came as one batch, in nonce order.
    const sendRequests = s.proxy.requests.filter((q) => (Array.isArray(q.body) ? q.body : [q.body]).some((m) => m?.method === "eth_sendRawTransaction"));
    const batches = sendRequests.filter((q) => Array.isArray(q.body));
    for (const q of batches) {
      const nonces = q.body.map((m) => seen.find((r) => r.hash === keccak256(m.params[0]))?.nonce);
      assert.deepEqual(nonces, [...nonces].sort((x, y) => x - y), "a batch is in nonce order");
    }
    const { capped, mostWaiting } = s.proxy.capStats();
    console.log(`# 40 sends in ${sendRequests.length} requests (${batches.length} batches); ${capped} requests waited for a slot, at most ${mostWaiting} at once`);
    assert.ok(mostWaiting <= 6, "the cap held");
    assert.ok(batches.length > 0 && sendRequests.length < 40, "the window's ready members share requests");
  } finally {
    await s.stop();
  }
});

test("SEND_WINDOW=1 (and every strict upstream): one of a sender's transactions at the upstream at a time", async () => {
  const s = await stack({ proxy: { strictNonce: false, latency: () => 20 }, vars: { SEND_WINDOW: "1" } });
  try {
    const a = devAccount(2);
    const raws = await Promise.all(Array.from({ length: 10 }, (_, n) => signTransfer(a, n)));
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
    assert.ok(answers.every((x) => x.json.result));
    assert.equal(await minedCount(s.anvil.url, a.address, 10), 10);
    assert.equal(mostAtOnce(seenOf(s, a)), 1);
  } finally {
    await s.stop();
  }
});

test("a member in the middle of a window refused (insufficient funds): it gets the node's refusal, the valid ones go in once each, and a corrected transaction with its nonce lets all be mined", async () => {
  const s = await stack({ proxy: { strictNonce: false, latency: () => 30 }, vars: { SEND_WINDOW: undefined } });
  try {
    const a = devAccount(3);
    const raws = await Promise.all(
      Array.from({ length: 10 }, (_, n) => signTransfer(a, n, n === 5 ? { value: 10n ** 30n } : {})),
    );
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
    for (let n = 0; n < 10; n++) {
      if (n === 5) {
        assert.match(answers[n].json.error?.message ?? "", /insufficient funds/i, JSON.stringify(answers[n].json));
      } else {
        assert.equal(answers[n].json.result, keccak256(raws[n]), `nonce ${n}: ${JSON.stringify(answers[n].json)}`);
      }
    }
    // 0..4 are mined; 6..9 wait in the node's queued pool for nonce 5.
    assert.equal(await minedCount(s.anvil.url, a.address, 5), 5);
    const corrected = await signTransfer(a, 5);
    const fix = await sendRaw(s.relay.url, corrected);
    assert.equal(fix.json.result, keccak256(corrected), JSON.stringify(fix.json));
    assert.equal(await minedCount(s.anvil.url, a.address, 10), 10, "nothing stuck");
    const accepted = seenOf(s, a).filter((r) => r.accepted);
    assert.equal(accepted.length, 10, "each valid transaction went in once");
    assert.equal(new Set(accepted.map((r) => r.nonce)).size, 10);
    assert.equal(seenOf(s, a).filter((r) => r.hash === keccak256(raws[5])).length, 1, "the refused one was sent once");
    assert.ok(mostAtOnce(seenOf(s, a)) > 1, "the members went out together");
  } finally {
    await s.stop();
  }
});

test("a window whose answers are lost (one member dropped before it reached the node, one after it went in): every transaction mined exactly once, every client gets its hash", async () => {
  const before = devAccount(4);
  const after = devAccount(5);
  const dropped = new Set();
  const s = await stack({
    proxy: {
      strictNonce: false,
      latency: () => 30,
      drop: (tx) => {
        const key = `${tx.sender}/${tx.nonce}`;
        if (tx.nonce !== 3 || dropped.has(key)) return null;
        dropped.add(key);
        return tx.sender === before.address.toLowerCase() ? "before" : tx.sender === after.address.toLowerCase() ? "after" : null;
      },
    },
    vars: { SEND_WINDOW: undefined },
  });
  try {
    for (const a of [before, after]) {
      const raws = await Promise.all(Array.from({ length: 8 }, (_, n) => signTransfer(a, n)));
      const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
      assert.deepEqual(
        answers.map((x) => x.json.result),
        raws.map((raw) => keccak256(raw)),
        JSON.stringify(answers.find((x) => !x.json.result)?.json),
      );
      assert.equal(await minedCount(s.anvil.url, a.address, 8), 8, "all mined");
      const seen = seenOf(s, a);
      const accepted = seen.filter((r) => r.accepted && !r.dropped);
      assert.equal(new Set(seen.filter((r) => r.accepted).map((r) => r.nonce)).size, 8);
      // Only what lost its answer was sent again: the dropped member, and the members of a batch
      // it went in (ready members go as one batch, docs/design.md "Send window"); nothing else twice.
      const lostWith = new Set();
      for (const q of s.proxy.requests) {
        const members = (Array.isArray(q.body) ? q.body : [q.body]).filter((m) => m?.method === "eth_sendRawTransaction");
        const hashes = members.map((m) => keccak256(m.params[0]));
        if (seen.some((r) => r.dropped && hashes.includes(r.hash))) hashes.forEach((h) => lostWith.add(seen.find((r) => r.hash === h).nonce));
      }
      const resent = [...new Set(seen.filter((r, i) => seen.findIndex((o) => o.hash === r.hash) !== i).map((r) => r.nonce))];
      assert.ok(
        resent.every((n) => lostWith.has(n)) && (!seen.some((r) => r.dropped) || resent.includes(3)),
        JSON.stringify({ resent, lostWith: [...lostWith], seen: seen.map((r) => [r.nonce, r.accepted, r.dropped]) }),
      );
      assert.ok(accepted.length >= 7);
      assert.ok(mostAtOnce(seen) > 1, "the members went out together");
    }
    assert.equal(dropped.size, 2, "both faults happened");
  } finally {
    await s.stop();
  }
});

for (const broadcast of ["all", "none"]) {
  test(`two upstreams, SEND_BROADCAST=${broadcast}: the window goes to ${broadcast === "all" ? "each upstream, whole" : "the preferred upstream"}, every transaction mined once`, async () => {
    const anvil = await startAnvil();
    // Under `none` the second is clearly slower (400 ms), so the first stays the best whatever a
    // busy machine does to one early latency (an upstream whose median is over twice another's
    // and 50 ms more goes behind it: src/upstream/rotation.rs), and "the preferred" is the first.
    const slowSecond = broadcast === "none" ? 400 : 40;
    const [a, b] = await Promise.all([40, slowSecond].map((ms) => startProxy({ upstream: anvil.url, strictNonce: false, latency: () => ms })));
    const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${a.url},${b.url}`, SEND_BROADCAST: broadcast, SEND_WINDOW: undefined } });
    try {
      const account = devAccount(6);
      const raws = await Promise.all(Array.from({ length: 20 }, (_, n) => signTransfer(account, n)));
      const answers = await Promise.all(raws.map((raw, i) => sendRaw(relay.url, raw, i)));
      assert.deepEqual(
        answers.map((x) => x.json.result),
        raws.map((raw) => keccak256(raw)),
        JSON.stringify(answers.find((x) => !x.json.result)?.json),
      );
      assert.equal(await minedCount(anvil.url, account.address, 20), 20, "all mined");
      const sender = account.address.toLowerCase();
      const on = (p) => p.seen.filter((r) => r.sender === sender);
      if (broadcast === "all") {
        for (let i = 0; i < 40 && on(a).length + on(b).length < 40; i++) await sleep(50);
        for (const p of [a, b]) {
          assert.deepEqual(new Set(on(p).map((r) => r.nonce)).size, 20, "every member reached each upstream");
          assert.ok(mostAtOnce(on(p)) > 1, "as a window");
        }
      } else {
        assert.equal(new Set(on(a).map((r) => r.nonce)).size, 20, "every member reached the preferred upstream");
        assert.ok(mostAtOnce(on(a)) > 1, "as a window");
      }
      const accepted = [...on(a), ...on(b)].filter((r) => r.accepted && r.hash);
      assert.equal(new Set(accepted.map((r) => r.nonce)).size, 20);
    } finally {
      await relay.stop();
      await Promise.all([a.stop(), b.stop()]);
      anvil.stop();
    }
  });
}

test("the relay killed mid-window and started again on its state: every client ends with its hash, each transaction went in once", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-window-`);
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, latency: (req) => (req?.method === "eth_sendRawTransaction" ? 40 : 0) });
  const vars = { UPSTREAM_RPC_URL: proxy.url, SEND_WINDOW: undefined };
  const current = { relay: await startRelay({ vars, persist }) };
  let second;
  try {
    const account = devAccount(7);
    const raws = await Promise.all(Array.from({ length: 40 }, (_, n) => signTransfer(account, n)));
    // Each client sends its bytes again until it gets its hash.
    const clients = Promise.all(raws.map((raw, i) => sendUntilResult(current, raw, i)));
    for (let i = 0; i < 300 && proxy.seen.filter((r) => r.accepted).length < 10; i++) await sleep(10);
    const atKill = proxy.seen.filter((r) => r.accepted).length;
    current.relay.kill();
    await current.relay.stop().catch(() => {});
    second = await startRelay({ vars, persist });
    current.relay = second;
    const results = await clients;
    assert.ok(atKill < 40, `killed mid-burst (${atKill} in)`);
    assert.deepEqual(
      results.map((hash, i) => hash === keccak256(raws[i])),
      Array(raws.length).fill(true),
      "every client ends with its hash",
    );
    assert.equal(await minedCount(anvil.url, account.address, 40), 40, "all mined");
    const accepted = proxy.seen.filter((r) => r.accepted).map((r) => r.hash);
    assert.equal(new Set(accepted).size, accepted.length, "no transaction went in twice");
    assert.equal(accepted.length, 40);
  } finally {
    await second?.stop();
    await proxy.stop();
    anvil.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
