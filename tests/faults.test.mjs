// Fault tests: the compiled relay on workerd with a test proxy that injects upstream faults.
// A fault that says nothing about the transaction is retried with the same bytes; when it lasts
// longer than the retries (here capped with UPSTREAM_RETRIES=3), the client gets a clear JSON-RPC
// error and the sender is not left locked: the sender's next transaction goes through at once.
import { test } from "node:test";
import assert from "node:assert/strict";
import { keccak256 } from "viem";
import { stack, sendRaw, devAccount, signTransfer, rpc, minedCounts } from "./support/harness.mjs";

/** A stack whose proxy answers the first `times` sends of transactions with `fault`, then behaves. */
async function faultTimes(fault, times, vars = {}) {
  let left = times;
  return stack({
    vars,
    proxy: {
      strictNonce: false,
      fault: (req) => {
        if (left <= 0 || req?.method !== "eth_sendRawTransaction") return null;
        left--;
        return fault;
      },
    },
  });
}

const sendsIn = (proxy) => proxy.requests.filter((r) => r.body?.method === "eth_sendRawTransaction");

const transient = [
  ["answers 502 with an HTML page", { status: 502, headers: { "content-type": "text/html" }, body: "<html>bad gateway</html>" }, -32002, /HTTP 502/],
  ["answers 503 with no body", { status: 503, body: "" }, -32002, /HTTP 503/],
  ["answers 429 with a JSON-RPC error", { status: 429, body: '{"jsonrpc":"2.0","id":1,"error":{"code":-32005,"message":"rate limited"}}' }, -32005, /rate limited/],
  ["answers 200 with garbage", { status: 200, body: "\u0000\u0001 not json {{" }, -32603, /invalid JSON-RPC response/],
  ["drops the connection mid-request", { destroy: true }, -32002, /connection failed/],
];

for (const [what, fault] of transient) {
  test(`upstream ${what} once: the same bytes are sent again and the client gets the hash`, async () => {
    const account = devAccount(19);
    const s = await faultTimes(fault, 1);
    try {
      const raw = await signTransfer(account, 0);
      const first = await sendRaw(s.relay.url, raw);
      assert.equal(first.json?.result, keccak256(raw), first.text.slice(0, 300));
      const sends = sendsIn(s.proxy);
      assert.equal(sends.length, 2, "one retry");
      assert.ok(sends.every((r) => r.body.params[0] === raw), "the original bytes both times");
      assert.equal(s.relay.events("tx_retried").length, 1, s.relay.logs.join("\n"));
    } finally {
      await s.stop();
    }
  });
}

for (const [what, fault, code, message] of transient) {
  // A rate limit turns a send away unattempted: it spends no retry (issue 40), tested below.
  if (fault.status === 429) continue;
  test(`upstream ${what} on every try: the error after UPSTREAM_RETRIES=3, lock released`, async () => {
    const account = devAccount(19);
    const s = await faultTimes(fault, 4, { UPSTREAM_RETRIES: "3" });
    try {
      const raw = await signTransfer(account, 0);
      const first = await sendRaw(s.relay.url, raw);
      // The relay keeps the transaction and may still send it: its outcome is unknown (EIP-1474
      // -32002, the hash as data), the upstream's failure in the message.
      assert.equal(first.json?.error?.code, -32002, first.text.slice(0, 300));
      assert.equal(first.json.error.data, keccak256(raw));
      assert.match(first.json.error.message, /^transaction outcome unknown: /);
      assert.match(first.json.error.message, message);
      assert.ok(!first.text.includes(s.proxy.url), "no upstream URL in the answer");
      // The first try and 3 retries answered the client; the relay may then send the stored
      // bytes again on its own (the outcome was unknown and the upstream does not have it).
      assert.ok(sendsIn(s.proxy).length >= 4, "the first try and 3 retries");
      // The lock was released at once: the next transaction of the same sender goes straight on.
      const next = await sendRaw(s.relay.url, await signTransfer(account, 0));
      assert.ok(next.json.result, next.text);
      // Nothing waited out the holder's lease (LOCK_MAX_HOLD_MS) or a gap wait.
      assert.equal(s.relay.events("force_release").length, 0, s.relay.logs.join("\n"));
      assert.equal(s.relay.events("gap_wait_expired").length, 0, s.relay.logs.join("\n"));
      console.log(`# ${what}: the next transaction answered after ${next.ms.toFixed(0)} ms`);
    } finally {
      await s.stop();
    }
  });
}

test("a rate limit (HTTP 429) on four tries spends no retry: with UPSTREAM_RETRIES=3 the fifth try gets the transaction in", async () => {
  const account = devAccount(19);
  const s = await faultTimes(transient.find(([, f]) => f.status === 429)[1], 4, { UPSTREAM_RETRIES: "3" });
  try {
    const raw = await signTransfer(account, 0);
    const first = await sendRaw(s.relay.url, raw);
    assert.equal(first.json?.result, keccak256(raw), first.text.slice(0, 300));
    assert.equal(sendsIn(s.proxy).length, 5, "four turned away, the fifth in");
  } finally {
    await s.stop();
  }
});

test("upstream answers a 50 MB body: the outcome unknown (-32002), not retried, nothing held", async () => {
  const account = devAccount(19);
  const s = await faultTimes({ status: 200, body: "[" + "1,".repeat(25 * 1024 * 1024) + "1]" }, 1);
  try {
    const first = await sendRaw(s.relay.url, await signTransfer(account, 0));
    assert.equal(first.json?.error?.code, -32002, first.text.slice(0, 300));
    assert.match(first.json.error.message, /^transaction outcome unknown: .*exceeds/);
    assert.equal(sendsIn(s.proxy).length, 1);
    const next = await sendRaw(s.relay.url, await signTransfer(account, 0));
    assert.ok(next.json.result, next.text);
  } finally {
    await s.stop();
  }
});

test("a proxied method's upstream failure is a clear error too", async () => {
  const account = devAccount(19);
  const s = await stack({ proxy: { fault: (req) => (req?.method === "eth_gasPrice" ? { status: 503, body: "" } : null) } });
  try {
    const answer = await rpc(s.relay.url, "eth_gasPrice");
    assert.equal(answer.error.code, -32002);
    const ok = await sendRaw(s.relay.url, await signTransfer(account, 0));
    assert.ok(ok.json.result, ok.text);
  } finally {
    await s.stop();
  }
});

test("a flood of 2,000 transactions from 100 senders at once: nothing lost, every queue back to zero", async () => {
  const { startAnvil, startProxy, startRelay, signBurst } = await import("./support/harness.mjs");
  const senders = 100;
  const perSender = 20;
  const anvil = await startAnvil({ accounts: senders + 1 });
  const senderOfRaw = new Map();
  const proxy = await startProxy({ upstream: anvil.url, senderOf: (raw) => senderOfRaw.get(raw) });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url } });
  try {
    const accounts = Array.from({ length: senders }, (_, i) => devAccount(i));
    const raws = await signBurst(accounts, perSender, senderOfRaw);
    const answers = await Promise.all(raws.map((raw, i) => sendRaw(relay.url, raw, i)));
    const failed = answers.filter((a) => !a.json?.result);
    // On a failure, say which path let a transaction out of order.
    const paths = ["fail_open", "gap_wait_expired", "nonce_lookup_failed", "upstream_error", "force_release"]
      .map((event) => `${event}: ${relay.events(event).length}`)
      .join(", ");
    assert.deepEqual(failed.map((a) => a.text).slice(0, 3), [], `${failed.length} not accepted (${paths})`);
    assert.equal(relay.events("gap_wait_expired").length, 0, "no transaction went past a gap");
    assert.equal(new Set(answers.map((a) => a.json.result)).size, senders * perSender, "no duplicates");
    for (const a of accounts) {
      let count;
      for (let i = 0; i < 100; i++) {
        count = await rpc(anvil.url, "eth_getTransactionCount", [a.address, "latest"]);
        if (Number(count.result) === perSender) break;
        await new Promise((r) => setTimeout(r, 50)); // the last block may still be in the making
      }
      assert.equal(Number(count.result), perSender, `${a.address} mined ${count.result} of ${perSender}`);
    }
    assert.equal(proxy.seen.filter((r) => !r.accepted).length, 0, "no rejection at the upstream");
    // Every sender's last forwarded transaction left an empty queue behind it.
    const forwarded = relay.events("tx_forwarded");
    assert.equal(forwarded.length, senders * perSender);
    const last = new Map();
    for (const e of forwarded) last.set(e.sender, e);
    assert.equal(last.size, senders);
    for (const [sender, e] of last) assert.equal(e.queue_depth, 0, `${sender}'s queue is empty`);
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});

test("the Durable Object crashes after it forwarded: the client gets its hash, the restarted object resolves the stored transaction by hash, the sender's next goes at once", async () => {
  // build-faults/ is the same worker with the test-faults feature: the x-test-fault header makes
  // the Durable Object crash (its instance is reset) after it forwarded, without recording the
  // answer (make test builds it).
  const { post } = await import("./support/harness.mjs");
  const account = devAccount(18);
  const s = await stack({ buildDir: "build-faults", vars: { LOCK_MAX_HOLD_MS: "1000" } });
  try {
    const raw0 = await signTransfer(account, 0);
    const first = await post(
      s.relay.url,
      { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw0] },
      { "x-test-fault": "throw-after-forward" },
    );
    // The object threw after forwarding. Whether the Worker sent the same bytes again on a new
    // stub or directly (fail-open), the strict upstream says "Nonce too low", the relay finds the
    // transaction by its hash, and the client gets the hash.
    assert.equal(first.json?.result, keccak256(raw0), `the hash: ${first.text}`);
    assert.equal(s.relay.events("object_error").length, 1, s.relay.logs.join("\n"));
    const started = performance.now();
    const second = await sendRaw(s.relay.url, await signTransfer(account, 1));
    const waited = performance.now() - started;
    assert.ok(second.json?.result, second.text);
    assert.equal(s.relay.events("force_release").length, 0, "nothing waits out a lease");
    assert.equal(s.relay.events("gap_wait_expired").length, 0, "nor a gap wait: the restarted object knew nonce 0 went in");
    assert.deepEqual(await minedCounts(s.anvil.url, [account], 2, 10_000), [2], "both transactions mined, once each (within 10 s: anvil's instant miner may lag, foundry-rs/foundry#10122)");
    assert.equal(s.proxy.seen.filter((r) => r.accepted).length, 2);
    console.log(`# after the Durable Object crashed, the sender's next transaction waited ${waited.toFixed(0)} ms`);
  } finally {
    await s.stop();
  }
});

test("a storage write fails under the machine (a newer instance took over): the object says it was superseded instead of trapping, and the client still gets its hash", async () => {
  // test-faults: x-test-fault: storage-fails fails the object's next write (the holder's row,
  // written while the machine runs).
  const { post } = await import("./support/harness.mjs");
  const account = devAccount(16);
  const s = await stack({ buildDir: "build-faults" });
  try {
    const raw = await signTransfer(account, 0);
    const answer = await post(
      s.relay.url,
      { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] },
      { "x-test-fault": "storage-fails" },
    );
    assert.equal(answer.json?.result, keccak256(raw), answer.text);
    const logs = s.relay.logs.join("\n");
    assert.equal(s.relay.events("storage_error").length, 1, logs);
    // Issue 42: every line names its sender and chain.
    const [failed] = s.relay.events("storage_error");
    assert.equal(failed.chain, 31337, logs);
    assert.equal(failed.sender, account.address.toLowerCase(), logs);
    assert.equal(s.relay.events("object_superseded").length, 1, logs);
    assert.ok(!/panicked|RuntimeError|unreachable/.test(logs), `the object trapped:\n${logs}`);
    assert.deepEqual(await minedCounts(s.anvil.url, [account], 1, 10_000), [1], "mined once (within 10 s: anvil's instant miner may lag, foundry-rs/foundry#10122)");
  } finally {
    await s.stop();
  }
});

test("the sender's Durable Object is reset under a call (a deploy): the call is made again on a new stub, the client gets its hash, nothing fails open", async () => {
  // The compiled SenderLock in a worker of its own (as deployed); test-faults: the first call with
  // x-test-fault: reset-once resets the object, and the runtime's error reaches the Worker.
  const { startAnvil, startProxy, startRelay, post } = await import("./support/harness.mjs");
  const anvil = await startAnvil();
  const proxy = await startProxy({ upstream: anvil.url });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url }, buildDir: "build-faults", lockHostBuild: "build-faults" });
  try {
    const account = devAccount(17);
    const raw = await signTransfer(account, 0);
    const answer = await post(
      relay.url,
      { jsonrpc: "2.0", id: 1, method: "eth_sendRawTransaction", params: [raw] },
      { "x-test-fault": "reset-once" },
    );
    assert.equal(answer.json?.result, keccak256(raw), answer.text);
    const errors = relay.events("object_error");
    assert.equal(errors.length, 1, relay.logs.join("\n"));
    assert.equal(errors[0].label, "retryable", JSON.stringify(errors[0]));
    assert.equal(relay.events("fail_open").length, 0, "not failed open");
    assert.equal(proxy.sendsOf(keccak256(raw)), 1, "sent once");
  } finally {
    await relay.stop();
    await proxy.stop();
    anvil.stop();
  }
});
