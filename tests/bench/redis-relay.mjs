// Bench only: the per-sender lock that Hedera's JSON-RPC relay ships with Redis, reimplemented as
// a small Node service in front of the same test upstream, so `make bench-e2e` can run the same
// bursts through both designs.
//
// From hiero-ledger/hiero-json-rpc-relay, src/relay/lib/services/lockService/RedisLockStrategy.ts,
// as introduced in commit 990bd22f ("nonce ordering with locks"), with its defaults
// (LOCK_MAX_HOLD_MS 30000, LOCK_QUEUE_POLL_INTERVAL_MS 50):
//   acquire(sender): id = randomUUID(); LPUSH lock:queue:{sender} id
//     loop: if LINDEX lock:queue:{sender} -1 == id and SET lock:{sender} id NX PX 30000 -> LLEN (logged), done
//           else sleep 50 ms
//     finally: LREM lock:queue:{sender} 1 id
//     any Redis error: fail open (no lock)
//   release(sender, id): EVAL 'if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end'
// The sender comes from the parsed, signature-recovered transaction (they use ethers v6
// Transaction.from; here viem's parseTransaction + recoverTransactionAddress), lowercased; the lock
// is taken right after parsing, before any other async work, and released after the upstream's
// answer to the send. Every other method is proxied. Later versions add heartbeats and a second
// lock around prechecks; the lock algorithm is the same.
//
//   UPSTREAM=http://127.0.0.1:8545 REDIS_URL=redis://127.0.0.1:6379 PORT=8788 node tests/bench/redis-relay.mjs
import http from "node:http";
import { randomUUID } from "node:crypto";
import { createClient } from "redis";
import { parseTransaction, recoverTransactionAddress } from "viem";

const UPSTREAM = process.env.UPSTREAM;
const POLL_MS = Number(process.env.LOCK_QUEUE_POLL_INTERVAL_MS ?? 50);
const HOLD_MS = Number(process.env.LOCK_MAX_HOLD_MS ?? 30000);
const RELEASE = `
          if redis.call("get", KEYS[1]) == ARGV[1] then
            return redis.call("del", KEYS[1])
          else
            return 0
          end`;

const redis = createClient({ url: process.env.REDIS_URL });
redis.on("error", () => {});
await redis.connect();
const agent = new http.Agent({ keepAlive: true, maxSockets: 256 });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function acquire(sender) {
  const id = randomUUID();
  const queue = `lock:queue:${sender}`;
  let joined = false;
  try {
    await redis.lPush(queue, id);
    joined = true;
    for (;;) {
      const first = await redis.lIndex(queue, -1);
      if (first === id) {
        const ok = await redis.set(`lock:${sender}`, id, { NX: true, PX: HOLD_MS });
        if (ok === "OK") {
          await redis.lLen(queue); // logged as queueLength in the original
          return id;
        }
      }
      await sleep(POLL_MS);
    }
  } catch {
    return undefined; // fail open
  } finally {
    if (joined) await redis.lRem(queue, 1, id).catch(() => {});
  }
}

async function release(sender, id) {
  try {
    await redis.eval(RELEASE, { keys: [`lock:${sender}`], arguments: [id] });
  } catch {
    /* logged and swallowed in the original */
  }
}

function forward(body) {
  return new Promise((resolve, reject) => {
    const req = http.request(UPSTREAM, { method: "POST", agent, headers: { "content-type": "application/json" } }, (res) => {
      const chunks = [];
      res.on("data", (c) => chunks.push(c));
      res.on("end", () => resolve(Buffer.concat(chunks).toString()));
    });
    req.on("error", reject);
    req.end(body);
  });
}

async function handle(body) {
  const req = JSON.parse(body);
  if (req.method !== "eth_sendRawTransaction") return forward(body);
  const raw = req.params[0];
  parseTransaction(raw);
  const sender = (await recoverTransactionAddress({ serializedTransaction: raw })).toLowerCase();
  const id = await acquire(sender);
  try {
    return await forward(body);
  } finally {
    if (id) await release(sender, id);
  }
}

const server = http.createServer(async (req, res) => {
  const chunks = [];
  for await (const c of req) chunks.push(c);
  try {
    const answer = await handle(Buffer.concat(chunks).toString());
    res.writeHead(200, { "content-type": "application/json" });
    res.end(answer);
  } catch (e) {
    res.writeHead(500);
    res.end(String(e));
  }
});
server.keepAliveTimeout = 60_000;
server.listen(Number(process.env.PORT), "127.0.0.1", () => console.log("ready"));
