#!/usr/bin/env bash
# `make test`: every test, the native core's (`cargo test`) and the worker's on workerd
# (tests/*.test.mjs through scripts/e2e.mjs), in this order:
#   1. the native build (target/native: `cargo test --no-run`);
#   2. the wasm32 build with the test-faults feature (build-faults/; scripts/build.sh --faults);
#   3. the production wasm32 build (build/), last, so that cargo's release artifact is the one
#      tests/deploy.test.mjs builds again (it then only optimizes it); beside it the native tests
#      run, as its last step (the crate under LTO in one codegen unit) uses one core;
#   4. the end-to-end files (scripts/e2e.mjs; E2E_JOBS at a time, each file's time at the end).
# On 2 cores, two builds side by side took longer than one after the other. The native tests'
# output is printed once they end; each step's time at the end. Run scripts/setup.sh first (make
# does). Exit status: the first step that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
mkdir -p target
# A step that fails ends the run: what runs beside it in the background ends with it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
started=$(date +%s)
times=()
mark() { times+=("$(printf '  %-40s %5d s' "$1" $(($(date +%s) - $2)))"); }
report() {
  echo
  echo "make test step times:"
  printf '%s\n' "${times[@]}"
}

step=$(date +%s)
CARGO_TARGET_DIR=target/native cargo test --no-run
mark "native build" "$step"

step=$(date +%s)
bash scripts/build.sh --faults
mark "wasm32 build, test-faults (build-faults/)" "$step"

step=$(date +%s)
native_log=target/test-native.log
(
  started_tests=$(date +%s)
  status=0
  CARGO_TARGET_DIR=target/native cargo test || status=$?
  echo "[test] native tests: $(($(date +%s) - started_tests)) s"
  exit "$status"
) >"$native_log" 2>&1 &
native=$!
bash scripts/build.sh
mark "wasm32 build (build/)" "$step"
native_status=0
wait "$native" || native_status=$?
cat "$native_log"
mark "native tests (beside the build/ build)" "$step"
if [ "$native_status" != 0 ]; then
  report
  echo "[test] native tests failed" >&2
  exit "$native_status"
fi

step=$(date +%s)
e2e_status=0
"$NODE_BIN" scripts/e2e.mjs || e2e_status=$?
mark "end-to-end (scripts/e2e.mjs)" "$step"
mark "make test, after setup" "$started"
report
if [ "$e2e_status" != 0 ]; then
  echo
  cat target/e2e-failures.txt 2>/dev/null || true
fi
exit "$e2e_status"
