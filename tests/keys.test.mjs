// API keys (issue 55, docs/keys.md): the compiled relay on workerd with a local Workers KV bound as
// KEYS, RELAY_SECRET and ADMIN_TOKEN, in front of anvil behind a recording proxy. Keys made by
// the operator's script (scripts/keys.mjs, `npm run keys`); each refusal as a client sees it;
// revocation while KV still serves the old record; a budget spent by parallel requests; and the
// raw key searched for in every log line, upstream request and stored file.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { mkdtemp, readdir, readFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import path from "node:path";
import { createHash, createHmac } from "node:crypto";
import { ethers } from "ethers";
import { startAnvil, startProxy, startRelay, post, devAccount, signTransfer, sleep, oneRateWindow } from "./support/harness.mjs";
import { startPrivateStack } from "./support/private-route.mjs";

const SECRET = "a-test-secret-of-the-deployment";
const TOKEN = "admin-token-of-the-test";
const DEAD = "0x000000000000000000000000000000000000dead";
const call = (method, params = [], id = 1) => ({ jsonrpc: "2.0", id, method, params });

const anvil = await startAnvil({ accounts: 4 });
const ten = await startAnvil({ accounts: 1, extraArgs: ["--chain-id", "10"] });
const proxy = await startProxy({ upstream: anvil.url, strictNonce: false });
const persist = await mkdtemp(`${tmpdir()}/nonce-relay-keys-`);
const relay = await startRelay({
  keys: true,
  persist,
  vars: {
    UPSTREAM_RPC_URL: proxy.url,
    RELAY_SECRET: SECRET,
    ADMIN_TOKEN: TOKEN,
    CHAINS: "10",
    CHAIN_10_UPSTREAM_RPC_URL: ten.url,
  },
});
/** Every key the tests made, searched for at the end. */
const made = [];

after(async () => {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
  ten.stop();
});

/** `npm run keys -- args...` against the relay at `url`: its JSON output. */
async function keysAt(url, ...args) {
  const { stdout } = await promisify(execFile)(process.execPath, ["scripts/keys.mjs", ...args], {
    env: { ...process.env, RELAY_URL: url, ADMIN_TOKEN: TOKEN },
  });
  return JSON.parse(stdout);
}

/** `npm run keys -- args...` against the relay: its JSON output. */
const keys = (...args) => keysAt(relay.url, ...args);

/** A key made by the script with `args` at the relay at `url` (default: the file's): { key, id }. */
async function makeKeyAt(url, ...args) {
  const { key, id } = await keysAt(url, "create", ...args);
  made.push(key);
  return { key, id };
}
const makeKey = (...args) => makeKeyAt(relay.url, ...args);

/** A well-formed key that was never made (its checksum right). */
function unknownKey() {
  const random = "0123456789abcdef".repeat(2);
  const check = createHash("sha256").update(random).digest("hex").slice(0, 8);
  return `nrk_${random}${check}`;
}

test("a key made by the script serves its chain at /k/{key}/evm/{id} and is refused on another; Basic and Bearer carry it too; a malformed or unknown one 401 -32016; no key: as today", async () => {
  const { key, id } = await makeKey("--chains", "31337", "--per-day", "100000", "--label", "dapp");
  assert.match(key, /^nrk_[0-9a-f]{40}$/);
  assert.match(id, /^k_[0-9a-f]{16}$/);
  const served = await post(`${relay.url}/k/${key}/evm/31337`, call("eth_chainId"));
  assert.deepEqual([served.status, served.json.result], [200, "0x7a69"]);
  const root = await post(`${relay.url}/k/${key}`, call("eth_chainId"));
  assert.equal(root.json.result, "0x7a69", "/k/{key} alone is the default chain");
  const other = await post(`${relay.url}/k/${key}/evm/10`, call("eth_chainId"));
  assert.deepEqual([other.status, other.json.error.code, other.json.error.data.scope], [403, -32002, "chains"]);
  // ethers takes https://:KEY@host and sends it as Authorization: Basic.
  const provider = new ethers.JsonRpcProvider(relay.url.replace("://", `://:${key}@`), 31337, { staticNetwork: true });
  assert.equal(await provider.getBlockNumber() >= 0, true);
  provider.destroy();
  const bearer = await post(relay.url, call("eth_chainId"), { authorization: `Bearer ${key}` });
  assert.equal(bearer.json.result, "0x7a69");
  for (const [url, headers, why] of [
    [`${relay.url}/k/nrk_nope/evm/31337`, {}, "malformed API key"],
    [`${relay.url}/k/${key.slice(0, -1)}${key.endsWith("0") ? "1" : "0"}`, {}, "checksum"],
    [`${relay.url}/k/${unknownKey()}`, {}, "unknown API key"],
    [relay.url, { authorization: `Bearer ${unknownKey()}` }, "unknown API key"],
  ]) {
    const refused = await post(url, call("eth_chainId"), headers);
    assert.deepEqual([refused.status, refused.json.error.code], [401, -32016], url);
    assert.match(refused.json.error.message, new RegExp(why));
  }
  // Without a key, KEYLESS=open: as without keys.
  assert.equal((await post(relay.url, call("eth_chainId"))).json.result, "0x7a69");
  assert.equal((await post(`${relay.url}/evm/10`, call("eth_chainId"))).json.result, "0xa");
  // The admin API lists it, by id, never its text.
  const listed = await keys("list");
  assert.ok(listed.keys.some((k) => k.id === id && k.label === "dapp"));
  assert.ok(!JSON.stringify(listed).includes(key.slice(4)));
});

test("scopes per member: a method, a contract, an override and a sender out of scope each refused (-32002) in a batch whose other members are answered; nothing refused reaches the upstream", async () => {
  const bot = devAccount(1);
  const stranger = devAccount(2);
  const { key } = await makeKey(
    "--methods", "eth_chainId,eth_call,eth_getBalance,eth_blockNumber,eth_sendRawTransaction",
    "--contracts", DEAD,
    "--senders", bot.address,
  );
  const before = proxy.requests.length;
  const fromBot = await signTransfer(bot, 0);
  const fromStranger = await signTransfer(stranger, 0);
  const batch = [
    call("eth_call", [{ to: DEAD, data: "0x" }, "latest"], 1),
    call("eth_getBalance", [stranger.address, "latest"], 2),
    call("eth_call", [{ to: DEAD }, "latest", { [DEAD]: { code: "0x00" } }], 3),
    call("eth_getTransactionCount", [DEAD, "latest"], 4),
    call("eth_sendRawTransaction", [fromStranger], 5),
    call("eth_sendRawTransaction", [fromBot], 6),
    call("eth_blockNumber", [], 7),
  ];
  const answer = await post(`${relay.url}/k/${key}`, batch);
  assert.equal(answer.status, 200);
  const byId = Object.fromEntries(answer.json.map((a) => [a.id, a]));
  for (const [id, scope] of [[2, "contracts"], [3, "contracts"], [4, "methods"], [5, "senders"]]) {
    assert.equal(byId[id].error?.code, -32002, `member ${id}: ${JSON.stringify(byId[id])}`);
    assert.equal(byId[id].error.data.scope, scope);
  }
  assert.equal(byId[1].result, "0x");
  assert.match(byId[6].result, /^0x[0-9a-f]{64}$/);
  assert.match(byId[7].result, /^0x[0-9a-f]+$/);
  const reached = proxy.requests.slice(before).map((r) => JSON.stringify(r.body));
  // (The bot's send makes its object ask the bot's own count: only the member's is out of scope.)
  assert.ok(!reached.some((r) => r.includes("eth_getTransactionCount") && r.includes(DEAD.slice(2))), "a method out of scope never asked");
  assert.ok(!reached.some((r) => r.includes(stranger.address.slice(2).toLowerCase())), "a stranger's read never asked");
  assert.ok(!reached.some((r) => r.includes(fromStranger.slice(-64))), "a stranger's send never sent");
  assert.ok(reached.some((r) => r.includes(fromBot.slice(-64))), "the bot's send was sent");
});

test("revoked while KV still serves the old record (written back): every request begun 10 s (a lease's life) after the revocation is refused, 401 -32016", async () => {
  const { key, id } = await makeKey("--per-day", "100000");
  assert.equal((await post(`${relay.url}/k/${key}`, call("eth_chainId"))).json.result, "0x7a69", "a lease held");
  const kv = await relay.mf.getKVNamespace("KEYS");
  const name = `key/v1/${createHmac("sha256", SECRET).update("nonce-relay api key v1\0").update(key).digest("hex")}`;
  assert.ok(name.includes(id.slice(2)), "the entry is named by the key's HMAC, its id the first 16 digits");
  const old = await kv.get(name);
  assert.ok(old && !JSON.parse(old).revoked);
  const revoked = await keys("revoke", id);
  assert.equal(revoked.record.revoked, true);
  const revokedAt = performance.now();
  await kv.put(name, old); // KV (a colo's cached copy) still says it is good
  const answers = [];
  while (performance.now() - revokedAt < 12_000) {
    const start = performance.now();
    const r = await post(`${relay.url}/k/${key}`, call("eth_chainId"));
    answers.push({ since: start - revokedAt, status: r.status, code: r.json?.error?.code });
    await sleep(250);
  }
  const late = answers.filter((a) => a.since >= 10_000);
  assert.ok(late.length > 0);
  assert.ok(late.every((a) => a.status === 401 && a.code === -32016), JSON.stringify(late));
  const first = answers.find((a) => a.status === 401);
  console.log(`# revoked: first refusal ${Math.round(first.since)} ms after, ${answers.filter((a) => a.status === 200).length} served before it`);
  assert.ok(answers.slice(answers.indexOf(first)).every((a) => a.status === 401), "refused for good once refused");
});

test("a daily budget of 1,000 spent by parallel requests: at most 1,000 served, then 429 -32005 with the reset time (the next UTC midnight)", async () => {
  await oneRateWindow(86_400, 60_000); // the budget's UTC day
  const { key, id } = await makeKey("--per-day", "1000");
  const results = [];
  const queue = Array.from({ length: 1_100 }, (_, i) => i);
  await Promise.all(
    Array.from({ length: 20 }, async () => {
      for (let i = queue.shift(); i !== undefined; i = queue.shift()) {
        const r = await post(`${relay.url}/k/${key}`, call("eth_chainId", [], i));
        results.push(r);
      }
    }),
  );
  const served = results.filter((r) => r.status === 200).length;
  const over = results.filter((r) => r.status === 429);
  console.log(`# budget 1000: ${served} served, ${over.length} refused 429`);
  assert.ok(served <= 1000, `served ${served}`);
  assert.ok(served >= 900, `served ${served}`);
  assert.equal(served + over.length, 1_100);
  const refusal = over[0].json.error;
  assert.equal(refusal.code, -32005);
  const midnight = (Math.floor(Date.now() / 86_400_000) + 1) * 86_400_000;
  assert.equal(refusal.data.reset_ms, midnight);
  assert.ok(Number(over[0].retryAfter) >= 1 && Number(over[0].retryAfter) <= 3600, over[0].retryAfter);
  const shown = await keys("show", id);
  assert.ok(shown.budget.used_day <= 1000 && shown.budget.used_day >= served, JSON.stringify(shown.budget));
});

test("a WebSocket opened with a key spends a unit a message and is closed 1008, its refusal first, once the budget is spent; one with an unknown key is never opened", async () => {
  const { key } = await makeKey("--per-day", "8");
  const socket = new WebSocket(`${relay.url.replace(/^http/, "ws")}/k/${key}`);
  const messages = [];
  const closed = new Promise((resolve) => (socket.onclose = (e) => resolve({ code: e.code, reason: e.reason })));
  socket.onmessage = (e) => messages.push(JSON.parse(e.data));
  await new Promise((resolve, reject) => ((socket.onopen = resolve), (socket.onerror = reject)));
  for (let i = 0; i < 12 && socket.readyState === WebSocket.OPEN; i++) {
    socket.send(JSON.stringify(call("eth_chainId", [], i)));
    await sleep(100);
  }
  const close = await closed;
  const answered = messages.filter((m) => m.result === "0x7a69").length;
  console.log(`# keyed socket: ${answered} answered, then closed ${close.code} (${close.reason})`);
  assert.equal(close.code, 1008);
  assert.ok(answered >= 1 && answered <= 7, `${answered} answered (the upgrade took a unit of 8)`);
  assert.ok(messages.some((m) => m.error?.code === -32005), "the refusal sent before the close");
  const unknown = new WebSocket(`${relay.url.replace(/^http/, "ws")}/k/${unknownKey()}`);
  const refused = await new Promise((resolve) => ((unknown.onerror = () => resolve(true)), (unknown.onopen = () => resolve(false))));
  assert.ok(refused, "the upgrade refused (HTTP 401)");
});

test("a WebSocket that only listens is checked at each lease: closed 1008 within a lease's life once its key is revoked, and once its notifications spent the budget (-32005), with no message sent", async () => {
  const ws = (key) => {
    const socket = new WebSocket(`${relay.url.replace(/^http/, "ws")}/k/${key}`);
    const seen = { notifications: 0, errors: [] };
    socket.onmessage = (e) => {
      const m = JSON.parse(e.data);
      if (m.method === "eth_subscription") seen.notifications += 1;
      else if (m.error) seen.errors.push(m.error.code);
    };
    // Not closed within 15 s (a lease and more): code null, and the socket closed by the test.
    seen.closed = Promise.race([
      new Promise((resolve) => (socket.onclose = (e) => resolve({ code: e.code, at: performance.now() }))),
      sleep(15_000).then(() => (socket.close(), { code: null, at: performance.now() })),
    ]);
    seen.open = new Promise((resolve, reject) => ((socket.onopen = resolve), (socket.onerror = reject)));
    return { socket, seen };
  };
  await oneRateWindow(86_400, 60_000); // the budget's UTC day
  const revoked = await makeKey("--per-day", "100000");
  const spent = await makeKey("--per-day", "30");
  const [a, b] = [ws(revoked.key), ws(spent.key)];
  await Promise.all([a.seen.open, b.seen.open]);
  for (const { socket } of [a, b]) socket.send(JSON.stringify(call("eth_subscribe", ["newHeads"])));
  await sleep(500);
  for (let i = 0; i < 40; i++) await post(anvil.url, call("evm_mine")); // 40 notifications each
  await keys("revoke", revoked.id);
  const revokedAt = performance.now();
  const [closedA, closedB] = await Promise.all([a.seen.closed, b.seen.closed]);
  console.log(`# listening sockets: the revoked key's closed ${closedA.code} ${Math.round(closedA.at - revokedAt)} ms after the revocation; the spent one's ${closedB.code} after ${b.seen.notifications} notifications (budget 30)`);
  assert.equal(closedA.code, 1008);
  assert.ok(closedA.at - revokedAt <= 11_000, `closed ${Math.round(closedA.at - revokedAt)} ms after: within a lease (10 s)`);
  assert.ok(a.seen.errors.includes(-32016), "the revocation's error before the close");
  assert.equal(closedB.code, 1008);
  assert.ok(b.seen.notifications >= 29, `${b.seen.notifications} notifications delivered`);
  assert.ok(b.seen.errors.includes(-32005), `over budget before the close: ${b.seen.errors}`);
  const shown = await keys("show", spent.id);
  assert.ok(shown.budget.used_day <= 30, JSON.stringify(shown.budget));
});

test("a key's rate-limit tier: its requests count on RATE_LIMIT_READ_{TIER}, keyed by its id; a key without one on RATE_LIMIT_READ; a tier with no binding refused at creation", async () => {
  const tiered = await startRelay({
    keys: true,
    vars: { UPSTREAM_RPC_URL: proxy.url, RELAY_SECRET: SECRET, ADMIN_TOKEN: TOKEN },
    ratelimits: { RATE_LIMIT_READ: { simple: { limit: 1000, period: 60 } }, RATE_LIMIT_READ_PRO: { simple: { limit: 5, period: 60 } } },
  });
  try {
    const pro = await makeKeyAt(tiered.url, "--tier", "pro");
    const plain = await makeKeyAt(tiered.url);
    const statuses = async (key) => {
      const out = [];
      for (let i = 0; i < 8; i++) out.push((await post(`${tiered.url}/k/${key}`, call("eth_chainId", [], i))).status);
      return out;
    };
    await oneRateWindow(60);
    const [proStatuses, plainStatuses] = [await statuses(pro.key), await statuses(plain.key)];
    console.log(`# tiers: pro (5 a minute) ${proStatuses.join(",")}; no tier (1000 a minute) ${plainStatuses.join(",")}`);
    assert.deepEqual(proStatuses, [200, 200, 200, 200, 200, 429, 429, 429]);
    assert.ok(plainStatuses.every((s) => s === 200));
    const refused = await keysAt(tiered.url, "create", "--tier", "gold").then(() => null, (e) => e);
    assert.ok(refused && /RATE_LIMIT_SEND_GOLD/.test(refused.stderr), String(refused?.stderr));
  } finally {
    await tiered.stop();
  }
});

test("RELAY_SECRET rotated: a key made under the old secret is served with RELAY_SECRET_PREVIOUS set (a new key under the new one too), and refused 401 once it is unset", async () => {
  const dir = await mkdtemp(`${tmpdir()}/nonce-relay-keys-rotate-`);
  const at = (vars) => startRelay({ keys: true, persist: dir, vars: { UPSTREAM_RPC_URL: proxy.url, ADMIN_TOKEN: TOKEN, ...vars } });
  const chainId = async (url, key) => {
    const r = await post(`${url}/k/${key}`, call("eth_chainId"));
    return [r.status, r.json?.result ?? r.json?.error?.code];
  };
  let r = await at({ RELAY_SECRET: "the-old-secret" });
  const old = await makeKeyAt(r.url);
  await r.stop();
  r = await at({ RELAY_SECRET: "the-new-secret", RELAY_SECRET_PREVIOUS: "the-old-secret" });
  try {
    const fresh = await makeKeyAt(r.url);
    assert.deepEqual(await chainId(r.url, old.key), [200, "0x7a69"], "the old key, under the previous secret");
    assert.deepEqual(await chainId(r.url, fresh.key), [200, "0x7a69"], "a new key, under the new secret");
    assert.equal((await keysAt(r.url, "show", old.id)).record.id, old.id, "the admin API finds it by its id");
  } finally {
    await r.stop();
  }
  r = await at({ RELAY_SECRET: "the-new-secret" });
  try {
    assert.deepEqual(await chainId(r.url, old.key), [401, -32016], "the previous secret unset: unknown");
  } finally {
    await r.stop();
  }
});

test("behind a private route, a key's choice of publishing wins over the URL's: never (the URL asked 2 blocks), or after 3 blocks (the URL asked nothing)", async () => {
  const s = await startPrivateStack({ keys: true, vars: { RELAY_SECRET: SECRET, ADMIN_TOKEN: TOKEN, SEND_PUBLIC_AFTER_BLOCKS: "25" } });
  try {
    const never = await makeKeyAt(s.relay.url, "--publish", "never");
    const three = await makeKeyAt(s.relay.url, "--publish", "3");
    const client = await makeKeyAt(s.relay.url);
    const account = devAccount(2);
    const send = async (path, nonce) => {
      const r = await post(`${s.relay.url}${path}`, call("eth_sendRawTransaction", [await signTransfer(account, nonce)]));
      assert.match(r.json?.result ?? "", /^0x[0-9a-f]{64}$/, r.text);
      return r.publicAfter;
    };
    const granted = [
      await send(`/k/${never.key}/?public_after_blocks=2`, 0),
      await send(`/k/${three.key}/`, 1),
      await send(`/k/${client.key}/?public_after_blocks=2`, 2),
    ];
    console.log(`# a key's publishing: never, 3, the client's: ${granted.join(", ")}`);
    assert.deepEqual(granted, ["never", "3", "2"]);
  } finally {
    await s.stop();
  }
});

test("KEYLESS=reads: a read without a key is served, a send without one refused -32016; KEYLESS=closed: every request without a key 401", async () => {
  for (const keyless of ["reads", "closed"]) {
    const strict = await startRelay({ keys: true, vars: { UPSTREAM_RPC_URL: proxy.url, RELAY_SECRET: SECRET, ADMIN_TOKEN: TOKEN, KEYLESS: keyless } });
    try {
      const read = await post(strict.url, call("eth_chainId"));
      const send = await post(strict.url, call("eth_sendRawTransaction", [await signTransfer(devAccount(3), 0)]));
      if (keyless === "reads") {
        assert.equal(read.json.result, "0x7a69");
        assert.deepEqual([send.status, send.json.error?.code], [200, -32016]);
      } else {
        assert.deepEqual([read.status, read.json.error.code, send.status], [401, -32016, 401]);
      }
    } finally {
      await strict.stop();
    }
  }
});

test("the raw key is in no log line, upstream request or stored file (KV, the objects' storage, the caches)", async () => {
  assert.ok(made.length >= 4);
  const files = [];
  const walk = async (dir) => {
    for (const e of await readdir(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) await walk(p);
      else files.push(p);
    }
  };
  await walk(persist);
  assert.ok(files.length > 0, "the runtime stored files");
  const stored = await Promise.all(files.map((f) => readFile(f)));
  const upstream = proxy.requests.map((r) => r.text ?? JSON.stringify(r.body)).join("\n");
  const logs = relay.logs.join("\n");
  assert.ok(logs.includes("key_usage"), "the usage metric is logged, by id");
  for (const key of made) {
    const secretPart = key.slice(4, 36);
    assert.ok(!logs.includes(secretPart), "not in a log line or metric");
    assert.ok(!upstream.includes(secretPart), "not sent upstream");
    for (const [i, bytes] of stored.entries()) {
      assert.ok(!bytes.includes(secretPart), `not stored: ${files[i]}`);
    }
  }
});
