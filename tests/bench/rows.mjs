// make bench-e2e: SQLite rows written per transaction (issue 39), as the sender's object counts them
// (each statement's rowsWritten, which Cloudflare bills at $1.00 per million; the per-sender view's
// `storage.rows_written`), for a lone transaction and for a burst of 20 of one sender, each on a
// fresh sender, on a mempool upstream (anvil automine, a test proxy that passes gaps, LATENCY_MS
// on each send), the relay's defaults but TRACK_INTERVAL_S (2: the bench waits for the check that
// finds them mined, and the object then deletes its storage). The hot sender's figure is
// tests/bench/sustained.mjs's. `deleteAll` (the object's storage deleted once nothing is left) is
// not SQL and is not in the count. Prints Markdown for BENCHMARKS.md.
import os from "node:os";
import { startAnvil, startProxy, startRelay, devAccount, signTransfer, sendRaw, rpc, sleep, until } from "../support/harness.mjs";

const L = Number(process.env.LATENCY_MS ?? 50);
const TOKEN = "rows-bench";
const anvil = await startAnvil({ accounts: 4 });
const proxy = await startProxy({ upstream: anvil.url, strictNonce: false, latency: (req) => (req?.method === "eth_sendRawTransaction" ? L : 0) });
const relay = await startRelay({
  vars: { UPSTREAM_RPC_URL: proxy.url, CHAIN_ID: "31337", SEND_WINDOW: undefined, ADMIN_TOKEN: TOKEN, TRACK_INTERVAL_S: "2" },
});
const view = async (account) =>
  (await fetch(`${relay.url}/senders/${account.address}`, { headers: { authorization: `Bearer ${TOKEN}` } })).json();

/** `count` transfers of a fresh sender at once; the view once its storage is gone (all mined). */
async function line(index, count) {
  const account = devAccount(index);
  const raws = await Promise.all(Array.from({ length: count }, (_, n) => signTransfer(account, n)));
  const answers = await Promise.all(raws.map((raw, i) => sendRaw(relay.url, raw, i)));
  const accepted = answers.filter((a) => a.json?.result).length;
  // Mined, checked by the tracking check, and the storage deleted (no row left in the view).
  await until(async () => {
    const v = await view(account);
    return v.tracked === 0 && v.storage.rows === 0 && v.bill.storage_deleted > 0;
  }, 30_000);
  const v = await view(account);
  const mined = Number((await rpc(anvil.url, "eth_getTransactionCount", [account.address, "latest"])).result);
  return { count, accepted, mined, written: v.storage.rows_written, view: v };
}

try {
  const rows = [await line(1, 1), await line(2, 20)];
  const out = [];
  out.push(`Machine: ${os.cpus()[0].model}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB; date ${new Date().toISOString().slice(0, 10)}`);
  out.push(`Command: node tests/bench/rows.mjs (LATENCY_MS=${L}; anvil automine, mempool test proxy, TRACK_INTERVAL_S=2, otherwise the relay's defaults)\n`);
  out.push("| one sender | accepted | mined | rows written (the object's count) | per transaction |");
  out.push("|---|---:|---:|---:|---:|");
  for (const r of rows) {
    out.push(`| ${r.count === 1 ? "a lone transaction" : `a burst of ${r.count}`} | ${r.accepted} | ${r.mined} | ${r.written} | ${(r.written / r.count).toFixed(2)} |`);
  }
  console.log(out.join("\n"));
  if (rows.some((r) => r.accepted !== r.count || r.mined !== r.count)) process.exitCode = 1;
  await sleep(10);
} finally {
  await relay.stop();
  await proxy.stop();
  anvil.stop();
}
