// The floor under the relay's CPU per transaction on this runtime: the workerd process CPU per
// request of the smallest JavaScript Workers that do what the relay's path does, under the same
// miniflare, on the same machine:
//   constant:          a Worker that answers a constant;
//   forward:           a Worker that forwards the body to the upstream and returns its answer;
//   forward via a DO:  a Worker that hands the body to a Durable Object (named per sender, as the
//                      relay does), which forwards it to the upstream.
// Each: 1,000 requests, 50 at a time, after a warm-up. Then the floor under the lock handoff gap:
// a JavaScript Durable Object that sends a sender's 20 transactions one after another (a promise
// chain, nothing else) to the same test upstream as make bench-e2e (anvil behind the strict-nonce
// proxy, 50 ms per send), and the gap that upstream sees between its answer to one and its
// receipt of the next. `node tests/bench/floor.mjs`
import { Miniflare, convertV4MiniflareOptions } from "miniflare";
import http from "node:http";
import { COMPATIBILITY_DATE, childPids, cpuMs, freePort, startAnvil, startProxy, devAccount, signTransfer } from "../support/harness.mjs";

const answer = '{"jsonrpc":"2.0","id":1,"result":"0x1"}';
const upstreamPort = await freePort();
const upstream = http.createServer((req, res) => {
  req.resume();
  req.on("end", () => {
    res.writeHead(200, { "content-type": "application/json", "content-length": answer.length });
    res.end(answer);
  });
});
await new Promise((r) => upstream.listen(upstreamPort, "127.0.0.1", r));
const UP = `http://127.0.0.1:${upstreamPort}`;
// The handoff floor's upstream: anvil behind the bench's strict-nonce test proxy, 50 ms a send.
const anvil = await startAnvil({ accounts: 10 });
const senderOfRaw = new Map();
const proxy = await startProxy({
  upstream: anvil.url,
  latency: (req) => (req?.method === "eth_sendRawTransaction" ? 50 : 0),
  senderOf: (raw) => senderOfRaw.get(raw),
});

const workers = {
  constant: { script: `export default { fetch() { return new Response('${answer}') } }` },
  forward: {
    script: `export default { async fetch(req) {
      const r = await fetch("${UP}", { method: "POST", body: await req.text(), headers: { "content-type": "application/json" } });
      return new Response(await r.text()); } }`,
  },
  "handoff": {
    script: `export class Lock {
        constructor() { this.chain = Promise.resolve(); }
        fetch(req) {
          const turn = this.chain.then(async () => {
            const r = await fetch("${proxy.url}", { method: "POST", body: await req.text(), headers: { "content-type": "application/json" } });
            return new Response(await r.text());
          });
          this.chain = turn.catch(() => {});
          return turn;
        }
      }
      export default { async fetch(req, env) { return env.LOCK.get(env.LOCK.idFromName("one")).fetch("https://lock/", { method: "POST", body: await req.text() }); } }`,
    durableObjects: { LOCK: { className: "Lock", useSQLite: true } },
    handoff: true,
  },
  "forward via a DO": {
    script: `export class Lock {
        async fetch(req) {
          const r = await fetch("${UP}", { method: "POST", body: await req.text(), headers: { "content-type": "application/json" } });
          return new Response(await r.text());
        }
      }
      export default { async fetch(req, env) {
        const body = await req.text();
        const stub = env.LOCK.get(env.LOCK.idFromName(String(body.length % 50)));
        return stub.fetch("https://lock/", { method: "POST", body });
      } }`,
    durableObjects: { LOCK: { className: "Lock", useSQLite: true } },
  },
};

const results = [];
for (const [name, { script, durableObjects, handoff }] of Object.entries(workers)) {
  const before = childPids();
  const mf = new Miniflare(convertV4MiniflareOptions({ modules: true, script, compatibilityDate: COMPATIBILITY_DATE, host: "127.0.0.1", port: await freePort(), ...(durableObjects ? { durableObjects } : {}) }));
  const url = (await mf.ready).toString();
  const pids = childPids().filter((p) => !before.includes(p));
  const cpu = () => pids.reduce((s, p) => s + cpuMs(p), 0);
  const body = (i) => JSON.stringify({ jsonrpc: "2.0", id: i, method: "eth_blockNumber", params: [], pad: "x".repeat(i % 50) });
  const run = async (n) => {
    for (let k = 0; k < n; k += 50) await Promise.all(Array.from({ length: 50 }, (_, i) => fetch(url, { method: "POST", body: body(k + i) }).then((r) => r.text())));
  };
  if (handoff) {
    const gaps = [];
    for (let round = 0; round < 6; round++) {
      // A fresh sender each round, its 20 transactions sent one after another in nonce order
      // (this floor does not sort; the relay does).
      const account = devAccount(round);
      const raws = [];
      for (let n = 0; n < 20; n++) {
        const raw = await signTransfer(account, n);
        senderOfRaw.set(raw, account.address.toLowerCase());
        raws.push(raw);
      }
      const pending = [];
      for (const [n, raw] of raws.entries()) {
        pending.push(fetch(url, { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", id: n, method: "eth_sendRawTransaction", params: [raw] }) }).then((r) => r.text()));
        await new Promise((r) => setTimeout(r, 1)); // in order into the chain
      }
      await Promise.all(pending);
      const seen = proxy.seen.filter((r) => r.sender === account.address.toLowerCase());
      if (seen.some((r) => !r.accepted)) throw new Error("the floor sent out of order");
      if (round > 0) for (let i = 1; i < seen.length; i++) gaps.push(seen[i].at - seen[i - 1].answeredAt);
    }
    gaps.sort((a, b) => a - b);
    const q = (p) => gaps[Math.min(gaps.length - 1, Math.floor(p * gaps.length))].toFixed(1);
    results.push([`handoff gap of a JS Durable Object, p50 / p99`, `${q(0.5)} / ${q(0.99)} ms`]);
    await mf.dispose();
    continue;
  }
  await run(300);
  const c0 = cpu();
  await run(1000);
  results.push([`${name}: workerd CPU per request`, `${((cpu() - c0) / 1000).toFixed(2)} ms`]);
  await mf.dispose();
}
upstream.close();
await proxy.stop();
anvil.stop();
for (const [name, value] of results) console.log(`| ${name} | ${value} |`);
