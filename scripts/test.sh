#!/usr/bin/env bash
# `make test`: every test, the native core's (`cargo test`) and the worker's on workerd
# (tests/*.test.mjs through scripts/e2e.mjs), with the steps that can overlap overlapped:
#   1. the native build and tests (target/native) beside the wasm32 build (build/): the wasm
#      build's last step, the release crate under LTO in one codegen unit, uses one core;
#   2. the end-to-end files start once build/ is there, beside the test-faults build
#      (build-faults/), which again uses one core; the files that run it wait for it
#      (E2E_WAIT_FOR).
# The native output is printed once it ends; each step's time at the end. Run scripts/setup.sh
# first (make does). Exit status: the first step that failed.
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
mkdir -p target
# A step that fails ends the run: what runs beside it in the background ends with it.
trap 'kill $(jobs -p) 2>/dev/null || true' EXIT
started=$(date +%s)
times=()
mark() { times+=("$(printf '  %-44s %5d s' "$1" $(($(date +%s) - $2)))"); }

native_log=target/test-native.log
native_started=$(date +%s)
(
  # Built first, then run: the tests' own time is then theirs alone.
  CARGO_TARGET_DIR=target/native cargo test --no-run
  echo "[test] native build done in $(($(date +%s) - native_started)) s"
  CARGO_TARGET_DIR=target/native cargo test
) >"$native_log" 2>&1 &
native=$!

wasm_started=$(date +%s)
bash scripts/build.sh
mark "wasm32 build (build/)" "$wasm_started"

faults_started=$(date +%s)
rm -f build-faults/.built
(
  mkdir -p build-faults
  if bash scripts/build.sh --out-dir build-faults . --features test-faults; then
    date +%s >build-faults/.built
  else
    echo failed >build-faults/.built
    exit 1
  fi
) >target/test-faults-build.log 2>&1 &
faults=$!

native_status=0
wait "$native" || native_status=$?
cat "$native_log"
mark "native build and tests (beside the wasm build)" "$native_started"
if [ "$native_status" != 0 ]; then
  kill "$faults" 2>/dev/null || true
  echo "[test] native tests failed" >&2
  exit "$native_status"
fi

e2e_started=$(date +%s)
e2e_status=0
E2E_WAIT_FOR=build-faults/.built "$NODE_BIN" scripts/e2e.mjs || e2e_status=$?
faults_status=0
wait "$faults" || faults_status=$?
cat target/test-faults-build.log
if [ "$faults_status" = 0 ]; then
  times+=("$(printf '  %-44s %5d s' "test-faults build (build-faults/)" $(($(cat build-faults/.built) - faults_started)))")
fi
mark "end-to-end (scripts/e2e.mjs)" "$e2e_started"
mark "make test, all" "$started"

echo
echo "make test step times:"
printf '%s\n' "${times[@]}"
[ "$faults_status" = 0 ] || { echo "[test] the test-faults build failed" >&2; exit "$faults_status"; }
exit "$e2e_status"
