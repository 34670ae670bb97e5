# ragd — the two commands: `make demo` and `make test`. Both install missing Debian packages
# (scripts/install-deps.sh), configure and build into build/, then run.
BUILD ?= build
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := 1
export OMP_WAIT_POLICY ?= PASSIVE

.PHONY: all deps configure build test demo fleet-demo fleet-bench bench bench-peers bench-peers-embed tsan asan soak fuzz clean train-model train-quote-model train-draft-model train-termvec eval eval-encoders console-test-deps clients-test-deps retrieval-quality-anchor

all: build

deps:
	@./scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja $(CMAKE_FLAGS)

configure: deps $(BUILD)/build.ninja

build: configure
	cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS) --timeout 900

# The demo builds only what it runs: the daemon, the CLI and the libraries they link (not the tests
# or the benchmarks).
demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target ragd ragctl
	./scripts/demo.sh $(BUILD)

# A fleet on loopback (examples/fleet): Redis as the shared KV tier, a primary that ingests, two
# replicas, HAProxy in front; one replica reuses the KV another computed, a short `ragctl bench`
# through HAProxy, requests per replica and reuse per tier (remote included), then everything stops.
fleet-demo: configure
	cmake --build $(BUILD) -j $(JOBS) --target ragd ragctl
	./examples/fleet/demo.sh $(BUILD)

# The fleet benchmarks (bench/FLEET_BENCH.md): sharing between replicas, the fleet with and without
# the shared tier, Redis killed mid-run, a tiny Redis. Results in $(BUILD)/fleet-bench.
fleet-bench: configure
	cmake --build $(BUILD) -j $(JOBS) --target ragd ragctl
	./scripts/fleet-bench.sh $(BUILD)

bench: build
	./scripts/bench.sh $(BUILD)

# ragd against llama.cpp on the CPU, same weights (converted to GGUF by `ragctl convert-gguf`) and
# same token ids: a greedy-token check at f32 (fails the target on a mismatch), then prefill and
# decode tok/s at f32 / bf16 / f16 / q8 and 1 / 2 threads. llama.cpp comes prebuilt from the npm
# registry (node-llama-cpp, pinned). Knobs: ROUNDS=3, PEERS_FORMATS, PEERS_THREADS, PEERS_PREFILL,
# PEERS_DECODE, PEERS_MODEL (scripts/bench-peers.sh). Table in $(BUILD)/peers/results.md.
bench-peers: build
	./scripts/bench-peers.sh $(BUILD)

# BERT encoders: ragd against llama.cpp's embedding mode on the same weights (same npm build as
# bench-peers). ROUNDS, EMBED_PRESETS, EMBED_TOKENS, EMBED_BATCH, EMBED_PASSAGES, EMBED_THREADS
# (scripts/bench-peers-embed.sh). Table in $(BUILD)/peers/embed-results.md.
bench-peers-embed: build
	./scripts/bench-peers-embed.sh $(BUILD)

# The console's browser test (ctest console_browser, run by `make test`) needs Debian's chromium and
# playwright-core from the npm registry (pinned in tests/console/package-lock.json; no browser
# download). Without them that test skips with a message.
console-test-deps:
	@./scripts/install-deps.sh --browser
	@command -v npm >/dev/null || { echo "console-test-deps: npm is not installed"; exit 1; }
	cd tests/console && npm ci --no-audit --no-fund

# The OpenAI clients' test (ctest openai_clients, run by `make test`): the official openai SDK,
# LangChain.js and LlamaIndex.TS from the npm registry, pinned in tests/clients/package-lock.json.
# Without them that test skips with a message.
clients-test-deps:
	@command -v npm >/dev/null || { echo "clients-test-deps: npm is not installed"; exit 1; }
	cd tests/clients && npm ci --no-audit --no-fund

# Trains the QA model into models/ragd-qa (scripts/train-model.sh): the committed model's recipe
# where PyTorch sees a GPU (4.5 minutes of training on an H200), else the earlier CPU recipe (four
# resumable phases, about 7 hours; TRAIN_RECIPE=gpu|cpu picks). Installs Debian's python3-torch if
# missing.
train-model: build
	./scripts/train-model.sh $(BUILD)

# models/ragd-qa-quote: models/ragd-qa continued on quotation questions (answers that quote their
# passage whole), the copy-heavy workload of speculative decoding (scripts/train-quote-model.sh;
# about 130 minutes on 2 CPU cores, two runs).
train-quote-model: build
	./scripts/train-quote-model.sh $(BUILD)

# models/ragd-draft: a 2-layer draft model for speculative decoding, distilled from
# models/ragd-qa-quote (scripts/train-draft-model.sh; about 35 minutes on one CPU core, seeded).
train-draft-model: build
	./scripts/train-draft-model.sh $(BUILD)

# models/ragd-termvec: the term vectors of hybrid retrieval, trained on Debian's documentation
# packages (installed when missing; scripts/train-termvec.sh; about 3 minutes on 2 CPU cores).
train-termvec:
	./scripts/train-termvec.sh

# Answer accuracy (exact match, F1) of models/ragd-qa on the held-out set: every exact reuse mode,
# and full prefill vs naive concatenation vs CacheBlend vs EPIC.
eval: build
	./scripts/eval.sh $(BUILD)

# The QA set end to end with a BERT embedder and a cross-encoder (random bge-small shapes) beside
# the hashing embedder and the generator's reranker: EM, gold@k, TTFT (scripts/eval-encoders.sh).
eval-encoders: build
	./scripts/eval-encoders.sh $(BUILD)

# The retrieval-quality benchmark's anchor (bench/retrieval-quality): installs the two document
# sets from Debian packages if missing (python3.11-doc's library reference, bash-doc's
# bashref.pdf), runs Xapian stand-alone on them (defaults and probe variants) and scores every
# ranking with score.py. Rankings and summaries in bench/retrieval-quality/results. Not part of
# `make test`; builds nothing.
retrieval-quality-anchor:
	./bench/retrieval-quality/run-anchor.sh

# ThreadSanitizer build of the concurrent modules, run on their tests.
tsan: deps
	cmake -S . -B build-tsan -G Ninja -DRAGD_TSAN=ON -DRAGD_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-tsan -j $(JOBS) --target test_common $(shell ls tests | sed -n 's/^kvstore$$/test_kvstore/p')
	cd build-tsan && TSAN_OPTIONS="halt_on_error=1" ctest --output-on-failure -L 'common|kvstore'

# AddressSanitizer + UndefinedBehaviorSanitizer build of everything (build-asan), run on the whole
# suite; any report fails the test that triggered it.
asan: deps
	cmake -S . -B build-asan -G Ninja -DRAGD_ASAN=ON -DRAGD_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
	cmake --build build-asan -j $(JOBS)
	cd build-asan && ASAN_OPTIONS="detect_leaks=1:abort_on_error=1" UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" \
	  ctest --output-on-failure -j $(JOBS) --timeout 1800

# The long soak (bench/soak_bench.cpp against a real daemon on loopback): SOAK_CLIENTS concurrent
# clients for SOAK_SECONDS, a third of the streams dropped and a third cancelled, uploads mixed in;
# fails unless the daemon is idle again with every KV block back, counters consistent, /healthz
# answered throughout and resident memory within 5 % of steady state.
SOAK_CLIENTS ?= 256
SOAK_SECONDS ?= 60
soak: build
	./tests/daemon/soak_check.sh $(BUILD)/bin/ragd $(BUILD)/bin/ragctl $(BUILD)/bin/bench_soak $(SOAK_CLIENTS) $(SOAK_SECONDS) 0.05

# libFuzzer campaigns over every parser (fuzz/): clang 14 with ASan + UBSan in build-fuzz, only the
# fuzz targets and the sources they need; each target runs FUZZ_SECONDS on a copy of its seed corpus.
# Summary table in build-fuzz/fuzz-results.md; fails when a target crashed. FUZZ_TARGETS="a b" for
# some of them. The replay-mode smoke tests (ctest -L fuzz) are part of `make test`.
FUZZ_SECONDS ?= 60
FUZZ_TARGETS ?=
FUZZ_JOBS ?= $(JOBS)
fuzz:
	@./scripts/install-deps.sh --fuzz
	cmake -S . -B build-fuzz -G Ninja -DRAGD_FUZZ=ON -DRAGD_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_C_COMPILER=/usr/bin/clang -DCMAKE_CXX_COMPILER=/usr/bin/clang++
	cmake --build build-fuzz -j $(FUZZ_JOBS) --target ragd_fuzz_all
	./fuzz/run_fuzz.sh build-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) build-tsan build-asan build-fuzz
