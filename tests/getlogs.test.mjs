// eth_getLogs over any range (issue 56, docs/getlogs.md), on workerd and anvil: a chain of 50,032
// blocks with logs spread through it (40 logs 1,250 blocks apart, then 30 in a row), behind test
// upstreams that answer each provider's refusal verbatim (src/upstream/logs/refusal.rs names the
// sources): range caps of 10, 1,000 and 10,000 blocks, result caps with and without a hint,
// QuickNode's HTTP 413, Hedera's HTTP 400, Nethermind's truncated stream, an address cap. The
// chain's anvil runs Cancun with no state history kept (`--hardfork cancun --prune-history`): under
// Prague anvil 1.7.1 mines block N in time growing with N (EIP-2935's history contract: the
// fifth 1,000 blocks took 16 s), under Cancun with the history pruned 5,000 blocks take 0.3 s
// at any height; logs and receipts are kept either way.
// Each answer must equal what anvil answers for the whole range. Then what the pieces share:
// aligned pieces for overlapping queries, a second query over a finalized range answered with no
// eth_getLogs upstream, and a reorg under an unfinalized piece while the pieces are asked.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { startAnvil, startProxy, startRelay, post, rpc, devAccount, sleep, until } from "./support/harness.mjs";

/** A contract whose every call emits one log (LOG1, topic 0x2a, no data): PUSH1 0x2a PUSH1 0
 * PUSH1 0 LOG1 STOP, returned by its init code. */
const INIT = "0x67602a60006000a10060005260086018f3";
const TOPIC = `0x${"2a".padStart(64, "0")}`;
const hex = (n) => `0x${n.toString(16)}`;
/** Each test's bound: one that hangs fails instead. */
const LIMIT = { timeout: 120_000 };

/** `method` at the anvil at `url`, given up after 10 s (a setup call that never returns must
 * fail the file, not hang it: one `anvil_mine` never answered in a fresh clone's run). */
async function call(url, method, params = []) {
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method, params }),
    signal: AbortSignal.timeout(10_000),
  });
  return res.json();
}
const blockNumber = async (url) => Number(BigInt((await call(url, "eth_blockNumber")).result));
/** The receipt of `hash` at `url`, once the block that has it is there. */
async function receipt(url, hash) {
  for (let i = 0; i < 100; i++) {
    const r = (await call(url, "eth_getTransactionReceipt", [hash])).result;
    if (r) return r;
    await sleep(50);
  }
  throw new Error(`no receipt for ${hash}`);
}
/** A call of `from`'s to `to` (or a contract made with `data`), mined: its receipt. */
const transact = async (url, tx) => receipt(url, (await call(url, "eth_sendTransaction", [tx])).result);
/** The address of a new contract whose every call emits one log, at the anvil at `url`. */
const deploy = async (url, from) => (await transact(url, { from, data: INIT })).contractAddress;
/** `n` empty blocks more at `url`. */
async function mine(url, n) {
  const target = (await blockNumber(url)) + n;
  let timeouts = 0;
  while ((await blockNumber(url)) < target) {
    try {
      await call(url, "anvil_mine", [hex(Math.min(500, target - (await blockNumber(url))))]);
    } catch (e) {
      if (++timeouts > 3) throw e; // asked again: the blocks it made count
    }
  }
}

const anvil = await startAnvil({ accounts: 2, mend: false, extraArgs: ["--hardfork", "cancun", "--prune-history"] });
after(() => anvil.stop());
const from = devAccount(1).address;
const contract = await deploy(anvil.url, from);
for (let i = 0; i < 40; i++) {
  await transact(anvil.url, { from, to: contract });
  await mine(anvil.url, 1_250);
}
for (let i = 0; i < 30; i++) await transact(anvil.url, { from, to: contract });
const HEAD = await blockNumber(anvil.url);

const filter = (a, b, extra = {}) => ({ fromBlock: hex(a), toBlock: hex(b), address: contract, topics: [TOPIC], ...extra });
const logsAt = async (url, f) => post(url, { jsonrpc: "2.0", id: 7, method: "eth_getLogs", params: [f] });
/** The test upstream's eth_getLogs requests: each one's [from, to]. */
const asked = (proxy) =>
  proxy.requests
    .flatMap((r) => [r.body].flat())
    .filter((m) => m?.method === "eth_getLogs")
    .map((m) => [Number(BigInt(m.params[0].fromBlock)), Number(BigInt(m.params[0].toBlock))]);
const aligned = ([a, b]) => {
  const n = b - a + 1;
  return (n & (n - 1)) === 0 && a % n === 0;
};

/** A JSON-RPC error answer to member `m`. */
const refuse = (m, code, message, data) => ({ jsonrpc: "2.0", id: m.id, error: { code, message, ...(data ? { data } : {}) } });
const span = (m) => [Number(BigInt(m.params[0].fromBlock)), Number(BigInt(m.params[0].toBlock))];
const isLogs = (m) => m?.method === "eth_getLogs";

/** A provider that refuses a range of more than `cap` blocks with `answer(m, from, to)`. */
const rangeCap = (cap, answer) => ({
  rewrite: async (m) => {
    if (!isLogs(m)) return undefined;
    const [a, b] = span(m);
    return b - a + 1 > cap ? answer(m, a, b) : undefined;
  },
});
/** The same, answered with an HTTP status (QuickNode's 413, Hedera's 400). */
const rangeCapStatus = (cap, status, answer) => ({
  fault: (req) => {
    const m = [req].flat().find(isLogs);
    if (!m) return null;
    const [a, b] = span(m);
    return b - a + 1 > cap ? { status, headers: { "content-type": "application/json" }, body: JSON.stringify(answer(m, a, b)) } : null;
  },
});
/** A provider that refuses an answer of more than `cap` logs with `answer(m, from, to, logs)`. */
const resultCap = (cap, answer) => ({
  rewrite: async (m, forward) => {
    if (!isLogs(m)) return undefined;
    const got = await forward(m);
    const [a, b] = span(m);
    return Array.isArray(got.result) && got.result.length > cap ? answer(m, a, b, got.result) : got;
  },
});

/** Each provider's refusal, verbatim, at its cap (1,000 or 10,000 blocks; results: 8 of the
 * chain's 70 logs, where a provider's is 10,000 of a busier chain's). */
const PROVIDERS = {
  "geth 1,000 blocks (-32602)": rangeCap(1_000, (m) => refuse(m, -32602, `exceed maximum block range 1000`)),
  "Erigon 1,000 blocks": rangeCap(1_000, (m) => refuse(m, -32000, "query block range exceeds server limit, narrow your filter: 1000")),
  "Nethermind 10,000 blocks": rangeCap(10_000, (m, a, b) =>
    refuse(m, -32602, `Block range ${b - a + 1} exceeds the maximum of 10000 blocks per logs request. Use a narrower fromBlock/toBlock range or increase Receipt.MaxBlockDepth.`)),
  "Besu 1,000 blocks (no number said, -32005)": rangeCap(1_000, (m) => refuse(m, -32005, "Requested range exceeds maximum RPC range limit")),
  "Infura 10,000 blocks (since 2026-08)": rangeCap(10_000, (m, a, b) => refuse(m, -32602, `range ${b - a + 1} exceeds limit of 10000`)),
  "QuickNode 10,000 blocks (HTTP 413)": rangeCapStatus(10_000, 413, (m) => refuse(m, -32614, "eth_getLogs is limited to a 10,000 range")),
  "Hedera's relay 1,000 blocks (HTTP 400)": rangeCapStatus(1_000, 400, (m) => refuse(m, -32000, "Exceeded maximum block range: 1000")),
  "reth 8 results (a range suggested)": resultCap(8, (m, a) => refuse(m, -32602, `query exceeds max results 8, retry with the range ${a}-${a + 99}`)),
  "Infura 8 results (the hint in data)": resultCap(8, (m, a) =>
    refuse(m, -32005, `query returned more than 8 results. Try with this block range [${hex(a).toUpperCase().replace("0X", "0x")}, ${hex(a + 255).toUpperCase().replace("0X", "0x")}].`, { from: hex(a), to: hex(a + 255), limit: 8 })),
  "Erigon 8 results (no hint)": resultCap(8, (m) => refuse(m, -32000, "query returns too many logs, narrow your filter: 8")),
  "Nethermind's stream truncated at 8": resultCap(8, (m, a, b, logs) => ({ jsonrpc: "2.0", result: logs.slice(0, 8), _streamStatus: "truncated", id: m.id })),
};

/** Erigon at a 100-block cap: pieces of 64, for the tests over a few thousand blocks. */
const erigon100 = rangeCap(100, (m) => refuse(m, -32000, "query block range exceeds server limit, narrow your filter: 100"));

const alchemy = rangeCap(10, (m, a) =>
  refuse(m, -32600, `Under the Free tier plan, you can make eth_getLogs requests with up to a 10 block range. Based on your parameters, this block range should work: [${hex(a)}, ${hex(a + 9)}]. Upgrade to PAYG for expanded block range.`));

/** A relay behind a test upstream acting as `provider`, with `vars`. */
async function behind(provider, vars = {}) {
  const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, ...provider });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ...vars } });
  return { proxy, relay, stop: async () => (await relay.stop(), await proxy.stop()) };
}

test("behind each provider's refusal, verbatim: a query over the whole chain returns exactly what anvil returns; every piece aligned", LIMIT, async () => {
  const whole = filter(1, HEAD);
  const want = (await logsAt(anvil.url, whole)).json.result;
  assert.equal(want.length, 70);
  const rows = [];
  for (const [name, provider] of Object.entries(PROVIDERS)) {
    // 50,031 blocks: under a 1,000-block cap, 97 pieces of 512 and their edges.
    const s = await behind(provider, { GETLOGS_MAX_PIECES: "200" });
    try {
      const got = await logsAt(s.relay.url, whole);
      const pieces = asked(s.proxy);
      rows.push(`${name}: ${pieces.length} eth_getLogs upstream`);
      assert.deepEqual(got.json.result, want, `${name}: ${got.text.slice(0, 300)}`);
      assert.ok(pieces.length > 1, `${name}: split`);
      assert.ok(pieces.slice(1).every(aligned), `${name}: ${JSON.stringify(pieces.slice(1).filter((p) => !aligned(p)))}`);
    } finally {
      await s.stop();
    }
  }
  console.log(`# ${HEAD} blocks, 70 logs:\n#   ${rows.join("\n#   ")}`);
});

test("behind a 10-block cap (Alchemy's free tier): 500 blocks answered whole; then the whole chain refused before any ask, -32602; with GETLOGS_SPLIT=off the client gets Alchemy's refusal", LIMIT, async () => {
  const s = await behind(alchemy, { GETLOGS_MAX_PIECES: "80" });
  try {
    const f = filter(HEAD - 520, HEAD - 20);
    const got = await logsAt(s.relay.url, f);
    assert.deepEqual(got.json.result, (await logsAt(anvil.url, f)).json.result, got.text.slice(0, 300));
    assert.ok(got.json.result.length >= 10, `${got.json.result.length} logs`);
    const before = asked(s.proxy).length;
    const wide = await logsAt(s.relay.url, filter(1, HEAD));
    console.log(`# 10-block cap: 501 blocks in ${before} asks; ${HEAD} blocks: ${JSON.stringify(wide.json.error)}`);
    assert.equal(wide.json.error?.code, -32602);
    assert.match(wide.json.error.message, /^query exceeds max block range \d+$/);
    assert.equal(asked(s.proxy).length, before, "refused before any ask");
  } finally {
    await s.stop();
  }
  const off = await behind(alchemy, { GETLOGS_SPLIT: "off" });
  try {
    const got = await logsAt(off.relay.url, filter(1, HEAD));
    assert.equal(got.json.error?.code, -32600);
    assert.match(got.json.error.message, /up to a 10 block range/);
    assert.equal(asked(off.proxy).length, 1, "asked once, as the client asked");
  } finally {
    await off.stop();
  }
});

test("an address cap is the client's answer: the range is never split for it", LIMIT, async () => {
  const capped = {
    rewrite: async (m) =>
      isLogs(m) && [m.params[0].address].flat().length > 2 ? refuse(m, -32000, "exceed max addresses or topics per search position") : undefined,
  };
  const s = await behind(capped);
  try {
    const three = [contract, "0x000000000000000000000000000000000000dead", "0x000000000000000000000000000000000000beef"];
    const got = await logsAt(s.relay.url, filter(1, HEAD, { address: three }));
    assert.equal(got.json.error?.message, "exceed max addresses or topics per search position");
    assert.equal(asked(s.proxy).length, 1);
  } finally {
    await s.stop();
  }
});

test("overlapping queries ask the same aligned pieces, each once; a second identical query over a finalized range sends no eth_getLogs upstream (X-Cache HIT)", LIMIT, async () => {
  const s = await behind(erigon100);
  try {
    const a = filter(100, 1_500);
    const b = filter(500, 2_000);
    for (const f of [a, b]) assert.deepEqual((await logsAt(s.relay.url, f)).json.result, (await logsAt(anvil.url, f)).json.result);
    const pieces = asked(s.proxy).filter((p) => p[1] - p[0] < 100); // the as-asked first asks aside
    const keys = pieces.map((p) => p.join("-"));
    assert.equal(new Set(keys).size, keys.length, "no piece asked twice: the overlap's pieces were the same, and kept");
    assert.ok(pieces.every(aligned));
    const before = asked(s.proxy).length;
    const again = await logsAt(s.relay.url, a);
    console.log(`# overlapping: ${pieces.length} pieces for both; again: ${asked(s.proxy).length - before} eth_getLogs, X-Cache ${again.cache}`);
    assert.deepEqual(again.json.result, (await logsAt(anvil.url, a)).json.result);
    assert.equal(asked(s.proxy).length, before, "no eth_getLogs upstream");
    assert.equal(again.cache, "HIT");
  } finally {
    await s.stop();
  }
});

test("a reorg under an unfinalized piece while the pieces are asked: the answer equals the node's after the reorg", LIMIT, async () => {
  // A chain of its own: the reorg must not move the other tests' blocks.
  const chain = await startAnvil({ accounts: 2, mend: false });
  const made = await deploy(chain.url, from);
  await mine(chain.url, 200);
  // Blocks enough that the six logs end the chain at a head one short of a multiple of 64: the
  // last 64 blocks are four aligned pieces of 16, all in flight at once (were a block to land
  // otherwise, the edge pieces still go while the first is held: 4 in flight).
  const now = await blockNumber(chain.url);
  const extra = (64 - ((now + 6 + 1) % 64)) % 64;
  if (extra) await mine(chain.url, extra);
  for (let i = 0; i < 6; i++) await transact(chain.url, { from, to: made });
  const head = await blockNumber(chain.url);
  const f = { fromBlock: hex(head - 63), toBlock: hex(head), address: made };
  // The first piece held until the reorg is done; the head's piece answered before it.
  let reorged;
  const reorgDone = new Promise((resolve) => (reorged = resolve));
  const fromOf = (m) => Number(BigInt(m.params[0].fromBlock));
  const proxy = await startProxy({
    upstream: chain.url,
    strictNonce: false,
    rewrite: async (m, forward) => (isLogs(m) && fromOf(m) === head - 63 ? (await reorgDone, forward(m)) : undefined),
  });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, GETLOGS_UPSTREAM_RANGE: "16", CACHE_FINALITY: "depth", CACHE_FINALITY_DEPTH: "100" } });
  try {
    const before = (await logsAt(chain.url, f)).json.result;
    const pending = logsAt(relay.url, f);
    const toOf = (m) => Number(BigInt(m.params[0].toBlock));
    const headPiece = () => proxy.requests.some((r) => isLogs(r.body) && toOf(r.body) === head && r.answeredAt !== undefined);
    assert.ok(await until(headPiece, 10_000), "the head's piece answered first");
    await rpc(chain.url, "anvil_reorg", [3, []]); // the last three blocks (three logs) replaced by empty ones
    reorged();
    const got = await pending;
    const want = (await logsAt(chain.url, f)).json.result;
    console.log(`# reorg: ${before.length} logs before, ${want.length} after; the relay answered ${got.json.result?.length}; eth_getLogs upstream ${asked(proxy).length}`);
    assert.equal(want.length, before.length - 3);
    assert.deepEqual(got.json.result, want, got.text.slice(0, 300));
  } finally {
    await relay.stop();
    await proxy.stop();
    chain.stop();
  }
});

test("each upstream's cap is its own, learned from its refusal and named in the getlogs_cap line; the pieces take the smallest; GETLOGS_UPSTREAM_RANGE gives one upstream's cap up front", LIMIT, async () => {
  const erigon = await startProxy({ upstream: anvil.url, strictNonce: false, ...erigon100 });
  const geth = await startProxy({ upstream: anvil.url, strictNonce: false, ...PROVIDERS["geth 1,000 blocks (-32602)"] });
  const whole = filter(HEAD - 2_500, HEAD);
  const want = (await logsAt(anvil.url, whole)).json.result;
  try {
    const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: `${erigon.url},${geth.url}`, GETLOGS_MAX_PIECES: "80" } });
    try {
      const got = await logsAt(relay.url, whole);
      assert.deepEqual(got.json.result, want, got.text.slice(0, 300));
      const caps = relay.events("getlogs_cap");
      console.log(`# two upstreams: getlogs_cap ${JSON.stringify(caps.map((c) => [c.upstream, c.blocks]))}; pieces: #1 ${asked(erigon).length}, #2 ${asked(geth).length}`);
      // Each line names the upstream that refused, with a cap within its own (Erigon #1 100,
      // geth #2 1,000, when the first ask went to it).
      assert.ok(caps.some((c) => c.upstream.startsWith("#1 ")), JSON.stringify(caps));
      for (const c of caps) {
        assert.ok(c.upstream.startsWith("#1 ") ? c.blocks <= 100 : c.upstream.startsWith("#2 ") && c.blocks > 100 && c.blocks <= 1_000, JSON.stringify(c));
      }
      const pieces = [...asked(erigon), ...asked(geth)].filter(([a, b]) => b - a < 2_500);
      assert.ok(pieces.every(([a, b]) => b - a + 1 <= 100), "every piece within the smallest cap");
    } finally {
      await relay.stop();
    }
    erigon.requests.length = 0;
    geth.requests.length = 0;
    const known = await startRelay({ vars: { UPSTREAM_RPC_URL: `${geth.url},${erigon.url}`, GETLOGS_UPSTREAM_RANGE: ",100", GETLOGS_MAX_PIECES: "80" } });
    try {
      const got = await logsAt(known.url, whole);
      assert.deepEqual(got.json.result, want, got.text.slice(0, 300));
      const all = [...asked(erigon), ...asked(geth)];
      assert.ok(all.length > 1 && all.every(([a, b]) => b - a + 1 <= 100), `no refusal first: ${JSON.stringify(all.slice(0, 3))}`);
      assert.deepEqual(known.events("getlogs_cap"), []);
    } finally {
      await known.stop();
    }
  } finally {
    await erigon.stop();
    await geth.stop();
  }
});

test("a batch of three split eth_getLogs: at most 4 pieces of the request in flight at once, every answer whole", LIMIT, async () => {
  let inFlight = 0;
  let most = 0;
  const s = await behind({
    rewrite: async (m, forward) => {
      if (!isLogs(m)) return undefined;
      most = Math.max(most, ++inFlight);
      try {
        await sleep(50);
        return await forward(m);
      } finally {
        inFlight--;
      }
    },
  }, { GETLOGS_UPSTREAM_RANGE: "100" });
  try {
    const ranges = [filter(1, 800), filter(801, 1_600), filter(1_601, 2_400)];
    const got = await post(s.relay.url, ranges.map((f, i) => ({ jsonrpc: "2.0", id: i, method: "eth_getLogs", params: [f] })));
    for (const [i, f] of ranges.entries()) {
      assert.deepEqual(got.json.find((r) => r.id === i)?.result, (await logsAt(anvil.url, f)).json.result, `member ${i}`);
    }
    console.log(`# a batch of 3 split eth_getLogs: ${asked(s.proxy).length} pieces, at most ${most} in flight`);
    assert.ok(asked(s.proxy).length >= 24, `${asked(s.proxy).length} pieces`);
    assert.ok(most <= 4, `${most} pieces in flight`);
    assert.ok(most >= 2, "the pieces go side by side");
  } finally {
    await s.stop();
  }
});

test("a range whose end is above every upstream's head is refused before any piece (-32602, geth's words)", LIMIT, async () => {
  const s = await behind(erigon100, { GETLOGS_UPSTREAM_RANGE: "100" });
  try {
    const got = await logsAt(s.relay.url, filter(HEAD - 300, HEAD + 1_000));
    assert.equal(got.json.error?.code, -32602, got.text);
    assert.equal(got.json.error.message, "block range extends beyond current head block");
    assert.equal(asked(s.proxy).length, 0, "no piece asked");
    const within = filter(HEAD - 300, HEAD);
    assert.deepEqual((await logsAt(s.relay.url, within)).json.result, (await logsAt(anvil.url, within)).json.result);
  } finally {
    await s.stop();
  }
});

test("pieces that outlast UPSTREAM_TIMEOUT_MS end the request with -32005, never a short answer", LIMIT, async () => {
  const slow = await behind({
    rewrite: async (m, forward) => (isLogs(m) ? (await sleep(400), forward(m)) : undefined),
  }, { GETLOGS_UPSTREAM_RANGE: "64", UPSTREAM_TIMEOUT_MS: "1500", GETLOGS_MAX_PIECES: "80" });
  try {
    const got = await logsAt(slow.relay.url, filter(HEAD - 2_400, HEAD));
    const n = asked(slow.proxy).length;
    console.log(`# 400 ms a piece, UPSTREAM_TIMEOUT_MS 1500: ${JSON.stringify(got.json.error)} after ${n} pieces`);
    assert.equal(got.json.error?.code, -32005, got.text.slice(0, 300));
    assert.match(got.json.error.message, /^query timeout exceeded/);
    assert.ok(n > 0 && n < 2_400 / 64, `${n} of about 38 pieces asked`);
  } finally {
    await slow.stop();
  }
});
