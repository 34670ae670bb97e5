#!/usr/bin/env bash
# Simulator validation: one `ragctl bench` run against a fresh ragd (empty KV cache) per call,
# on this machine, with the daemon config the simulation reads. Timing runs hold the build lock so
# that no build of ours runs beside them.
#   bench/sim/validate.sh NAME CONFIG TOPICS -- BENCH_ARGS...
# TOPICS: the synthetic corpus (TOPICS x 4 documents, `ragctl bench --ingest-synthetic`), ingested
# once into $VAL_DIR/data-TOPICS.
# Environment: VAL_DIR (default /tmp/ragd-simval; model in $VAL_DIR/model: `ragctl make-model
# --preset small --out $VAL_DIR/model`), BUILD (default build).
set -euo pipefail
BUILD=${BUILD:-build}
BIN="$BUILD/bin"
DIR=${VAL_DIR:-/tmp/ragd-simval}
name=$1 config=$2 topics=$3
shift 4
data="$DIR/data-$topics"
rm -rf "$data/kvcache"
port=$((20000 + RANDOM % 20000))
"$BIN/ragd" --config "$config" --model "$DIR/model" --data "$data" --pipelines configs/pipelines \
  --listen "127.0.0.1:$port" --log-level warn &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
ingest=()
[[ -f "$data/.ingested" ]] || ingest=(--ingest-synthetic --topics "$topics")
if [[ ${#ingest[@]} -gt 0 ]]; then
  "$BIN/ragctl" bench --url "http://127.0.0.1:$port" "${ingest[@]}" --requests 1 --concurrency 1 > /dev/null
  touch "$data/.ingested"
  kill $pid; wait $pid 2>/dev/null || true
  rm -rf "$data/kvcache"
  "$BIN/ragd" --config "$config" --model "$DIR/model" --data "$data" --pipelines configs/pipelines \
    --listen "127.0.0.1:$port" --log-level warn &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
fi
flock /tmp/ragd-build.lock "$BIN/ragctl" bench --url "http://127.0.0.1:$port" --json "$DIR/$name.json" "$@" | tee "$DIR/$name.txt"
