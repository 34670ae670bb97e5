#!/usr/bin/env bash
# Simulator validation: one `ragctl bench` run against a fresh ragd (empty KV cache) per call,
# on this machine, with the daemon config the simulation reads. A timing run must be quiet: the
# caller holds the build lock for the whole call (daemon start, ingest and the run), so that no
# build or timed run of ours shares the cores with it:
#   flock /tmp/ragd-build.lock bench/sim/validate.sh NAME CONFIG TOPICS -- BENCH_ARGS...
# (bench/sim/real-runs.sh runs a workload's levels twice that way). The load average before the
# run goes to $VAL_DIR/NAME.load.
# TOPICS: the synthetic corpus (TOPICS x 4 documents, `ragctl bench --ingest-synthetic`), ingested
# once into $VAL_DIR/data-TOPICS.
# Environment: VAL_DIR (default /tmp/ragd-simval; model in $VAL_DIR/model: `ragctl make-model
# --preset small --out $VAL_DIR/model`), BUILD (default build), PIPELINES (default configs/pipelines;
# a copy taken with the binaries keeps a run independent of later edits there).
set -euo pipefail
BUILD=${BUILD:-build}
BIN="$BUILD/bin"
DIR=${VAL_DIR:-/tmp/ragd-simval}
PIPES=${PIPELINES:-configs/pipelines}
name=$1 config=$2 topics=$3
shift 4
# A measured run is evidence: never overwrite one (two groups of real-runs.sh share run names, e.g.
# calib-load and calib-c4 both write calib-hit-c4-K; pick FIRST_RUN past the existing ones).
if [[ -e "$DIR/$name.json" ]]; then
  echo "validate.sh: $DIR/$name.json exists; not overwriting a measured run (remove it or pick another FIRST_RUN)" >&2
  exit 1
fi
data="$DIR/data-$topics"
rm -rf "$data/kvcache"
port=$((20000 + RANDOM % 20000))
"$BIN/ragd" --config "$config" --model "$DIR/model" --data "$data" --pipelines "$PIPES" \
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
  "$BIN/ragd" --config "$config" --model "$DIR/model" --data "$data" --pipelines "$PIPES" \
    --listen "127.0.0.1:$port" --log-level warn &
  pid=$!
  for _ in $(seq 1 600); do curl -sf "http://127.0.0.1:$port/readyz" > /dev/null 2>&1 && break; sleep 0.1; done
fi
cat /proc/loadavg > "$DIR/$name.load"
"$BIN/ragctl" bench --url "http://127.0.0.1:$port" --json "$DIR/$name.json" "$@" | tee "$DIR/$name.txt"
