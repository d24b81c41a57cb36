// eth_getLogs over a long range behind a range cap (issue 56, docs/getlogs.md): the relay (cold:
// its first query learns the cap from the refusal; warm: the same query again, the finalized pieces
// kept) beside a client that splits by itself (chunks of the cap from its fromBlock, 4 at a time,
// as an indexer's loop does), straight to the same capped upstream. Each upstream request waits
// LATENCY_MS (default 40) as a provider's would. Prints wall time and eth_getLogs calls.
// BLOCKS (default 50,000) and CAP (default 1,000). The chain's anvil runs Cancun with no state
// history kept (`--hardfork cancun --prune-history`): under Prague anvil 1.7.1 mines block N in
// time growing with N (tests/getlogs.test.mjs).
//
//   node tests/bench/getlogs.mjs            (make bench-e2e runs it)
import { startAnvil, startProxy, startRelay, post, rpc, devAccount } from "../support/harness.mjs";

const LATENCY_MS = Number(process.env.LATENCY_MS ?? 40);
const CAP = Number(process.env.CAP ?? 1_000);
const BLOCKS = Number(process.env.BLOCKS ?? 50_000);
const INIT = "0x67602a60006000a10060005260086018f3"; // every call emits one log (tests/getlogs.test.mjs)
const hex = (n) => `0x${n.toString(16)}`;

const anvil = await startAnvil({ accounts: 2, extraArgs: ["--hardfork", "cancun", "--prune-history"] });
const from = devAccount(1).address;
const deployed = await rpc(anvil.url, "eth_sendTransaction", [{ from, data: INIT }]);
const contract = (await rpc(anvil.url, "eth_getTransactionReceipt", [deployed.result])).result.contractAddress;
for (let i = 0; i < 40; i++) {
  await rpc(anvil.url, "eth_sendTransaction", [{ from, to: contract }]);
  await rpc(anvil.url, "anvil_mine", [hex(Math.floor(BLOCKS / 40))]);
}
const head = Number(BigInt((await rpc(anvil.url, "eth_blockNumber")).result));
const first = head - BLOCKS + 1;

const isLogs = (m) => m?.method === "eth_getLogs";
const proxy = await startProxy({
  upstream: anvil.url,
  strictNonce: false,
  latency: () => LATENCY_MS,
  rewrite: async (m) => {
    if (!isLogs(m)) return undefined;
    const [a, b] = [m.params[0].fromBlock, m.params[0].toBlock].map((x) => Number(BigInt(x)));
    return b - a + 1 > CAP
      ? { jsonrpc: "2.0", id: m.id, error: { code: -32000, message: `query block range exceeds server limit, narrow your filter: ${CAP}` } }
      : undefined;
  },
});
const calls = () => proxy.requests.flatMap((r) => [r.body].flat()).filter(isLogs).length;
const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, GETLOGS_MAX_PIECES: "200" } });

const filter = (a, b) => ({ fromBlock: hex(a), toBlock: hex(b), address: contract });
const want = (await post(anvil.url, { jsonrpc: "2.0", id: 1, method: "eth_getLogs", params: [filter(first, head)] })).json.result;

/** Runs `work`, returning [ms, eth_getLogs calls, logs]. */
async function measure(work) {
  const calls0 = calls();
  const t0 = performance.now();
  const logs = await work();
  return [performance.now() - t0, calls() - calls0, logs.length];
}

const viaRelay = async () => {
  const r = await post(relay.url, { jsonrpc: "2.0", id: 1, method: "eth_getLogs", params: [filter(first, head)] });
  if (!Array.isArray(r.json.result)) throw new Error(r.text.slice(0, 300));
  return r.json.result;
};
const bySelf = async () => {
  const chunks = [];
  for (let a = first; a <= head; a += CAP) chunks.push([a, Math.min(a + CAP - 1, head)]);
  const out = new Array(chunks.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: 4 }, async () => {
      for (let i = next++; i < chunks.length; i = next++) {
        const r = await post(proxy.url, { jsonrpc: "2.0", id: i, method: "eth_getLogs", params: [filter(...chunks[i])] });
        out[i] = r.json.result;
      }
    }),
  );
  return out.flat();
};

const rows = [
  ["relay, cold (learns the cap from the refusal)", await measure(viaRelay)],
  ["relay, warm (the same query again)", await measure(viaRelay)],
  [`client splitting by itself (${CAP} from its fromBlock, 4 at a time)`, await measure(bySelf)],
];
console.log(`\neth_getLogs over ${BLOCKS} blocks (${first}-${head}), ${want.length} logs, behind a ${CAP}-block cap, upstream latency ${LATENCY_MS} ms`);
console.log("| who | wall ms | eth_getLogs upstream | logs |");
console.log("|---|---|---|---|");
for (const [who, [ms, n, logs]] of rows) {
  if (logs !== want.length) throw new Error(`${who}: ${logs} logs, anvil ${want.length}`);
  console.log(`| ${who} | ${ms.toFixed(0)} | ${n} | ${logs} |`);
}
await relay.stop();
await proxy.stop();
anvil.stop();
