# Sourced by the Makefile's scripts: tool locations and the wasm32 build environment.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WORKER_BUILD_VERSION=0.8.7
export WASM_BINDGEN_VERSION=0.2.130
# Host tools built from source live outside the checkout so a fresh clone on the same machine reuses them.
export TOOLS_DIR=${TOOLS_DIR:-$HOME/.cache/nonce-relay/tools}
export ANVIL_BIN=$ROOT/node_modules/@foundry-rs/anvil-linux-amd64/bin/anvil
export CAST_BIN=$ROOT/node_modules/@foundry-rs/cast-linux-amd64/bin/cast
export WASM_BINDGEN_BIN=$TOOLS_DIR/bin/wasm-bindgen
export ESBUILD_BIN=$ROOT/node_modules/@esbuild/linux-x64/bin/esbuild
export WRANGLER_SEND_METRICS=false WRANGLER_SEND_ERROR_REPORTS=false CLOUDFLARE_CF_FETCH_ENABLED=false

# Detect, do not assume: rustup's wasm32 target when installed, Debian's toolchain otherwise.
if command -v rustup >/dev/null 2>&1 && rustup target list --installed 2>/dev/null | grep -qx wasm32-unknown-unknown; then
  export WASM_TOOLCHAIN=rustup
  export WASM_PATH=$TOOLS_DIR/bin:$PATH
else
  export WASM_TOOLCHAIN=debian
  # /usr/bin first, or rustup's rustc is picked and worker-build tries `rustup target add`.
  export WASM_PATH=/usr/bin:$TOOLS_DIR/bin:$PATH
  export WASM_ENV="RUSTC_BOOTSTRAP=1 CARGO_UNSTABLE_BUILD_STD=std,panic_abort"
fi
