// The stand-in private route (tests/support/private-route.mjs) that the private-send tests stand
// on: it must keep sends private, include nonce by nonce, answer its status endpoint in Protect's
// words, and fail, forget or hold a transaction when told.
import { test } from "node:test";
import assert from "node:assert/strict";
import { devAccount, minedCount, rpc, signTransfer, startAnvil } from "./support/harness.mjs";
import { startPrivateRoute, STATUS } from "./support/private-route.mjs";

test("the stand-in private route keeps sends private, includes nonce by nonce, and fails, forgets or holds when told", async () => {
  const anvil = await startAnvil({ extraArgs: ["--no-mining"] });
  const route = await startPrivateRoute({ chain: anvil.url });
  try {
    const account = devAccount(3);
    const raws = await Promise.all([0, 1, 2, 3].map((n) => signTransfer(account, n)));
    const hashes = [];
    for (const i of [1, 0, 3, 2]) {
      const answer = await rpc(route.url, "eth_sendRawTransaction", [raws[i]]);
      assert.match(answer.result ?? "", /^0x[0-9a-f]{64}$/, JSON.stringify(answer));
      hashes[i] = answer.result;
    }
    assert.equal((await rpc(route.url, "eth_sendRawTransaction", [raws[0]])).result, hashes[0], "a copy: the same hash");
    assert.equal((await rpc(route.url, "eth_chainId")).result, "0x7a69", "reads are answered");
    // Private: the chain's node has none of them.
    for (const hash of hashes) {
      assert.equal((await rpc(anvil.url, "eth_getTransactionByHash", [hash])).result, null);
    }
    const pending = await rpc(anvil.url, "eth_getTransactionCount", [account.address, "pending"]);
    assert.equal(Number(BigInt(pending.result)), 0, "not in the public pending count");
    const statusOf = async (hash) => (await (await fetch(route.statusUrl.replace("{hash}", hash))).json()).status;
    assert.equal(await statusOf(hashes[0]), STATUS.PENDING);
    assert.equal(await statusOf(`0x${"ab".repeat(32)}`), STATUS.UNKNOWN);

    route.holdFor(hashes[1], 2);
    route.forget(hashes[3]);
    assert.deepEqual(await route.buildBlock(), [hashes[0]], "n+1 held: n alone");
    assert.equal(await statusOf(hashes[0]), STATUS.INCLUDED);
    assert.equal(await statusOf(hashes[3]), STATUS.FAILED);
    assert.deepEqual(await route.buildBlock(), [], "n+1 held a second block, n+2 behind it");
    assert.deepEqual(await route.buildBlock(), [hashes[1], hashes[2]], "then in nonce order");
    assert.equal(await minedCount(anvil.url, account.address), 3);
    assert.equal(await statusOf(hashes[3]), STATUS.FAILED, "forgotten: never included");
    // Sent again from its bytes: held again, then included.
    await rpc(route.url, "eth_sendRawTransaction", [raws[3]]);
    assert.equal(await statusOf(hashes[3]), STATUS.PENDING);
    assert.deepEqual(await route.buildBlock(), [hashes[3]]);
    assert.equal(await minedCount(anvil.url, account.address), 4);
    assert.equal(route.sends.length, 6);
  } finally {
    await route.stop();
    anvil.stop();
  }
});
