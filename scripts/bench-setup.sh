#!/usr/bin/env bash
# What `make bench-e2e` needs beyond `make setup`: a real redis-server (Debian's package) for the
# Redis design it measures side by side with the relay (tests/bench/redis-relay.mjs).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! command -v redis-server >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  if command -v apt-get >/dev/null 2>&1; then
    echo "[bench-setup] installing Debian's redis-server" >&2
    $SUDO apt-get update -qq
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "[bench-setup] install redis-server (macOS: brew install redis)" >&2
    exit 1
  fi
fi
