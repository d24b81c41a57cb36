#!/usr/bin/env node
// The operator's tool for API keys (docs/keys.md): the relay's admin API, behind ADMIN_TOKEN.
//
//   npm run keys -- create --chains 1,8453 --per-day 100000 [--label "dapp"] [--methods eth_call,eth_get*]
//                          [--deny-methods eth_getLogs] [--contracts 0x…,0x…] [--senders 0x…]
//                          [--origins https://app.example] [--ips 203.0.113.7] [--per-month N]
//                          [--tier pro] [--publish never|client|N]
//   npm run keys -- list
//   npm run keys -- show k_0123456789abcdef
//   npm run keys -- update k_0123456789abcdef --per-day 5000     (what it names changes; the rest stays)
//   npm run keys -- revoke k_0123456789abcdef
//
// The relay's URL and token come from RELAY_URL and ADMIN_TOKEN (or --url and --token). `create`
// prints the key once: the relay keeps only its hash. Exit status 1 with the relay's error.
import { parseArgs } from "node:util";

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    url: { type: "string" },
    token: { type: "string" },
    label: { type: "string" },
    chains: { type: "string" },
    methods: { type: "string" },
    "deny-methods": { type: "string" },
    contracts: { type: "string" },
    senders: { type: "string" },
    origins: { type: "string" },
    ips: { type: "string" },
    "per-day": { type: "string" },
    "per-month": { type: "string" },
    tier: { type: "string" },
    publish: { type: "string" },
  },
});
const [command, id] = positionals;
const url = (values.url ?? process.env.RELAY_URL ?? "").replace(/\/$/, "");
const token = values.token ?? process.env.ADMIN_TOKEN;
if (!url || !token || !command) {
  console.error("usage: RELAY_URL=https://… ADMIN_TOKEN=… npm run keys -- create|list|show|update|revoke [id] [--chains 1,8453 --per-day N ...]");
  process.exit(2);
}

const list = (v) => v?.split(",").map((s) => s.trim()).filter(Boolean);
const count = (v) => {
  if (v === undefined) return undefined;
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new Error(`not a count: ${v}`);
  return n;
};

/** The change the flags name: only what they name (an update leaves the rest). */
function change() {
  const scope = {
    chains: list(values.chains)?.map((c) => count(c)),
    methods: list(values.methods),
    deny_methods: list(values["deny-methods"]),
    contracts: list(values.contracts),
    senders: list(values.senders),
    origins: list(values.origins),
    ips: list(values.ips),
  };
  const quota = { per_day: count(values["per-day"]), per_month: count(values["per-month"]) };
  const body = {};
  if (values.label !== undefined) body.label = values.label;
  // The tier's bindings are RATE_LIMIT_SEND_{TIER} and RATE_LIMIT_READ_{TIER} ("" for the default).
  if (values.tier !== undefined) body.tier = values.tier;
  // Behind a private route: never published, the client's ?public_after_blocks=N, or after N blocks.
  if (values.publish !== undefined) {
    body.publish = ["never", "client"].includes(values.publish) ? values.publish : { after_blocks: count(values.publish) };
  }
  if (Object.values(scope).some((v) => v !== undefined)) body.scope = Object.fromEntries(Object.entries(scope).filter(([, v]) => v !== undefined));
  if (Object.values(quota).some((v) => v !== undefined)) body.quota = Object.fromEntries(Object.entries(quota).filter(([, v]) => v !== undefined));
  return body;
}

async function admin(method, path, body) {
  const response = await fetch(`${url}/admin/keys${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = { error: text };
  }
  if (!response.ok) {
    console.error(`HTTP ${response.status}: ${json.error ?? text}`);
    process.exit(1);
  }
  return json;
}

let result;
switch (command) {
  case "create":
    result = await admin("POST", "", change());
    break;
  case "list":
    result = await admin("GET", "");
    break;
  case "show":
    result = await admin("GET", `/${id}`);
    break;
  case "update":
    if (values.chains === undefined && Object.keys(change()).length === 0) {
      console.error("update: name what changes (--per-day, --chains, ...)");
      process.exit(2);
    }
    // A scope flag replaces the whole scope: the others are read first and kept.
    {
      const body = change();
      if (body.scope) body.scope = { ...(await admin("GET", `/${id}`)).record.scope, ...body.scope };
      if (body.quota) body.quota = { ...(await admin("GET", `/${id}`)).record.quota, ...body.quota };
      result = await admin("PATCH", `/${id}`, body);
    }
    break;
  case "revoke":
    result = await admin("DELETE", `/${id}`);
    break;
  default:
    console.error(`unknown command ${command}: create, list, show, update, revoke`);
    process.exit(2);
}
console.log(JSON.stringify(result, null, 2));
