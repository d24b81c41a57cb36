// Refusing locally what the upstream would refuse (issue: strict upstreams and fork rules). The
// compiled relay on workerd, anvil behind the strict-nonce test proxy, which refuses nonce gaps as
// Hedera's consensus nodes do and records every transaction that reaches it.
//
// - UPSTREAM_POOL=strict (and `auto` on Hedera's chain id 296): a refused n with n+1..n+9 waiting
//   behind it refuses them at once, unsent, naming n; a gap that expires is refused instead of
//   sent; a corrected n within the gap wait lets the queue go on.
// - HARDFORK (default osaka): gas 20,999 for a transfer, calldata below the EIP-7623 floor,
//   49,153 bytes of init code and a gas limit of 2^24 + 1 are refused before the sender's object,
//   never sent; the same transactions made valid are mined by anvil.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { stack, sendRaw, rpc, devAccount, signTransfer, minedCount, sleep } from "./support/harness.mjs";

/** Waits until `address` has `want` mined transactions at `url`, at most `ms`; the count. */
async function mined(url, address, want, ms = 10_000) {
  const until = performance.now() + ms;
  let count;
  do {
    count = await minedCount(url, address);
    if (count >= want) return count;
    await sleep(100);
  } while (performance.now() < until);
  return count;
}

/** Sends each raw transaction as its own request, at once; each answer with its arrival time. */
function sendAll(url, raws) {
  return Promise.all(
    raws.map(async (raw) => {
      const res = await sendRaw(url, raw);
      return { ...res, at: performance.now() };
    }),
  );
}

test("strict: a refused n refuses n+1..n+9 at once, unsent, naming n (UPSTREAM_POOL=auto on Hedera's chain id 296)", async () => {
  const s = await stack({
    anvil: { extraArgs: ["--chain-id", "296"] },
    // CHAIN_ID unset: the relay learns 296 from the upstream, and auto means strict there.
    vars: { CHAIN_ID: undefined, NONCE_GAP_WAIT_MS: "3000", ADMIN_TOKEN: "strict-view-token" },
  });
  try {
    // An account with no funds: nonce 0 is refused as terminal (insufficient funds).
    const poor = privateKeyToAccount(`0x${"43".repeat(32)}`);
    const raws = [];
    for (let n = 0; n < 10; n++) raws.push(await signTransfer(poor, n, { chainId: 296 }));
    const above = sendAll(s.relay.url, raws.slice(1));
    await sleep(500); // n+1..n+9 are queued behind the missing n
    const n = await sendRaw(s.relay.url, raws[0]);
    const refusedAt = performance.now();
    assert.match(n.json.error?.message ?? "", /insufficient funds/i, JSON.stringify(n.json));
    const answers = await above;
    answers.forEach((a, i) => {
      assert.equal(a.json.error?.code, -32000, JSON.stringify(a.json));
      assert.match(a.json.error.message, new RegExp(`^nonce too high: next nonce 0, tx nonce ${i + 1}; not sent: nonce 0 was refused`));
    });
    const latest = Math.max(...answers.map((a) => a.at)) - refusedAt;
    // At once: each was refused because n was refused ("nonce 0 was refused", which the relay
    // says only when it refuses the waiters above a refused n, at that refusal), not when its
    // own gap wait ran out ("did not arrive within NONCE_GAP_WAIT_MS").
    const refusals = s.relay.events("tx_refused").filter((e) => e.sender === poor.address.toLowerCase());
    assert.deepEqual(refusals.map((e) => [e.label, e.nonce]).sort((a, b) => a[1] - b[1]), [1, 2, 3, 4, 5, 6, 7, 8, 9].map((n) => ["nonce_too_high", n]));
    const sent = s.proxy.seen.filter((r) => r.sender === poor.address.toLowerCase());
    assert.deepEqual(sent.map((r) => r.nonce), [0], "only n reached the upstream");
    const view = await (
      await fetch(`${s.relay.url}/senders/${poor.address}`, { headers: { authorization: "Bearer strict-view-token" } })
    ).json();
    assert.equal(view.upstream_pool, "strict", "auto resolved from chain id 296");
    assert.equal(view.counters.gap_refused, 9);
    console.log(`# strict: 9 refused ${latest.toFixed(0)} ms after n's refusal; upstream sends of n+1..n+9: 0`);
  } finally {
    await s.stop();
  }
});

test("strict: a corrected n within the gap wait lets the queue go on (all 10 mined, 0 rejections)", async () => {
  const s = await stack({ vars: { UPSTREAM_POOL: "strict", NONCE_GAP_WAIT_MS: "3000" } });
  try {
    const account = devAccount(3);
    const start = await minedCount(s.anvil.url, account.address);
    // n with gas 20,999: refused by the relay (intrinsic gas), never sent.
    const bad = await sendRaw(s.relay.url, await signTransfer(account, start, { gas: 20_999n }));
    assert.equal(bad.json.error?.message, "intrinsic gas too low: gas 20999, minimum needed 21000");
    const raws = [];
    for (let n = start + 1; n < start + 10; n++) raws.push(await signTransfer(account, n));
    const above = sendAll(s.relay.url, raws.sort(() => Math.random() - 0.5));
    await sleep(1000);
    const corrected = await sendRaw(s.relay.url, await signTransfer(account, start));
    assert.ok(corrected.json.result, JSON.stringify(corrected.json));
    const answers = await above;
    answers.forEach((a) => assert.ok(a.json.result, JSON.stringify(a.json)));
    assert.equal(await mined(s.anvil.url, account.address, start + 10), start + 10);
    const mine = s.proxy.seen.filter((r) => r.sender === account.address.toLowerCase());
    assert.equal(mine.length, 10, "each sent once");
    assert.equal(mine.filter((r) => !r.accepted).length, 0, "0 rejections");
  } finally {
    await s.stop();
  }
});

test("strict: a gap that expires is refused instead of sent; mempool sends it", async () => {
  for (const pool of ["strict", "mempool"]) {
    const s = await stack({ vars: { UPSTREAM_POOL: pool, NONCE_GAP_WAIT_MS: "1000" } });
    try {
      const account = devAccount(4);
      const next = await minedCount(s.anvil.url, account.address);
      const started = performance.now();
      const res = await sendRaw(s.relay.url, await signTransfer(account, next + 2));
      const waited = performance.now() - started;
      const sends = s.proxy.seen.filter((r) => r.sender === account.address.toLowerCase()).length;
      if (pool === "strict") {
        assert.equal(
          res.json.error?.message,
          `nonce too high: next nonce ${next}, tx nonce ${next + 2}; not sent: nonce ${next} did not arrive within NONCE_GAP_WAIT_MS, and the upstream refuses nonce gaps (UPSTREAM_POOL=strict)`,
        );
        assert.equal(sends, 0, "not sent");
        // Refused when its gap wait ran out: the relay says so in the message above.
      } else {
        // The strict-nonce proxy refuses it: what a mempool relay does on such an upstream.
        assert.equal(sends, 1);
        assert.match(res.json.error?.message ?? "", /Nonce too high/);
        // Sent once its gap wait ran out, NONCE_GAP_WAIT_MS by the relay's own measure.
        const gapWaits = s.relay.events("gap_wait_expired");
        assert.deepEqual(gapWaits.map((e) => [e.nonce, e.expected_nonce]), [[next + 2, next]], s.relay.logs.join("\n"));
        assert.ok(gapWaits[0].waited_ms >= 1000, `the relay's gap wait: ${gapWaits[0].waited_ms} ms`);
      }
      console.log(`# ${pool}: a gap of 2 answered after ${waited.toFixed(0)} ms (NONCE_GAP_WAIT_MS 1000)`);
    } finally {
      await s.stop();
    }
  }
});

test("fork rules (HARDFORK osaka): four invalid transactions refused unsent; their valid versions mined", async () => {
  const s = await stack({ proxy: { strictNonce: false } });
  try {
    const account = devAccount(5);
    const to = "0x000000000000000000000000000000000000dEaD";
    let nonce = await minedCount(s.anvil.url, account.address);
    const calldata = `0x${"01".repeat(1000)}`; // intrinsic 37,000; EIP-7623 floor 61,000
    const initCode = (bytes) => `0x${"00".repeat(bytes)}`; // STOP: deploys empty code
    const cases = [
      {
        name: "transfer with gas 20,999",
        bad: { gas: 20_999n },
        good: { gas: 21_000n },
        error: "intrinsic gas too low: gas 20999, minimum needed 21000",
      },
      {
        name: "calldata below the EIP-7623 floor",
        bad: { data: calldata, gas: 40_000n },
        good: { data: calldata, gas: 61_000n },
        error: "insufficient gas for floor data gas cost: gas 40000, minimum needed 61000",
      },
      {
        name: "49,153 bytes of init code",
        bad: { to: null, value: 0n, data: initCode(49_153), gas: 600_000n },
        good: { to: null, value: 0n, data: initCode(49_152), gas: 600_000n },
        error: "max initcode size exceeded: code size 49153, limit 49152",
      },
      {
        name: "gas limit 2^24 + 1",
        bad: { gas: 2n ** 24n + 1n },
        good: { gas: 2n ** 24n },
        error: "transaction gas limit too high (cap: 16777216, tx: 16777217)",
      },
    ];
    for (const c of cases) {
      const bad = await signTransfer(account, nonce, { to, ...c.bad });
      const refused = await sendRaw(s.relay.url, bad);
      assert.deepEqual(refused.json.error, { code: -32000, message: c.error }, c.name);
      assert.equal(s.proxy.sendsOf(keccak256(bad)), 0, `${c.name}: never sent`);
      const good = await signTransfer(account, nonce, { to, ...c.good });
      const accepted = await sendRaw(s.relay.url, good);
      assert.equal(accepted.json.result, keccak256(good), `${c.name}: ${JSON.stringify(accepted.json)}`);
      nonce += 1;
      assert.equal(await mined(s.anvil.url, account.address, nonce), nonce, `${c.name}: mined`);
      const receipt = (await rpc(s.anvil.url, "eth_getTransactionReceipt", [keccak256(good)])).result;
      assert.equal(receipt?.status, "0x1", `${c.name}: succeeded`);
    }
    const refusals = s.relay.logs.filter((l) => l.includes('"tx_refused"'));
    assert.ok(refusals.length >= 4, `each refusal logged: ${refusals.length}`);
  } finally {
    await s.stop();
  }
});

test("HARDFORK=none: the relay leaves the fork rules to the upstream", async () => {
  const s = await stack({ vars: { HARDFORK: "none" }, proxy: { strictNonce: false } });
  try {
    const account = devAccount(6);
    const nonce = await minedCount(s.anvil.url, account.address);
    const bad = await signTransfer(account, nonce, { gas: 20_999n });
    await sendRaw(s.relay.url, bad);
    assert.equal(s.proxy.sendsOf(keccak256(bad)), 1, "sent: the upstream judges it");
  } finally {
    await s.stop();
  }
});
