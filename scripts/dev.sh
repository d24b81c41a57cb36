#!/usr/bin/env bash
# Runs a local chain (anvil, chain id 31337, on 127.0.0.1:8545) as the upstream and the relay under
# `wrangler dev` on http://127.0.0.1:8787. Ctrl-C stops both.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
ANVIL_PORT=${ANVIL_PORT:-8545}
RELAY_PORT=${RELAY_PORT:-8787}

anvil_pid=""
if (exec 3<>"/dev/tcp/127.0.0.1/$ANVIL_PORT") 2>/dev/null; then
  echo "[dev] something already listens on 127.0.0.1:$ANVIL_PORT; using it as the upstream"
else
  "$ANVIL_BIN" --host 127.0.0.1 --port "$ANVIL_PORT" >.wrangler-anvil.log 2>&1 &
  anvil_pid=$!
  # anvil 1.7.1's pool now and then leaves a transaction of a burst unmined (its pool race, not
  # the relay's): this puts it right and says so, as the tests' harness does.
  "$NODE_BIN" tests/support/anvil-mend.mjs "http://127.0.0.1:$ANVIL_PORT" &
  mend_pid=$!
  trap '[ -n "$anvil_pid" ] && kill "$anvil_pid" "$mend_pid" 2>/dev/null || true' EXIT INT TERM
  echo "[dev] anvil started on 127.0.0.1:$ANVIL_PORT (log: .wrangler-anvil.log)"
fi

# Local secrets for wrangler dev (never committed). Keep an existing file.
if [ ! -f .dev.vars ]; then
  echo "UPSTREAM_RPC_URL=http://127.0.0.1:$ANVIL_PORT" >.dev.vars
  echo "[dev] wrote .dev.vars (UPSTREAM_RPC_URL=http://127.0.0.1:$ANVIL_PORT)"
fi

cat <<MSG
[dev] relay starting on http://127.0.0.1:$RELAY_PORT (about 20 s). Then send a transaction with
      anvil's first dev key:

  $CAST_BIN send --rpc-url http://127.0.0.1:$RELAY_PORT \\
    --private-key 0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80 \\
    0x000000000000000000000000000000000000dEaD --value 1

MSG
"$NODE_BIN" node_modules/wrangler/bin/wrangler.js dev --local --ip 127.0.0.1 --port "$RELAY_PORT"
