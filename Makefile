# make dev  : install what is missing, build, run anvil + the relay on http://127.0.0.1:8787
# make test : install what is missing, run every test (native core + the wasm worker on workerd)
SHELL := bash
.DEFAULT_GOAL := help
# Native builds of the core keep their own target dir, apart from the wasm32 build's.
NATIVE := CARGO_TARGET_DIR=target/native

.PHONY: help setup build dev test test-native test-e2e bench bench-e2e soak soak-cache fuzz fmt lint clean

help:
	@echo "make dev    - run anvil and the relay locally (http://127.0.0.1:8787)"
	@echo "make test   - run every test"
	@echo "make build  - build the wasm worker into build/"
	@echo "make lint   - cargo fmt --check and clippy (native, and the wasm32 adapters)"
	@echo "make fuzz   - fuzz the decoder for FUZZ_SECONDS (default 1800)"
	@echo "make soak   - every fault at once (outages, a kill, pool drops, lost answers, copies), 10 senders x 30, for SEEDS seeds from SEED_FROM (default 20 from 1)"
	@echo "make soak-cache - the read cache through a reorg every 3-7 s (depth 1-6) for DURATION_S (default 120): no read begun after a reorg names a block it replaced (CACHE_HEAD_WATCH=off: after CACHE_HEAD_MS + 0.5 s)"
	@echo "make bench  - decoding cost native vs wasm on workerd, and the wasm size"
	@echo "make bench-e2e - S senders x N transactions: limit, relay, Redis design (SENDERS, TXS, LATENCY_MS), behind a strict upstream, a private route (ROUTE=private: 1 x 20) and a mempool one (UPSTREAM, SEND_WINDOW: 1 x 40, 1 x 200, 20 x 20), 1 x 40 under production's six-connection cap (CONNECTION_CAP); one sender at 50/s for 120 s and the rows written per transaction (RATE, DURATION_S); a lone transaction's bill, 1,000 fresh senders at LATENCY_MS 50 and 250 beside a busy sender (tests/bench/lone.mjs); idle WebSockets (SOCKETS, IDLE_S); what hostile WebSocket clients make an isolate keep (SUBS, LOGS); the read cache behind nodes that lag: dense blooms, a 12 MB eth_getLogs, identical reads in flight (tests/bench/cache-proof.mjs; PART=trace with BASE_BUILD compares a build's dapp trace); eth_getLogs over 50,000 blocks behind a 1,000-block cap beside a client splitting by itself (tests/bench/getlogs.mjs)"

setup:
	@bash scripts/setup.sh

build: setup
	@bash scripts/build.sh

test-native: setup
	$(NATIVE) cargo test

# The e2e tests also run build-faults/: the same worker with the test-faults feature. The files run
# side by side, E2E_JOBS at a time (scripts/e2e.mjs; default 5), each file's time printed at the end;
# FILES picks some (`make test-e2e FILES="tests/relay.test.mjs tests/cache.test.mjs"`).
# build/ is built last: cargo's release artifact is then the one tests/deploy.test.mjs builds again.
test-e2e: setup
	@bash scripts/build.sh --faults
	@bash scripts/build.sh
	@. scripts/env.sh && "$$NODE_BIN" scripts/e2e.mjs $(FILES)

# Both (scripts/test.sh): the native build, the two wasm32 builds, the native tests beside the last
# of them, then the end-to-end files; each step's time at the end.
test: setup
	@bash scripts/test.sh

dev: build
	@bash scripts/dev.sh

# Decode + hash + recover per type: criterion natively, the bench-feature worker on workerd, and
# the size of the optimized worker. The table goes into BENCHMARKS.md.
bench: setup
	$(NATIVE) cargo bench -p nonce-relay-bench --bench decode --bench keys -- --noplot
	@WASM_OPT=1 bash scripts/build.sh --out-dir build-bench . --features bench
	@WASM_OPT=1 bash scripts/build.sh --out-dir build-size
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/decode-report.mjs

# The relay under load against the measured serialized limit and the Redis design, side by side,
# with full accounting (tests/bench/e2e.mjs; SENDERS, TXS, LATENCY_MS); one sender's 20 through the
# stand-in private route (ROUTE=private).
bench-e2e: build
	@bash scripts/bench-setup.sh
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && ROUTE=private SENDERS=1 "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && UPSTREAM=mempool SENDERS=1 TXS=40 "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/getlogs.mjs
	@. scripts/env.sh && UPSTREAM=mempool SENDERS=1 TXS=40 CONNECTION_CAP=6 "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && UPSTREAM=mempool SENDERS=1 TXS=200 MAX_QUEUE_PER_SENDER=256 "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && UPSTREAM=mempool SENDERS=20 TXS=20 "$$NODE_BIN" tests/bench/e2e.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/chains.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/cache.mjs
	@. scripts/env.sh && PART=blooms,large,followers "$$NODE_BIN" tests/bench/cache-proof.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/sustained.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/rows.mjs
	@. scripts/env.sh && LATENCY_MS=50 "$$NODE_BIN" tests/bench/lone.mjs
	@. scripts/env.sh && LATENCY_MS=250 "$$NODE_BIN" tests/bench/lone.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/ws-idle.mjs
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/ws-memory.mjs

# Every fault at once (tests/support/every-fault.mjs), one seed after another: each must end with
# every client's hash and every transaction mined exactly once. `make test` runs one seed
# (tests/every-fault.test.mjs). SEEDS, SEED_FROM, SENDERS, TXS, KEEP_DIR.
soak: build
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/soak.mjs

# The read cache through many reorgs (tests/bench/cache-soak.mjs): `make test` has one
# (tests/cache-reorg.test.mjs). DURATION_S, READERS, SEED.
soak-cache: build
	@. scripts/env.sh && "$$NODE_BIN" tests/bench/cache-soak.mjs

# libFuzzer on the decoder (fuzz/), with rustup's stable toolchain in nightly mode. New inputs go to
# fuzz/corpus-work; the committed seeds in fuzz/corpus/decode are only read.
FUZZ_SECONDS ?= 1800
fuzz:
	@. scripts/env.sh && mkdir -p fuzz/corpus-work && \
	  { [ -x "$$TOOLS_DIR/bin/cargo-fuzz" ] || cargo install -q cargo-fuzz --version =0.13.2 --locked --root "$$TOOLS_DIR"; } && \
	  RUSTC_BOOTSTRAP=1 "$$TOOLS_DIR/bin/cargo-fuzz" fuzz run --sanitizer none decode fuzz/corpus-work fuzz/corpus/decode -- \
	    -max_total_time=$(FUZZ_SECONDS) -timeout=2 -rss_limit_mb=2048 -max_len=262144 -print_final_stats=1

fmt:
	cargo fmt

lint: setup
	cargo fmt --check
	$(NATIVE) cargo clippy --workspace --all-targets -- -D warnings
	@bash scripts/lint-wasm.sh

clean:
	rm -rf target build .wrangler
