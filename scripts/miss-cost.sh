#!/usr/bin/env bash
# What a cache miss costs: `ragctl bench` against a fresh daemon per run, on a workload where
# documents rarely repeat (uniform popularity over many synthetic topics) and on a Zipf(0.9) one,
# with reuse = none and reuse = knowledge_tree alternating (none, kt, none, kt, ...), so that drift in
# machine load hits both alike. Every run starts from an empty KV cache.
#   MISS_MODEL (default: a `small` preset model made here), MISS_DIR (default /tmp/ragd-miss-cost),
#   MISS_RUNS (pairs per workload, default 2), MISS_REQUESTS (default 24), MISS_TOPICS (default 200)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
DIR=${MISS_DIR:-/tmp/ragd-miss-cost}
RUNS=${MISS_RUNS:-2}
REQ=${MISS_REQUESTS:-24}
TOPICS=${MISS_TOPICS:-200}
mkdir -p "$DIR"
MODEL=${MISS_MODEL:-$DIR/model}
[[ -f "$MODEL/config.json" ]] || "$BIN/ragctl" make-model --preset small --out "$MODEL" > /dev/null

port=$((20000 + RANDOM % 20000))
run_one() {  # workload zipf reuse index
  local zipf=$1 reuse=$2 i=$3 data="$DIR/data-$1"
  rm -rf "$data/kvcache"
  "$BIN/ragd" --model "$MODEL" --data "$data" --listen "127.0.0.1:$port" --log-level warn &
  local pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
  local ingest=()
  [[ -f "$data/.ingested" ]] || ingest=(--ingest-synthetic)
  "$BIN/ragctl" bench --url "http://127.0.0.1:$port" "${ingest[@]}" --topics "$TOPICS" --zipf "$zipf" \
    --requests "$REQ" --reuse "$reuse" --concurrency 1 --json "$DIR/zipf$zipf-$reuse-$i.json" > "$DIR/zipf$zipf-$reuse-$i.txt"
  touch "$data/.ingested"
  kill "$pid"; wait "$pid" 2> /dev/null || true
}
for zipf in 0 0.9; do
  for i in $(seq 1 "$RUNS"); do
    run_one "$zipf" none "$i"
    run_one "$zipf" knowledge_tree "$i"
  done
done
echo "results: $DIR/zipf*-{none,knowledge_tree}-*.json (and .txt)"
