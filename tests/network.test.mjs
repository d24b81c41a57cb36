// Every transaction through once, in order, over a network that drops connections: the compiled
// relay on workerd, anvil behind the strict-nonce test proxy, which drops connections before a
// transaction is forwarded or after it went in, or speaks HTTP/1.0 and closes every connection.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, stack, sendRaw, rpc, devAccount, signTransfer, signBurst, minedCounts, sleep } from "./support/harness.mjs";

/** A small seeded PRNG (mulberry32), so a run's drops can be replayed. */
function prng(seed) {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/**
 * About 5% of the sends dropped, both kinds: the first try of three chosen transactions is
 * dropped before it is forwarded and of three others after it went in; any other send (retries
 * included) is dropped with probability 2%, half of each kind.
 */
function dropper(accounts, seed) {
  const random = prng(seed);
  const chosen = new Map();
  accounts.slice(0, 6).forEach((a, i) => chosen.set(`${a.address.toLowerCase()}:${3 + i}`, i < 3 ? "before" : "after"));
  const tried = new Set();
  return (tx) => {
    const key = `${tx.sender}:${tx.nonce}`;
    const first = !tried.has(key);
    tried.add(key);
    if (first && chosen.has(key)) return chosen.get(key);
    const r = random();
    return r < 0.01 ? "before" : r < 0.02 ? "after" : null;
  };
}

/** S senders x N transactions fired at once through a relay over a dropping proxy. */
async function droppedBurst({ senders = 10, perSender = 10, vars = {}, http10 = false, seed = 7 } = {}) {
  const anvil = await startAnvil({ accounts: senders + 1 });
  const accounts = Array.from({ length: senders }, (_, i) => devAccount(i));
  const senderOfRaw = new Map();
  const proxy = await startProxy({
    upstream: anvil.url,
    drop: dropper(accounts, seed),
    http10,
    senderOf: (raw) => senderOfRaw.get(raw),
  });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ...vars } });
  try {
    const raws = await signBurst(accounts, perSender, senderOfRaw);
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(relay.url, raw, i)));
    // Anvil mines each transaction at once; give the last block up to 3 s in all.
    const mined = await minedCounts(anvil.url, accounts, perSender, 3000);
    return { raws, answers, mined, proxy, relay, accounts };
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
}

/** What a burst's accounting says: hashes answered, refusals at the upstream that were not resends. */
function account({ raws, answers, proxy }) {
  const wrongHash = answers.filter((a, i) => a.json?.result !== keccak256(raws[i]));
  const acceptedHashes = new Set(proxy.seen.filter((r) => r.accepted).map((r) => r.hash));
  // A refusal at the strict upstream is fine only for a resend of a transaction it already took.
  const badRefusals = proxy.seen.filter((r) => r.answeredAt && !r.accepted && !r.dropped && !acceptedHashes.has(r.hash));
  const dropped = { before: proxy.seen.filter((r) => r.dropped === "before").length, after: proxy.seen.filter((r) => r.dropped === "after").length };
  return { wrongHash, badRefusals, dropped };
}

test("10 senders x 10 transactions with ~5% of sends dropped (before and after they went in): all 100 accepted once", async () => {
  const run = await droppedBurst();
  const { wrongHash, badRefusals, dropped } = account(run);
  const retried = run.relay.events("tx_retried").length;
  console.log(`# dropped before ${dropped.before}, after ${dropped.after}; ${retried} retries; ${run.proxy.seen.length} sends for 100 transactions`);
  assert.ok(dropped.before >= 3 && dropped.after >= 3, `both kinds dropped: ${JSON.stringify(dropped)}`);
  assert.deepEqual(wrongHash.map((a) => a.text).slice(0, 3), [], `${wrongHash.length} clients did not get their hash`);
  assert.deepEqual(run.mined, Array(10).fill(10), "every sender's 10 mined, once each");
  assert.deepEqual(badRefusals, [], "the upstream refused nothing but resends of what it had");
  assert.equal(run.relay.events("gap_wait_expired").length, 0);
});

test("the same burst with UPSTREAM_RETRIES=0 loses transactions (what the retries guard)", async () => {
  const run = await droppedBurst({ vars: { UPSTREAM_RETRIES: "0" } });
  const { wrongHash } = account(run);
  console.log(`# without retries: ${wrongHash.length} of 100 clients did not get their hash; mined ${run.mined.reduce((a, b) => a + b)}`);
  assert.ok(wrongHash.length > 0, "without retries some clients get errors");
});

test("the same burst against an HTTP/1.0 upstream that closes every connection: all accepted once", async () => {
  const run = await droppedBurst({ http10: true, seed: 11 });
  const { wrongHash, badRefusals, dropped } = account(run);
  const retried = run.relay.events("tx_retried").length;
  console.log(`# HTTP/1.0: dropped before ${dropped.before}, after ${dropped.after}; ${retried} retries`);
  assert.deepEqual(wrongHash.map((a) => a.text).slice(0, 3), [], `${wrongHash.length} clients did not get their hash`);
  assert.deepEqual(run.mined, Array(10).fill(10));
  assert.deepEqual(badRefusals, []);
});

test("one transaction sent 3 times at once: one upstream send, three answers with its hash; resent after it was mined: its hash, no send", async () => {
  const s = await stack({ proxy: { latency: (req) => (req?.method === "eth_sendRawTransaction" ? 100 : 0) } });
  try {
    const account = devAccount(3);
    const raw = await signTransfer(account, 0);
    const answers = await Promise.all([1, 2, 3].map((id) => sendRaw(s.relay.url, raw, id)));
    assert.deepEqual(answers.map((a) => a.json.result), Array(3).fill(keccak256(raw)), answers.map((a) => a.text).join("\n"));
    assert.deepEqual(answers.map((a) => a.json.id), [1, 2, 3], "each with its own id");
    assert.equal(s.proxy.sendsOf(keccak256(raw)), 1, "one upstream send");
    const again = await sendRaw(s.relay.url, raw, 4);
    assert.equal(again.json.result, keccak256(raw));
    assert.equal(s.proxy.sendsOf(keccak256(raw)), 1, "no send for the resend");
    assert.equal(s.relay.events("tx_deduplicated").length, 3);
  } finally {
    await s.stop();
  }
});

test("an answer lost after the transaction went in: the retry's 'Nonce too low' becomes the hash", async () => {
  const account = devAccount(4);
  const sender = account.address.toLowerCase();
  let armed = true;
  const s = await stack({ proxy: { drop: (tx) => (tx.sender === sender && armed ? ((armed = false), "after") : null) } });
  try {
    const raw = await signTransfer(account, 0);
    const answer = await sendRaw(s.relay.url, raw);
    assert.equal(answer.json.result, keccak256(raw), answer.text);
    const tries = s.proxy.seen.filter((r) => r.hash === keccak256(raw));
    assert.equal(tries.length, 2);
    assert.equal(tries[0].dropped, "after");
    assert.equal(tries[1].accepted, false, "the strict upstream refused the resend (nonce too low)");
    const next = await sendRaw(s.relay.url, await signTransfer(account, 1));
    assert.ok(next.json.result, "the next nonce is known: 1 goes at once");
    // At once: it waited out no gap (for a nonce 0 the relay thought missing) and no lease.
    assert.equal(s.relay.events("gap_wait_expired").length, 0, s.relay.logs.join("\n"));
    assert.equal(s.relay.events("force_release").length, 0, s.relay.logs.join("\n"));
    const ones = s.proxy.seen.filter((r) => r.sender === sender && r.nonce === 1);
    assert.deepEqual(ones.map((r) => r.accepted), [true], "sent once, and the strict upstream took it as the next nonce");
    console.log(`# the next transaction answered after ${next.ms.toFixed(0)} ms`);
  } finally {
    await s.stop();
  }
});

test("an answer lost after the transaction went in: the retry's 'already known' becomes the hash", async () => {
  // Anvil mines a block a second here, so the resend finds the transaction still in its pool
  // and anvil answers "transaction already imported".
  const anvil = await startAnvil({ extraArgs: ["--block-time", "2"] });
  const account = devAccount(5);
  let armed = true;
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, drop: () => (armed ? ((armed = false), "after") : null) });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url } });
  try {
    const raw = await signTransfer(account, 0);
    const answer = await sendRaw(relay.url, raw);
    assert.equal(answer.json.result, keccak256(raw), answer.text);
    assert.equal(proxy.sendsOf(keccak256(raw)), 2);
    const forwarded = relay.events("tx_forwarded");
    assert.equal(forwarded[0].label, "already_known", JSON.stringify(forwarded));
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("a terminal rejection of n in a shuffled burst n..n+9, n corrected within the gap wait: the rest go in order", async () => {
  const s = await stack({ vars: { NONCE_GAP_WAIT_MS: "3000" } });
  try {
    const account = devAccount(6);
    const sender = account.address.toLowerCase();
    // Nonce 0 with too little gas: anvil refuses it for itself ("intrinsic gas too low").
    const bad = await signTransfer(account, 0, { gas: 20000n });
    const rest = await Promise.all(Array.from({ length: 9 }, (_, k) => signTransfer(account, k + 1)));
    const shuffled = [bad, ...rest].map((raw, i) => ({ raw, i })).sort(() => Math.random() - 0.5);
    const pending = shuffled.map(({ raw, i }) => sendRaw(s.relay.url, raw, i));
    const refused = await pending[shuffled.findIndex(({ i }) => i === 0)];
    assert.match(refused.json?.error?.message ?? "", /intrinsic gas too low/, refused.text);
    const corrected = await sendRaw(s.relay.url, await signTransfer(account, 0), 100);
    assert.ok(corrected.json.result, corrected.text);
    const answers = await Promise.all(pending);
    const others = answers.filter((a) => a.json.id !== 0);
    assert.deepEqual(others.filter((a) => !a.json.result).map((a) => a.text), [], "1..9 all accepted");
    const accepted = s.proxy.seen.filter((r) => r.sender === sender && r.accepted).map((r) => r.nonce);
    assert.deepEqual(accepted, [0, 1, 2, 3, 4, 5, 6, 7, 8, 9], "in nonce order at the upstream");
    assert.equal(s.relay.events("gap_wait_expired").length, 0);
  } finally {
    await s.stop();
  }
});

test("a restarted Durable Object still knows the hashes it accepted (SQLite storage) and checks them by hash, without a send", async () => {
  const { mkdtemp, rm } = await import("node:fs/promises");
  const { tmpdir } = await import("node:os");
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url });
  const vars = { UPSTREAM_RPC_URL: proxy.url };
  try {
    const account = devAccount(7);
    const raw = await signTransfer(account, 0);
    const first = await startRelay({ vars, persist });
    assert.equal((await sendRaw(first.url, raw)).json.result, keccak256(raw));
    await first.stop();
    const second = await startRelay({ vars, persist });
    try {
      const again = await sendRaw(second.url, raw);
      assert.equal(again.json.result, keccak256(raw), again.text);
      assert.equal(proxy.sendsOf(keccak256(raw)), 1, "answered from storage and the upstream, not sent again");
      // Not vouched for after the restart: the upstream was asked by hash.
      assert.equal(second.events("tx_deduplicated")[0]?.label, "upstream");
    } finally {
      await second.stop();
    }
  } finally {
    await proxy.stop();
    anvil.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
