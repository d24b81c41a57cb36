#!/usr/bin/env bash
# Builds the wasm32 Worker into build/worker (shim.mjs + index_bg.wasm) with worker-build.
# Run scripts/setup.sh first (make does).
#
#   bash scripts/build.sh [worker-build args]   the production build (build/), or as the args say
#   bash scripts/build.sh --faults              the tests' build (build-faults/): the test-faults
#                                               feature's hooks (tests/faults.test.mjs)
#
# The tests' build compiles this crate's own code at opt-level 0: under the release profile's fat
# LTO its optimization is one pass on one core (83 s of LLVM, 104 s in all, against 23 s at 0 on
# this machine), and the tests run it for behaviour, not speed. Its dependencies and std keep
# opt-level 3 (a package override leaves their artifacts as they are), so the production build
# after it compiles only the crate again. The production build (build/) is never built this way.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
args=("$@")
if [ "${1:-}" = --faults ]; then
  args=(--out-dir build-faults . --features test-faults --config profile.release.package.nonce-relay.opt-level=0 "${@:2}")
fi
opt=(--no-opt)
[ "${WASM_OPT:-0}" = 1 ] && opt=() && export WASM_OPT_BIN="$ROOT/node_modules/binaryen/bin/wasm-opt"
# shellcheck disable=SC2086
PATH=$WASM_PATH env ${WASM_ENV:-} worker-build --release "${opt[@]}" "${args[@]}"
