// ethers v6 through the relay: read, then send a transaction and wait for it to be mined.
import { JsonRpcProvider, Wallet, parseEther } from "ethers";

const relay = process.env.RELAY_URL ?? "http://127.0.0.1:8787";
const provider = new JsonRpcProvider(relay);
const wallet = new Wallet(
  process.env.PRIVATE_KEY ?? "0x5de4111afa1a4b94908f83103eb1f1706367c2e68ca870fc3fb9a804cdab365a", // anvil dev key 2
  provider,
);

console.log(`chain ${(await provider.getNetwork()).chainId} block ${await provider.getBlockNumber()}`);
console.log(`balance ${await provider.getBalance(wallet.address)}`);
const tx = await wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: parseEther("0.001") });
const receipt = await tx.wait();
console.log("sent", tx.hash, receipt.status);
