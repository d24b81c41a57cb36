// Test harness: a real anvil chain, a recording test proxy that injects latency and faults and
// (like Hedera's consensus nodes) refuses a transaction whose nonce is not the sender's next one,
// and the compiled wasm relay running on workerd through miniflare's Node API.
import { spawn } from "node:child_process";
import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import WebSocket from "ws";
import http from "node:http";
import net from "node:net";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import { toolPaths } from "../../scripts/tools.mjs";
import { mnemonicToAccount } from "viem/accounts";
import { parseTransaction, recoverTransactionAddress, parseGwei, keccak256 } from "viem";
import { mendPool } from "./anvil-mend.mjs";

export const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
/** The compatibility date the relay runs with here: wrangler.toml's, as deployed. */
export const COMPATIBILITY_DATE = /^compatibility_date\s*=\s*"([^"]+)"/m.exec(readFileSync(path.join(ROOT, "wrangler.toml"), "utf8"))[1];
const TOOLS = toolPaths();
/** This platform's anvil and cast binaries (scripts/tools.mjs), unless given in the environment. */
export const ANVIL_BIN = process.env.ANVIL_BIN ?? TOOLS.ANVIL_BIN;
export const CAST_BIN = process.env.CAST_BIN ?? TOOLS.CAST_BIN;
export const CHAIN_ID = 31337;
const MNEMONIC = "test test test test test test test test test test test junk";

/** Anvil's well-known dev accounts (index 0..n-1 of its default mnemonic). */
export function devAccount(index) {
  return mnemonicToAccount(MNEMONIC, { addressIndex: index });
}

/**
 * This process's ports: a block of its own, `{ next, last }`. scripts/e2e.mjs gives each file one
 * (`E2E_PORTS=first-last`, below the kernel's ephemeral range, so no outgoing connection takes one
 * either); a process started otherwise takes a block by its process id, in the same range.
 */
const PORTS = (() => {
  const given = /^(\d+)-(\d+)$/.exec(process.env.E2E_PORTS ?? "");
  if (given) return { next: Number(given[1]), last: Number(given[2]) };
  const first = 10_000 + (process.pid % 44) * 500;
  return { next: first, last: first + 499 };
})();

/** Whether nothing listens on `port` of 127.0.0.1 now. */
function listenable(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.unref();
    srv.on("error", () => resolve(false));
    srv.listen(port, "127.0.0.1", () => srv.close(() => resolve(true)));
  });
}

/**
 * A port for a server of this process (anvil, workerd, a proxy, a route), from its block
 * (`PORTS`), each at most once: a port a test stopped listening on (an upstream made to refuse,
 * an outage, a stopped relay) is never given again, so whatever still calls it (a relay's retries,
 * a stale URL) reaches nothing, never another test's server. Ports the kernel picked (`listen(0)`)
 * were given again to other files run beside this one, whose chains have the same dev accounts
 * and chain id: a stale upstream URL could put a transaction in another file's chain.
 */
export async function freePort() {
  while (PORTS.next <= PORTS.last) {
    const port = PORTS.next++;
    if (await listenable(port)) return port;
  }
  throw new Error(`no port left in this process's block (E2E_PORTS=${process.env.E2E_PORTS ?? "unset"})`);
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** POSTs a JSON body (object or raw string) and returns { status, json, text, ms, retryAfter,
 * publicAfter, cache } (the last two: the `x-public-after-blocks` and `x-cache` headers). */
export async function post(url, body, headers = {}) {
  const started = performance.now();
  const res = await fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  const text = await res.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return {
    status: res.status,
    json,
    text,
    ms: performance.now() - started,
    retryAfter: res.headers.get("retry-after"),
    publicAfter: res.headers.get("x-public-after-blocks"),
    cache: res.headers.get("x-cache"),
  };
}

let ids = 0;
export async function rpc(url, method, params = []) {
  const { json } = await post(url, { jsonrpc: "2.0", id: ++ids, method, params });
  return json;
}

/** Starts anvil on a free port (or `port`); returns { url, stop, mended, lost } (see `mendPool`). */
export async function startAnvil({ accounts = 20, extraArgs = [], port: fixedPort, mend = true } = {}) {
  const port = fixedPort ?? (await freePort());
  const args = ["--port", String(port), "--host", "127.0.0.1", "--accounts", String(accounts), ...extraArgs];
  const proc = spawn(ANVIL_BIN, args, {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const url = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 200; i++) {
    try {
      const r = await rpc(url, "eth_chainId");
      if (r?.result) {
        // `mend: false`: a chain a test builds one transaction at a time, with no pool race to mend.
        const mender = mend ? mendPool(url) : { mended: [], lost: [], stop: () => {} };
        proc.once("exit", mender.stop);
        return { url, proc, pid: proc.pid, mended: mender.mended, lost: mender.lost, stop: () => (mender.stop(), proc.kill("SIGTERM")) };
      }
    } catch {
      /* not up yet */
    }
    await sleep(50);
  }
  proc.kill("SIGKILL");
  throw new Error("anvil did not start");
}

/**
 * A recording proxy in front of `upstream`: a test upstream that can be unfriendly.
 * - latency(req): ms to wait before handling each request (default 0);
 * - strictNonce: refuse eth_sendRawTransaction whose nonce is not the sender's next one, as
 *   Hedera's consensus nodes do, in the words of Hedera's JSON-RPC relay (-32000 "Nonce too low.
 *   Provided nonce: M, current nonce: N" / "Nonce too high. ...");
 * - hang(tx): when true for a transaction, never answer it;
 * - drop(tx): "before" closes the connection without forwarding the transaction; "after" forwards
 *   it (it goes in) and then closes the connection without an answer; null behaves;
 * - fault(req): may return a { status, body } to answer instead of forwarding ({ destroy: true }
 *   closes the connection);
 * - http10: speak HTTP/1.0 and close every connection after one answer (a raw TCP server), as
 *   some load balancers and old nodes do; otherwise Node's HTTP/1.1 server with keep-alive;
 * - lagPendingMs: answer eth_getTransactionCount(address, "pending") as it stood that many ms
 *   earlier, from the transactions this proxy saw accepted (a lagging mirror node);
 * - senderOf(raw): the sender of a raw transaction the caller signed itself (lowercase), to spare
 *   the proxy a signature recovery under load; otherwise it recovers the sender;
 * - connectionCap: at most this many requests waiting for their response headers at once; one
 *   more waits, unsent, until one of them has its answer (FIFO): Cloudflare's limit of six
 *   connections waiting for headers per Worker invocation (a Durable Object's concurrent
 *   requests share one I/O context), which local workerd does not enforce. `capped` counts the
 *   requests that had to wait, `mostWaiting` the most at once;
 * - goJson: read each request the way a Go node (geth, Erigon, op-geth, Nitro) reads it with
 *   `encoding/json`: member names matched case-insensitively (`Method`, `PARAMS`, `paramſ`), a
 *   later one winning; what it then runs is what is forwarded and recorded.
 * `outage(kind, ms)` takes the upstream away for `ms`: "503" answers every request with an HTML
 * 503 page (a load balancer while the node restarts); "refuse" closes the listening socket and
 * every open connection, so connections are refused (the node itself restarting). It resolves
 * when the upstream is back; `outages` records { kind, from, to } (performance.now(), ms).
 * Provider profiles (tests/support/providers.mjs) plug in through `profile` (or spread in) and
 * these hooks; without them the proxy behaves as before:
 * - profile: an object of options and hooks (a provider's), under the options given here: its
 *   `fault` is asked after the one given here (the first answer wins), its `latency` adds to the
 *   one given here, its `hang` is or-ed with the one given here; every other option given here
 *   replaces the profile's. It is returned as the proxy's `profile` (its own records, such as
 *   `refusals`, stay on it);
 * - memberAnswers(batch): once per batch (a JSON array), after `fault`: an array as long as the
 *   batch whose entries are null (the member goes on to the node as before) or a JSON-RPC answer
 *   object to give that member instead (a per-member rate limit); such a member never reaches
 *   the node (it is not in `seen`);
 * - rewrite(message, forward): for every request object (a single request or a batch's member)
 *   before the proxy handles it: a JSON-RPC answer object to give instead, or undefined to go on
 *   as before; `forward(message)` asks the node and returns its answer object (a lagging read).
 * `flightStats()` says how many requests are at the proxy now (read, not yet answered, those
 * waiting under `connectionCap` included) and the most at once since the start or the last
 * `resetFlight()`.
 * `seen` records every transaction that reached the proxy:
 * { sender, nonce, hash, at (arrival, before the injected latency), answeredAt, accepted, dropped }
 * (times from performance.now(), ms). `requests` records every request body with its arrival
 * (`{ at, body, text, answeredAt }`: the body as read, its text as it came, and when the
 * upstream's answer was ready, for those answered with one).
 */
export async function startProxy(options) {
  const { profile = {} } = options;
  const given = Object.fromEntries(Object.entries(options).filter(([, v]) => v !== undefined));
  const {
    upstream,
    latency: givenLatency = () => 0,
    strictNonce = true,
    hang: givenHang = () => false,
    drop = () => null,
    fault: givenFault = () => null,
    http10 = false,
    lagPendingMs = 0,
    senderOf = () => undefined,
    goJson = false,
    connectionCap = Infinity,
    memberAnswers = null,
    rewrite = null,
  } = { ...profile, ...given, latency: given.latency, hang: given.hang, fault: given.fault };
  const latency = profile.latency ? (req) => (givenLatency(req) ?? 0) + (profile.latency(req) ?? 0) : givenLatency;
  const hang = profile.hang ? (tx) => givenHang(tx) || profile.hang(tx) : givenHang;
  const fault = profile.fault ? (req) => givenFault(req) ?? profile.fault(req) : givenFault;
  // Requests being handled (read, not yet answered), and the most at once.
  const flight = { now: 0, most: 0 };
  const flying = async (work) => {
    flight.now += 1;
    flight.most = Math.max(flight.most, flight.now);
    try {
      return await work();
    } finally {
      flight.now -= 1;
    }
  };
  // The connection cap: requests with their headers not yet answered, and those waiting a slot.
  const cap = { active: 0, queue: [], capped: 0, mostWaiting: 0 };
  const acquire = async () => {
    if (cap.active >= connectionCap) {
      cap.capped += 1;
      await new Promise((resolve) => cap.queue.push(resolve));
    }
    cap.active += 1;
    cap.mostWaiting = Math.max(cap.mostWaiting, cap.active);
  };
  const release = () => {
    cap.active -= 1;
    cap.queue.shift()?.();
  };
  const seen = [];
  const requests = [];
  const nextNonce = new Map();
  const hung = [];
  const base = new Map();
  const nonceOf = async (sender) => {
    if (!nextNonce.has(sender)) {
      nextNonce.set(
        sender,
        rpc(upstream, "eth_getTransactionCount", [sender, "pending"]).then((r) => Number(BigInt(r.result))),
      );
    }
    return nextNonce.get(sender);
  };
  const forward = async (text) => {
    const res = await fetch(upstream, { method: "POST", headers: { "content-type": "application/json" }, body: text });
    return { status: res.status, body: await res.text() };
  };
  const DROP = Symbol("drop");
  const lagged = async (req) => {
    const sender = String(req.params[0]).toLowerCase();
    if (!base.has(sender)) {
      const now = Number(BigInt((await rpc(upstream, "eth_getTransactionCount", [sender, "pending"])).result));
      base.set(sender, now - seen.filter((r) => r.sender === sender && r.accepted).length);
    }
    const cutoff = performance.now() - lagPendingMs;
    const count = base.get(sender) + seen.filter((r) => r.sender === sender && r.accepted && r.answeredAt <= cutoff).length;
    return { jsonrpc: "2.0", id: req.id, result: `0x${count.toString(16)}` };
  };
  const forwardOne = async (message) => JSON.parse((await forward(JSON.stringify(message))).body);
  const handleOne = async (req, arrivedAt) => {
    if (rewrite && req && typeof req === "object") {
      const instead = await rewrite(req, forwardOne);
      if (instead !== undefined) return instead;
    }
    if (lagPendingMs && req.method === "eth_getTransactionCount" && req.params?.[1] === "pending") return lagged(req);
    if (req.method !== "eth_sendRawTransaction") return JSON.parse((await forward(JSON.stringify(req))).body);
    const raw = req.params[0];
    const tx = parseTransaction(raw);
    const sender = senderOf(raw) ?? (await recoverTransactionAddress({ serializedTransaction: raw })).toLowerCase();
    const record = { sender, nonce: tx.nonce, hash: keccak256(raw), at: arrivedAt, accepted: false };
    seen.push(record);
    if (hang(record)) {
      await new Promise((resolve) => hung.push(resolve));
      return null;
    }
    const dropped = drop(record);
    if (dropped === "before") {
      record.dropped = "before";
      return DROP;
    }
    if (strictNonce) {
      const expected = await nonceOf(sender);
      if (tx.nonce !== expected) {
        record.answeredAt = performance.now();
        const word = tx.nonce < expected ? "low" : "high";
        return {
          jsonrpc: "2.0",
          id: req.id,
          error: { code: -32000, message: `Nonce too ${word}. Provided nonce: ${tx.nonce}, current nonce: ${expected}` },
        };
      }
      nextNonce.set(sender, Promise.resolve(expected + 1));
    }
    const answer = JSON.parse((await forward(JSON.stringify(req))).body);
    record.answeredAt = performance.now();
    record.accepted = Boolean(answer.result);
    if (!answer.result && strictNonce) nextNonce.delete(sender); // relearn after a refusal
    if (dropped === "after") {
      record.dropped = "after";
      return DROP;
    }
    return answer;
  };
  // A batch's members are handled one after another, in the batch's order, as geth and anvil
  // run a batch (a window's members then reach anvil in nonce order, as they would a node).
  const inOrder = async (members, each) => {
    const out = [];
    for (const [i, member] of members.entries()) out.push(await each(member, i));
    return out;
  };
  /** One request text in; { status, headers, body }, or "destroy", or null (hung). */
  let down503Until = 0;
  const handle = async (text) => {
    if (performance.now() < down503Until) {
      return { status: 503, headers: { "content-type": "text/html" }, body: "<html><body>503 Service Unavailable</body></html>" };
    }
    let req;
    try {
      req = JSON.parse(text);
      if (goJson) req = Array.isArray(req) ? req.map(asGoReads) : asGoReads(req);
    } catch {
      req = null;
    }
    const arrivedAt = performance.now();
    const record = { at: arrivedAt, body: req, text };
    requests.push(record);
    await sleep(latency(req));
    const injected = fault(req);
    if (injected) {
      if (injected.destroy) return "destroy";
      return { status: injected.status ?? 200, headers: injected.headers ?? { "content-type": "application/json" }, body: injected.body ?? "" };
    }
    try {
      const instead = Array.isArray(req) && memberAnswers ? memberAnswers(req) : null;
      const answer = Array.isArray(req)
        ? await inOrder(req, (r, i) => instead?.[i] ?? handleOne(r, arrivedAt))
        : await handleOne(req, arrivedAt);
      if (answer === null) return null; // hung: the socket stays open until stop()
      if (answer === DROP || (Array.isArray(answer) && answer.includes(DROP))) return "destroy";
      // With its length, as nodes answer (geth, anvil, reth declare Content-Length).
      const body = JSON.stringify(answer);
      record.answeredAt = performance.now();
      return { status: 200, headers: { "content-type": "application/json", "content-length": Buffer.byteLength(body) }, body };
    } catch (e) {
      return { status: 500, headers: {}, body: String(e) };
    }
  };
  let server;
  const sockets = new Set();
  if (http10) {
    // HTTP/1.0: one request per connection, answered with Connection: close, then closed.
    server = net.createServer((socket) => {
      sockets.add(socket);
      socket.on("close", () => sockets.delete(socket));
      socket.on("error", () => {});
      let buf = Buffer.alloc(0);
      let done = false;
      socket.on("data", async (chunk) => {
        if (done) return;
        buf = Buffer.concat([buf, chunk]);
        const end = buf.indexOf("\r\n\r\n");
        if (end < 0) return;
        const head = buf.subarray(0, end).toString();
        const length = Number(/content-length:\s*(\d+)/i.exec(head)?.[1] ?? 0);
        if (buf.length < end + 4 + length) return;
        done = true;
        const out = await flying(() => handle(buf.subarray(end + 4, end + 4 + length).toString()));
        if (out === null) return;
        if (out === "destroy") return socket.destroy();
        const body = Buffer.from(out.body);
        const headers = { ...out.headers, "content-length": body.length, connection: "close" };
        const lines = Object.entries(headers).map(([k, v]) => `${k}: ${v}`).join("\r\n");
        socket.end(Buffer.concat([Buffer.from(`HTTP/1.0 ${out.status} X\r\n${lines}\r\n\r\n`), body]));
      });
    });
  } else {
    server = http.createServer(async (request, response) => {
      const chunks = [];
      try {
        for await (const c of request) chunks.push(c);
      } catch {
        return; // the client (the relay, killed mid-request) went away: nothing to answer
      }
      const out = await flying(async () => {
        await acquire();
        try {
          return await handle(Buffer.concat(chunks).toString());
        } finally {
          release(); // its headers go now (or never: hung, dropped)
        }
      });
      if (out === null) return;
      if (out === "destroy") return request.socket.destroy();
      response.writeHead(out.status, out.headers);
      response.end(out.body);
    });
  }
  // WebSocket upgrades pass through to the upstream byte for byte (anvil serves ws on its HTTP
  // port); `dropWebSockets()` cuts every one, `refuseWebSockets(ms)` refuses new ones meanwhile.
  const webSockets = new Set();
  let refuseWsUntil = 0;
  server.on?.("upgrade", (request, socket, head) => {
    socket.on("error", () => {});
    if (performance.now() < refuseWsUntil) return socket.destroy();
    const target = new URL(upstream);
    const up = net.connect(Number(target.port), target.hostname, () => {
      const lines = [`${request.method} ${request.url} HTTP/1.1`];
      for (let i = 0; i < request.rawHeaders.length; i += 2) lines.push(`${request.rawHeaders[i]}: ${request.rawHeaders[i + 1]}`);
      up.write(lines.join("\r\n") + "\r\n\r\n");
      if (head.length) up.write(head);
      socket.pipe(up);
      up.pipe(socket);
    });
    up.on("error", () => socket.destroy());
    const pair = { socket, up };
    webSockets.add(pair);
    const forget = () => {
      webSockets.delete(pair);
      socket.destroy();
      up.destroy();
    };
    socket.on("close", forget);
    up.on("close", forget);
  });
  const port = await freePort();
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  const outages = [];
  const outage = async (kind, ms) => {
    const record = { kind, from: performance.now() };
    outages.push(record);
    if (kind === "503") {
      down503Until = record.from + ms;
      await sleep(ms);
    } else {
      const closed = new Promise((r) => server.close(r));
      if (server.closeAllConnections) server.closeAllConnections();
      sockets.forEach((socket) => socket.destroy());
      await sleep(ms);
      await closed;
      await new Promise((r) => server.listen(port, "127.0.0.1", r));
    }
    record.to = performance.now();
  };
  return {
    url: `http://127.0.0.1:${port}`,
    seen,
    requests,
    outage,
    outages,
    /** Requests that waited for a slot under `connectionCap`, and the most waiting for headers at once. */
    capStats: () => ({ capped: cap.capped, mostWaiting: cap.mostWaiting }),
    /** Requests being handled now, and the most at once since the start or the last resetFlight(). */
    flightStats: () => ({ now: flight.now, most: flight.most }),
    /** Starts counting the most requests at once anew (from those in flight now). */
    resetFlight: () => {
      flight.most = flight.now;
    },
    /** The provider profile this proxy plays (tests/support/providers.mjs), or {}. */
    profile,
    /** How many WebSocket connections pass through now. */
    webSocketCount: () => webSockets.size,
    /** Cuts every WebSocket passing through (the upstream's socket drops). */
    dropWebSockets: () => webSockets.forEach(({ socket, up }) => (socket.destroy(), up.destroy())),
    /** Cuts every WebSocket and refuses new ones for `ms`. */
    refuseWebSockets: (ms) => {
      refuseWsUntil = performance.now() + ms;
      webSockets.forEach(({ socket, up }) => (socket.destroy(), up.destroy()));
    },
    /** The eth_sendRawTransaction requests that reached the proxy, per transaction hash. */
    sendsOf: (hash) => seen.filter((r) => r.hash === hash).length,
    stop: async () => {
      hung.forEach((resolve) => resolve());
      if (server.closeAllConnections) server.closeAllConnections();
      sockets.forEach((s) => s.destroy());
      await new Promise((r) => server.close(r));
    },
  };
}

/** Go's `bytes.EqualFold` for the JSON-RPC member names: ASCII case, and ſ (U+017F) as s, K (U+212A) as k. */
const goFold = (key) => key.replace(/\u017f/g, "s").replace(/\u212a/g, "k").toLowerCase();

/**
 * A request object as a Go node reads it: each of `jsonrpc`, `id`, `method` and `params` takes the
 * value of the last member whose name folds to it (`encoding/json` matches names
 * case-insensitively, and a later member overwrites an earlier one).
 */
export function asGoReads(request) {
  if (!request || typeof request !== "object" || Array.isArray(request)) return request;
  const out = {};
  for (const [key, value] of Object.entries(request)) {
    const folded = goFold(key);
    out[["jsonrpc", "id", "method", "params"].includes(folded) ? folded : key] = value;
  }
  return out;
}

/**
 * Runs the compiled relay (build/worker/shim.mjs) on workerd via miniflare. `ratelimits` are its
 * rate limit bindings (none by default).
 * `vars` are the Worker's vars/secrets. `lockHost` hosts the SenderLock class in another worker
 * (a script text), to make the Durable Object unreachable for real; `lockHostBuild` hosts the
 * compiled SenderLock of that build in a worker of its own, as in production (its isolate apart
 * from the Worker's). `persist` keeps Durable
 * Object storage in that folder, so a second relay on it is the same objects restarted.
 * `buildDir` is the worker build to run (default build/, or $RELAY_BUILD_DIR, to run the tests against
 * another build; build-faults/ has the test-faults feature).
 * The tests' upstream is the strict-nonce proxy unless they say otherwise, an upstream that refuses
 * nonce gaps: the relay gets SEND_WINDOW=1 (one at a time, as under UPSTREAM_POOL=strict) unless
 * `vars` names SEND_WINDOW (undefined: the relay's default window).
 * `keys`: a local Workers KV namespace bound as KEYS (API keys on, with RELAY_SECRET in `vars`).
 * Returns { url, logs, stop }; `logs` collects the runtime's stdout lines.
 */
export async function startRelay({ vars: given, lockHost, lockHostBuild, persist, buildDir = process.env.RELAY_BUILD_DIR ?? "build", ratelimits, inspectorPort, keys } = {}) {
  let vars = "SEND_WINDOW" in (given ?? {}) ? given : { SEND_WINDOW: "1", ...given };
  // RELAY_CACHE=off runs every relay of a suite with the read cache off (unless a test sets it).
  if (process.env.RELAY_CACHE && !("CACHE" in vars)) vars = { ...vars, CACHE: process.env.RELAY_CACHE };
  const logs = [];
  const relay = {
    name: "relay",
    ...workerModules(buildDir),
    compatibilityDate: COMPATIBILITY_DATE,
    // A var given as undefined is left unset (CHAIN_ID: undefined makes the relay learn it).
    bindings: Object.fromEntries(
      Object.entries({ CHAIN_ID: String(CHAIN_ID), ...vars }).filter(([, v]) => v !== undefined),
    ),
    durableObjects: {
      SENDER_LOCK: lockHost || lockHostBuild
        ? { className: "SenderLock", scriptName: "lock-host" }
        : { className: "SenderLock", useSQLite: true },
      KEY_AUTHORITY: { className: "KeyAuthority", useSQLite: true },
    },
    // API keys (docs/keys.md): a local Workers KV namespace bound as KEYS.
    ...(keys ? { kvNamespaces: ["KEYS"] } : {}),
    // Workers Rate Limiting bindings, as wrangler.toml's [[ratelimits]] would give them:
    // { RATE_LIMIT_SEND: { simple: { limit, period } }, ... }. Miniflare 5 wants each binding's
    // namespace_id too (wrangler.toml's: 7001 send, 7002 read).
    ...(ratelimits
      ? {
          ratelimits: Object.fromEntries(
            Object.entries(ratelimits).map(([name, r], i) => [
              name,
              { namespace_id: { RATE_LIMIT_SEND: "7001", RATE_LIMIT_READ: "7002" }[name] ?? String(7100 + i), ...r },
            ]),
          ),
        }
      : {}),
  };
  const workers = [relay];
  if (lockHostBuild) {
    workers.push({
      ...relay,
      name: "lock-host",
      ...workerModules(lockHostBuild),
      durableObjects: { SENDER_LOCK: { className: "SenderLock", useSQLite: true } },
    });
  }
  if (lockHost) {
    workers.push({
      name: "lock-host",
      modules: true,
      script: lockHost,
      compatibilityDate: COMPATIBILITY_DATE,
      durableObjects: { SENDER_LOCK: { className: "SenderLock", useSQLite: true } },
    });
  }
  const port = await freePort();
  const before = childPids();
  // Miniflare 5 takes a new shape of options; convertV4MiniflareOptions() turns the v4 shape
  // into it, as wrangler itself does. It leaves the dev registry off (v4's default), so each relay
  // stands alone: no discovery of other Miniflare processes' workers or storage.
  const mf = new Miniflare(convertV4MiniflareOptions({
    workers,
    host: "127.0.0.1",
    port,
    // Miniflare 5: one root for every resource's storage; Durable Objects go to <persist>/do.
    ...(persist ? { resourcePersistencePath: persist } : {}),
    ...(inspectorPort ? { inspectorPort } : {}),
    // Miniflare 5 runs workerd with structured logging and hands over each line's message (the
    // relay's console line as it wrote it; workerd's own internal lines it keeps to itself).
    handleStructuredLogs({ message }) {
      logs.push(...message.split("\n"));
    },
  }));
  const url = (await mf.ready).toString().replace(/\/$/, "");
  const runtime = childPids().filter((pid) => !before.includes(pid));
  return {
    url,
    logs,
    mf,
    /** The workerd process ids. */
    pids: runtime,
    /** Kills the workerd process at once (SIGKILL): a crash, not a shutdown. */
    kill: () => runtime.forEach((pid) => process.kill(pid, "SIGKILL")),
    events: (name) =>
      logs
        .map((l) => {
          try {
            return JSON.parse(l.slice(l.indexOf("{")));
          } catch {
            return null;
          }
        })
        .filter((e) => e && e.event === name),
    stop: () => mf.dispose(),
  };
}

/**
 * A worker-build output folder as Miniflare modules: worker/shim.mjs (wrangler.toml's main) first,
 * then every other .js/.mjs as an ES module and .wasm as compiled Wasm, named by their path under
 * the folder, as wrangler bundles them. (Miniflare 5 no longer collects modules by `modulesRules`.)
 */
function workerModules(buildDir) {
  const root = path.resolve(ROOT, buildDir);
  const main = path.join(root, "worker/shim.mjs");
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true })
      .filter((e) => !e.name.startsWith("."))
      .flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  const type = (f) => (/\.m?js$/.test(f) ? "ESModule" : f.endsWith(".wasm") ? "CompiledWasm" : undefined);
  const rest = walk(root).filter((f) => f !== main && type(f));
  return { modulesRoot: root, modules: [main, ...rest].map((f) => ({ type: type(f), path: f })) };
}

/** A process's resident memory now, in KiB (Linux /proc: VmRSS). */
export function rssKb(pid) {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
  } catch {
    return NaN;
  }
}

/**
 * Which of the senders' Durable Objects in a `persist` folder hold storage: the paths (relative to
 * `persist`, sorted) of SQLite files with a schema or data, or a write-ahead log not empty (workerd
 * makes a file for every object it starts, empty until the object writes). Read with the relay
 * stopped.
 */
export function objectDatabases(persist) {
  const walk = (dir) =>
    readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? walk(path.join(dir, e.name)) : [path.join(dir, e.name)]));
  return walk(persist)
    .filter((f) => f.includes("SenderLock") && f.endsWith(".sqlite"))
    .filter((f) => {
      const head = readFileSync(f).subarray(0, 100);
      const pages = head.length >= 32 ? head.readUInt32BE(28) : 0;
      const cookie = head.length >= 44 ? head.readUInt32BE(40) : 0;
      const wal = existsSync(`${f}-wal`) ? statSync(`${f}-wal`).size : 0;
      return pages > 1 || cookie > 0 || wal > 0;
    })
    .map((f) => path.relative(persist, f))
    .sort();
}

/** A raw WebSocket to the relay (the `ws` package): send(obj), call(method, params), next(pred, ms) for the next message matching pred, closed (its close code, reason and time). */
export async function openSocket(url, options) {
  const ws = new WebSocket(url, options);
  const inbox = [];
  const waiters = [];
  ws.on("message", (data) => {
    const message = JSON.parse(String(data));
    inbox.push(message);
    for (const w of [...waiters]) if (w.pred(message)) (waiters.splice(waiters.indexOf(w), 1), w.resolve(message));
  });
  const closed = new Promise((resolve) => ws.on("close", (code, reason) => resolve({ code, reason: String(reason), at: performance.now() })));
  await new Promise((resolve, reject) => (ws.on("open", resolve), ws.on("error", reject)));
  let id = 0;
  return {
    ws,
    inbox,
    closed,
    send: (obj) => ws.send(typeof obj === "string" ? obj : JSON.stringify(obj)),
    call: (method, params = []) => {
      const want = ++id;
      ws.send(JSON.stringify({ jsonrpc: "2.0", id: want, method, params }));
      return next((m) => m.id === want, 10_000);
    },
    next,
  };
  function next(pred, ms = 10_000) {
    const found = inbox.find(pred);
    if (found) return Promise.resolve(found);
    return new Promise((resolve, reject) => {
      const w = { pred, resolve };
      waiters.push(w);
      setTimeout(() => reject(new Error(`no matching message in ${ms} ms`)), ms);
    });
  }
}

/** CPU time a process has used so far, in ms (Linux /proc; utime + stime). */
export function cpuMs(pid) {
  try {
    const fields = readFileSync(`/proc/${pid}/stat`, "utf8").split(") ")[1].split(" ");
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100; // clock ticks of 10 ms
  } catch {
    return NaN;
  }
}

/** This process's child process ids (Linux /proc). */
export function childPids() {
  try {
    return readFileSync(`/proc/${process.pid}/task/${process.pid}/children`, "utf8").trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Signs a simple EIP-1559 value transfer from `account` with `nonce`. */
export function signTransfer(account, nonce, extra = {}) {
  return account.signTransaction({
    type: "eip1559",
    chainId: CHAIN_ID,
    nonce,
    to: "0x000000000000000000000000000000000000dEaD",
    value: 1n,
    gas: 21000n,
    maxFeePerGas: parseGwei("20"),
    maxPriorityFeePerGas: parseGwei("1"),
    ...extra,
  });
}

/**
 * The most distinct `keyOf(record)` among `records` (a proxy's `seen`) that were at the upstream
 * at one time: a record is there from its arrival (`at`) until its answer (`answeredAt`; never
 * answered: for good). By default each record counts alone; `(r) => r.sender` counts senders.
 */
export function mostAtOnce(records, keyOf = (r) => r) {
  const there = (t) => records.filter((o) => o.at <= t && t < (o.answeredAt ?? Infinity));
  return Math.max(0, ...records.map((r) => new Set(there(r.at).map(keyOf)).size));
}

/** Polls until `check()` is true or `ms` pass (a bound on waiting, not an assertion of time); true when it became true. */
export async function until(check, ms, every = 100) {
  const end = performance.now() + ms;
  while (performance.now() < end) {
    if (await check()) return true;
    await sleep(every);
  }
  return false;
}

/**
 * Waits, when the current rate-limit window has less than `needMs` left, until the next one
 * begins: a test that counts requests against a limit then counts them in one window (also a
 * key's daily budget, whose day is the UTC day: `periodS` 86,400). Miniflare's rate limiter (the
 * `ratelimits` of startRelay) counts in windows aligned to the wall clock (miniflare's
 * ratelimit-object.worker.js: epoch = floor(now / period)), so a count that straddled a boundary
 * started over mid-test (seen: 401, 401, 401, then 200 where 429 was due). `periodS` is the window
 * (a binding's period: 10 or 60 s); `needMs` (default 10 s, at most half the period) a bound on
 * the counted requests' time, not an assertion of it. Returns the ms waited (0 most of the time).
 */
export async function oneRateWindow(periodS, needMs = 10_000) {
  const periodMs = periodS * 1000;
  const left = periodMs - (Date.now() % periodMs);
  if (left >= Math.min(needMs, periodMs / 2)) return 0;
  await sleep(left + 50);
  return left + 50;
}

/**
 * A client that sends `raw` again until an answer has a result (a lost connection or an error
 * answer is tried again 100 ms later), for at most `forMs`: what a wallet does while the relay
 * restarts. It asks `current.relay`, which the test swaps when it starts the relay again. Returns
 * the result, or null; `onError` is called for each error answer.
 */
export async function sendUntilResult(current, raw, id, { forMs = 30_000, onError = () => {} } = {}) {
  const until = performance.now() + forMs;
  while (performance.now() < until) {
    try {
      const answer = await sendRaw(current.relay.url, raw, id);
      if (answer.json?.result) return answer.json.result;
      onError(answer);
    } catch {
      /* the relay is down */
    }
    await sleep(100);
  }
  return null;
}

/**
 * Signs transfers with nonces 0..perSender-1 for each of `accounts`, in that order, and records
 * each raw transaction's sender (lowercase) in `senderOfRaw` (for startProxy's `senderOf`).
 */
export async function signBurst(accounts, perSender, senderOfRaw) {
  const raws = [];
  for (const a of accounts) {
    for (let n = 0; n < perSender; n++) {
      const raw = await signTransfer(a, n);
      senderOfRaw.set(raw, a.address.toLowerCase());
      raws.push(raw);
    }
  }
  return raws;
}

/** `address`'s mined transaction count at `url`. */
export async function minedCount(url, address) {
  return Number(BigInt((await rpc(url, "eth_getTransactionCount", [address, "latest"])).result));
}

/** Every account's mined count, each polled until it is `want` or `ms` passed in all (the last block may still be in the making). */
export async function minedCounts(url, accounts, want, ms = 5000) {
  const until = performance.now() + ms;
  const counts = [];
  for (const a of accounts) {
    let count;
    do {
      count = await minedCount(url, a.address);
      if (count === want) break;
      await sleep(50);
    } while (performance.now() < until);
    counts.push(count);
  }
  return counts;
}

export function sendRaw(url, raw, id = ++ids) {
  return post(url, { jsonrpc: "2.0", id, method: "eth_sendRawTransaction", params: [raw] });
}

/** A full stack: anvil (options), proxy (options), relay (vars, and its `persist` folder). */
export async function stack({ anvil: anvilOptions = {}, proxy: proxyOptions = {}, vars = {}, lockHost, buildDir, ratelimits, persist } = {}) {
  const anvil = await startAnvil(anvilOptions);
  const proxy = await startProxy({ upstream: anvil.url, ...proxyOptions });
  const relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ...vars }, lockHost, buildDir, ratelimits, persist });
  return {
    anvil,
    proxy,
    relay,
    stop: async () => {
      await relay.stop();
      await proxy.stop();
      anvil.stop();
    },
  };
}

/**
 * Follows the chain's head through `url` as viem's and ethers' polling watchers do: every 250 ms
 * `eth_blockNumber`, and for each block from the last seen to the new head, in order, `onBlock(n)`
 * (awaited), for `ms`. Returns how often the head went backwards.
 */
export async function followBlocks(url, ms, onBlock) {
  const number = async () => Number((await post(url, { jsonrpc: "2.0", id: 1, method: "eth_blockNumber", params: [] })).json?.result);
  let backwards = 0;
  let last = await number();
  const end = performance.now() + ms;
  while (performance.now() < end) {
    await sleep(250);
    const head = await number();
    if (head < last) backwards += 1;
    if (!(head > last)) continue;
    for (let n = last + 1; n <= head; n++) await onBlock(n);
    last = head;
  }
  return backwards;
}
