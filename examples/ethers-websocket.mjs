// ethers v6 over the relay's WebSocket: new blocks as they come, and a transaction sent on the same
// socket.
import { WebSocketProvider, Wallet } from "ethers";

const relay = (process.env.RELAY_URL ?? "http://127.0.0.1:8787").replace(/^http/, "ws");
const provider = new WebSocketProvider(relay);
const wallet = new Wallet(
  process.env.PRIVATE_KEY ?? "0x7c852118294e51e653712a81e05800f419141751be58f605c371e15141b007a6", // anvil dev key 3
  provider,
);

let blocks = 0;
await provider.on("block", (number) => {
  blocks += 1;
  console.log(`block ${number}`);
});
const tx = await wallet.sendTransaction({ to: "0x000000000000000000000000000000000000dEaD", value: 1n });
const receipt = await tx.wait();
console.log(`sent ${tx.hash} ${receipt.status}`);
while (blocks < 2) await new Promise((r) => setTimeout(r, 100));
await provider.destroy();
