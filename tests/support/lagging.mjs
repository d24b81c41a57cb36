// What the lagging-upstream tests share (tests/lagging.test.mjs, tests/lagging-head.test.mjs):
// anvil mining a block a second with a log emitter called about every block, and a WebSocket
// upstream that never announces a head.
import { randomBytes } from "node:crypto";
import { WebSocketServer } from "ws";
import { keccak256, stringToHex } from "viem";
import { startAnvil, post, rpc, sleep, devAccount, freePort } from "./harness.mjs";

export const call = (method, params = [], id = 1) => ({ jsonrpc: "2.0", id, method, params });
export const quantity = (n) => `0x${n.toString(16)}`;
export const from = devAccount(0).address;
/** The emitter's one event: LOG1 with this topic and no data, on every call. */
export const TOPIC = keccak256(stringToHex("Ping()"));
// Init code (PUSH1 37 DUP1 PUSH1 9 PUSH0 CODECOPY PUSH0 RETURN) returning the 37-byte runtime
// PUSH32 topic PUSH0 PUSH0 LOG1 STOP.
export const EMITTER_INIT = `0x60258060095f395ff37f${TOPIC.slice(2)}5f5fa100`;
/** An address no log comes from: a filter a bloom check answers `[]` for. */
export const NOWHERE = "0x000000000000000000000000000000000000dead";
/** MAX_HEAD_LAG, the relay's default. */
/** CACHE_HEAD_MS, its default, ms. */
export const HEAD_MS = 1000;
export const MAX_HEAD_LAG = 2;
/** The slow tail's late answers in the two-upstream test, ms. */
export const LATE_MS = 1500;

/** anvil (a block a second unless `instant`; 100 blocks mined first so that `finalized` is above
 * genesis), the emitter deployed, and a call to it about every block (eth_sendTransaction from dev
 * account 0 straight to anvil) until stop(). */
export async function chain({ chainId, instant = false } = {}) {
  const args = [...(instant ? [] : ["--block-time", "1"]), ...(chainId ? ["--chain-id", String(chainId)] : [])];
  const anvil = await startAnvil({ accounts: 2, extraArgs: args });
  const ask = async (method, params = []) => (await rpc(anvil.url, method, params)).result;
  const deploy = await ask("eth_sendTransaction", [{ from, data: EMITTER_INIT }]);
  await ask("anvil_mine", ["0x1"]);
  await ask("anvil_mine", ["0x64"]);
  const emitter = (await ask("eth_getTransactionReceipt", [deploy])).contractAddress;
  let running = !instant;
  const calls = (async () => {
    while (running) {
      await ask("eth_sendTransaction", [{ from, to: emitter }]);
      await sleep(900);
    }
  })();
  return {
    anvil,
    ask,
    emitter,
    head: async () => Number(await ask("eth_blockNumber")),
    stop: async () => {
      running = false;
      await calls;
      anvil.stop();
    },
  };
}

/**
 * A node's WebSocket that accepts eth_subscribe("newHeads") and never announces a head (a stuck
 * node's, or one whose subscription feed stalled while its socket stays open); every other request
 * on it is answered by `upstream` over HTTP. `subscriptions` records the params subscribed.
 */
export async function silentWebSocket(upstream) {
  const port = await freePort();
  const server = new WebSocketServer({ host: "127.0.0.1", port });
  const subscriptions = [];
  const one = async (m) => {
    if (m?.method === "eth_subscribe") {
      subscriptions.push(m.params);
      return { jsonrpc: "2.0", id: m.id, result: `0x${randomBytes(16).toString("hex")}` };
    }
    if (m?.method === "eth_unsubscribe") return { jsonrpc: "2.0", id: m.id, result: true };
    return (await post(upstream, m)).json;
  };
  server.on("connection", (socket) => {
    socket.on("error", () => {});
    socket.on("message", async (data) => {
      let message;
      try {
        message = JSON.parse(String(data));
      } catch {
        return;
      }
      const answer = Array.isArray(message) ? await Promise.all(message.map(one)) : await one(message);
      if (socket.readyState === socket.OPEN) socket.send(JSON.stringify(answer));
    });
  });
  await new Promise((resolve) => server.on("listening", resolve));
  return {
    url: `ws://127.0.0.1:${port}`,
    subscriptions,
    connections: () => server.clients.size,
    stop: () => new Promise((resolve) => (server.clients.forEach((s) => s.terminate()), server.close(resolve))),
  };
}
