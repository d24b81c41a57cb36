// make bench-e2e: what a lone transaction costs (issue 52). SENDERS fresh senders (default 1,000)
// send one transaction each through the relay, on anvil mining a block every 2 s behind a test
// proxy that answers every request after LATENCY_MS (default 50); SECOND of them (default 20) send
// a second one 30 s after their first (its answer's latency is reported). Then every object's
// per-sender view gives its bill as the object counts it (src/ordering/bill.rs: the time it could
// not hibernate, requests, alarms fired and set, `deleteAll`s, rows written), summed over the lone
// senders, beside one busy sender's (BUSY transactions, default 200, at 20/s), and priced at
// Cloudflare's list prices (BENCHMARKS.md, "A lone transaction's bill"). Prints Markdown; exits 1
// when a transaction is not accepted or not mined.
import os from "node:os";
import { generatePrivateKey, privateKeyToAccount } from "viem/accounts";
import { startAnvil, startProxy, startRelay, signTransfer, sendRaw, rpc, sleep, until } from "../support/harness.mjs";

const L = Number(process.env.LATENCY_MS ?? 50);
const N = Number(process.env.SENDERS ?? 1000);
const SECOND = Math.min(N, Number(process.env.SECOND ?? 20));
const BUSY = Number(process.env.BUSY ?? 200);
const CONCURRENCY = 25;
const TOKEN = "lone-bench";
// List prices (Workers Paid, beyond the included amounts), $ per unit.
const PRICE = {
  workerRequest: 0.3e-6,
  workerCpuMs: 0.02e-6,
  objectRequest: 0.15e-6,
  gbS: 12.5e-6,
  rowWritten: 1.0e-6,
};
const GB = 0.125; // the 128 MB an object is billed for
const WORKER_CPU_MS = 2; // BENCHMARKS.md: the Worker's part of a transaction, about 2 ms

const anvil = await startAnvil({ accounts: 2, extraArgs: ["--block-time", "2"] });
const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, latency: () => L });
const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ADMIN_TOKEN: TOKEN, SEND_WINDOW: undefined } });
const view = async (address) =>
  (await fetch(`${relay.url}/senders/${address}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();

/** `count` fresh accounts, funded. */
async function fresh(count) {
  const accounts = Array.from({ length: count }, () => privateKeyToAccount(generatePrivateKey()));
  for (const a of accounts) await rpc(anvil.url, "anvil_setBalance", [a.address, "0xde0b6b3a7640000"]);
  return accounts;
}

/** Runs `work(i)` for i in 0..count, at most `limit` at once. */
async function pool(count, limit, work) {
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, count) }, async () => {
      while (next < count) await work(next++);
    }),
  );
}

/** The errors answered, by message. */
const errors = new Map();

/** Sends `raw` through the relay: [accepted, ms]. */
async function timedSend(raw, id) {
  const t0 = performance.now();
  const a = await sendRaw(relay.url, raw, id);
  const ok = Boolean(a.json?.result);
  if (!ok) {
    const why = a.json?.error?.message ?? `HTTP ${a.status}`;
    errors.set(why, (errors.get(why) ?? 0) + 1);
  }
  return [ok, performance.now() - t0];
}

const pct = (xs, p) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))];

/** Each account's view, once its object has nothing tracked and no storage (all checked). */
async function settledViews(accounts, ms) {
  const views = new Map();
  await until(async () => {
    for (const a of accounts) {
      if (views.has(a.address)) continue;
      const v = await view(a.address);
      if (v.tracked === 0 && v.storage?.rows === 0 && v.bill) views.set(a.address, v);
    }
    return views.size === accounts.length;
  }, ms, 500);
  const missing = accounts.filter((a) => !views.has(a.address));
  if (missing.length) throw new Error(`${missing.length} objects never settled, e.g. ${JSON.stringify(await view(missing[0].address))}`);
  return accounts.map((a) => views.get(a.address));
}

const sum = (views, key) => views.reduce((s, v) => s + Number(v.bill[key] ?? 0), 0);

/** The per-transaction bill of `views` over `txs` transactions, and its price per million. */
function bill(views, txs) {
  const per = (key) => sum(views, key) / txs;
  const b = {
    billableS: per("billable_ms") / 1000,
    requests: per("requests"),
    alarmsFired: per("alarms_fired"),
    alarmsSet: per("alarms_set"),
    alarmsDeleted: per("alarms_deleted"),
    storageDeleted: per("storage_deleted"),
    rows: per("rows_written"),
  };
  b.price =
    1e6 *
    (PRICE.workerRequest +
      WORKER_CPU_MS * PRICE.workerCpuMs +
      (b.requests + b.alarmsFired) * PRICE.objectRequest +
      b.billableS * GB * PRICE.gbS +
      (b.rows + b.alarmsSet) * PRICE.rowWritten);
  return b;
}

try {
  const lone = await fresh(N);
  const raws = await Promise.all(lone.map((a) => signTransfer(a, 0)));
  const seconds = await Promise.all(lone.slice(0, SECOND).map((a) => signTransfer(a, 1)));
  const startedAt = new Map();
  let accepted = 0;
  const firstMs = [];
  const calls0 = proxy.requests.length;
  const t0 = performance.now();
  await pool(N, CONCURRENCY, async (i) => {
    startedAt.set(i, performance.now());
    const [ok, ms] = await timedSend(raws[i], i);
    accepted += ok;
    firstMs.push(ms);
  });
  const sendS = (performance.now() - t0) / 1000;
  // The second transactions, each 30 s after its sender's first.
  const secondMs = [];
  let secondAccepted = 0;
  await Promise.all(
    seconds.map(async (raw, i) => {
      await sleep(Math.max(0, startedAt.get(i) + 30_000 - performance.now()));
      const [ok, ms] = await timedSend(raw, N + i);
      secondAccepted += ok;
      secondMs.push(ms);
    }),
  );
  const views = await settledViews(lone, 120_000);
  const upstreamCalls = proxy.requests.length - calls0;
  let mined = 0;
  await pool(N, CONCURRENCY, async (i) => {
    const count = Number((await rpc(anvil.url, "eth_getTransactionCount", [lone[i].address, "latest"])).result);
    mined += count === (i < SECOND ? 2 : 1);
  });
  const loneViews = views.slice(SECOND);
  const loneBill = bill(loneViews, loneViews.length);

  // One busy sender beside it: BUSY transactions at 20/s.
  const [busy] = await fresh(1);
  const busyRaws = await Promise.all(Array.from({ length: BUSY }, (_, n) => signTransfer(busy, n)));
  let busyAccepted = 0;
  await Promise.all(
    busyRaws.map(async (raw, n) => {
      await sleep(n * 50);
      const [ok] = await timedSend(raw, 10_000 + n);
      busyAccepted += ok;
    }),
  );
  const [busyView] = await settledViews([busy], 120_000);
  const busyBill = bill([busyView], BUSY);
  const busyMined = Number((await rpc(anvil.url, "eth_getTransactionCount", [busy.address, "latest"])).result);

  const f = (x, d = 2) => x.toFixed(d);
  const out = [];
  out.push(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; date ${new Date().toISOString().slice(0, 10)}`);
  out.push(`Command: LATENCY_MS=${L} SENDERS=${N} node tests/bench/lone.mjs (anvil --block-time 2, every upstream request answered after ${L} ms, the relay's defaults)\n`);
  out.push(`${N} fresh senders, one transaction each (${CONCURRENCY} clients at once, ${f(sendS, 1)} s): accepted ${accepted}/${N}, mined ${mined}/${N}; answer p50 / p99 ${f(pct(firstMs, 50), 0)} / ${f(pct(firstMs, 99), 0)} ms; upstream calls ${upstreamCalls} (${f(upstreamCalls / (N + SECOND))} per transaction, their checks included); ${SECOND} of them sent a second transaction 30 s after the first: accepted ${secondAccepted}/${SECOND}, answer p50 / max ${f(pct(secondMs, 50), 0)} / ${f(Math.max(...secondMs), 0)} ms.\n`);
  out.push("| sender | billable object-s / tx | object requests / tx | alarms fired / tx | setAlarm / tx | deleteAlarm / tx | deleteAll / tx | rows written / tx | $ per million tx (list prices) |");
  out.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
  const line = (name, b) =>
    `| ${name} | ${f(b.billableS, 3)} | ${f(b.requests)} | ${f(b.alarmsFired)} | ${f(b.alarmsSet)} | ${f(b.alarmsDeleted)} | ${f(b.storageDeleted)} | ${f(b.rows)} | $${f(b.price)} |`;
  out.push(line(`a lone transaction (${loneViews.length} senders, LATENCY_MS ${L})`, loneBill));
  out.push(line(`a busy sender (${BUSY} at 20/s; accepted ${busyAccepted}, mined ${busyMined})`, busyBill));
  out.push(`\nPriced: Worker request $0.30/M and ${WORKER_CPU_MS} ms of CPU at $0.02 per million ms; object requests and alarms $0.15/M; duration 0.125 GB x billable s at $12.50 per million GB-s; rows written and setAlarm calls $1.00/M (deleteAlarm and deleteAll not priced: no published rate).`);
  if (errors.size) out.push(`\nErrors answered: ${[...errors].map(([m, n]) => `${n} x ${m}`).join("; ")}`);
  console.log(out.join("\n"));
  if (accepted !== N || mined !== N || secondAccepted !== SECOND || busyAccepted !== BUSY || busyMined !== BUSY) process.exitCode = 1;
} finally {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
}
