// Every fault at once (issue 39): S senders x N transactions through the compiled relay on
// workerd, in front of a mempool node (anvil mining a block every second, each block holding at
// most BLOCK_TXS transfers, so a pool backlog builds as on a busy chain), behind the test proxy
// with strictNonce off. One seed places every fault of a run:
// - the upstream away (HTTP 503 from its load balancer, and refused connections), each a few
//   hundred ms to 2 s;
// - lost answers: the proxy closes the connection without an answer, before forwarding a send
//   ("before") or after the transaction went in ("after");
// - pool drops: anvil_dropTransaction of accepted transactions not yet mined (anvil drops the
//   sender's higher nonces with it), during the burst and after the restart, while the relay
//   still tracks them (after the restart, preferably of senders whose clients all have their
//   hashes: only the relay's storage and tracking stand for those);
// - the relay killed (SIGKILL of workerd) mid-burst and started again on the same Durable Object
//   storage;
// - duplicates: copies of a transaction's bytes sent at once by other clients (other ids), and
//   JSON-RPC batches of transactions.
// Every transaction has a client that sends its bytes until it has its hash (as a wallet does while
// the relay restarts). Then the run waits, bounded, until every sender's N are mined, and counts.
// `everyFault` returns its accounting; a bad outcome is returned, never thrown.
import { readdirSync } from "node:fs";
import { cp, mkdir, mkdtemp, rm, writeFile } from "node:fs/promises";
import path from "node:path";
import { tmpdir } from "node:os";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, post, rpc, devAccount, signBurst, sleep, until } from "./harness.mjs";

/** mulberry32: a small seeded PRNG, floats in [0, 1). */
export function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Transfers a block holds (its gas limit is this many times 21,000). */
export const BLOCK_TXS = 25;
/** Each sender's burst begins within this many ms of the run's start and lasts 0.3-3 s (its
 * clients start in nonce order, a few swapped). */
const START_MS = 5000;
/** The faults fall within this many ms of the run's start. */
const FAULTS_MS = 7000;
/** How long each client sends its bytes again before it gives up. */
const CLIENT_MS = 75_000;
/** How long the run waits, once the clients are done, for every sender's N to be mined. */
const MINED_MS = 60_000;
/** The relay's events summarized. */
const EVENTS = [
  "tx_resubmitted",
  "tx_included",
  "tx_retried",
  "tx_deduplicated",
  "tx_outcome_unknown",
  "tx_replaced",
  "tx_expired",
  "tx_abandoned",
  "tx_refused",
  "fail_open",
  "force_release",
  "gap_wait_expired",
  "object_error",
  "nonce_lookup_failed",
  "storage_error",
];

/**
 * The fault schedule of `seed` (a pure function of the seed and the sizes): client start times,
 * batches, duplicates, lost answers, outages, the kill, pool drop times.
 */
export function schedule(seed, senders, perSender) {
  const rand = mulberry32(seed);
  const between = (lo, hi) => lo + rand() * (hi - lo);
  const int = (lo, hi) => Math.floor(between(lo, hi + 1));
  const total = senders * perSender;
  const txs = [];
  for (let s = 0; s < senders; s++) {
    // Each sender's burst: its own start and length, so at the kill some senders have every
    // answer (their transactions in the pool, tracked), some are mid-burst, some not begun.
    const from = between(0, START_MS);
    const length = between(300, 3000);
    const times = Array.from({ length: perSender }, () => from + between(0, length)).sort((x, y) => x - y);
    // A few neighbours arrive the other way round (clients race).
    for (let n = 0; n + 1 < perSender; n++) if (rand() < 0.08) [times[n], times[n + 1]] = [times[n + 1], times[n]];
    for (let n = 0; n < perSender; n++) txs.push({ index: s * perSender + n, sender: s, nonce: n, startMs: times[n] });
  }
  // JSON-RPC batches: some of one sender's consecutive nonces (a wallet's batch), some of several
  // senders' (an aggregator's). A transaction in a batch has the batch as its client.
  const batches = [];
  const batched = new Set();
  const batchCount = int(6, 10);
  for (let b = 0; b < batchCount; b++) {
    const size = int(2, 5);
    let members;
    if (rand() < 0.5) {
      const s = int(0, senders - 1);
      const first = int(0, perSender - size);
      members = Array.from({ length: size }, (_, k) => s * perSender + first + k);
    } else {
      members = Array.from({ length: size }, () => int(0, total - 1));
    }
    members = [...new Set(members)].filter((i) => !batched.has(i));
    if (members.length < 2) continue;
    members.forEach((i) => batched.add(i));
    batches.push({ members, startMs: Math.min(...members.map((i) => txs[i].startMs)) });
  }
  // Duplicates: other clients with the same bytes, at about the same time.
  const duplicates = [];
  for (const tx of txs) {
    if (rand() < 0.12) {
      const copies = rand() < 0.3 ? 2 : 1;
      for (let c = 0; c < copies; c++) duplicates.push({ index: tx.index, startMs: tx.startMs + between(0, 400) });
    }
  }
  // Lost answers: a transaction's first (or second) arrival at the upstream dropped.
  const lost = new Map();
  for (const tx of txs) {
    const r = rand();
    const mode = r < 0.05 ? "after" : r < 0.09 ? "before" : null;
    const arrival = rand() < 0.8 ? 1 : 2;
    if (mode) lost.set(tx.index, { mode, arrival });
  }
  // Outages, one after another: one of each kind, then a third of either.
  const kinds = rand() < 0.5 ? ["503", "refuse"] : ["refuse", "503"];
  kinds.push(rand() < 0.5 ? "503" : "refuse");
  const outages = kinds
    .map((kind) => ({ kind, atMs: between(200, FAULTS_MS), ms: Math.round(between(300, 2000)) }))
    .sort((x, y) => x.atMs - y.atMs);
  // The kill, mid-burst (while clients are still sending, or once they have their hashes and the
  // relay tracks a pool backlog), and how long the relay stays down before it starts again.
  const kill = { atMs: between(1500, FAULTS_MS), downMs: Math.round(between(0, 800)) };
  // Pool drops during the burst, and after the restart (ms after the relay answers again).
  const drops = Array.from({ length: int(4, 6) }, () => ({ atMs: between(500, FAULTS_MS + 1000), victims: int(1, 2) }));
  const dropsAfterRestart = Array.from({ length: int(2, 3) }, () => ({ afterMs: between(300, 4000), victims: int(1, 3) }));
  return { seed, txs, batches, batched, duplicates, lost, outages, kill, drops, dropsAfterRestart, pickSeed: int(1, 2 ** 31) };
}

/**
 * Runs one seeded schedule; returns its accounting:
 * { seed, ok, error, ms, total, clients: { count, withHash, wrong }, mined (per sender),
 *   minedOnce, missing, wentInTwice, wentInTwiceNotDropped, upstreamRefusals, clientErrors,
 *   events, resubmitted, faults, diagnosis }.
 * `log` gets progress lines; `buildDir` is the worker build (default: the harness's); with
 * `keepDir`, a run that failed (any run, with `keepAlways`) leaves there (seed-N/) each relay's log,
 * what the upstream saw, the pool drops, and the Durable Object storage folder.
 */
export async function everyFault({ seed, senders = 10, perSender = 30, buildDir, log = () => {}, keepDir, keepAlways = false }) {
  const started = performance.now();
  const plan = schedule(seed, senders, perSender);
  const pick = mulberry32(plan.pickSeed);
  const total = senders * perSender;
  const result = { seed, ok: false, error: null, total, senders, perSender };
  let anvil;
  let proxy;
  let persist;
  const relays = [];
  const current = { relay: null };
  let stopped = false;
  const faultTasks = [];
  try {
    persist = await mkdtemp(`${tmpdir()}/nonce-relay-every-fault-`);
    anvil = await startAnvil({ accounts: senders + 1, extraArgs: ["--block-time", "1", "--gas-limit", String(21000 * BLOCK_TXS)] });
    const accounts = Array.from({ length: senders }, (_, i) => devAccount(i));
    const senderOfRaw = new Map();
    const raws = await signBurst(accounts, perSender, senderOfRaw);
    const hashes = raws.map((raw) => keccak256(raw));
    const indexOfHash = new Map(hashes.map((h, i) => [h, i]));
    // Lost answers: the proxy's drop() for a transaction's planned arrival.
    const arrivals = new Map();
    const lostDone = [];
    proxy = await startProxy({
      upstream: anvil.url,
      strictNonce: false,
      latency: (req) => (JSON.stringify(req ?? null).includes("eth_sendRawTransaction") ? 20 : 0),
      senderOf: (raw) => senderOfRaw.get(raw),
      drop: (record) => {
        const index = indexOfHash.get(record.hash);
        const count = (arrivals.get(index) ?? 0) + 1;
        arrivals.set(index, count);
        const planned = plan.lost.get(index);
        if (!planned || planned.arrival !== count) return null;
        lostDone.push({ index, mode: planned.mode, at: performance.now() });
        return planned.mode;
      },
    });
    const vars = { UPSTREAM_RPC_URL: proxy.url, SEND_WINDOW: undefined, TRACK_INTERVAL_S: "2" };
    const first = await startRelay({ vars, persist, buildDir });
    relays.push(first);
    current.relay = first;
    log(`seed ${seed}: stack up (anvil ${anvil.url}, proxy ${proxy.url}, relay ${first.url})`);

    // The clients: one per transaction (or its batch), and the duplicates.
    const clientErrors = new Map();
    const onError = (message) => clientErrors.set(message, (clientErrors.get(message) ?? 0) + 1);
    const outcomes = []; // { index, kind, result }
    let nextId = 1;
    const t0 = performance.now();
    const client = async (indexes, kind, startMs) => {
      await sleep(startMs);
      const asBatch = kind === "batch";
      const open = new Map(indexes.map((i) => [nextId++, i]));
      const deadline = performance.now() + CLIENT_MS;
      while (open.size && performance.now() < deadline && !stopped) {
        const members = [...open].map(([id, i]) => ({ jsonrpc: "2.0", id, method: "eth_sendRawTransaction", params: [raws[i]] }));
        try {
          const res = await post(current.relay.url, asBatch ? members : members[0]);
          const answers = Array.isArray(res.json) ? res.json : res.json ? [res.json] : [];
          if (!answers.length) onError(`HTTP ${res.status} ${res.text.slice(0, 60)}`);
          for (const answer of answers) {
            const i = open.get(answer?.id);
            if (i === undefined) continue;
            if (answer.result) {
              outcomes.push({ index: i, kind, result: answer.result, at: performance.now() - t0 });
              open.delete(answer.id);
            } else {
              onError(String(answer.error?.message ?? JSON.stringify(answer)).slice(0, 80));
            }
          }
        } catch {
          /* the relay is down, or the connection was lost */
        }
        if (open.size) await sleep(100);
      }
      for (const i of open.values()) outcomes.push({ index: i, kind, result: null });
    };
    const clients = [];
    for (const tx of plan.txs) if (!plan.batched.has(tx.index)) clients.push(client([tx.index], "single", tx.startMs));
    for (const b of plan.batches) clients.push(client(b.members, "batch", b.startMs));
    for (const d of plan.duplicates) clients.push(client([d.index], "duplicate", d.startMs));
    const clientCount = total + plan.duplicates.length;

    // Faults. Outages one after another.
    const outagesDone = [];
    faultTasks.push(
      (async () => {
        for (const o of plan.outages) {
          const wait = o.atMs - (performance.now() - t0);
          if (wait > 0) await sleep(wait);
          if (stopped) return;
          await proxy.outage(o.kind, o.ms);
          outagesDone.push({ kind: o.kind, ms: o.ms, atMs: Math.round(o.atMs) });
        }
      })(),
    );
    // The kill and the restart on the same storage.
    const kill = {};
    const restart = (async () => {
      await sleep(plan.kill.atMs);
      if (stopped) return;
      kill.acceptedAtKill = new Set(proxy.seen.filter((r) => r.accepted).map((r) => r.hash)).size;
      kill.answeredAtKill = outcomes.filter((o) => o.result).length;
      kill.at = performance.now() - t0;
      kill.wallMs = Date.now();
      first.kill();
      await first.stop().catch(() => {});
      await sleep(plan.kill.downMs);
      const second = await startRelay({ vars, persist, buildDir });
      relays.push(second);
      current.relay = second;
      kill.readyAt = performance.now() - t0;
      log(`seed ${seed}: relay killed at ${kill.at.toFixed(0)} ms (${kill.acceptedAtKill} in), answering again at ${kill.readyAt.toFixed(0)} ms`);
    })();
    faultTasks.push(restart);
    // Pool drops: accepted transactions the pool holds, picked by the seed's second stream.
    const poolDrops = [];
    const acceptedHashes = () => new Set(proxy.seen.filter((r) => r.accepted).map((r) => r.hash));
    // Senders whose every client has its hash: after the restart, only the relay's own storage
    // and tracking stand for their transactions (the issue's lost sender was one).
    const answeredSenders = () => {
      const answered = new Set(outcomes.filter((o) => o.result === hashes[o.index]).map((o) => o.index));
      return new Set(accounts.map((_, s) => s).filter((s) => hashes.every((_, i) => Math.floor(i / perSender) !== s || answered.has(i))));
    };
    const dropSome = async (victims, { preferAnswered = false } = {}) => {
      if (stopped) return;
      const from = Math.round(performance.now() - t0);
      // anvil drops only what its pool holds ready (pending); it answers null for one queued
      // above a gap, and keeps it.
      const content = (await rpc(anvil.url, "txpool_content")).result ?? {};
      const accepted = acceptedHashes();
      const held = [];
      for (const byNonce of Object.values(content.pending ?? {})) {
        for (const tx of Object.values(byNonce)) if (indexOfHash.has(tx.hash) && accepted.has(tx.hash)) held.push(tx.hash);
      }
      held.sort();
      if (preferAnswered) {
        const answered = answeredSenders();
        const theirs = held.filter((h) => answered.has(Math.floor(indexOfHash.get(h) / perSender)));
        if (theirs.length) held.splice(0, held.length, ...theirs);
      }
      for (let k = 0; k < victims && held.length; ) {
        const hash = held.splice(Math.floor(pick() * held.length), 1)[0];
        const i = indexOfHash.get(hash);
        const s = Math.floor(i / perSender);
        // anvil drops the sender's higher nonces with it: those are lost to the pool too.
        const inPool = [];
        for (const h of hashes.slice(s * perSender, (s + 1) * perSender)) {
          if ((await rpc(anvil.url, "eth_getTransactionByHash", [h])).result?.blockNumber === null) inPool.push(h);
        }
        const answer = await rpc(anvil.url, "anvil_dropTransaction", [hash]);
        if (!answer?.result) continue; // mined meanwhile
        k += 1;
        const gone = [];
        for (const h of inPool) if (!(await rpc(anvil.url, "eth_getTransactionByHash", [h])).result) gone.push(h);
        const phase = kill.readyAt !== undefined ? "after restart" : kill.at !== undefined ? "relay down" : "before kill";
        poolDrops.push({ when: phase, from, at: Math.round(performance.now() - t0), sender: s, nonce: i % perSender, gone: gone.map((h) => indexOfHash.get(h) % perSender), goneHashes: gone });
      }
    };
    for (const d of plan.drops) {
      faultTasks.push(
        (async () => {
          await sleep(d.atMs);
          await dropSome(d.victims);
        })(),
      );
    }
    for (const d of plan.dropsAfterRestart) {
      faultTasks.push(
        (async () => {
          await restart;
          await sleep(d.afterMs);
          await dropSome(d.victims, { preferAnswered: true });
        })(),
      );
    }

    await Promise.all(clients);
    const clientsDoneMs = performance.now() - t0;
    await Promise.all(faultTasks);
    const minedAll = await until(
      async () => {
        for (const a of accounts) {
          const count = Number(BigInt((await rpc(anvil.url, "eth_getTransactionCount", [a.address, "latest"])).result));
          if (count < perSender) return false;
        }
        return true;
      },
      MINED_MS,
      500,
    );
    const minedMs = performance.now() - t0;

    // The accounting.
    const mined = [];
    for (const a of accounts) mined.push(Number(BigInt((await rpc(anvil.url, "eth_getTransactionCount", [a.address, "latest"])).result)));
    const receipts = [];
    for (const h of hashes) receipts.push((await rpc(anvil.url, "eth_getTransactionReceipt", [h])).result);
    const includedOnce = receipts.map((r) => r?.status === "0x1");
    // Mined exactly once: a hash with its receipt is in one block, and its nonce is used by it
    // (the only transaction signed with that nonce); with every sender's mined count N, each nonce
    // is used by its hash.
    const minedOnce = includedOnce.filter(Boolean).length;
    const missing = hashes.map((h, i) => (includedOnce[i] ? null : { sender: Math.floor(i / perSender), nonce: i % perSender, hash: h })).filter(Boolean);
    const withHash = outcomes.filter((o) => o.result === hashes[o.index]).length;
    const wrong = outcomes.filter((o) => o.result !== hashes[o.index]).map((o) => ({ sender: Math.floor(o.index / perSender), nonce: o.index % perSender, kind: o.kind, result: o.result }));
    const acceptedCount = new Map();
    for (const r of proxy.seen) if (r.accepted) acceptedCount.set(r.hash, (acceptedCount.get(r.hash) ?? 0) + 1);
    const droppedFromPool = new Set(poolDrops.flatMap((d) => d.goneHashes));
    // A transaction that went in twice should have left the pool in between: a pool drop of its
    // sender at or below its nonce (anvil drops the higher nonces with it) between the two.
    const twice = [...acceptedCount].filter(([, n]) => n > 1).map(([h]) => h);
    const explained = (h) => {
      const i = indexOfHash.get(h);
      const ins = proxy.seen.filter((r) => r.hash === h && r.accepted).map((r) => r.at - t0);
      return ins.slice(1).every((second, k) =>
        poolDrops.some((d) => d.sender === Math.floor(i / perSender) && d.nonce <= i % perSender && d.from <= second && d.at >= ins[k] - 50),
      );
    };
    const events = {};
    for (const name of EVENTS) events[name] = relays.reduce((sum, r) => sum + r.events(name).length, 0);
    const resubmittedLabels = {};
    for (const r of relays) for (const e of r.events("tx_resubmitted")) resubmittedLabels[e.label] = (resubmittedLabels[e.label] ?? 0) + 1;
    Object.assign(result, {
      ok: withHash === clientCount && minedOnce === total && mined.every((m) => m === perSender),
      ms: Math.round(performance.now() - started),
      clientsDoneMs: Math.round(clientsDoneMs),
      minedMs: Math.round(minedMs),
      minedAll,
      clients: { count: clientCount, withHash, wrong, duplicates: plan.duplicates.length, batches: plan.batches.length, batched: plan.batched.size },
      mined,
      minedOnce,
      missing,
      wentInTwice: twice.length,
      wentInTwiceNotDropped: twice.filter((h) => !explained(h)).length,
      twiceNotDropped: twice
        .filter((h) => !explained(h))
        .map((h) => ({
          sender: Math.floor(indexOfHash.get(h) / perSender),
          nonce: indexOfHash.get(h) % perSender,
          arrivals: proxy.seen.filter((r) => r.hash === h).map((r) => `${Math.round(r.at - t0)}:${r.accepted ? "in" : "out"}${r.dropped ? `/${r.dropped}` : ""}`),
        })),
      upstreamSends: proxy.seen.length,
      upstreamRefusals: proxy.seen.filter((r) => r.answeredAt && !r.accepted && !r.dropped).length,
      clientErrors: Object.fromEntries([...clientErrors].sort((x, y) => y[1] - x[1])),
      events,
      resubmitted: events.tx_resubmitted,
      resubmittedLabels,
      faults: {
        outages: outagesDone,
        lostBefore: lostDone.filter((l) => l.mode === "before").length,
        lostAfter: lostDone.filter((l) => l.mode === "after").length,
        poolDrops: poolDrops.map(({ goneHashes, ...d }) => d),
        poolDropped: droppedFromPool.size,
        kill: { atMs: Math.round(kill.at), readyAtMs: Math.round(kill.readyAt), downMs: plan.kill.downMs, acceptedAtKill: kill.acceptedAtKill, answeredAtKill: kill.answeredAtKill },
      },
    });
    result.killWallMs = kill.wallMs;
    if (!result.ok) result.diagnosis = await diagnose({ result, anvil, proxy, relays, accounts, hashes, perSender, poolDrops, kill, t0 });
    if ((!result.ok || keepAlways) && keepDir) {
      const dir = path.join(keepDir, `seed-${seed}`);
      await mkdir(dir, { recursive: true });
      for (const [k, r] of relays.entries()) await writeFile(path.join(dir, `relay-${k}.log`), r.logs.join("\n"));
      const seen = proxy.seen.map((r) => ({ ...r, at: Math.round(r.at - t0), answeredAt: r.answeredAt && Math.round(r.answeredAt - t0), index: indexOfHash.get(r.hash) }));
      await writeFile(path.join(dir, "upstream-seen.json"), JSON.stringify(seen));
      await writeFile(path.join(dir, "result.json"), JSON.stringify({ ...result, poolDrops, kill, t0 }, null, 1));
      result.kept = dir; // the storage folder is copied there once the relay has stopped
    }
  } catch (e) {
    result.ok = false;
    result.error = e?.stack ?? String(e);
    result.ms = Math.round(performance.now() - started);
  } finally {
    stopped = true;
    await Promise.allSettled(faultTasks);
    for (const r of relays) await r.stop().catch(() => {});
    await proxy?.stop().catch(() => {});
    anvil?.stop();
    if (persist && result.diagnosis) result.diagnosis.push(...(await storageLines(persist, result.killWallMs)));
    if (persist && result.kept) await cp(persist, path.join(result.kept, "persist"), { recursive: true }).catch(() => {});
    if (persist) await rm(persist, { recursive: true, force: true });
  }
  return result;
}

/** What happened to each sender whose transactions were not all mined, or whose clients lack a hash. */
async function diagnose({ result, anvil, proxy, relays, accounts, hashes, perSender, poolDrops, kill, t0 }) {
  const lines = [];
  const bad = new Set([...result.missing.map((m) => m.sender), ...result.clients.wrong.map((w) => w.sender)]);
  const content = (await rpc(anvil.url, "txpool_content")).result ?? {};
  for (const s of [...bad].sort((x, y) => x - y)) {
    const address = accounts[s].address.toLowerCase();
    const nonces = result.missing.filter((m) => m.sender === s).map((m) => m.nonce);
    const inPool = [];
    for (const part of ["pending", "queued"]) {
      for (const [from, byNonce] of Object.entries(content[part] ?? {})) if (from.toLowerCase() === address) inPool.push(...Object.keys(byNonce).map((n) => `${n}${part[0]}`));
    }
    lines.push(`sender ${s} (${address}): mined ${result.mined[s]}/${perSender}; not mined: nonces ${nonces.join(",") || "-"}; in anvil's pool now: ${inPool.join(",") || "-"}`);
    const wrong = result.clients.wrong.filter((w) => w.sender === s);
    if (wrong.length) lines.push(`  clients without their hash: ${wrong.map((w) => `${w.nonce}(${w.kind}: ${w.result})`).join(", ")}`);
    const drops = poolDrops.filter((d) => d.sender === s);
    lines.push(`  pool drops: ${drops.map((d) => `${d.when} at ${d.at} ms: nonce ${d.nonce}, gone ${d.gone.join(",")}`).join("; ") || "-"}`);
    lines.push(`  kill at ${Math.round(kill.at)} ms, relay answering again at ${Math.round(kill.readyAt)} ms`);
    const mine = proxy.seen.filter((r) => r.sender === address);
    const last = mine.length ? Math.round(Math.max(...mine.map((r) => r.at)) - t0) : null;
    for (const n of nonces.slice(0, 4)) {
      const h = hashes[s * perSender + n];
      const rec = mine.filter((r) => r.hash === h).map((r) => `${r.accepted ? "in" : r.dropped ? "lost" : "refused"}${r.dropped ? `(${r.dropped})` : ""} at ${Math.round(r.at - t0)} ms`);
      lines.push(`  nonce ${n}: upstream saw ${rec.join(" ") || "nothing"}`);
    }
    lines.push(`  upstream: ${mine.length} sends of this sender, the last at ${last} ms`);
    relays.forEach((r, k) => {
      const of = (name) => r.events(name).filter((e) => String(e.sender ?? "").toLowerCase() === address);
      const nonceList = (name) => of(name).map((e) => e.nonce);
      const included = nonceList("tx_included");
      lines.push(
        `  relay ${k === 0 ? "before the kill" : "after the restart"}: tx_included nonces ${included.length ? `${Math.min(...included)}..${Math.max(...included)} (${included.length})` : "-"}; ` +
          `tx_resubmitted ${nonceList("tx_resubmitted").join(",") || "-"}; tx_forwarded ${of("tx_forwarded").length}; ` +
          `force_release ${of("force_release").length}; fail_open ${r.events("fail_open").filter((e) => String(e.sender ?? "").toLowerCase() === address).length}; ` +
          `tx_expired ${of("tx_expired").length}; tx_abandoned ${of("tx_abandoned").length}; tx_deduplicated ${of("tx_deduplicated").length}`,
      );
    });
  }
  return lines;
}

/**
 * What each sender's Durable Object holds once the relay has stopped (read from the `persist`
 * folder with node:sqlite): its stored transactions, the alarm its own storage holds, and the alarm
 * workerd's scheduler holds for it (metadata.sqlite, _cf_ALARM, what a restarted workerd fires).
 * Alarm times are ms from the kill.
 */
async function storageLines(persist, killWallMs) {
  try {
    const { DatabaseSync } = await import("node:sqlite");
    const dir = path.join(persist, "do", "relay-SenderLock");
    const open = (f) => new DatabaseSync(path.join(dir, f), { readOnly: true });
    const rel = (ms) => (ms === null || ms === undefined ? "none" : `${Math.round(Number(ms) - killWallMs)} ms`);
    const scheduled = new Map();
    const meta = open("metadata.sqlite");
    for (const row of meta.prepare("SELECT actor_name, scheduled_time / 1000000 AS ms FROM _cf_ALARM").all()) scheduled.set(String(row.actor_name).toLowerCase(), row.ms);
    meta.close();
    const lines = ["storage after the run (alarm times from the kill):"];
    for (const f of readdirSync(dir).filter((f) => f.endsWith(".sqlite") && f !== "metadata.sqlite")) {
      const db = open(f);
      const tables = db.prepare("SELECT name FROM sqlite_master WHERE type = 'table'").all().map((r) => r.name);
      if (tables.includes("meta")) {
        const sender = db.prepare("SELECT value FROM meta WHERE key = 'sender'").get()?.value ?? "?";
        const nonces = ["sends", "txs"]
          .filter((t) => tables.includes(t))
          .flatMap((t) => db.prepare(`SELECT nonce FROM ${t}`).all().map((r) => Number(r.nonce)));
        const own = tables.includes("_cf_METADATA") ? db.prepare("SELECT value / 1000000 AS ms FROM _cf_METADATA WHERE key = 1").get()?.ms : null;
        if (nonces.length) {
          lines.push(
            `  ${sender}: ${nonces.length} stored (nonces ${Math.min(...nonces)}..${Math.max(...nonces)}); ` +
              `its alarm ${rel(own)}; workerd's scheduled alarm ${rel(scheduled.get(String(sender).toLowerCase()))}`,
          );
        }
      }
      db.close();
    }
    return lines;
  } catch (e) {
    return [`storage not read: ${e.message}`];
  }
}

/** One line of a result: seed, hashes, mined once, resubmitted, faults, time. */
export function summaryLine(r) {
  if (r.error && !r.clients) return `seed ${r.seed}: ERROR ${r.error.split("\n")[0]} (${(r.ms / 1000).toFixed(1)} s)`;
  const f = r.faults;
  const e = r.events;
  return (
    `seed ${r.seed}: ${r.ok ? "ok" : "FAILED"}; hashes ${r.clients.withHash}/${r.clients.count} clients ` +
    `(${r.clients.duplicates} duplicates, ${r.clients.batched} in ${r.clients.batches} batches); ` +
    `mined once ${r.minedOnce}/${r.total} (per sender ${r.mined.join(",")}); resubmitted ${r.resubmitted}; ` +
    `went in twice ${r.wentInTwice} (${r.wentInTwiceNotDropped} not pool-dropped); upstream refusals ${r.upstreamRefusals} of ${r.upstreamSends} sends; ` +
    `faults: outages ${f.outages.map((o) => `${o.kind}/${o.ms}ms`).join(" ")}, lost answers ${f.lostBefore} before + ${f.lostAfter} after, ` +
    `pool drops ${f.poolDrops.length} (${f.poolDropped} txs, ${f.poolDrops.filter((d) => d.when === "after restart").length} after the restart, ${f.poolDrops.filter((d) => d.when === "relay down").length} while the relay was down), ` +
    `kill at ${f.kill.atMs} ms with ${f.kill.acceptedAtKill} in, back at ${f.kill.readyAtMs} ms; ` +
    `events: included ${e.tx_included}, retried ${e.tx_retried}, deduplicated ${e.tx_deduplicated}, outcome_unknown ${e.tx_outcome_unknown}, ` +
    `fail_open ${e.fail_open}, force_release ${e.force_release}, expired ${e.tx_expired}, abandoned ${e.tx_abandoned}, gap_wait_expired ${e.gap_wait_expired}; ` +
    `time ${(r.ms / 1000).toFixed(1)} s`
  );
}
