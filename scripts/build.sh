#!/usr/bin/env bash
# Builds the wasm32 Worker into build/worker (shim.mjs + index_bg.wasm) with worker-build.
# Run scripts/setup.sh first (make does).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
opt=(--no-opt)
[ "${WASM_OPT:-0}" = 1 ] && opt=() && export WASM_OPT_BIN="$ROOT/node_modules/binaryen/bin/wasm-opt"
# shellcheck disable=SC2086
PATH=$WASM_PATH env ${WASM_ENV:-} worker-build --release "${opt[@]}" "$@"
