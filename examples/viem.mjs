// viem through the relay: read, send one transaction, then a burst of five fired at once (the
// relay keeps them in nonce order on their way to the node).
import { createPublicClient, createWalletClient, http, parseGwei } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";

const relay = process.env.RELAY_URL ?? "http://127.0.0.1:8787";
const account = privateKeyToAccount(
  process.env.PRIVATE_KEY ?? "0x59c6995e998f97a5a0044966f0945389dc9e86dae88c7a8412f4603b6b78690d", // anvil dev key 1
);
const publicClient = createPublicClient({ chain: foundry, transport: http(relay) });
const wallet = createWalletClient({ account, chain: foundry, transport: http(relay) });

console.log(`block ${await publicClient.getBlockNumber()}`);
const hash = await wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n });
const receipt = await publicClient.waitForTransactionReceipt({ hash });
console.log("sent", hash, receipt.status);

// A burst: nonces n..n+4 signed locally and sent at once.
const nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: "pending" });
const burst = await Promise.all(
  [0, 1, 2, 3, 4].map(async (i) =>
    wallet.sendRawTransaction({
      serializedTransaction: await wallet.signTransaction({
        to: "0x000000000000000000000000000000000000dEaD",
        value: 1n,
        nonce: nonce + i,
        gas: 21000n,
        maxFeePerGas: parseGwei("20"),
        maxPriorityFeePerGas: parseGwei("1"),
      }),
    }),
  ),
);
for (const h of burst) await publicClient.waitForTransactionReceipt({ hash: h });
console.log("burst", burst.length, "mined");
