// A stand-in for a private transaction route (Flashbots Protect, MEV Blocker) in front of an anvil
// started with `--no-mining`: the real routes cannot be reached from the test machines.
//
// What it does, as those routes do:
// - `eth_sendRawTransaction` keeps the transaction private: it is not forwarded to the chain's
//   pool, so a public node answers null for its hash and does not count it in a pending count.
//   A copy of a transaction it holds or included is answered with the same hash.
// - `buildBlock()` is a block built with what it holds: for each sender, the transactions whose
//   nonces run on from the chain's next nonce (nonce by nonce, a gap stops the run) go to the chain
//   and a block is mined. The others stay held.
// - `GET /tx/{hash}` answers `{"status": ...}` in Flashbots Protect's words: PENDING (held),
//   INCLUDED (in a block), FAILED (given up, forgotten), UNKNOWN (never seen).
// - Faults: `forget(hash)` gives a held transaction up (FAILED, never included, as Protect marks a
//   transaction it dropped; the same bytes sent again are held again); `holdFor(hash, blocks)`
//   keeps one out of the next `blocks` blocks (before or after it arrives); `cancel(hash)` is its
//   sender cancelling it (CANCELLED, never included); with the option `nonceCacheLagMs`,
//   Protect's nonce cache, written that many ms after each acceptance, refuses a nonce above it
//   `invalid nonce` (-32603).
// - `eth_sendPrivateTransaction` (`[{tx, maxBlockNumber, preferences}]`, Protect's) holds `tx` as
//   `eth_sendRawTransaction` does, never past `maxBlockNumber`: a block built after it gives the
//   transaction up (FAILED). `eth_cancelPrivateTransaction` (`[{txHash}]`) cancels a held one
//   (CANCELLED, answer true; false for any other). With `servesPrivateMethods: false` both answer
//   -32601, as Flashbots Protect's RPC and MEV Blocker do.
// - The status answer names the transaction's `from` and `nonce` (`transaction`, as Protect's does).
// - A cancel-tx (to its own sender, at most 2 bytes of data) at the nonce of one it holds cancels
//   that one (CANCELLED) and is itself sent nowhere (Protect's rule); its record has `cancelTx`.
// Every other method is forwarded to the chain (the routes answer reads, `eth_chainId` included).
// `sends` records every `eth_sendRawTransaction` it received: { hash, sender, nonce, at (arrival,
// before the latency), answeredAt } (performance.now(), ms).
// Options: `latencyMs` (default 0) waits that long before answering a request that holds an
// `eth_sendRawTransaction`, as the test proxy's `latency` does (the bench's hop to the route);
// `senderOf(raw)` names the sender of a transaction the caller signed itself (lowercase), to spare
// a signature recovery under load, as the test proxy's does.

import http from "node:http";
import { keccak256, parseTransaction, recoverTransactionAddress } from "viem";
import { freePort, rpc, sleep, startAnvil, startProxy, startRelay } from "./harness.mjs";

/** The statuses of the status endpoint (Flashbots Protect's `/tx/{hash}`). */
export const STATUS = { PENDING: "PENDING", INCLUDED: "INCLUDED", FAILED: "FAILED", UNKNOWN: "UNKNOWN", CANCELLED: "CANCELLED" };

/**
 * Starts the stand-in in front of `chain` (the URL of an anvil run with `--no-mining`), with the
 * module comment's `latencyMs` and `senderOf` when given; returns
 * { url, statusUrl (with `{hash}`), sends, status(hash), buildBlock(), forget(hash),
 * holdFor(hash, blocks), stop() }.
 */
export async function startPrivateRoute({ chain, latencyMs = 0, senderOf = () => undefined, nonceCacheLagMs = null, servesPrivateMethods = true }) {
  /** sender -> the highest nonce it holds, as its nonce cache knows it (Protect's Redis). */
  const cachedMax = new Map();
  const refusals = [];
  /** hash -> { raw, sender, nonce, status, holdBlocks } */
  const txs = new Map();
  const sends = [];
  /** hash -> blocks, for a transaction not received yet */
  const holds = new Map();

  const forward = async (request) => {
    const res = await fetch(chain, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(request) });
    return res.json();
  };

  const send = async (request, at) => {
    const priv = request.method === "eth_sendPrivateTransaction";
    const raw = priv ? request.params?.[0]?.tx : request.params?.[0];
    const maxBlock = priv && request.params?.[0]?.maxBlockNumber != null ? Number(BigInt(request.params[0].maxBlockNumber)) : null;
    let hash, sender, nonce;
    try {
      hash = keccak256(raw);
      const parsed = parseTransaction(raw);
      nonce = Number(parsed.nonce ?? 0);
      sender = senderOf(raw) ?? (await recoverTransactionAddress({ serializedTransaction: raw })).toLowerCase();
    } catch (e) {
      return { jsonrpc: "2.0", id: request.id ?? null, error: { code: -32602, message: `invalid raw transaction: ${e.message}` } };
    }
    const record = { hash, sender, nonce, at, method: request.method, maxBlock };
    sends.push(record);
    const known = txs.get(hash);
    if (nonceCacheLagMs !== null && !known) {
      // Flashbots Protect (server/request_processor.go): a nonce is taken only if
      // latestCount <= nonce <= max(latestCount, cachedMaxPendingNonce + 1), and the cache is
      // written asynchronously after it answered (`go RState.SetSenderMaxNonce`).
      const latest = Number(BigInt((await rpc(chain, "eth_getTransactionCount", [sender, "latest"])).result));
      const cached = cachedMax.get(sender);
      const highest = cached === undefined ? latest : Math.max(latest, cached + 1);
      if (nonce < latest || nonce > highest) {
        refusals.push(record);
        record.answeredAt = performance.now();
        return { jsonrpc: "2.0", id: request.id ?? null, error: { code: -32603, message: "invalid nonce" } };
      }
      setTimeout(() => cachedMax.set(sender, Math.max(cachedMax.get(sender) ?? -1, nonce)), nonceCacheLagMs);
    }
    // Flashbots Protect's cancel-tx (server/request_sendrawtx.go): to its own sender with at
    // most 2 bytes of data, at the nonce of one it holds: that one is cancelled, and neither is
    // sent anywhere; the answer is the cancel's hash.
    if (!known && !priv) {
      const parsed = parseTransaction(raw);
      const selfCancel = parsed.to?.toLowerCase() === sender && (parsed.data ?? "0x").length <= 2 + 4;
      const held = selfCancel && [...txs.values()].find((t) => t.sender === sender && t.nonce === nonce && t.status === STATUS.PENDING);
      if (held) {
        held.status = STATUS.CANCELLED;
        record.cancelTx = true;
        record.answeredAt = performance.now();
        return { jsonrpc: "2.0", id: request.id ?? null, result: hash };
      }
    }
    if (!known || known.status === STATUS.FAILED) {
      txs.set(hash, { raw, sender, nonce, maxBlock, status: STATUS.PENDING, holdBlocks: known?.holdBlocks ?? holds.get(hash) ?? 0 });
      holds.delete(hash);
    }
    record.answeredAt = performance.now();
    return { jsonrpc: "2.0", id: request.id ?? null, result: hash };
  };

  const isSend = (request) => ["eth_sendRawTransaction", "eth_sendPrivateTransaction"].includes(request?.method);
  const privateMethods = ["eth_sendPrivateTransaction", "eth_cancelPrivateTransaction"];
  /** The cancels it received: { hash, answer }. */
  const cancels = [];
  const cancelTx = (request) => {
    const hash = String(request.params?.[0]?.txHash ?? "").toLowerCase();
    const tx = txs.get(hash);
    const cancelled = tx?.status === STATUS.PENDING;
    if (cancelled) tx.status = STATUS.CANCELLED;
    cancels.push({ hash, answer: cancelled });
    return { jsonrpc: "2.0", id: request.id ?? null, result: cancelled };
  };
  const answer = (request, at) => {
    if (!servesPrivateMethods && privateMethods.includes(request?.method)) {
      return { jsonrpc: "2.0", id: request.id ?? null, error: { code: -32601, message: `the method ${request.method} does not exist/is not available` } };
    }
    if (request?.method === "eth_cancelPrivateTransaction") return cancelTx(request);
    return isSend(request) ? send(request, at) : forward(request);
  };

  const server = http.createServer(async (req, res) => {
    const status = /^\/tx\/(0x[0-9a-fA-F]{64})$/.exec(req.url ?? "");
    if (req.method === "GET" && status) {
      const tx = txs.get(status[1].toLowerCase());
      const body = JSON.stringify({
        status: tx?.status ?? STATUS.UNKNOWN,
        hash: status[1].toLowerCase(),
        ...(tx ? { maxBlockNumber: tx.maxBlock, transaction: { from: tx.sender, nonce: `0x${tx.nonce.toString(16)}` } } : {}),
      });
      res.writeHead(200, { "content-type": "application/json" }).end(body);
      return;
    }
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const at = performance.now();
    let body;
    try {
      const request = JSON.parse(Buffer.concat(chunks).toString());
      if (latencyMs > 0 && [request].flat().some(isSend)) await sleep(latencyMs);
      body = Array.isArray(request) ? await Promise.all(request.map((r) => answer(r, at))) : await answer(request, at);
    } catch (e) {
      body = { jsonrpc: "2.0", id: null, error: { code: -32700, message: String(e) } };
    }
    const text = JSON.stringify(body);
    res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) }).end(text);
  });
  const port = await freePort();
  await new Promise((resolve) => server.listen(port, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${port}`;

  /** Builds one block from what it holds (see the module comment); returns the hashes included. */
  const buildBlock = async () => {
    const bySender = new Map();
    const building = Number(BigInt((await rpc(chain, "eth_blockNumber", [])).result)) + 1;
    const lapsed = [];
    for (const [hash, tx] of txs) {
      if (tx.status !== STATUS.PENDING) continue;
      if (tx.maxBlock !== null && tx.maxBlock !== undefined && building > tx.maxBlock) {
        lapsed.push(tx); // past its maxBlockNumber: given up once this block is in
        continue;
      }
      if (tx.holdBlocks > 0) {
        tx.holdBlocks -= 1;
        continue;
      }
      if (!bySender.has(tx.sender)) bySender.set(tx.sender, []);
      bySender.get(tx.sender).push([hash, tx]);
    }
    const included = [];
    for (const [sender, list] of bySender) {
      list.sort((a, b) => a[1].nonce - b[1].nonce);
      let next = Number(BigInt((await rpc(chain, "eth_getTransactionCount", [sender, "latest"])).result));
      for (const [hash, tx] of list) {
        if (tx.nonce < next) {
          tx.status = STATUS.FAILED; // its nonce was taken by another transaction
          continue;
        }
        if (tx.nonce > next) break; // a gap: the rest waits
        const sent = await rpc(chain, "eth_sendRawTransaction", [tx.raw]);
        if (sent.error) {
          tx.status = STATUS.FAILED;
          break;
        }
        included.push(hash);
        next += 1;
      }
    }
    await rpc(chain, "evm_mine", []);
    for (const tx of lapsed) tx.status = STATUS.FAILED;
    for (const hash of included) {
      const receipt = await rpc(chain, "eth_getTransactionReceipt", [hash]);
      txs.get(hash).status = receipt.result ? STATUS.INCLUDED : STATUS.PENDING;
    }
    return included;
  };

  return {
    url,
    statusUrl: `${url}/tx/{hash}`,
    sends,
    status: (hash) => txs.get(hash.toLowerCase())?.status ?? STATUS.UNKNOWN,
    buildBlock,
    forget(hash) {
      const tx = txs.get(hash.toLowerCase());
      if (tx) tx.status = STATUS.FAILED;
    },
    /** Its sender cancels a held transaction (MEV Blocker's eth_cancelTransaction): CANCELLED, never included. */
    cancel(hash) {
      const tx = txs.get(hash.toLowerCase());
      if (tx) tx.status = STATUS.CANCELLED;
    },
    /** The `eth_cancelPrivateTransaction`s it received: { hash, answer }. */
    cancels,
    /** The sends its racing nonce cache refused `invalid nonce` (with `nonceCacheLagMs`). */
    refusals,
    holdFor(hash, blocks) {
      const tx = txs.get(hash.toLowerCase());
      if (tx) tx.holdBlocks = blocks;
      else holds.set(hash.toLowerCase(), blocks);
    },
    stop: () => new Promise((resolve) => server.close(() => resolve())),
  };
}

/**
 * The stack the private-route tests run on: anvil `--no-mining`; the read node, a recording test
 * proxy before it; the stand-in route before the same anvil, reached through a link (another test
 * proxy) that holds each send `routeLatencyMs` before passing it on when that is above 0 (a route a
 * round trip away: a send can be on its way when the relay dies); and the relay, with
 * `UPSTREAM_RPC_URL` the read node, `UPSTREAM_SEND_URL` the route (or the link) and `vars`, its
 * Durable Object storage in `persist` when given (a second relay on it is the same objects
 * restarted). Returns { anvil, read, route, link, relay, vars, stop }: a test may put the relay it
 * started in another's place in `relay`; `stop()` stops that relay and the rest.
 */
export async function startPrivateStack({ vars = {}, persist, routeLatencyMs = 0, route: routeOptions = {}, keys } = {}) {
  const anvil = await startAnvil({ extraArgs: ["--no-mining"] });
  const read = await startProxy({ upstream: anvil.url, strictNonce: false });
  const route = await startPrivateRoute({ chain: anvil.url, ...routeOptions });
  const isSend = (m) => ["eth_sendRawTransaction", "eth_sendPrivateTransaction"].includes(m?.method);
  const link =
    routeLatencyMs > 0
      ? await startProxy({ upstream: route.url, strictNonce: false, latency: (req) => ([req].flat().some(isSend) ? routeLatencyMs : 0) })
      : null;
  const all = { UPSTREAM_RPC_URL: read.url, UPSTREAM_SEND_URL: link?.url ?? route.url, ...vars };
  const s = { anvil, read, route, link, vars: all, relay: await startRelay({ vars: all, persist, keys }) };
  s.stop = async () => {
    await s.relay.stop().catch(() => {}); // already stopped by a test that restarted it: fine
    await Promise.all([read.stop(), route.stop(), link?.stop()]);
    anvil.stop();
  };
  return s;
}

/** How many transactions (or private cancels) the test proxy `proxy` was sent (any send method, alone or in a batch). */
export const sendsAt = (proxy) =>
  proxy.requests.filter((r) => [r.body].flat().some((m) => /^eth_send(RawTransaction|PrivateTransaction)|^eth_cancelPrivateTransaction/.test(m?.method ?? ""))).length;
