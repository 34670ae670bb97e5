#!/usr/bin/env bash
# make bench: runs every benchmark that was built, each printing ratios against a baseline measured
# in the same run. The exact command of each figure in docs/benchmarks.md is given there too.
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
run() { local name=$1; shift; if [[ -x "$BIN/$name" ]]; then echo "== $name $*"; "$BIN/$name" "$@"; else echo "== $name: not built, skipped"; fi; }
run bench_engine
run bench_sampler
run bench_kvstore
run bench_retrieval
run bench_e2e
if [[ -x bench/http_bench.sh ]]; then echo "== http"; bench/http_bench.sh "$BUILD"; fi
