#!/usr/bin/env bash
# Installs what building and testing the relay needs, idempotently. Safe to run again: each step
# checks first and skips what is already there.
#
#   - a wasm32 Rust toolchain: rustup's wasm32-unknown-unknown target when it is installed, otherwise
#     Debian's rustc-web/cargo-web with the std sources (the std is then built with -Zbuild-std);
#   - worker-build and wasm-bindgen-cli (pinned, built from source once) into $TOOLS_DIR;
#   - the npm packages of package.json: wrangler, miniflare (workerd), anvil, cast, esbuild, binaryen,
#     viem, ethers, playwright-core, and Node 22 for them as this platform's node package (linux x64
#     and arm64, macOS x64; elsewhere the system's node must be >= 22.12: scripts/env.sh picks);
#   - a Chromium for the browser test (Debian's `chromium` where apt-get exists).
set -euo pipefail
cd "$(dirname "$0")/.."
. scripts/env.sh

log() { printf '[setup] %s\n' "$*" >&2; }
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"

if [ "$WASM_TOOLCHAIN" = rustup ]; then
  log "wasm32 toolchain: rustup's wasm32-unknown-unknown target"
else
  if ! dpkg -s rustc-web cargo-web rust-web-src lld lld-22 >/dev/null 2>&1; then
    log "wasm32 toolchain: installing Debian's rustc-web, cargo-web, rust-web-src, lld, lld-22 (rust-lld)"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq rustc-web cargo-web rust-web-src lld lld-22 >/dev/null
  fi
  # worker-build asks rustc for the wasm32 target-libdir and refuses to run when it is missing; the
  # std is compiled from source, so an empty folder is enough.
  libdir=$(/usr/bin/rustc --print sysroot)/lib/rustlib/wasm32-unknown-unknown/lib
  [ -d "$libdir" ] || $SUDO mkdir -p "$libdir"
  log "wasm32 toolchain: Debian $(/usr/bin/rustc --version) with -Zbuild-std"
fi

mkdir -p "$TOOLS_DIR"
# Host tools are built with the host's normal cargo (rustup's when present).
host_cargo=$(command -v cargo)
# worker-build 0.8 prints its bare version (`0.8.7`); older ones printed `worker-build 0.x.y`.
worker_build_version=$("$TOOLS_DIR/bin/worker-build" --version 2>/dev/null || true)
if [ "${worker_build_version#worker-build }" != "$WORKER_BUILD_VERSION" ]; then
  log "building worker-build $WORKER_BUILD_VERSION (a few minutes, once)"
  "$host_cargo" install -q worker-build --version "=$WORKER_BUILD_VERSION" --locked --root "$TOOLS_DIR"
fi
if [ "$("$TOOLS_DIR/bin/wasm-bindgen" --version 2>/dev/null || true)" != "wasm-bindgen $WASM_BINDGEN_VERSION" ]; then
  log "building wasm-bindgen-cli $WASM_BINDGEN_VERSION (a few minutes, once)"
  # Not --locked: its lock file names crate versions the reachable index may not have yet.
  "$host_cargo" install -q wasm-bindgen-cli --version "=$WASM_BINDGEN_VERSION" --root "$TOOLS_DIR"
fi

if [ ! -x node_modules/.bin/wrangler ] || [ ! -x "${ANVIL_BIN:-}" ] || [ -z "$NODE_BIN" ] ||
  [ package-lock.json -nt node_modules/.package-lock.json ]; then
  log "installing npm packages"
  # `npm install`, not `npm ci`: the anvil and cast packages list their other-platform binaries
  # with empty versions, which package-lock.json cannot record, so `npm ci` calls it out of sync.
  # The lock file still pins every version that is installed.
  # npm may run on an older node (Debian's 20): wrangler's and miniflare's engines then only warn,
  # and they run on the node package installed here.
  npm install --no-audit --no-fund --loglevel=error
  . scripts/env.sh
fi
if [ -z "$NODE_BIN" ]; then
  log "no Node >= $NODE_MIN_VERSION: wrangler and miniflare need it, and no node package of this"
  log "platform ($(uname -s) $(uname -m)) is in node_modules. Install Node 22 (macOS: brew install"
  log "node@22), or set NODE_BIN to one, and run this again."
  exit 1
fi
log "node for wrangler, miniflare and the tests: $NODE_BIN ($("$NODE_BIN" --version))"

if [ -z "$CHROMIUM_BIN" ]; then
  if command -v apt-get >/dev/null 2>&1; then
    log "installing Debian's chromium (the browser test runs a page in it, headless)"
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  else
    log "no Chromium found: install one (macOS: brew install --cask chromium) or set CHROMIUM_BIN"
  fi
fi
log "ready"
