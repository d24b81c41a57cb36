// make soak-cache: the read cache through many reorgs (issue 43's promise, longer than the test's
// one reorg). The compiled relay on workerd (CACHE=on) in front of anvil mining a block a second;
// a transfer sent straight to anvil about every 700 ms; READERS clients (default 4) each reading
// every 20 ms, in turn, the latest block, one of the last eight blocks by number, `eth_blockNumber`
// and the receipt of a recent transfer; every 3-7 s an `anvil_reorg` of depth 1-6 (some with a
// transfer in the new blocks). Every answer naming a block is checked against the reorgs: with
// the head watch (CACHE_HEAD_WATCH=on, the default) a block replaced by a reorg answered at time T
// must not be named by an answer to a read begun after T; without it (CACHE_HEAD_WATCH=off), not
// after T + CACHE_HEAD_MS + 0.5 s (the window a polled head leaves, README "Cache"); how many are
// named within the window is printed. DURATION_S (default 120), READERS, SEED, CACHE_HEAD_MS (the
// relay's, default 1000); CHECK_WINDOW_MS (the window checked, by default as above: a relay that
// knows of reorgs later than it is checked for, CACHE_HEAD_WATCH=off CHECK_WINDOW_MS=0, must
// fail). Exits 1 on any answer after the window, or any read that failed.
import { startAnvil, startRelay, post, rpc, sleep, devAccount } from "../support/harness.mjs";

const DURATION_S = Number(process.env.DURATION_S ?? 120);
const READERS = Number(process.env.READERS ?? 4);
let seed = Number(process.env.SEED ?? 1);
const random = () => ((seed = (seed * 1103515245 + 12345) % 2 ** 31), seed / 2 ** 31);
const RELAY_HEAD_MS = Number(process.env.CACHE_HEAD_MS ?? 1000);
const WATCH = process.env.CACHE_HEAD_WATCH ?? "on";
const WINDOW_MS = Number(process.env.CHECK_WINDOW_MS ?? (WATCH === "on" ? 0 : RELAY_HEAD_MS + 500));
const quantity = (n) => `0x${n.toString(16)}`;
const call = (method, params = [], id = 1) => ({ jsonrpc: "2.0", id, method, params });

const anvil = await startAnvil({ accounts: 2, extraArgs: ["--block-time", "1"] });
const ask = async (method, params = []) => (await rpc(anvil.url, method, params)).result;
await ask("anvil_mine", ["0x64"]);
const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: anvil.url, CACHE: "on", CACHE_HEAD_MS: String(RELAY_HEAD_MS), CACHE_HEAD_WATCH: WATCH } });
const from = devAccount(0).address;
const recipient = "0x000000000000000000000000000000000000c0de";

/** Every block hash a reorg replaced: hash -> when the reorg was answered (performance.now()). */
const replaced = new Map();
const reorgs = [];
const transfers = [];
const answers = [];
const failures = [];
let head = Number(await ask("eth_blockNumber"));
const end = performance.now() + DURATION_S * 1000;

const sender = (async () => {
  while (performance.now() < end) {
    const hash = await ask("eth_sendTransaction", [{ from, to: recipient, value: "0x1" }]);
    if (hash) transfers.push(hash);
    await sleep(700);
  }
})();

const reorger = (async () => {
  await sleep(3000);
  while (performance.now() < end - 3000) {
    const depth = 1 + Math.floor(random() * 6);
    const top = Number(await ask("eth_blockNumber"));
    const numbers = [];
    for (let n = Math.max(1, top - 10); n <= top; n++) numbers.push(n);
    const before = await Promise.all(numbers.map((n) => ask("eth_getBlockByNumber", [quantity(n), false])));
    const txs = random() < 0.5 ? [] : [[{ from, to: recipient, value: "0x2" }, 0]];
    const started = performance.now();
    const answer = await rpc(anvil.url, "anvil_reorg", [depth, txs]);
    const done = performance.now();
    if (answer.error) {
      failures.push({ what: "anvil_reorg", error: answer.error });
      continue;
    }
    const afterBlocks = await Promise.all(numbers.map((n) => ask("eth_getBlockByNumber", [quantity(n), false])));
    let count = 0;
    before.forEach((b, i) => {
      if (b && afterBlocks[i]?.hash !== b.hash && !replaced.has(b.hash)) {
        replaced.set(b.hash, { at: started, done, number: Number(b.number) });
        count += 1;
      }
    });
    reorgs.push({ depth, started, done, replaced: count });
    await sleep(3000 + random() * 4000);
  }
})();

let ids = 0;
async function reader(r) {
  let i = r;
  while (performance.now() < end) {
    const kind = i++ % 4;
    const id = ++ids;
    const recent = transfers.at(-1 - Math.floor(random() * 6));
    const req =
      kind === 0
        ? call("eth_getBlockByNumber", ["latest", false], id)
        : kind === 1
          ? call("eth_getBlockByNumber", [quantity(Math.max(1, head - Math.floor(random() * 8))), false], id)
          : kind === 2
            ? call("eth_blockNumber", [], id)
            : call("eth_getTransactionReceipt", [recent ?? "0x" + "00".repeat(32)], id);
    const start = performance.now();
    const answer = await post(relay.url, req);
    const finished = performance.now();
    const result = answer.json?.result;
    if (answer.json?.error || result === undefined) {
      failures.push({ req, text: answer.text });
    } else {
      if (req.method === "eth_blockNumber") head = Math.max(head, Number(result));
      const named = result?.hash && result?.number ? { number: Number(result.number), hash: result.hash } : result?.blockHash ? { number: Number(result.blockNumber), hash: result.blockHash } : null;
      answers.push({ req, start, finished, named, cache: answer.cache });
    }
    await sleep(20);
  }
}

await Promise.all([sender, reorger, ...Array.from({ length: READERS }, (_, r) => reader(r))]);

let within = 0;
let lastWithinMs = 0;
const after = [];
for (const a of answers) {
  const gone = a.named && replaced.get(a.named.hash);
  if (!gone || a.start < gone.at) continue;
  if (a.start <= gone.done + WINDOW_MS) {
    within += 1;
    lastWithinMs = Math.max(lastWithinMs, a.start - gone.done);
  } else {
    after.push({ ...a, gone });
  }
}
const hits = answers.filter((a) => a.cache === "HIT").length;
const reorgLines = relay.logs.filter((l) => l.includes('"event":"cache_reorg"')).length;
console.log(
  `cache soak: ${DURATION_S} s, ${READERS} readers, ${answers.length} answers (${hits} hits), ${failures.length} failed; ` +
    `${reorgs.length} reorgs (depth ${reorgs.map((r) => r.depth).join(",")}), ${replaced.size} blocks replaced, ${reorgLines} cache_reorg lines; ` +
    `CACHE_HEAD_WATCH=${WATCH}; answers naming a replaced block: ${within} within ${WINDOW_MS} ms of its reorg (the last ${lastWithinMs.toFixed(0)} ms after), ${after.length} after`,
);
for (const a of after.slice(0, 5)) console.log(`  after the window: ${JSON.stringify(a.req)} named ${a.named.number} ${a.named.hash}, begun ${(a.start - a.gone.done).toFixed(0)} ms after its reorg (${a.cache})`);
for (const f of failures.slice(0, 5)) console.log(`  failed: ${JSON.stringify(f)}`);
await relay.stop();
anvil.stop();
process.exit(after.length || failures.length ? 1 : 0);
