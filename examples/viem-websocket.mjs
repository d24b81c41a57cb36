// viem over the relay's WebSocket: watch new block numbers, and send a burst of three on the same socket
// (the relay keeps them in nonce order, as over HTTP).
import { createPublicClient, createWalletClient, webSocket } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";

const relay = (process.env.RELAY_URL ?? "http://127.0.0.1:8787").replace(/^http/, "ws");
const account = privateKeyToAccount(
  process.env.PRIVATE_KEY ?? "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", // anvil dev key 2
);
const transport = webSocket(relay);
const publicClient = createPublicClient({ chain: foundry, transport });
const wallet = createWalletClient({ account, chain: foundry, transport });

const blocks = [];
// Numbers, not blocks: watchBlocks fetches each block, and viem retries a fetch that close() cuts
// off on a new socket of its own, which then keeps the script running.
const unwatch = publicClient.watchBlockNumber({ onBlockNumber: (number) => blocks.push(number) });
const nonce = await publicClient.getTransactionCount({ address: account.address, blockTag: "pending" });
const hashes = await Promise.all(
  [0, 1, 2].map((i) =>
    wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n, nonce: nonce + i, gas: 21000n }),
  ),
);
const receipts = await Promise.all(hashes.map((hash) => publicClient.waitForTransactionReceipt({ hash })));
console.log(`burst ${receipts.filter((r) => r.status === "success").length} mined`);
while (blocks.length < 2) await new Promise((r) => setTimeout(r, 100));
console.log(`watched ${blocks.length} blocks`);
unwatch();
await (await publicClient.transport.getRpcClient()).close();
