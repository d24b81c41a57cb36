#!/usr/bin/env bash
# cast (Foundry) through the relay: read, then send a transaction and wait for its receipt.
set -euo pipefail
RELAY_URL=${RELAY_URL:-http://127.0.0.1:8787}
PRIVATE_KEY=${PRIVATE_KEY:-0xac0974bec39a17e36ba4a6b4d238ff944bacb478cbed5efcae784d7bf4f2ff80} # anvil's first dev key

cast chain-id --rpc-url "$RELAY_URL"
cast block-number --rpc-url "$RELAY_URL"
cast send --rpc-url "$RELAY_URL" --private-key "$PRIVATE_KEY" \
  0x000000000000000000000000000000000000dEaD --value 1wei --json
