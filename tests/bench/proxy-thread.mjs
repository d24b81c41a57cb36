// A strict-nonce test proxy (tests/support/harness.mjs `startProxy`) in a thread of its own, so
// that two chains' test upstreams do not share one event loop with each other and with the
// bench's client: the bench measures the relay, and a test upstream must not be its bottleneck.
// The proxy answers each eth_sendRawTransaction after `latencyMs`; the bench tells it each raw
// transaction's sender (`know`) and reads what reached it (`seen`).
import { Worker, isMainThread, parentPort, workerData } from "node:worker_threads";

if (!isMainThread) {
  const { startProxy } = await import("../support/harness.mjs");
  const senders = new Map();
  const proxy = await startProxy({
    upstream: workerData.upstream,
    strictNonce: true,
    latency: (req) => (req?.method === "eth_sendRawTransaction" ? workerData.latencyMs : 0),
    senderOf: (raw) => senders.get(raw),
  });
  parentPort.on("message", async (m) => {
    if (m.know) for (const [raw, sender] of m.know) senders.set(raw, sender);
    if (m.seen) parentPort.postMessage({ id: m.id, seen: proxy.seen.map(({ sender, nonce, accepted }) => ({ sender, nonce, accepted })) });
    if (m.know) parentPort.postMessage({ id: m.id });
    if (m.stop) {
      await proxy.stop();
      parentPort.postMessage({ id: m.id });
    }
  });
  parentPort.postMessage({ url: proxy.url });
}

/**
 * Starts the proxy in a thread in front of `upstream`: { url, know(entries) (raw -> sender,
 * lowercase), seen() (the transactions that reached it: { sender, nonce, accepted }), stop() }.
 */
export async function startProxyThread({ upstream, latencyMs }) {
  const worker = new Worker(new URL(import.meta.url), { workerData: { upstream, latencyMs } });
  const url = await new Promise((resolve, reject) => {
    worker.once("message", (m) => resolve(m.url));
    worker.once("error", reject);
  });
  let next = 0;
  const waiting = new Map();
  worker.on("message", (m) => {
    if (m.id !== undefined) {
      waiting.get(m.id)?.(m);
      waiting.delete(m.id);
    }
  });
  const ask = (message) =>
    new Promise((resolve) => {
      const id = ++next;
      waiting.set(id, resolve);
      worker.postMessage({ ...message, id });
    });
  return {
    url,
    know: (entries) => ask({ know: entries }),
    seen: async () => (await ask({ seen: true })).seen,
    stop: async () => {
      await ask({ stop: true });
      await worker.terminate();
    },
  };
}
