#!/usr/bin/env bash
# Clippy on the wasm32-only adapters (src/edge/), which the native `cargo clippy` never compiles:
# rustup's clippy where the wasm32 target is installed, Debian's rust-web-clippy otherwise (with
# the std built from source, in its own target dir; about 8 minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh
if [ "$WASM_TOOLCHAIN" = debian ] && [ ! -x /usr/bin/clippy-driver ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  echo "[lint] installing Debian's rust-web-clippy" >&2
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rust-web-clippy >/dev/null
fi
for features in "" "--features test-faults" "--features bench"; do
  # shellcheck disable=SC2086
  PATH=$WASM_PATH env ${WASM_ENV:-} CARGO_TARGET_DIR=target/wasm-clippy \
    cargo clippy --lib --target wasm32-unknown-unknown $features -- -D warnings
done
