// Provider profiles for the test proxy (startProxy in ./harness.mjs): each upstream as it really
// answers what anvil never refuses: a batch over its limit, requests past a plan's rate, a node
// that lags, one stuck behind the chain's head, one that swallows sends. Each profile is a
// function of its options returning startProxy's options and hooks
// (`startProxy({ upstream, profile: geth({ batchLimit: 5 }) })`), with a `name` and its own
// record of what it refused (`refusals`: { at, kind, size?, method?, id? }, performance.now()).
// Every one lets any nonce through (strictNonce: false: a mempool node); a test that wants
// Hedera's consensus nodes' nonce rule as well passes strictNonce: true.
//
// The shapes come from each provider's code or documentation, cited at each profile. Where a
// detail is not documented, the comment says what was assumed.
import { randomUUID } from "node:crypto";

/** mulberry32: a small seeded PRNG, floats in [0, 1) (as tests/support/every-fault.mjs has it). */
function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const JSON_HEADERS = { "content-type": "application/json" };
const error = (id, code, message, data) => ({ jsonrpc: "2.0", id, error: data === undefined ? { code, message } : { code, message, data } });
const answer = (status, body) => ({ status, headers: JSON_HEADERS, body: JSON.stringify(body) });
/** The id of a batch's first call (a member with a method and an id), as geth's
 * respondWithBatchTooLarge looks for it; null when there is none. */
const firstCallId = (batch) => batch.find((m) => m && typeof m === "object" && typeof m.method === "string" && "id" in m)?.id ?? null;

/**
 * A node whose batch limit refuses a whole batch over `batchLimit` members with `refuse(batch)`
 * ({ status, body }); smaller batches and single requests go through as before.
 */
function batchLimited(name, batchLimit, refuse, extra = {}) {
  const refusals = [];
  return {
    name,
    batchLimit,
    refusals,
    strictNonce: false,
    fault: (req) => {
      if (!Array.isArray(req) || req.length <= batchLimit) return null;
      refusals.push({ at: performance.now(), kind: "batch_limit", size: req.length });
      return refuse(req);
    },
    ...extra,
  };
}

/**
 * geth (go-ethereum; `--rpc.batch-request-limit`, node.DefaultConfig BatchRequestLimit 1000,
 * BatchResponseMaxSize 25 MB). rpc/handler.go handleBatch: over the limit,
 * respondWithBatchTooLarge writes `[]*jsonrpcMessage{resp}`, an array of ONE error, with the id of
 * the batch's first call ("the best we can do, given that the protocol doesn't have a way of
 * reporting an error for the entire batch"); the error is invalidRequestError{errMsgBatchTooLarge}:
 * code -32600, message "batch too large" (rpc/errors.go). HTTP 200. (The same code in geth's forks:
 * coreth/libevm, op-geth.)
 */
export function geth({ batchLimit = 1000 } = {}) {
  return batchLimited("geth", batchLimit, (batch) => answer(200, [error(firstCallId(batch), -32600, "batch too large")]));
}

/**
 * Erigon (`--rpc.batch.limit`, default 100). rpc/handler.go (erigontech/erigon) handleBatch ->
 * respondWithBatchTooLarge: an array of ONE invalidRequestError (-32600) with the first call's id,
 * message `batch limit %d exceeded (can increase by --rpc.batch.limit). Requested batch of size:
 * %d`. HTTP 200. Older Erigon (rpc/server.go serveSingleRequest, 2023) wrote one error OBJECT,
 * `errorMessage(fmt.Errorf(...))`: id null, code -32000, the same message (erigon#7072 shows
 * `batch limit 100 exceeded: 142 requests given` from before that): `shape: "object"`.
 */
export function erigon({ batchLimit = 100, shape = "array" } = {}) {
  return batchLimited("erigon", batchLimit, (batch) => {
    const message = `batch limit ${batchLimit} exceeded (can increase by --rpc.batch.limit). Requested batch of size: ${batch.length}`;
    return shape === "object" ? answer(200, error(null, -32000, message)) : answer(200, [error(firstCallId(batch), -32600, message)]);
  });
}

/**
 * Besu (`--rpc-http-max-batch-size`, default 1024). Its batch handler
 * (org.hyperledger.besu.ethereum.api.handlers.batch): over the limit,
 * handleJsonRpcError(ctx, null, RpcErrorType.EXCEEDS_RPC_MAX_BATCH_SIZE): one error OBJECT, id
 * null, code -32005, "Number of requests exceeds max batch size" (RpcErrorType.java); HTTP 200
 * (Besu's HTTP service test of a batch over the limit asserts status 200).
 */
export function besu({ batchLimit = 1024 } = {}) {
  return batchLimited("besu", batchLimit, () => answer(200, error(null, -32005, "Number of requests exceeds max batch size")));
}

/**
 * Nethermind (JsonRpc.MaxBatchSize, default 1024). Nethermind.JsonRpc/JsonRpcProcessor.cs: over
 * the limit, `JsonRpcResult.Single(GetErrorResponse(ErrorCodes.LimitExceeded, "Batch size limit
 * exceeded"))`: one error OBJECT, id null, code -32005; Nethermind.Runner (Startup.cs
 * GetStatusCode / HttpJsonRpcResponseSink.cs) answers a single result whose error is
 * ModuleTimeout or LimitExceeded with HTTP 503 Service Unavailable (a collection always 200).
 */
export function nethermind({ batchLimit = 1024 } = {}) {
  return batchLimited("nethermind", batchLimit, () => answer(503, error(null, -32005, "Batch size limit exceeded")));
}

/**
 * reth and every jsonrpsee server (BatchRequestConfig::Limit(n); jsonrpsee's default is
 * Unlimited). jsonrpsee test-utils helpers.rs batches_too_large: one error OBJECT
 * `{"jsonrpc":"2.0","id":null,"error":{"code":-32010,"message":"The batch request was too large",
 * "data":"Exceeded max limit of N"}}`, HTTP 200 (seen so on HyperEVM's public endpoint at 20).
 */
export function reth({ batchLimit = 100 } = {}) {
  return batchLimited("reth", batchLimit, () => answer(200, error(null, -32010, "The batch request was too large", `Exceeded max limit of ${batchLimit}`)));
}

/**
 * Hedera's JSON-RPC relay (hiero-ledger/hiero-json-rpc-relay; BATCH_REQUESTS_MAX_SIZE, default 100;
 * BATCH_REQUESTS_ENABLED). packages/server/src/koaJsonRpc/index.ts handleBatchRequest: over the
 * limit, `jsonRespError(null, predefined.BATCH_REQUESTS_AMOUNT_MAX_EXCEEDED(n, max), requestId)`
 * and ctx.status = 400: one error OBJECT, id null, code -32203, message `Batch request amount N
 * exceeds max M` (the relay package's predefined errors), which jsonRespError prefixes
 * with `[Request ID: <uuid>] ` (lib/RpcResponse.ts). Batches disabled (`enabled: false`): 400,
 * -32202 "Batch requests are disabled". Its consensus nodes refuse nonce gaps: strictNonce.
 */
export function hedera({ batchLimit = 100, enabled = true, strictNonce = false } = {}) {
  const refuse = (batch) =>
    enabled
      ? answer(400, error(null, -32203, `[Request ID: ${randomUUID()}] Batch request amount ${batch.length} exceeds max ${batchLimit}`))
      : answer(400, error(null, -32202, `[Request ID: ${randomUUID()}] Batch requests are disabled`));
  return { ...batchLimited("hedera", enabled ? batchLimit : 0, refuse), strictNonce };
}

/**
 * A plan's requests per second, counted per JSON-RPC request (a batch's members each count), over a
 * sliding second; only what was let through counts. `overSingle(message)` is the answer
 * ({ status, body }) to a single request past the rate, `overMember(member)` the answer object
 * given to a batch member past it (the rest of the batch is answered as usual, HTTP 200).
 * `cost(method)` weighs a request (1 each, or a provider's compute units).
 */
function rateLimited(name, { perSecond, cost = () => 1, overSingle, overMember, extra = {} }) {
  const refusals = [];
  const admitted = []; // { at, weight }
  const take = (message) => {
    const now = performance.now();
    while (admitted.length && admitted[0].at <= now - 1000) admitted.shift();
    const used = admitted.reduce((sum, a) => sum + a.weight, 0);
    const weight = cost(message?.method);
    if (used + weight > perSecond) {
      refusals.push({ at: now, kind: "rate_limit", method: message?.method, id: message?.id });
      return false;
    }
    admitted.push({ at: now, weight });
    return true;
  };
  return {
    name,
    perSecond,
    refusals,
    strictNonce: false,
    fault: (req) => (Array.isArray(req) || take(req) ? null : overSingle(req)),
    memberAnswers: (batch) => batch.map((member) => (take(member) ? null : overMember(member))),
    ...extra,
  };
}

/**
 * QuickNode: a plan's requests per second (the issue's trial: 25). Its support article "429
 * Errors Explained": "batching also counts as RPS because each request is counted individually.
 * Sending a batch with 26 requests while your RPS is 25 will result in 25 valid responses and one
 * (1) error. The JSON structure will still be valid": the batch is answered 200, the members past
 * the rate with -32007 `N/second request limit reached - reduce calls per second or upgrade your
 * account at quicknode.com` (the text as foundry's is_rate_limit_err, foundry#4894, and
 * dank_mids' _QUICKNODE_429_ERR_MSG match it: "quicknode doesnt return a response with status
 * code 429" inside a batch). A single request past the rate: HTTP 429 ("Exceeding this limit will
 * result in a 429 Error"), with the same -32007 error as its body (eRPC's tests model it as a
 * 429 carrying that error).
 */
export function quicknode({ perSecond = 25 } = {}) {
  const text = `${perSecond}/second request limit reached - reduce calls per second or upgrade your account at quicknode.com`;
  return rateLimited("quicknode", {
    perSecond,
    overSingle: (req) => answer(429, error(req?.id ?? null, -32007, text)),
    overMember: (member) => error(member?.id ?? null, -32007, text),
  });
}

/**
 * Chainstack: a plan's requests per second, each batch member counted ("batching also counts as
 * RPS because each request is counted individually", its support article "429 Errors Response
 * Information"). The text `You've exceeded the RPS limit available on the current plan.` (dank_mids'
 * _CHAINSTACK_429_ERR_MSG: "chainstack doesnt return a response with status code 429 when we reach
 * rate limits"), code -32005 (as a client that met it records it). Batch members past the rate:
 * that error inside the 200 array; a single request past it: HTTP 429 (the support article) with
 * the same error as its body (assumed: the article shows no body).
 */
export function chainstack({ perSecond = 25 } = {}) {
  const text = "You've exceeded the RPS limit available on the current plan.";
  return rateLimited("chainstack", {
    perSecond,
    overSingle: (req) => answer(429, error(req?.id ?? null, -32005, text)),
    overMember: (member) => error(member?.id ?? null, -32005, text),
  });
}

/**
 * Alchemy's throughput compute units per second ("Compute Unit Costs": eth_sendRawTransaction 250
 * throughput CU, eth_call 26, eth_blockNumber, eth_feeHistory and eth_maxPriorityFeePerGas 10,
 * eth_chainId and net_version 0, most reads 20; a batch costs the sum of its members; the free
 * plan's 330 CUPS). Past it, its Error Reference: HTTP 429 with `{"jsonrpc":"2.0","error":{"code":
 * 429,"message":"Your app has exceeded its compute units per second capacity. If you have retries
 * enabled, you can safely ignore this message. If not, check out
 * https://docs.alchemy.com/reference/throughput"},"id":1}`; inside a batch, HTTP 200 with that
 * code-429 error in each member it did not serve (as a client measured it). Its batch page ("Does
 * Alchemy support batch requests?") lists "Most Transact APIs (exceptions:
 * eth_sendPrivateTransaction and eth_cancelPrivateTransaction)" as not batchable: a batch with a
 * send is refused whole, `Unsupported methods [eth_sendRawTransaction] in batch call. See available
 * methods at https://docs.alchemy.com/alchemy/documentation/apis` (the text a user met for
 * trace_block, agnosticeng/clickhouse-evm#4; its code and status are not documented: assumed one
 * error object, id null, -32600, HTTP 200). Its batch limit over HTTP is 1000.
 */
export function alchemy({ computeUnitsPerSecond = 330, batchLimit = 1000 } = {}) {
  const costs = {
    eth_sendRawTransaction: 250,
    eth_sendRawTransactionSync: 250,
    eth_call: 26,
    eth_blockNumber: 10,
    eth_feeHistory: 10,
    eth_maxPriorityFeePerGas: 10,
    eth_chainId: 0,
    net_version: 0,
  };
  const text =
    "Your app has exceeded its compute units per second capacity. If you have retries enabled, you can safely ignore this message. If not, check out https://docs.alchemy.com/reference/throughput";
  const notBatchable = new Set(["eth_sendRawTransaction", "eth_sendRawTransactionSync", "eth_sendTransaction"]);
  const limited = rateLimited("alchemy", {
    perSecond: computeUnitsPerSecond,
    cost: (method) => costs[method] ?? 20,
    overSingle: (req) => answer(429, error(req?.id ?? null, 429, text)),
    overMember: (member) => error(member?.id ?? null, 429, text),
  });
  const rateFault = limited.fault;
  return {
    ...limited,
    computeUnitsPerSecond,
    fault: (req) => {
      if (Array.isArray(req)) {
        const methods = [...new Set(req.map((m) => m?.method).filter((m) => notBatchable.has(m)))];
        if (methods.length) {
          limited.refusals.push({ at: performance.now(), kind: "not_batchable", size: req.length, method: methods.join(",") });
          return answer(200, error(null, -32600, `Unsupported methods [${methods.join(", ")}] in batch call. See available methods at https://docs.alchemy.com/alchemy/documentation/apis`));
        }
        if (req.length > batchLimit) {
          limited.refusals.push({ at: performance.now(), kind: "batch_limit", size: req.length });
          return answer(200, error(null, -32600, `Batch size ${req.length} exceeds the limit of ${batchLimit}`));
        }
      }
      return rateFault(req);
    },
  };
}

/**
 * A node with a slow tail: `share` of its answers (any request, single or batch) come `lateMs`
 * late, the rest at once; drawn from a seeded generator (`seed`), so a run can be repeated. The
 * issue's trial: 15% of answers 1.5 s late. `late` counts the late ones.
 */
export function lagging({ share = 0.15, lateMs = 1500, seed = 40 } = {}) {
  const random = mulberry32(seed);
  const profile = {
    name: "lagging",
    share,
    lateMs,
    late: 0,
    /** The ids of the requests it answered late (a batch: its first member's). */
    lateIds: [],
    refusals: [],
    strictNonce: false,
    latency: (req) => {
      if (random() >= share) return 0;
      profile.late += 1;
      profile.lateIds.push([req].flat()[0]?.id);
      return lateMs;
    },
  };
  return profile;
}

const BLOCK_TAGS = new Set(["latest", "pending", "safe", "finalized"]);
/** Where each read names its block: the index of the block parameter. */
const BLOCK_PARAM = {
  eth_getBalance: 1,
  eth_getTransactionCount: 1,
  eth_getCode: 1,
  eth_getStorageAt: 2,
  eth_call: 1,
  eth_estimateGas: 1,
  eth_getProof: 2,
  eth_getBlockTransactionCountByNumber: 0,
  eth_getBlockReceipts: 0,
};

/**
 * A node stuck `behind` blocks under the chain's real head (a node that fell behind, as eRPC's
 * users met it, erpc#50; go-ethereum#27353): every read answers as of its head, the real head
 * minus `behind` (never below 0), read from the node at each request. eth_blockNumber is that
 * head; eth_getBlockByNumber("latest" / "pending" / "safe" / "finalized") is that block, a number
 * above it answers null; reads with a block tag (balances, counts, code, calls) answer at that
 * block, and a number above it gets geth's `header not found` (-32000); a transaction or receipt in
 * a block above it answers null, as a node that has not seen the block. Sends and everything else
 * pass through. `head(real)` is the head it answers for `real`.
 */
export function stuck({ behind = 30 } = {}) {
  const headOf = (real) => Math.max(0, real - behind);
  const hex = (n) => `0x${n.toString(16)}`;
  const realHead = async (forward) => Number(BigInt((await forward({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })).result));
  const blockOf = (tag, head) => (BLOCK_TAGS.has(tag) ? head : typeof tag === "string" && /^0x[0-9a-f]+$/i.test(tag) ? Number(BigInt(tag)) : tag === "earliest" ? 0 : null);
  return {
    name: "stuck",
    behind,
    head: headOf,
    refusals: [],
    strictNonce: false,
    rewrite: async (message, forward) => {
      const { method, params = [], id } = message;
      if (method === "eth_blockNumber") return { jsonrpc: "2.0", id, result: hex(headOf(await realHead(forward))) };
      if (method === "eth_getBlockByNumber") {
        const head = headOf(await realHead(forward));
        const number = blockOf(params[0], head);
        if (number === null) return undefined;
        if (number > head) return { jsonrpc: "2.0", id, result: null };
        return forward({ ...message, params: [hex(number), ...params.slice(1)] });
      }
      if (method in BLOCK_PARAM) {
        const at = BLOCK_PARAM[method];
        const head = headOf(await realHead(forward));
        const tag = params[at] ?? "latest";
        const number = typeof tag === "object" && tag !== null ? null : blockOf(tag, head);
        if (number === null) return undefined;
        if (number > head) return error(id, -32000, "header not found");
        const moved = [...params];
        while (moved.length < at) moved.push(undefined);
        moved[at] = hex(number);
        return forward({ ...message, params: moved });
      }
      if (method === "eth_getTransactionByHash" || method === "eth_getTransactionReceipt" || method === "eth_getBlockByHash") {
        const head = headOf(await realHead(forward));
        const found = await forward(message);
        const inBlock = found?.result?.blockNumber ?? found?.result?.number;
        if (inBlock !== undefined && inBlock !== null && Number(BigInt(inBlock)) > head) {
          // A transaction it never saw mined: a node behind may still hold it in its pool, but
          // has no block for it.
          return { jsonrpc: "2.0", id, result: method === "eth_getTransactionByHash" ? { ...found.result, blockHash: null, blockNumber: null, transactionIndex: null } : null };
        }
        return found;
      }
      return undefined;
    },
  };
}

/**
 * A node that swallows sends: eth_sendRawTransaction (alone or in a batch) is never answered (the
 * connection stays open until the proxy stops); everything else, eth_chainId included, is answered
 * (issue 40: such a node was never cooled, so with SEND_BROADCAST=all every refusal waited for it).
 * What reached it is in the proxy's `seen` (never accepted, never answered).
 */
export function hangsOnSends() {
  return { name: "hangs-on-sends", refusals: [], strictNonce: false, hang: () => true };
}

/** The batch-limit profiles by name, each a function of { batchLimit }. */
export const BATCH_LIMITED = { geth, erigon, besu, nethermind, hedera, reth };
/** The per-request rate profiles by name. */
export const RATE_LIMITED = { quicknode, chainstack, alchemy };

// ---- nodes that answer as of a head below the chain's (issue: lagging upstreams and the cache) ----

const hexOf = (n) => `0x${n.toString(16)}`;
const QUANTITY = /^0x[0-9a-f]+$/i;
const result = (id, value) => ({ jsonrpc: "2.0", id, result: value });
/** The node's (anvil's) real head. */
const realHeadOf = async (forward) => Number(BigInt((await forward({ jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })).result));
/** The number a tag names at anvil (`safe`, `finalized`): anvil's own answer, or null. */
const taggedAt = async (forward, tag) => {
  const block = (await forward({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByNumber", params: [tag, false] })).result;
  return block ? Number(BigInt(block.number)) : null;
};

/**
 * How a node whose head is `head` answers `message` (anvil, ahead of it, answers the rest through
 * `forward`). `tags`: "node" resolves `safe`/`finalized` at the node (anvil's, never above `head`),
 * "latest" reads them as `latest` (Hedera's relay); `logs`: "erigon", "geth" or "hedera"; `state`:
 * "geth" (a state read above the head: -32000 "header not found") or "latest" (read at its head).
 * Returns a JSON-RPC answer object, or undefined to pass the request through unchanged.
 */
async function answerAsOf(message, forward, head, { tags, logs, state }) {
  const { method, params = [], id } = message;
  // The number a block parameter names for this node: a tag at its head (or anvil's safe and
  // finalized, capped at its head), a quantity as given; null for what it cannot read (an object).
  const numberOf = async (tag) => {
    if (tag === undefined || tag === null || tag === "latest" || tag === "pending") return head;
    if (tag === "earliest") return 0;
    if (tag === "safe" || tag === "finalized") return tags === "latest" ? head : Math.min(head, (await taggedAt(forward, tag)) ?? head);
    if (typeof tag === "string" && QUANTITY.test(tag)) return Number(BigInt(tag));
    return null;
  };
  if (method === "eth_blockNumber") return result(id, hexOf(head));
  if (method === "eth_getBlockByNumber") {
    const number = await numberOf(params[0]);
    if (number === null) return undefined;
    if (number > head) return result(id, null);
    return forward({ ...message, params: [hexOf(number), ...params.slice(1)] });
  }
  if (method === "eth_getBlockByHash" || method === "eth_getTransactionByHash" || method === "eth_getTransactionReceipt") {
    const found = await forward(message);
    const inBlock = found?.result?.blockNumber ?? found?.result?.number;
    if (inBlock === undefined || inBlock === null || Number(BigInt(inBlock)) <= head) return found;
    // A block it has not seen; a transaction in one: still in its pool (a node) or unknown (a mirror).
    if (method === "eth_getTransactionByHash" && logs !== "hedera") return result(id, { ...found.result, blockHash: null, blockNumber: null, transactionIndex: null });
    return result(id, null);
  }
  if (method === "eth_getBlockReceipts") {
    const number = await numberOf(params[0]);
    if (number === null) return undefined;
    if (number > head) {
      return logs === "hedera"
        ? error(id, -32001, `[Request ID: ${randomUUID()}] Requested resource not found. Block: ${params[0]}`)
        : result(id, null);
    }
    return forward({ ...message, params: [hexOf(number)] });
  }
  if (method === "eth_getLogs") return logsAsOf(message, forward, head, logs, numberOf);
  if (method in BLOCK_PARAM) {
    const at = BLOCK_PARAM[method];
    const tag = params[at] ?? "latest";
    let number;
    if (tag && typeof tag === "object") {
      // EIP-1898 {blockHash}: geth looks the header up by hash ("header for hash not found").
      const block = tag.blockHash ? (await forward({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByHash", params: [tag.blockHash, false] })).result : null;
      if (!tag.blockHash || !block) return undefined;
      if (Number(BigInt(block.number)) > head) return state === "latest" ? undefined : error(id, -32000, "header for hash not found");
      return undefined;
    }
    number = await numberOf(tag);
    if (number === null) return undefined;
    if (number > head) {
      if (state !== "latest") return error(id, -32000, "header not found");
      number = head;
    }
    const moved = [...params];
    while (moved.length < at) moved.push(undefined);
    moved[at] = hexOf(number);
    return forward({ ...message, params: moved });
  }
  return undefined;
}

/** eth_getLogs as of `head`, as Erigon, geth or Hedera's relay answer a range or a hash past it. */
async function logsAsOf(message, forward, head, kind, numberOf) {
  const { params = [], id } = message;
  const filter = params[0] ?? {};
  if (filter.blockHash) {
    const block = (await forward({ jsonrpc: "2.0", id: 1, method: "eth_getBlockByHash", params: [filter.blockHash, false] })).result;
    if (block && Number(BigInt(block.number)) <= head) return forward(message);
    if (kind === "hedera") return result(id, []);
    // Erigon: fmt.Errorf("block not found: %x", hash) (no 0x: common.Hash's %x); geth: "unknown block".
    return kind === "erigon" ? error(id, -32000, `block not found: ${filter.blockHash.replace(/^0x/, "").toLowerCase()}`) : error(id, -32000, "unknown block");
  }
  const from = filter.fromBlock === undefined ? head : await numberOf(filter.fromBlock);
  const to = filter.toBlock === undefined ? head : await numberOf(filter.toBlock);
  if (from === null || to === null) return undefined;
  if (kind === "erigon") {
    if (from > head) return result(id, []);
    const end = Math.min(to, head);
    if (end < from) return error(id, -32000, `end (${end}) < begin (${from})`);
    return forward({ ...message, params: [{ ...filter, fromBlock: hexOf(from), toBlock: hexOf(end) }] });
  }
  if (kind === "hedera") {
    if (from > head || to > head) return result(id, []);
    return forward({ ...message, params: [{ ...filter, fromBlock: hexOf(from), toBlock: hexOf(to) }] });
  }
  if (from > head || to > head) return error(id, -32602, "block range extends beyond current head block");
  return forward({ ...message, params: [{ ...filter, fromBlock: hexOf(from), toBlock: hexOf(to) }] });
}

/**
 * One URL over several nodes, as a provider's load balancer spreads requests (erpc#50's "nodes a
 * block apart"): node i is `lags[i]` blocks behind the chain's real head (anvil's, read at each
 * request), and each HTTP request (a batch whole) goes to one node drawn by a seeded generator
 * (`seed`), the relay's own requests (eth_chainId, its head asks) too; `picks[i]` counts the
 * requests node i got. WebSockets pass through to anvil itself (the real head): a provider's
 * WebSocket and HTTP requests served by different nodes.
 * The picked node answers as of its head, as `stuck` does: eth_blockNumber is its head;
 * eth_getBlockByNumber of `latest`/`pending` its head's block, `safe`/`finalized` anvil's (never
 * above its head), a number above its head null; a state read at a number above its head geth's
 * -32000 `header not found` (go-ethereum eth/api_backend.go StateAndHeaderByNumber:
 * `errors.New("header not found")`), by a hash it lacks `header for hash not found`
 * (StateAndHeaderByNumberOrHash); a block by hash, a transaction or a receipt in a block above its
 * head null (a transaction: its pool's form, no block); eth_getBlockReceipts above it null
 * (Erigon's GetBlockReceipts: `if block == nil { return nil, nil }`).
 * eth_getLogs as Erigon answers it (`erigonLogs`; erigontech/erigon rpc/jsonrpc/eth_receipts.go
 * GetLogs, Erigon 3.0-3.1): `latest` is its last executed block; a fromBlock past it answers
 * `[]` (`if begin > latest { return types.Logs{}, nil }`, HTTP 200; issue #14134 shows the
 * `[]`); a toBlock past it is taken as given, its index holding nothing above its head (assumed:
 * the logs up to its head); end below begin -32000 `end (E) < begin (B)`; a `blockHash` it does
 * not have -32000 `block not found: <hash, no 0x>` (`fmt.Errorf("block not found: %x", ...)`).
 * (Erigon's master has since moved to an error for both, ethereum/execution-apis#875: -32602.)
 * `erigonLogs: false`: as geth and that spec, -32602 `block range extends beyond current head
 * block` for any bound past its head (execution-apis tests/eth_getLogs/
 * filter-error-future-block-range.io), a hash it lacks -32000 `unknown block`.
 */
export function loadBalanced({ lags = [0, 1], seed = 51, erigonLogs = true } = {}) {
  const random = mulberry32(seed);
  const picks = lags.map(() => 0);
  // Each request object of an HTTP request -> its route: the node and that request's one head.
  const routes = new WeakMap();
  const profile = {
    name: "load-balanced",
    lags,
    seed,
    erigonLogs,
    picks,
    refusals: [],
    strictNonce: false,
    /** The head node i answers for the real head `real`. */
    head: (real, i) => Math.max(0, real - lags[i]),
    // Asked once per HTTP request, with its whole body, before any member is handled: the pick.
    latency: (req) => {
      if (req && typeof req === "object") {
        const node = Math.floor(random() * lags.length);
        picks[node] += 1;
        const route = { node, head: null };
        for (const member of [req].flat()) if (member && typeof member === "object") routes.set(member, route);
      }
      return 0;
    },
    rewrite: async (message, forward) => {
      const route = routes.get(message);
      if (!route) return undefined;
      route.head ??= realHeadOf(forward).then((real) => profile.head(real, route.node));
      return answerAsOf(message, forward, await route.head, { tags: "node", logs: erigonLogs ? "erigon" : "geth", state: "geth" });
    },
  };
  return profile;
}

/**
 * Hedera's JSON-RPC relay (hiero-ledger/hiero-json-rpc-relay) in front of a mirror node `lag`
 * blocks behind the chain (anvil; run it with `--chain-id 296`, Hedera testnet's id). Everything
 * it reads comes from the mirror node, so it answers as of the mirror's head:
 * - eth_blockNumber: the mirror's latest block (CommonService.getLatestBlockNumber);
 * - `safe` and `finalized` are `latest` (CommonService.blockTagIsLatestOrPending: null, latest,
 *   pending, safe and finalized alike), so its finalized block is its head;
 * - eth_getLogs (CommonService.getLogs): a `blockHash` the mirror lacks answers `[]`
 *   (validateBlockHashAndAddTimestampToParams returns false on a 404); a range whose fromBlock or
 *   toBlock the mirror lacks answers `[]` (validateBlockRangeAndAddTimestampToParams:
 *   getHistoricalBlockResponse gives null, "return false ... return an empty response"), HTTP 200;
 * - eth_getBlockByNumber / eth_getBlockByHash of a block it lacks: null (BlockService.getBlock,
 *   `if (blockResponse == null) return null`); a transaction or receipt in one: null;
 * - eth_getBlockReceipts of one: -32001 `Requested resource not found. Block: <param>`
 *   (predefined.RESOURCE_NOT_FOUND), prefixed with `[Request ID: <uuid>] ` as its errors are;
 * - a state read at a number above its head is read at its latest (AccountService.getBalance: a
 *   block no more than 1 below the latest, or above it, "is latest"; assumed for every state read).
 * The rest (eth_chainId, sends) passes through. `head(real)` is the head it answers for `real`.
 */
export function hederaMirror({ lag = 2 } = {}) {
  const headOf = (real) => Math.max(0, real - lag);
  return {
    name: "hedera-mirror",
    lag,
    head: headOf,
    refusals: [],
    strictNonce: false,
    rewrite: async (message, forward) => answerAsOf(message, forward, headOf(await realHeadOf(forward)), { tags: "latest", logs: "hedera", state: "latest" }),
  };
}
