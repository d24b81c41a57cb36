// anvil 1.7.1's pool races, mended while anvil runs: used by the test harness for every anvil it
// starts (tests/support/harness.mjs) and by `make dev` for its own (scripts/dev.sh). Plain fetch,
// no other import, so a script can run it alone: `node tests/support/anvil-mend.mjs URL`.

let ids = 0;
async function rpc(url, method, params = []) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: ++ids, method, params }),
  });
  return res.json();
}
/** One JSON-RPC batch ([[method, params], ...]): the results in the calls' order. */
async function batch(url, calls) {
  const first = ids + 1;
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify(calls.map(([method, params = []]) => ({ jsonrpc: "2.0", id: ++ids, method, params }))),
  });
  const answers = await res.json();
  return calls.map((_, i) => answers.find((a) => a.id === first + i)?.result);
}
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** A sender's transactions in a `txpool_content` result, `pools` (default both): hash -> nonce. */
export const poolOf = (content, sender, pools = ["pending", "queued"]) =>
  new Map(
    pools.flatMap((pool) =>
      Object.entries(content?.[pool] ?? {})
        .filter(([from]) => from.toLowerCase() === sender.toLowerCase())
        .flatMap(([, byNonce]) => Object.entries(byNonce).map(([nonce, tx]) => [tx.hash, Number(nonce)])),
    ),
  );

/**
 * Mends anvil's pool races while anvil runs. anvil 1.7.1 (crates/anvil/src/eth/api.rs
 * `send_raw_transaction`) reads the sender's on-chain nonce before it takes the pool's lock, so
 * a transaction that arrives while the block holding the one below it is being mined requires a
 * marker the block already pruned, and waits in `queued` forever though its nonce is the sender's
 * next one; and its instant miner now and then misses a ready transaction, which then waits in
 * `pending` until something else is mined (foundry-rs/foundry#10122). geth, reth and Nethermind
 * promote the first and mine the second in their next block. Two sends of one sender that cross
 * on the way (a send window, a resend) hit them now and then. Every 250 ms, a sender's lowest
 * pool transaction at its on-chain nonce, seen so twice in a row, is mended: queued, it is taken
 * out with the sender's other pool transactions and they are put back from their own bytes in
 * nonce order (`anvil_removePoolTransactions`, `eth_sendRawTransaction`; `anvil_dropTransaction`
 * takes only ready ones); ready while anvil mines itself (`anvil_getAutomine`), a block is mined
 * (`evm_mine`). The removal takes every pool transaction of the sender, so the bytes of each are
 * read first (again for those that came meanwhile), and the pool is read again in the removal's
 * own batch: one that arrived between the two (anvil keeps no copy) is listed in `lost`, never
 * silently gone. Before, the sends that arrived while the queued ones' bytes were read were
 * removed and never put back (the likely cause of a 40-send burst left 11 short, once). This
 * never goes through a test's proxy. `mended` lists the hashes so mended.
 */
export function mendPool(url, { onMend = () => {} } = {}) {
  const mended = [];
  const lost = [];
  let stopped = false;
  let suspects = new Set();
  const poll = async () => {
    const status = (await rpc(url, "txpool_status")).result;
    const [pending, queued] = [status?.pending, status?.queued].map((n) => Number(BigInt(n ?? 0)));
    const automine = pending > 0 && (await rpc(url, "anvil_getAutomine")).result === true;
    if (queued === 0 && !automine) return new Set();
    const content = (await rpc(url, "txpool_content")).result ?? {};
    const now = new Set();
    const senders = new Set([...Object.keys(content.pending ?? {}), ...Object.keys(content.queued ?? {})]);
    for (const sender of senders) {
      const ready = content.pending?.[sender] ?? {};
      const waiting = content.queued?.[sender] ?? {};
      const readyNonces = Object.keys(ready).map(Number);
      const [pool, nonces] = readyNonces.length ? ["ready", readyNonces] : ["queued", Object.keys(waiting).map(Number)];
      if (pool === "ready" && !automine) continue;
      const lowest = Math.min(...nonces);
      const onChain = Number(BigInt((await rpc(url, "eth_getTransactionCount", [sender, "latest"])).result));
      if (lowest !== onChain) continue;
      const hash = (pool === "ready" ? ready : waiting)[String(lowest)].hash;
      if (!suspects.has(hash)) {
        now.add(hash);
        continue;
      }
      if (stopped) return now;
      if (pool === "ready") {
        await rpc(url, "evm_mine");
      } else {
        // The bytes of every pool transaction of the sender, those that came while they were read
        // too (at most three reads), then the removal with the pool read in its batch.
        const raws = new Map(); // hash -> [nonce, raw]
        let held = poolOf(content, sender);
        for (let round = 0; round < 3 && [...held.keys()].some((h) => !raws.has(h)); round++) {
          for (const [h, nonce] of held) if (!raws.has(h)) raws.set(h, [nonce, (await rpc(url, "eth_getRawTransactionByHash", [h])).result]);
          held = poolOf((await rpc(url, "txpool_content")).result, sender);
        }
        if ([...raws.values()].some(([, raw]) => !raw) || [...held.keys()].some((h) => !raws.has(h))) continue;
        const [before] = await batch(url, [["txpool_content"], ["anvil_removePoolTransactions", [sender]]]);
        const removed = poolOf(before, sender);
        for (const h of removed.keys()) if (!raws.has(h)) lost.push(h);
        const back = [...raws].filter(([h]) => removed.has(h)).sort(([, [x]], [, [y]]) => x - y);
        for (const [, [, raw]] of back) await rpc(url, "eth_sendRawTransaction", [raw]);
      }
      mended.push(hash);
      onMend({ sender, nonce: lowest, pool, hash });
    }
    return now;
  };
  (async () => {
    while (!stopped) {
      await sleep(250);
      try {
        suspects = await poll();
      } catch {
        suspects = new Set(); // anvil going down, or busy: the next round asks again
      }
    }
  })();
  return { mended, lost, stop: () => (stopped = true) };
}

// Run alone (`make dev`): mends until killed, saying each time it did.
if (import.meta.url === `file://${process.argv[1]}`) {
  const url = process.argv[2] ?? "http://127.0.0.1:8545";
  mendPool(url, {
    onMend: ({ sender, nonce, pool }) =>
      console.log(`[dev] anvil left ${sender}'s nonce ${nonce} ${pool === "ready" ? "ready but unmined" : "queued at its next nonce"} (its pool race); put right`),
  });
}
