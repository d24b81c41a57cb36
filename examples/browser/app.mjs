// In a page: reads and a transaction through the relay, cross-origin (the relay answers CORS).
// The relay's URL and a test key come from the page's query (?relay=...&key=...); a real dapp
// signs with its own key or the user's wallet and sends the signed bytes the same way.
import { createPublicClient, createWalletClient, http } from "viem";
import { privateKeyToAccount } from "viem/accounts";
import { foundry } from "viem/chains";

const query = new URLSearchParams(location.search);
const relay = query.get("relay") ?? "http://127.0.0.1:8787";
const account = privateKeyToAccount(query.get("key"));
const publicClient = createPublicClient({ chain: foundry, transport: http(relay) });
const wallet = createWalletClient({ account, chain: foundry, transport: http(relay) });
const result = document.getElementById("result");

try {
  const block = await publicClient.getBlockNumber();
  const hash = await wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n });
  const receipt = await publicClient.waitForTransactionReceipt({ hash });
  result.textContent = JSON.stringify({ block: String(block), hash, status: receipt.status });
} catch (e) {
  result.textContent = JSON.stringify({ error: String(e.shortMessage ?? e.message) });
}
