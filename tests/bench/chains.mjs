// make bench-e2e: two chains from one relay (issue 42). Two anvils, the default chain 31337 and
// chain 296, each behind its own strict-nonce test proxy that answers every
// eth_sendRawTransaction after LATENCY_MS, each proxy in a thread of its own (PROXY_THREADS=off:
// both in the bench's process, beside its client); one relay with CHAINS=296. Each round takes
// fresh senders and fires one sender's TXS transactions at once: on 31337 alone, on 296 alone,
// then on both at once (the same key on both chains, interleaved). The limit is a sender's TXS
// sent one after another straight to its chain's proxy (D1); efficiency = D1 / wall. Every
// transaction must be mined exactly once, in nonce order, 0 refusals at either upstream. ROUNDS
// (default 5), TXS (20), LATENCY_MS (50). Prints Markdown for BENCHMARKS.md.
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, sleep } from "../support/harness.mjs";
import { startProxyThread } from "./proxy-thread.mjs";

const ROUNDS = Number(process.env.ROUNDS ?? 5);
const N = Number(process.env.TXS ?? 20);
const L = Number(process.env.LATENCY_MS ?? 50);
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const f2 = (x) => x.toFixed(2);

const accounts = ROUNDS * 8 + 4;
const chains = {};
const THREADS = (process.env.PROXY_THREADS ?? "on") === "on";
/** The chain's test upstream, in a thread or in this process: { url, know, seen, stop }. */
async function proxyFor(upstream) {
  if (THREADS) return startProxyThread({ upstream, latencyMs: L });
  const senderOfRaw = new Map();
  const proxy = await startProxy({
    upstream,
    strictNonce: true,
    latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0),
    senderOf: (raw) => senderOfRaw.get(raw),
  });
  return {
    url: proxy.url,
    know: async (entries) => entries.forEach(([raw, sender]) => senderOfRaw.set(raw, sender)),
    seen: async () => proxy.seen,
    stop: () => proxy.stop(),
  };
}
for (const [id, args] of [[31337, []], [296, ["--chain-id", "296"]]]) {
  const anvil = await startAnvil({ accounts, extraArgs: args });
  chains[id] = { id, anvil, proxy: await proxyFor(anvil.url) };
}
const relay = await startRelay({
  vars: { UPSTREAM_RPC_URL: chains[31337].proxy.url, CHAINS: "296", CHAIN_296_UPSTREAM_RPC_URL: chains[296].proxy.url },
});
const pathOf = (id) => (id === 31337 ? relay.url : `${relay.url}/evm/${id}`);

let next = 0;
const sign = async (chain, account) => {
  const raws = [];
  for (let n = 0; n < N; n++) raws.push(await signTransfer(account, n, { chainId: chain.id }));
  await chain.proxy.know(raws.map((raw) => [raw, account.address.toLowerCase()]));
  return raws;
};
const mined = async (chain, account) => Number(BigInt((await rpc(chain.anvil.url, "eth_getTransactionCount", [account.address, "latest"])).result));

/** One sender's N one after another straight to the chain's proxy: the serialized limit, ms. */
async function limit(chain) {
  const account = devAccount(next++);
  const raws = await sign(chain, account);
  const started = performance.now();
  for (const raw of raws) await sendRaw(chain.proxy.url, raw);
  return performance.now() - started;
}

/** The relay: one sender's N at once on each chain of `ids`, together; wall ms per chain. */
async function burst(ids) {
  const runs = await Promise.all(
    ids.map(async (id) => {
      const account = devAccount(next++);
      return { chain: chains[id], account, raws: await sign(chains[id], account) };
    }),
  );
  const walls = await Promise.all(
    runs.map(async ({ chain, raws }) => {
      const started = performance.now();
      const answers = await Promise.all(raws.map((raw, i) => sendRaw(pathOf(chain.id), raw, i + 1)));
      const wall = performance.now() - started;
      const bad = answers.filter((a) => !a.json?.result).length;
      if (bad) throw new Error(`chain ${chain.id}: ${bad} sends without a hash: ${answers.find((a) => !a.json?.result).text}`);
      return wall;
    }),
  );
  for (const { chain, account } of runs) {
    const sender = account.address.toLowerCase();
    for (let i = 0; i < 100 && (await mined(chain, account)) < N; i++) await sleep(50);
    const seen = (await chain.proxy.seen()).filter((r) => r.sender === sender);
    const inOrder = seen.every((r, i) => r.nonce === i);
    if ((await mined(chain, account)) !== N || seen.length !== N || !inOrder || seen.some((r) => !r.accepted)) {
      throw new Error(`chain ${chain.id}: ${await mined(chain, account)}/${N} mined, ${seen.length} sends, in order ${inOrder}`);
    }
  }
  return walls;
}

const d1 = { 31337: [], 296: [] };
const alone = { 31337: [], 296: [] };
const both = { 31337: [], 296: [] };
// The control: two senders on one chain at once, the same work in the same workerd process.
const pair = [];
for (let round = 0; round < ROUNDS; round++) {
  for (const id of [31337, 296]) d1[id].push(await limit(chains[id]));
  // Alternating which goes first, so neither gets the quieter half of a round.
  const together = () => burst([31337, 296]);
  const [x, y] = round % 2 ? await together() : [];
  const [a] = await burst([31337]);
  const [b] = await burst([296]);
  const [p, q] = round % 2 ? [x, y] : await together();
  alone[31337].push(a);
  alone[296].push(b);
  both[31337].push(p);
  both[296].push(q);
  pair.push(...(await burst([296, 296])));
}
const eff = (walls, id) => median(d1[id]) / median(walls);
console.log(`\n| chain | D1 (ms) | alone: wall (ms) | alone: efficiency | both at once: wall (ms) | both at once: efficiency | difference |`);
console.log(`|---|---|---|---|---|---|---|`);
for (const id of [31337, 296]) {
  const [ea, eb] = [eff(alone[id], id), eff(both[id], id)];
  console.log(
    `| ${id} | ${median(d1[id]).toFixed(0)} | ${median(alone[id]).toFixed(0)} | ${f2(ea)} | ${median(both[id]).toFixed(0)} | ${f2(eb)} | ${f2(eb - ea)} |`,
  );
}
console.log(
  `| 296, beside a second sender on 296 (the control) | ${median(d1[296]).toFixed(0)} | | | ${median(pair).toFixed(0)} | ${f2(eff(pair, 296))} | ${f2(eff(pair, 296) - eff(alone[296], 296))} |`,
);
console.log(`\n${ROUNDS} rounds, 1 x ${N} per chain, LATENCY_MS=${L}, PROXY_THREADS=${THREADS ? "on" : "off"}, medians; every transaction mined once, in nonce order, 0 refusals.`);
await relay.stop();
for (const c of Object.values(chains)) {
  await c.proxy.stop();
  c.anvil.stop();
}
