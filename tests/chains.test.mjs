// Several chains from one deployment (issue 42): the compiled relay on workerd in front of two
// anvils, the default chain 31337 and chain 296 behind a test upstream that refuses nonce gaps
// as Hedera's consensus nodes do (`CHAINS=296:hedera-testnet`, `CHAIN_296_UPSTREAM_RPC_URL`).
// One private key's transactions on both chains at once, reads and WebSocket heads per path,
// a chain not served, a chain with a broken setting, and a restart with a chain added.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { keccak256 } from "viem";
import { startAnvil, startProxy, startRelay, post, rpc, sendRaw, devAccount, signTransfer, sleep, until, minedCount, minedCounts, oneRateWindow } from "./support/harness.mjs";

const call = (method, params = [], id = 1) => ({ jsonrpc: "2.0", id, method, params });
const view = async (url, address) => (await fetch(`${url}/senders/${address}`, { headers: { authorization: "Bearer t" } })).json();

/** Two anvils, 296 behind the strict proxy, and the relay serving both; `vars` added (or made
 * from the proxies: `vars({ localProxy, hederaProxy })`). */
async function twoChains(vars = {}, { persist, noMining = false, ratelimits } = {}) {
  const mining = noMining ? ["--no-mining"] : [];
  const local = await startAnvil({ accounts: 4, extraArgs: mining });
  const hedera = await startAnvil({ accounts: 4, extraArgs: ["--chain-id", "296", ...mining] });
  const localProxy = await startProxy({ upstream: local.url, strictNonce: false });
  const hederaProxy = await startProxy({ upstream: hedera.url, strictNonce: true });
  const chainVars = {
    UPSTREAM_RPC_URL: localProxy.url,
    CHAINS: "296:hedera-testnet",
    CHAIN_296_UPSTREAM_RPC_URL: hederaProxy.url,
    ADMIN_TOKEN: "t",
    ...(typeof vars === "function" ? vars({ localProxy, hederaProxy }) : vars),
  };
  const relay = await startRelay({ vars: chainVars, persist, ratelimits });
  return {
    local,
    hedera,
    localProxy,
    hederaProxy,
    relay,
    vars: chainVars,
    stop: async () => {
      await relay.stop();
      await localProxy.stop();
      await hederaProxy.stop();
      local.stop();
      hedera.stop();
    },
  };
}

let shared;
const sharedChains = () => (shared ??= twoChains());
after(async () => (await shared)?.stop());

test("one key's 20 transactions on each chain at once, interleaved: each chain's in nonce order, all mined on their own chain, 0 refusals at the strict one, one sender object per chain", async () => {
  const c = await sharedChains();
  const account = devAccount(1);
  const sender = account.address.toLowerCase();
  const onLocal = await Promise.all(Array.from({ length: 20 }, (_, n) => signTransfer(account, n)));
  const onHedera = await Promise.all(Array.from({ length: 20 }, (_, n) => signTransfer(account, n, { chainId: 296 })));
  // Interleaved: 0 on each, 1 on each, ...; half of the default chain's through / and half
  // through /evm/31337 (the same chain, the same object).
  const sends = onLocal.flatMap((raw, n) => [
    sendRaw(n % 2 ? `${c.relay.url}/evm/31337` : c.relay.url, raw, 1000 + n),
    sendRaw(`${c.relay.url}/evm/${n % 2 ? "hedera-testnet" : "296"}`, onHedera[n], 2000 + n),
  ]);
  const answers = await Promise.all(sends);
  const expected = onLocal.flatMap((raw, n) => [keccak256(raw), keccak256(onHedera[n])]);
  assert.deepEqual(answers.map((a) => a.json?.result ?? a.text), expected, "every client its hash");
  let mined = [0, 0];
  await until(async () => {
    mined = [await minedCount(c.local.url, account.address), await minedCount(c.hedera.url, account.address)];
    return mined[0] === 20 && mined[1] === 20;
  }, 10_000);
  const strict = c.hederaProxy.seen.filter((r) => r.sender === sender);
  const loose = c.localProxy.seen.filter((r) => r.sender === sender);
  const [localView, hederaView] = [await view(c.relay.url, sender), await view(`${c.relay.url}/evm/296`, sender)];
  console.log(
    `# mined ${mined[0]}/20 on 31337, ${mined[1]}/20 on 296; at the strict upstream ${strict.length} sends, ` +
      `${strict.filter((r) => !r.accepted).length} refused; at the default chain's ${loose.length}; ` +
      `objects: 31337 next nonce ${localView.next_nonce} (${localView.upstream_pool}), 296 next nonce ${hederaView.next_nonce} (${hederaView.upstream_pool})`,
  );
  assert.deepEqual(mined, [20, 20], "all mined, each on its own chain");
  assert.deepEqual(strict.map((r) => r.nonce), Array.from({ length: 20 }, (_, n) => n), "296's in nonce order, each once");
  assert.equal(strict.filter((r) => !r.accepted).length, 0, "0 refusals at the strict upstream");
  assert.ok(strict.every((r) => onHedera.some((raw) => keccak256(raw) === r.hash)), "only 296's transactions at 296's node");
  assert.ok(loose.every((r) => onLocal.some((raw) => keccak256(raw) === r.hash)), "only 31337's at 31337's node");
  assert.equal(loose.filter((r) => r.accepted).length, 20);
  // One object per (chain, sender): each knows its own chain and its own nonces.
  assert.equal(hederaView.upstream_pool, "strict", "auto is strict on Hedera's chain id");
  assert.equal(localView.upstream_pool, "mempool");
  assert.equal(hederaView.next_nonce, 20);
  assert.equal(localView.next_nonce, 20);
  // Every log line and data point carries the chain id it is about.
  const forwarded = c.relay.events("tx_forwarded").filter((e) => e.sender === sender);
  const byChain = (id) => forwarded.filter((e) => e.chain === id).length;
  assert.deepEqual([byChain(31337), byChain(296), forwarded.length], [20, 20, 40], "tx_forwarded per chain");
});

test("reads go to their chain's node, and a WebSocket's newHeads on each path follows its own chain", async () => {
  const c = await sharedChains();
  const chainIdOf = async (path) => (await post(`${c.relay.url}${path}`, call("eth_chainId"))).json.result;
  assert.equal(await chainIdOf(""), "0x7a69");
  assert.equal(await chainIdOf("/evm/31337"), "0x7a69");
  assert.equal(await chainIdOf("/evm/296"), "0x128");
  assert.equal(await chainIdOf("/evm/Hedera-Testnet"), "0x128");
  // Different heights, so a head names its chain.
  await rpc(c.hedera.url, "anvil_mine", ["0x20"]);
  // One chain's height never raises another's eth_blockNumber (the isolate keeps both chains'
  // heads).
  for (const [path, node] of [["/evm/296", c.hedera.url], ["", c.local.url], ["/evm/31337", c.local.url]]) {
    const said = (await post(`${c.relay.url}${path}`, call("eth_blockNumber"))).json.result;
    assert.equal(said, (await rpc(node, "eth_blockNumber")).result, `${path || "/"}: its own chain's height`);
  }
  const heads = async (path, node) => {
    const socket = new WebSocket(`${c.relay.url.replace(/^http/, "ws")}${path}`);
    const messages = [];
    socket.onmessage = (e) => messages.push(JSON.parse(e.data));
    await new Promise((resolve, reject) => ((socket.onopen = resolve), (socket.onerror = reject)));
    socket.send(JSON.stringify(call("eth_subscribe", ["newHeads"], 7)));
    await until(async () => messages.some((m) => m.id === 7), 5000);
    await rpc(node, "evm_mine");
    await until(async () => messages.some((m) => m.method === "eth_subscription"), 5000);
    socket.close();
    const head = messages.find((m) => m.method === "eth_subscription").params.result;
    const block = (await rpc(node, "eth_getBlockByNumber", ["latest", false])).result;
    return { head, block };
  };
  for (const [path, node] of [["/evm/296", c.hedera.url], ["/evm/31337", c.local.url], ["", c.local.url]]) {
    const { head, block } = await heads(path, node);
    console.log(`# ${path || "/"}: head ${Number(head.number)} ${head.hash.slice(0, 10)}, its node's latest ${Number(block.number)}`);
    assert.equal(head.hash, block.hash, `${path || "/"} follows its own chain`);
  }
});

test("a chain not served: HTTP 404 and the list; a chain with a broken setting: that chain's error, the others serve", async () => {
  const c = await twoChains(({ localProxy }) => ({
    CHAINS: "296:hedera-testnet, 5, 10, 11",
    CHAIN_5_UPSTREAM_RPC_URL: "http://127.0.0.1:9",
    CHAIN_5_UPSTREAM_POOL: "gapless",
    // Chain 10's one upstream is another chain's node (31337's).
    CHAIN_10_UPSTREAM_RPC_URL: localProxy.url,
    // Chain 11's operator mistyped a setting's name: not ignored.
    CHAIN_11_UPSTREAM_RPC_URL: localProxy.url,
    CHAIN_11_SEND_WINDOWS: "4",
  }));
  try {
    const unknown = await post(`${c.relay.url}/evm/7`, call("eth_chainId"));
    assert.equal(unknown.status, 404);
    assert.equal(unknown.json.error.code, -32001);
    assert.match(unknown.json.error.message, /chain "7" is not served here; served: 31337, 296, 5, 10, 11/);
    assert.deepEqual(unknown.json.error.data.chains, [
      { chainId: 31337, path: "/evm/31337" },
      { chainId: 296, path: "/evm/296", alias: "/evm/hedera-testnet" },
      { chainId: 5, path: "/evm/5" },
      { chainId: 10, path: "/evm/10" },
      { chainId: 11, path: "/evm/11" },
    ]);
    assert.equal((await post(`${c.relay.url}/evm/base`, call("eth_chainId"))).status, 404, "an alias not served");
    for (const path of ["/evm", "/evm/"]) {
      const listed = await fetch(`${c.relay.url}${path}`);
      assert.equal(listed.status, 200, path);
      assert.deepEqual((await listed.json()).chains, unknown.json.error.data.chains, `GET ${path}: the chains served`);
    }
    const broken = await post(`${c.relay.url}/evm/5`, call("eth_chainId"));
    assert.equal(broken.status, 500);
    assert.match(broken.json.error.message, /relay misconfigured: chain 5: UPSTREAM_POOL must be auto, mempool or strict, got "gapless"/);
    const typo = await post(`${c.relay.url}/evm/11`, call("eth_chainId"));
    assert.equal(typo.status, 500);
    assert.match(typo.json.error.message, /chain 11: CHAINS CHAIN_11_SEND_WINDOWS is set, but SEND_WINDOWS is no setting/);
    assert.equal((await post(`${c.relay.url}/evm/296`, call("eth_chainId"))).json.result, "0x128", "296 serves");
    assert.equal((await post(c.relay.url, call("eth_chainId"))).json.result, "0x7a69", "the default chain serves");
    const account = devAccount(2);
    const raw = await signTransfer(account, 0, { chainId: 296 });
    assert.equal((await sendRaw(`${c.relay.url}/evm/296`, raw)).json.result, keccak256(raw));
    // A transaction of another chain on a chain's path: refused by its EIP-155 chain id, unsent.
    const wrong = await signTransfer(account, 0);
    const refused = await sendRaw(`${c.relay.url}/evm/296`, wrong);
    assert.ok(refused.json.error, `refused: ${refused.text}`);
    assert.ok(!c.hederaProxy.seen.some((r) => r.hash === keccak256(wrong)), "never at 296's node");
    // A chain whose one upstream is another chain's node: excluded once asked, never used.
    const elsewhere = await post(`${c.relay.url}/evm/10`, call("eth_blockNumber"));
    console.log(`# /evm/10 on 31337's node: HTTP ${elsewhere.status} ${elsewhere.text.slice(0, 160)}`);
    assert.ok(elsewhere.json?.error, "no answer from another chain's node");
    const excluded = c.relay.events("upstream_excluded");
    assert.ok(excluded.some((e) => e.chain_id === 31337 && e.want === 10 && e.chain === 10), JSON.stringify(excluded));
    // Issue 51, point 8: its error names the mismatch, not "connection failed"; its chain id is
    // its own; none of its reads is answered with 31337's data; 31337 serves on / meanwhile (its
    // upstream's health is its own chain's, not taken down by /evm/10's check).
    assert.match(elsewhere.json.error.message, /it serves another chain \(eth_chainId 31337, the relay's chain is 10\)/);
    assert.equal((await post(`${c.relay.url}/evm/10`, call("eth_chainId"))).json.result, "0xa", "its configured id");
    assert.equal((await post(`${c.relay.url}/evm/10`, call("net_version"))).json.result, "10");
    for (const read of [call("eth_getBlockByNumber", ["0x0", false]), call("eth_getBalance", [account.address, "latest"]), call("eth_blockNumber")]) {
      const b = await post(`${c.relay.url}/evm/10`, read);
      assert.ok(b.json?.error && b.json.result === undefined, `/evm/10 ${read.method}: ${b.text.slice(0, 160)}`);
      const a = await post(c.relay.url, read);
      assert.ok(a.json?.result !== undefined && !a.json.error, `/ ${read.method} serves: ${a.text.slice(0, 160)}`);
    }
    const config = c.relay.logs.filter((l) => l.includes('"config_error"'));
    assert.ok(config.some((l) => l.includes('"chain":5')), "logged with its chain id");
  } finally {
    await c.stop();
  }
});

test("a client's rate limit is one budget across chains", async () => {
  const c = await twoChains({}, { ratelimits: { RATE_LIMIT_READ: { simple: { limit: 4, period: 60 } } } });
  try {
    const from = (ip) => ({ "cf-connecting-ip": ip });
    const read = (path, ip) => post(`${c.relay.url}${path}`, call("eth_chainId"), from(ip));
    await oneRateWindow(60);
    const answers = [];
    for (const path of ["", "/evm/296", "", "/evm/hedera-testnet", "/evm/296", ""]) answers.push((await read(path, "203.0.113.7")).status);
    console.log(`# one client, reads on / and /evm/296 in turn: ${answers.join(", ")}`);
    assert.deepEqual(answers, [200, 200, 200, 200, 429, 429], "4 reads in all, whichever chain");
    assert.equal((await read("/evm/296", "203.0.113.8")).status, 200, "another client has its own");
  } finally {
    await c.stop();
  }
});

test("a relay with stored transactions on the default chain, restarted with a second chain added: every stored one sent again and mined", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const local = await startAnvil({ accounts: 4, extraArgs: ["--no-mining"] });
  const proxy = await startProxy({ upstream: local.url, strictNonce: false });
  const hedera = await startAnvil({ accounts: 4, extraArgs: ["--chain-id", "296"] });
  let relay = await startRelay({ vars: { UPSTREAM_RPC_URL: proxy.url, ADMIN_TOKEN: "t" }, persist });
  try {
    const account = devAccount(3);
    const raws = await Promise.all(Array.from({ length: 5 }, (_, n) => signTransfer(account, n)));
    for (const raw of raws) assert.equal((await sendRaw(relay.url, raw)).json.result, keccak256(raw));
    // The node loses them while the relay is down (a pool that forgot, a node restarted).
    relay.kill();
    await relay.stop().catch(() => {});
    await rpc(local.url, "anvil_removePoolTransactions", [account.address]);
    relay = await startRelay({
      vars: { UPSTREAM_RPC_URL: proxy.url, ADMIN_TOKEN: "t", CHAINS: "296", CHAIN_296_UPSTREAM_RPC_URL: hedera.url },
      persist,
    });
    const before = proxy.seen.length;
    // The sender's object starts on its stored rows at its first request, here the operator's
    // view (or at its alarm), and checks them at once.
    await view(relay.url, account.address);
    await until(async () => proxy.seen.slice(before).filter((r) => r.accepted).length >= 5, 10_000);
    await rpc(local.url, "evm_mine");
    let mined = 0;
    await until(async () => (mined = await minedCount(local.url, account.address)) === 5, 5000);
    const resent = proxy.seen.slice(before).map((r) => r.nonce);
    console.log(`# after the restart with chain 296 added: sent again ${resent.join(", ")}; mined ${mined}/5`);
    assert.deepEqual(resent, [0, 1, 2, 3, 4], "every stored transaction sent again, in nonce order");
    assert.equal(mined, 5);
    assert.equal((await post(`${relay.url}/evm/296`, call("eth_chainId"))).json.result, "0x128", "and the new chain serves");
  } finally {
    await relay.stop();
    await proxy.stop();
    local.stop();
    hedera.stop();
    await rm(persist, { recursive: true, force: true });
  }
});

test("ALLOW_UNPROTECTED_TXS=true at the top level is the default chain's alone: a pre-EIP-155 transaction is accepted on / and /evm/31337, refused on /evm/296 and never sent there; the isolate says so once (config_notice)", async () => {
  const c = await twoChains({ ALLOW_UNPROTECTED_TXS: "true" });
  try {
    const account = devAccount(3);
    const unprotected = (nonce) =>
      account.signTransaction({ type: "legacy", nonce, to: "0x000000000000000000000000000000000000dEaD", value: 1n, gas: 21000n, gasPrice: 10n ** 10n });
    const atRoot = await post(c.relay.url, call("eth_sendRawTransaction", [await unprotected(0)]));
    assert.match(atRoot.json?.result ?? "", /^0x[0-9a-f]{64}$/, atRoot.text);
    const atDefault = await post(`${c.relay.url}/evm/31337`, call("eth_sendRawTransaction", [await unprotected(1)]));
    assert.match(atDefault.json?.result ?? "", /^0x[0-9a-f]{64}$/, atDefault.text);
    // The same bytes a victim signed for the default chain, replayed to the other chain.
    const replayed = await post(`${c.relay.url}/evm/296`, call("eth_sendRawTransaction", [await unprotected(0)]));
    assert.equal(replayed.json?.error?.code, -32000, replayed.text);
    assert.match(replayed.json.error.message, /EIP-155|unprotected/i);
    assert.equal(c.hederaProxy.requests.filter((r) => r.body?.method === "eth_sendRawTransaction").length, 0, "never sent to chain 296");
    // Mined (anvil's instant miner may leave a sent transaction for a moment: foundry-rs/foundry#10122).
    assert.deepEqual(await minedCounts(c.local.url, [account], 2, 10_000), [2]);
    // One line per chain and setting, once per isolate (workerd here runs one).
    const notices = [...new Set(c.relay.events("config_notice").map((e) => e.notice))];
    assert.equal(notices.length, 1, JSON.stringify(notices));
    assert.match(notices[0], /ALLOW_UNPROTECTED_TXS .* chain 296 .* CHAIN_296_ALLOW_UNPROTECTED_TXS/);
  } finally {
    await c.stop();
  }
});

test("stored transactions on chain A, the relay restarted with CHAIN_ID moved to B and A into CHAINS: A's are kept untouched and shown in the per-sender view, none goes to B's upstream; the sender's sends on B fail open, counted", async () => {
  const persist = await mkdtemp(`${tmpdir()}/nonce-relay-do-`);
  const local = await startAnvil({ accounts: 4, extraArgs: ["--no-mining"] });
  const localProxy = await startProxy({ upstream: local.url, strictNonce: false });
  const hedera = await startAnvil({ accounts: 4, extraArgs: ["--chain-id", "296"] });
  const hederaProxy = await startProxy({ upstream: hedera.url, strictNonce: false });
  let relay = await startRelay({ vars: { UPSTREAM_RPC_URL: localProxy.url, ADMIN_TOKEN: "t" }, persist });
  try {
    const account = devAccount(2);
    const raws = await Promise.all([0, 1].map((n) => signTransfer(account, n)));
    for (const raw of raws) assert.equal((await sendRaw(relay.url, raw)).json.result, keccak256(raw));
    await relay.stop();
    // The operator moves the default chain: 296 at /, 31337 served beside it.
    relay = await startRelay({
      vars: { CHAIN_ID: "296", UPSTREAM_RPC_URL: hederaProxy.url, CHAINS: "31337", CHAIN_31337_UPSTREAM_RPC_URL: localProxy.url, ADMIN_TOKEN: "t" },
      persist,
    });
    const kept = await view(relay.url, account.address);
    assert.equal(kept.storage, "other_chain", JSON.stringify(kept));
    assert.deepEqual([kept.stored_chain_id, kept.serving_chain_id], [31337, 296]);
    assert.deepEqual(kept.stored.map((t) => t.hash).sort(), raws.map((r) => keccak256(r)).sort());
    // The sender's first transaction on 296, through /: straight to the upstream (fail-open).
    const onB = await signTransfer(account, 0, { chainId: 296 });
    assert.equal((await sendRaw(relay.url, onB)).json?.result, keccak256(onB));
    const sentToB = hederaProxy.requests.filter((r) => r.body?.method === "eth_sendRawTransaction").map((r) => keccak256(r.body.params[0]));
    assert.deepEqual(sentToB, [keccak256(onB)], "none of chain 31337's went to 296's upstream");
    assert.ok(relay.events("fail_open").length >= 1, "the fail-open counted");
    assert.deepEqual(await minedCounts(hedera.url, [account], 1, 10_000), [1], "mined on 296 (within 10 s: anvil's instant miner may lag)");
    // Still kept: chain 31337's are untouched (the operator may move it back).
    assert.equal((await view(relay.url, account.address)).stored.length, 2);
  } finally {
    await relay.stop();
    await localProxy.stop();
    await hederaProxy.stop();
    local.stop();
    hedera.stop();
    await rm(persist, { recursive: true, force: true });
  }
});
