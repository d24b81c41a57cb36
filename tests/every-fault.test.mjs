// Every fault at once (issue 39), one seed: 10 senders x 30 transactions through the relay on
// workerd in front of a mempool node (anvil mining a block a second, a pool backlog), with the
// upstream away (503 and refused connections), lost answers before and after a send went in,
// pool drops during the burst and after the restart, the relay killed mid-burst and started again
// on its storage, duplicate copies and JSON-RPC batches (tests/support/every-fault.mjs). Every
// client ends with its hash and each of the 300 is mined exactly once. SEED picks the schedule;
// `make soak` runs 20 of them (tests/bench/soak.mjs).
import { test } from "node:test";
import assert from "node:assert/strict";
import { everyFault, summaryLine } from "./support/every-fault.mjs";

const SEED = Number(process.env.SEED ?? 14);

test(`every fault at once, seed ${SEED}: 10 senders x 30 on a mempool node; every client gets its hash, 300/300 mined exactly once`, async () => {
  const r = await everyFault({ seed: SEED, log: (line) => console.log(`# ${line}`) });
  console.log(`# ${summaryLine(r)}`);
  if (r.resubmittedLabels) console.log(`# resubmitted by label: ${JSON.stringify(r.resubmittedLabels)}; client error answers: ${JSON.stringify(r.clientErrors)}`);
  for (const line of r.diagnosis ?? []) console.log(`# ${line}`);
  assert.equal(r.error, null, r.error ?? "");
  assert.deepEqual(r.clients.wrong.slice(0, 5), [], `${r.clients.wrong.length} clients without their hash`);
  assert.equal(r.clients.withHash, r.clients.count, "every client got its hash");
  assert.deepEqual(r.mined, Array(r.senders).fill(r.perSender), "every sender's transactions mined");
  assert.deepEqual(r.missing.slice(0, 5), [], `${r.missing.length} transactions without a receipt`);
  assert.equal(r.minedOnce, r.total, "each transaction mined exactly once (its receipt, its nonce)");
});
