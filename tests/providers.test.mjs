// Provider profiles (issue 40): the upstreams as they really answer (tests/support/providers.mjs),
// first the profiles themselves against anvil (no relay), then the compiled relay on workerd
// behind them: one sender's 40 at once behind each batch limit and a per-member rate limit,
// tracking of 150 behind Erigon's and Besu's limits, reads behind a node stuck 30 blocks back and
// a node with a slow tail, refusals beside a node that swallows sends. What is asserted is the
// issue's "Done when"; each test prints its numbers first (`#` lines).
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, stack, post, rpc, sendRaw, devAccount, signTransfer, sleep, until, minedCount, minedCounts } from "./support/harness.mjs";
import { poolOf } from "./support/anvil-mend.mjs";
import { geth, erigon, besu, nethermind, hedera, reth, quicknode, chainstack, alchemy, lagging, stuck, hangsOnSends } from "./support/providers.mjs";

const call = (id, method = "eth_chainId", params = []) => ({ jsonrpc: "2.0", id, method, params });
const batchOf = (ids, method, params) => ids.map((id) => call(id, method, params));
const ids = (from, n) => Array.from({ length: n }, (_, i) => from + i);

// One anvil for the profiles' own tests.
let shared;
const sharedAnvil = () => (shared ??= startAnvil({ accounts: 4 }));
after(async () => (await shared)?.stop());

// ---- the profiles themselves, straight to the proxy ----------------------------------------------

test("profiles: a batch over the limit (6 at a limit of 5) gets each node's own answer; 5 pass", async () => {
  const anvil = await sharedAnvil();
  const tooLarge = "batch limit 5 exceeded (can increase by --rpc.batch.limit). Requested batch of size: 6";
  const cases = [
    [geth, 200, [{ jsonrpc: "2.0", id: 11, error: { code: -32600, message: "batch too large" } }]],
    [erigon, 200, [{ jsonrpc: "2.0", id: 11, error: { code: -32600, message: tooLarge } }]],
    [besu, 200, { jsonrpc: "2.0", id: null, error: { code: -32005, message: "Number of requests exceeds max batch size" } }],
    [nethermind, 503, { jsonrpc: "2.0", id: null, error: { code: -32005, message: "Batch size limit exceeded" } }],
    [reth, 200, { jsonrpc: "2.0", id: null, error: { code: -32010, message: "The batch request was too large", data: "Exceeded max limit of 5" } }],
    [hedera, 400, null],
  ];
  for (const [profile, status, body] of cases) {
    const proxy = await startProxy({ upstream: anvil.url, profile: profile({ batchLimit: 5 }) });
    try {
      const ok = await post(proxy.url, batchOf(ids(1, 5)));
      assert.equal(ok.status, 200, profile.name);
      assert.deepEqual(ok.json.map((a) => [a.id, a.result]), ids(1, 5).map((id) => [id, "0x7a69"]), profile.name);
      const over = await post(proxy.url, batchOf(ids(11, 6)));
      assert.equal(over.status, status, `${profile.name}: ${over.text}`);
      if (body) {
        assert.deepEqual(over.json, body, profile.name);
      } else {
        // Hedera's relay: one error object, the message prefixed with the request's id.
        assert.deepEqual(Object.keys(over.json).sort(), ["error", "id", "jsonrpc"]);
        assert.equal(over.json.id, null);
        assert.equal(over.json.error.code, -32203);
        assert.match(over.json.error.message, /^\[Request ID: [0-9a-f-]{36}\] Batch request amount 6 exceeds max 5$/);
      }
      assert.equal(proxy.profile.refusals.length, 1);
      assert.equal((await post(proxy.url, call(21))).json.result, "0x7a69", "a single request passes");
    } finally {
      await proxy.stop();
    }
  }
  // Erigon before its handler answered with an array (rpc/server.go): one object, -32000.
  const old = await startProxy({ upstream: anvil.url, profile: erigon({ batchLimit: 5, shape: "object" }) });
  try {
    const over = await post(old.url, batchOf(ids(11, 6)));
    assert.deepEqual(over.json, { jsonrpc: "2.0", id: null, error: { code: -32000, message: tooLarge } });
  } finally {
    await old.stop();
  }
});

test("profiles: QuickNode and Chainstack answer a batch's members past the rate inside a 200 array, a single request past it with 429; Alchemy counts compute units and refuses a send in a batch", async () => {
  const anvil = await sharedAnvil();
  const quick = "5/second request limit reached - reduce calls per second or upgrade your account at quicknode.com";
  const chain = "You've exceeded the RPS limit available on the current plan.";
  for (const [profile, code, message] of [
    [quicknode({ perSecond: 5 }), -32007, quick],
    [chainstack({ perSecond: 5 }), -32005, chain],
  ]) {
    const proxy = await startProxy({ upstream: anvil.url, profile });
    try {
      const batch = await post(proxy.url, batchOf(ids(1, 8)));
      assert.equal(batch.status, 200, profile.name);
      assert.deepEqual(batch.json.slice(0, 5).map((a) => [a.id, a.result]), ids(1, 5).map((id) => [id, "0x7a69"]));
      assert.deepEqual(batch.json.slice(5), ids(6, 3).map((id) => ({ jsonrpc: "2.0", id, error: { code, message } })), profile.name);
      assert.deepEqual(proxy.requests.length, 1);
      const single = await post(proxy.url, call(9));
      assert.equal(single.status, 429, profile.name);
      assert.deepEqual(single.json, { jsonrpc: "2.0", id: 9, error: { code, message } });
      await sleep(1050);
      assert.equal((await post(proxy.url, call(10))).json.result, "0x7a69", "the next second");
      assert.equal(profile.refusals.length, 4);
    } finally {
      await proxy.stop();
    }
  }
  const cu = alchemy({ computeUnitsPerSecond: 100 });
  const proxy = await startProxy({ upstream: anvil.url, profile: cu });
  try {
    const raw = await signTransfer(devAccount(3), 0);
    const withSend = await post(proxy.url, [call(1), call(2, "eth_sendRawTransaction", [raw])]);
    assert.equal(withSend.status, 200);
    assert.equal(withSend.json.id, null);
    assert.equal(withSend.json.error.code, -32600);
    assert.match(withSend.json.error.message, /^Unsupported methods \[eth_sendRawTransaction\] in batch call/);
    assert.equal(proxy.seen.length, 0, "the send never reached the node");
    // Six balances at 20 CU each against 100 CUPS: five answered, the sixth refused with code 429.
    const address = devAccount(3).address;
    const reads = await post(proxy.url, batchOf(ids(1, 6), "eth_getBalance", [address, "latest"]));
    assert.equal(reads.status, 200);
    assert.equal(reads.json.filter((a) => a.result).length, 5);
    assert.equal(reads.json[5].error.code, 429);
    assert.match(reads.json[5].error.message, /^Your app has exceeded its compute units per second capacity/);
    const single = await post(proxy.url, call(7, "eth_blockNumber"));
    assert.equal(single.status, 429);
    assert.equal(single.json.error.code, 429);
  } finally {
    await proxy.stop();
  }
});

test("profiles: a stuck node answers every read as of a head 30 blocks behind the real one; a lagging node answers its tail late; a node that swallows sends answers everything else", async () => {
  const anvil = await sharedAnvil();
  await rpc(anvil.url, "anvil_mine", ["0x28"]);
  const real = Number(BigInt((await rpc(anvil.url, "eth_blockNumber")).result));
  const behind = await startProxy({ upstream: anvil.url, profile: stuck({ behind: 30 }) });
  try {
    const head = real - 30;
    assert.equal(Number(BigInt((await rpc(behind.url, "eth_blockNumber")).result)), head);
    assert.equal(Number(BigInt((await rpc(behind.url, "eth_getBlockByNumber", ["latest", false])).result.number)), head);
    assert.equal((await rpc(behind.url, "eth_getBlockByNumber", [`0x${(head + 1).toString(16)}`, false])).result, null, "a block above its head is null");
    assert.equal(Number(BigInt((await rpc(behind.url, "eth_getBlockByNumber", [`0x${head.toString(16)}`, false])).result.number)), head);
    const address = devAccount(2).address;
    assert.equal(
      (await rpc(behind.url, "eth_getTransactionCount", [address, "latest"])).result,
      (await rpc(anvil.url, "eth_getTransactionCount", [address, `0x${head.toString(16)}`])).result,
    );
    // A transaction mined now (in block real + 1) is one it has not seen mined.
    const raw = await signTransfer(devAccount(2), 0);
    const sent = await rpc(anvil.url, "eth_sendRawTransaction", [raw]);
    const hash = sent.result;
    assert.ok(hash, JSON.stringify(sent));
    // anvil mines it in a task of its own: its receipt may come a moment after the answer.
    assert.ok(await until(async () => (await rpc(anvil.url, "eth_getTransactionReceipt", [hash])).result, 5_000), "mined at the node");
    assert.equal((await rpc(behind.url, "eth_getTransactionReceipt", [hash])).result, null);
    assert.equal(Number(BigInt((await rpc(behind.url, "eth_blockNumber")).result)), head + 1, "it follows the head, 30 behind");
  } finally {
    await behind.stop();
  }

  const slow = lagging({ share: 0.15, lateMs: 1500, seed: 7 });
  const tail = await startProxy({ upstream: anvil.url, profile: slow });
  try {
    const times = await Promise.all(Array.from({ length: 40 }, async (_, i) => (await post(tail.url, call(i))).ms));
    const late = slow.late;
    console.log(`# lagging: ${late} of 40 answers held 1.5 s; most in flight at the proxy ${tail.flightStats().most}`);
    assert.ok(late >= 1 && late <= 15, `${late} late`);
    assert.equal(slow.lateIds.length, late);
    // A lower bound only (a timer never fires early): each one it held took at least its delay.
    for (const id of slow.lateIds) assert.ok(times[id] >= 1500, `request ${id} held, answered after ${times[id]} ms`);
    assert.ok(tail.flightStats().most >= late, "the late ones were in flight together");
    assert.equal(tail.flightStats().now, 0);
  } finally {
    await tail.stop();
  }

  const swallow = await startProxy({ upstream: anvil.url, profile: hangsOnSends() });
  try {
    assert.equal((await rpc(swallow.url, "eth_chainId")).result, "0x7a69");
    const raw = await signTransfer(devAccount(1), 0);
    const sent = fetch(swallow.url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(call(1, "eth_sendRawTransaction", [raw])), signal: AbortSignal.timeout(1500) });
    await assert.rejects(sent, /abort|timeout/i, "never answered");
    assert.equal(swallow.seen.length, 1);
    assert.equal(swallow.seen[0].accepted, false);
    assert.equal((await rpc(swallow.url, "eth_blockNumber")).result !== undefined, true, "reads still answered");
  } finally {
    await swallow.stop();
  }
});

// ---- the relay behind them ------------------------------------------------------------------------

/**
 * One sender's 40 fired at once through the relay behind `profile` (50 ms hop, production's six
 * connections, the relay's default window, a 10 s deadline: 40 transfers need far less): what each
 * client got, what was mined, what reached the node.
 */
async function fortyAtOnce(profile, vars = {}) {
  const s = await stack({ proxy: { profile, latency: () => 50, connectionCap: 6 }, vars: { SEND_WINDOW: undefined, LOCK_MAX_HOLD_MS: "10000", ...vars } });
  try {
    const account = devAccount(1);
    const raws = await Promise.all(Array.from({ length: 40 }, (_, n) => signTransfer(account, n)));
    const started = performance.now();
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(s.relay.url, raw, i)));
    const wall = performance.now() - started;
    const hashes = answers.filter((a, i) => a.json?.result === keccak256(raws[i])).length;
    const errors = answers.filter((a) => !a.json?.result);
    let mined = 0;
    await until(async () => (mined = await minedCount(s.anvil.url, account.address)) >= 40, hashes === 40 ? 8000 : 3000);
    // Short of 40 (seen once, in a loaded run: 29, every nonce at the node once): where the rest
    // wait in anvil's pool, and whether 10 s more mine them (slow, or stuck in the node's pool).
    const short =
      mined < 40 && hashes === 40
        ? {
            pool: (await rpc(s.anvil.url, "txpool_status")).result,
            // The sender's nonces in anvil's pending and queued pools.
            inPool: await rpc(s.anvil.url, "txpool_content").then(({ result }) =>
              Object.fromEntries(["pending", "queued"].map((pool) => [pool, [...poolOf(result, account.address, [pool]).values()].join(",")])),
            ),
            mended: s.anvil.mended.length,
            lostByTheMender: s.anvil.lost.length,
            minedLater: (await minedCounts(s.anvil.url, [account], 40, 10_000))[0],
          }
        : null;
    const sender = account.address.toLowerCase();
    const seen = s.proxy.seen.filter((r) => r.sender === sender);
    const nonces = new Set(seen.map((r) => r.nonce));
    const twice = [...nonces].filter((n) => seen.filter((r) => r.nonce === n).length > 1).length;
    const batches = s.proxy.requests.filter((q) => Array.isArray(q.body) && q.body.some((m) => m?.method === "eth_sendRawTransaction")).length;
    const messages = [...new Set(errors.map((a) => `${a.json?.error?.code} ${a.json?.error?.message ?? a.text}`.slice(0, 110)))];
    return { s, hashes, errors: errors.length, messages, mined, short, sends: seen.length, nonces: nonces.size, twice, batches, refused: profile.refusals.length, wall };
  } catch (e) {
    await s.stop();
    throw e;
  }
}

const LIMITED = [
  ["geth", () => geth({ batchLimit: 5 })],
  ["Erigon", () => erigon({ batchLimit: 5 })],
  ["Besu", () => besu({ batchLimit: 5 })],
  ["Nethermind", () => nethermind({ batchLimit: 5 })],
  ["Hedera's relay", () => hedera({ batchLimit: 5 })],
  ["QuickNode (25/s)", () => quicknode({ perSecond: 25 })],
];
for (const [name, make] of LIMITED) {
  for (const retries of [undefined, "0"]) {
    const setting = retries === undefined ? "" : `, UPSTREAM_RETRIES=${retries}`;
    const limit = name.startsWith("QuickNode") ? "a per-member rate limit" : "a batch limit of 5";
    test(`behind ${name} (${limit}${setting}): one sender's 40 at once, every client its hash, all mined, each nonce at the node once, 0 errors`, async () => {
      const profile = make();
      const r = await fortyAtOnce(profile, retries === undefined ? {} : { UPSTREAM_RETRIES: retries });
      try {
        console.log(
          `# ${name}${setting}: ${r.hashes}/40 hashes, ${r.errors} errors in ${r.wall.toFixed(0)} ms; ${r.mined}/40 mined; ` +
            `${r.sends} sends reached the node (${r.nonces} nonces, ${r.twice} more than once); ${r.batches} send batches, ` +
            `${r.refused} refused by the profile; ${r.s.anvil.mended.length} mended in anvil's pool${r.messages.length ? `; errors: ${r.messages.join(" | ")}` : ""}`,
        );
        assert.equal(r.errors, 0, r.messages.join("\n"));
        assert.equal(r.hashes, 40);
        assert.equal(r.mined, 40, `all mined; short: ${JSON.stringify(r.short)}`);
        assert.equal(r.nonces, 40, "every nonce reached the node");
        assert.equal(r.sends, 40, "each nonce reached the node once");
      } finally {
        await r.s.stop();
      }
    });
  }
}

const view = async (relayUrl, address) => (await fetch(`${relayUrl}/senders/${address}`, { headers: { authorization: "Bearer t" } })).json();

// The issue's "Done when" at the default limit (100), and the same below the relay's batch of a
// check (20: the issue's point 3, batches cut to the limit learned, the single-request fallback
// at most 4 in flight).
for (const [name, limit, make] of [
  ["Erigon", 100, () => erigon({ batchLimit: 100 })],
  ["Besu", 100, () => besu({ batchLimit: 100 })],
  ["Erigon", 20, () => erigon({ batchLimit: 20 })],
  ["Besu", 20, () => besu({ batchLimit: 20 })],
]) {
  test(`tracking behind ${name} (batch limit ${limit}) with 150 pending: all confirmed once mined, at most 4 requests in flight at once`, async () => {
    const profile = make();
    const s = await stack({
      anvil: { extraArgs: ["--no-mining"] },
      proxy: { profile },
      vars: { ADMIN_TOKEN: "t", TRACK_INTERVAL_S: "1", SEND_WINDOW: undefined },
    });
    try {
      const account = devAccount(2);
      const raws = await Promise.all(Array.from({ length: 150 }, (_, n) => signTransfer(account, n)));
      // In three bursts of 50 (a sender's queue holds 64).
      let hashes = 0;
      for (let from = 0; from < 150; from += 50) {
        const answers = await Promise.all(raws.slice(from, from + 50).map((raw, i) => sendRaw(s.relay.url, raw, from + i)));
        hashes += answers.filter((a, i) => a.json?.result === keccak256(raws[from + i])).length;
      }
      const pending = (await view(s.relay.url, account.address)).tracked;
      // A check while nothing is mined (the counts vouch for all), then the block.
      await sleep(1500);
      s.proxy.resetFlight();
      const fromRequest = s.proxy.requests.length;
      const fromRefusals = profile.refusals.length;
      await rpc(s.anvil.url, "evm_mine");
      const mined = await minedCount(s.anvil.url, account.address);
      const settledMs = await (async () => {
        const start = performance.now();
        const ok = await until(async () => (await view(s.relay.url, account.address)).tracked === 0, 8000, 200);
        return ok ? performance.now() - start : null;
      })();
      const v = await view(s.relay.url, account.address);
      const during = s.proxy.requests.slice(fromRequest);
      const byHash = during.flatMap((q) => [q.body].flat()).filter((m) => m?.method === "eth_getTransactionByHash").length;
      const largest = Math.max(0, ...during.map((q) => (Array.isArray(q.body) ? q.body.length : 1)));
      const most = s.proxy.flightStats().most;
      console.log(
        `# tracking behind ${name} (limit ${limit}): ${hashes}/150 hashes, ${pending} tracked before the block, ${mined} mined; ` +
          `after it: ${v.tracked} still tracked, ${v.counters?.included} included ${settledMs === null ? "(not settled in 8 s)" : `in ${settledMs.toFixed(0)} ms`}; ` +
          `${during.length} requests (${byHash} by-hash lookups, largest batch ${largest}), ${profile.refusals.length - fromRefusals} refused by the profile; ` +
          `at most ${most} requests in flight at once`,
      );
      assert.equal(hashes, 150);
      assert.equal(mined, 150);
      assert.equal(v.tracked, 0, "all confirmed");
      assert.equal(v.counters?.included, 150, "each one included");
      assert.ok(most <= 4, `${most} requests in flight at once`);
    } finally {
      await s.stop();
    }
  });
}

test("two upstreams, one stuck 30 blocks behind and one with a slow tail (15% of answers 1.5 s late), a block a second: 200 polls, 0 backwards heads, 0 nulls for announced blocks, the stuck one logged as lagging", async () => {
  const anvil = await startAnvil({ accounts: 2, extraArgs: ["--block-time", "1"] });
  await rpc(anvil.url, "anvil_mine", ["0x28"]);
  const tail = await startProxy({ upstream: anvil.url, profile: lagging({ share: 0.15, lateMs: 1500, seed: 40 }) });
  const behind = await startProxy({ upstream: anvil.url, profile: stuck({ behind: 30 }) });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${tail.url},${behind.url}` } });
  try {
    // Four clients polling at once, 50 polls each: each reads the head, then that block. A head is
    // backwards when it is below one the relay had already announced (to any client) before this
    // read was sent.
    const announced = []; // { n, at }
    const stats = { polls: 0, backwards: 0, worst: 0, nulls: 0, wrong: 0, failed: 0 };
    const poller = async () => {
      for (let i = 0; i < 50; i++) {
        const sentAt = performance.now();
        const known = Math.max(-1, ...announced.filter((a) => a.at < sentAt).map((a) => a.n));
        const head = await rpc(relay.url, "eth_blockNumber");
        stats.polls += 1;
        if (!head?.result) {
          stats.failed += 1;
          continue;
        }
        const n = Number(BigInt(head.result));
        announced.push({ n, at: performance.now() });
        if (n < known) {
          stats.backwards += 1;
          stats.worst = Math.max(stats.worst, known - n);
        }
        const block = await rpc(relay.url, "eth_getBlockByNumber", [head.result, false]);
        if (block?.result === null) stats.nulls += 1;
        else if (!block?.result) stats.failed += 1;
        else if (Number(BigInt(block.result.number)) !== n) stats.wrong += 1;
      }
    };
    const started = performance.now();
    await Promise.all([poller(), poller(), poller(), poller()]);
    const port = new URL(behind.url).port;
    const lagging_ = relay.logs.filter((l) => l.includes('"upstream_lagging"'));
    const namesStuck = lagging_.filter((l) => l.includes(`:${port}`));
    const reads = (p) => p.requests.flatMap((q) => [q.body].flat()).filter((m) => m?.method === "eth_blockNumber" || m?.method === "eth_getBlockByNumber").length;
    console.log(
      `# stuck + slow tail: ${stats.polls} polls in ${((performance.now() - started) / 1000).toFixed(1)} s: ${stats.backwards} backwards heads (by up to ${stats.worst}), ` +
        `${stats.nulls} nulls for announced blocks, ${stats.wrong} other blocks, ${stats.failed} failed; reads at the slow-tail one ${reads(tail)}, at the stuck one ${reads(behind)}; ` +
        `upstream_lagging lines ${lagging_.length} (${namesStuck.length} naming the stuck one)`,
    );
    assert.equal(stats.failed, 0);
    assert.equal(stats.backwards, 0, "eth_blockNumber never went backwards");
    assert.equal(stats.nulls, 0, "every announced block was answered");
    assert.ok(namesStuck.length >= 1, "the stuck upstream logged as upstream_lagging");
  } finally {
    await relay.stop();
    await tail.stop();
    await behind.stop();
    anvil.stop();
  }
});

test("a node that hangs on sends beside a healthy one, SEND_BROADCAST=all: once its sends have timed out, refusals are answered from the healthy one at once", async () => {
  const anvil = await startAnvil({ accounts: 3 });
  const swallow = await startProxy({ upstream: anvil.url, profile: hangsOnSends() });
  const healthy = await startProxy({ upstream: anvil.url, strictNonce: false });
  const deadline = 8000;
  const relay = await startRelay({
    vars: { UPSTREAM_RPC_URL: `${swallow.url},${healthy.url}`, SEND_BROADCAST: "all", UPSTREAM_TIMEOUT_MS: "2000", LOCK_MAX_HOLD_MS: String(deadline) },
  });
  try {
    const account = devAccount(1);
    // Three accepted sends: each answered by the healthy node's acceptance; their copies at the
    // other never answer, and time out after UPSTREAM_TIMEOUT_MS.
    const accepted = [];
    for (let n = 0; n < 3; n++) {
      const raw = await signTransfer(account, n);
      const a = await sendRaw(relay.url, raw, n);
      accepted.push({ ok: a.json?.result === keccak256(raw), ms: a.ms });
    }
    // Their copies at the hanging node time out (UPSTREAM_TIMEOUT_MS) and cool it.
    const cooled = () => relay.logs.some((l) => l.includes('"upstream_cooling"'));
    assert.ok(await until(cooled, 15_000), "the hanging node cooled by its swallowed copies");
    const poor = await signTransfer(account, 3, { value: 10n ** 30n });
    const funds = await sendRaw(relay.url, poor, 10);
    const cheap = await signTransfer(account, 3, { maxFeePerGas: 1n, maxPriorityFeePerGas: 1n });
    const fee = await sendRaw(relay.url, cheap, 11);
    const fmt = (a) => `${a.ms.toFixed(0)} ms ${a.json?.error ? `${a.json.error.code} ${a.json.error.message}` : a.json?.result}`.slice(0, 120);
    console.log(
      `# hangs on sends: accepted ${accepted.filter((a) => a.ok).length}/3 in ${accepted.map((a) => a.ms.toFixed(0)).join(", ")} ms; ` +
        `insufficient funds answered in ${fmt(funds)}; a fee under the base fee answered in ${fmt(fee)}; ` +
        `sends at the hanging node ${swallow.seen.length}, at the healthy one ${healthy.seen.length}; cool-downs logged ${relay.logs.filter((l) => l.includes('"upstream_cooling"')).length}`,
    );
    assert.deepEqual(accepted.map((a) => a.ok), [true, true, true]);
    // The nodes' own refusals, not an unknown outcome: the refusals went to the healthy node
    // alone, so no copy waited on the hanging one (what the upstreams saw, not a wall time).
    assert.match(funds.json?.error?.message ?? "", /insufficient funds/i, funds.text);
    assert.match(fee.json?.error?.message ?? "", /base fee/i, fee.text);
    const refused = new Set([keccak256(poor), keccak256(cheap)]);
    assert.equal(swallow.seen.filter((r) => refused.has(r.hash)).length, 0, "no refused copy at the hanging node");
    assert.equal(healthy.seen.filter((r) => refused.has(r.hash)).length, 2);
  } finally {
    await relay.stop();
    await swallow.stop();
    await healthy.stop();
    anvil.stop();
  }
});
