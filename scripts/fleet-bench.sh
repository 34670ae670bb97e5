#!/usr/bin/env bash
# shellcheck disable=SC2154  # FLEET_URL, URL_replica_N, ... come from the fleet's fleet.env
# The fleet benchmarks (bench/FLEET_BENCH.md), on loopback with examples/fleet/fleet.sh (Redis, a
# primary, two replicas, HAProxy) and the `small` preset with random weights:
#   (a) sharing  replica B answers questions whose documents replica A computed: TTFT of B's load
#                from Redis against B's recompute of the same request, greedy outputs compared
#   (b) fleet    Zipf(0.9) workload through HAProxy, the same fleet without the shared tier
#                (url "") and with it, alternating; hit rate, TTFT p50 / p99, outputs per request
#   (c) faults   Redis killed (SIGKILL) during the workload and started again (empty) later:
#                client errors, outputs against the run without Redis, TTFT per time window
#   (d) tiny     Redis with maxmemory 8mb (allkeys-lru)
#   (e) rejoin   the workload once, the replicas restarted with empty local tiers (Redis kept), the
#                workload again: what a replica that joins or restarts gets from a warm Redis
#   (m) mac      the remote values' MAC on (default) and off (trust_unauthenticated), alternating
#                pairs (FLEET_BENCH_MAC_PAIRS, 2): B's remote-hit TTFT (sharing) and the Zipf load
# Results: $FLEET_BENCH_DIR/results (per-request JSON, *-info.json counters, results.md, summary.json).
# Knobs: FLEET_BENCH_DIR (default BUILD/fleet-bench), FLEET_BENCH_REQUESTS (400),
# FLEET_BENCH_TOPICS (100: 400 documents), FLEET_BENCH_CONCURRENCY (4), FLEET_BENCH_PAIRS (2: runs
# without / with the tier), FLEET_BENCH_REPS (8: sharing questions), FLEET_BENCH_KILL_S (10),
# FLEET_BENCH_DOWN_S (10), FLEET_BENCH_TINY (8mb), FLEET_BENCH_PARTS ("a b c d e"; "m" on request),
# FLEET_BENCH_SET (extra `ragd --set` options for every daemon, space-separated).
set -euo pipefail
BUILD=${1:-build}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
BIN=$(cd "$BUILD/bin" && pwd)
DIR=${FLEET_BENCH_DIR:-$BUILD/fleet-bench}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
RES=$DIR/results
REQ=${FLEET_BENCH_REQUESTS:-400}
TOPICS=${FLEET_BENCH_TOPICS:-100}
CONC=${FLEET_BENCH_CONCURRENCY:-4}
PAIRS=${FLEET_BENCH_PAIRS:-2}
REPS=${FLEET_BENCH_REPS:-8}
KILL_S=${FLEET_BENCH_KILL_S:-10}
DOWN_S=${FLEET_BENCH_DOWN_S:-10}
TINY=${FLEET_BENCH_TINY:-8mb}
PARTS=${FLEET_BENCH_PARTS:-a b c d e}
FLEET="$ROOT/examples/fleet/fleet.sh"
PY="python3 $ROOT/scripts/fleet-bench.py"
export FLEET_BIN=$BIN FLEET_SET=${FLEET_BENCH_SET:-}
export FLEET_MODEL=$DIR/model
RUN=$DIR/run
mkdir -p "$RES"
[[ -f $FLEET_MODEL/config.json ]] || "$BIN/ragctl" make-model --preset small --seed 1 --out "$FLEET_MODEL" > /dev/null 2>&1

step() { printf '\n== %s\n' "$*"; }
current=""
stop_fleet() { [[ -n $current ]] && "$FLEET" stop --dir "$current" > /dev/null; current=""; }
trap stop_fleet EXIT
start_fleet() {  # DIR fleet.sh-options...
  current=$1
  "$FLEET" start --dir "$@" > "$RES/fleet-start.log" 2>&1 || { cat "$RES/fleet-start.log"; exit 1; }
  # shellcheck disable=SC1091
  source "$current/fleet.env"
}
load() {  # NAME [extra load options]
  local name=$1; shift
  $PY load --url "$FLEET_URL" --topics "$TOPICS" --zipf 0.9 --requests "$REQ" --concurrency "$CONC" --seed 1 \
    --out "$RES/$name.json" "$@"
}
capture() {  # NAME KEY=VALUE...
  local name=$1; shift
  $PY capture --env "$current/fleet.env" --out "$RES/$name-info.json" "$@"
}
CORPUS=synthetic:$TOPICS
T0=$(date +%s)

if [[ " $PARTS " == *" a "* ]]; then
  step "(a) sharing: replica B answers with the documents replica A computed ($REPS questions)"
  rm -rf "$DIR/run-sharing"  # the sharing documents are new on every run
  start_fleet "$DIR/run-sharing" --corpus synthetic:1
  $PY sharing --primary "$PRIMARY_URL" --url-a "$URL_replica_1" --url-b "$URL_replica_2" --reps "$REPS" \
    --out "$RES/sharing.json"
  capture sharing remote=1
  stop_fleet
fi

if [[ " $PARTS " == *" b "* ]]; then
  for p in $(seq 1 "$PAIRS"); do
    step "(b) fleet without the shared tier, run $p: $REQ requests, $TOPICS topics, Zipf(0.9), concurrency $CONC"
    start_fleet "$RUN" --corpus "$CORPUS" --no-remote
    load "without-$p"
    capture "without-$p" remote=0
    stop_fleet
    step "(b) fleet with the shared tier, run $p"
    start_fleet "$RUN" --corpus "$CORPUS"
    load "with-$p"
    capture "with-$p" remote=1
    stop_fleet
  done
fi

if [[ " $PARTS " == *" c "* ]]; then
  step "(c) faults: Redis killed $KILL_S s into the run, started again $DOWN_S s later"
  start_fleet "$RUN" --corpus "$CORPUS"
  load faults &
  load_pid=$!
  # Each replica's breaker and remote counters every 0.5 s, until the load ends.
  (
    while kill -0 "$load_pid" 2> /dev/null; do
      for i in $(seq 1 "$REPLICAS"); do
        var=URL_replica_$i
        printf '%s replica-%s %s\n' "$(date +%s.%N)" "$i" "$(curl -s --max-time 1 "${!var}/metrics" |
          awk '/^ragd_kv_remote_breaker_open/ { b = $NF } /^ragd_kv_remote_events\{event="(hits|puts|puts_dropped|errors)"\}/ { split($1, k, "\""); c = c " " k[2] "=" $NF } END { print "breaker_open=" b c }')"
      done
      sleep 0.5
    done
  ) > "$RES/faults-timeline.txt" &
  poll_pid=$!
  sleep "$KILL_S"
  "$FLEET" redis-kill --dir "$RUN"
  kill_at=$(date +%s.%N)  # Redis is gone
  sleep "$DOWN_S"
  "$FLEET" redis-start --dir "$RUN"
  restart_at=$(date +%s.%N)  # Redis answers again
  wait "$load_pid"
  wait "$poll_pid"
  capture faults remote=1 "kill_at=$kill_at" "restart_at=$restart_at"
  stop_fleet
fi

if [[ " $PARTS " == *" d "* ]]; then
  step "(d) Redis with maxmemory $TINY (allkeys-lru)"
  start_fleet "$RUN" --corpus "$CORPUS" --redis-maxmemory "$TINY" --redis-policy allkeys-lru
  load tiny
  capture tiny remote=1
  stop_fleet
fi

if [[ " $PARTS " == *" e "* ]]; then
  step "(e) replicas restarted behind a warm Redis: the workload once, replicas restarted (empty local tiers), again"
  # Without Redis first (the baseline: restarted replicas recompute), then with it.
  for mode in norem remote; do
    opts=(--corpus "$CORPUS")
    [[ $mode == norem ]] && opts+=(--no-remote)
    start_fleet "$RUN" "${opts[@]}"
    load "warmup-$mode"
    sleep 3  # idle: the replicas' pending host copies (and their writes to Redis) go
    capture "warmup-$mode" "remote=$([[ $mode == remote ]] && echo 1 || echo 0)"
    "$FLEET" replicas-restart --dir "$RUN" > /dev/null
    load "rejoin-$mode"
    capture "rejoin-$mode" "remote=$([[ $mode == remote ]] && echo 1 || echo 0)"
    stop_fleet
  done
fi

if [[ " $PARTS " == *" m "* ]]; then
  # The cost of the remote values' MAC: fleets with it (default) and without it
  # (trust_unauthenticated), alternating, the order swapped in every other pair against drift.
  MAC_PAIRS=${FLEET_BENCH_MAC_PAIRS:-2}
  for p in $(seq 1 "$MAC_PAIRS"); do
    order="on off"; (( p % 2 == 0 )) && order="off on"
    for mode in $order; do
      step "(m) MAC $mode, pair $p: sharing ($REPS questions), then $REQ requests Zipf(0.9)"
      opts=(--corpus "$CORPUS"); [[ $mode == off ]] && opts+=(--no-mac)
      rm -rf "$DIR/run-mac"
      start_fleet "$DIR/run-mac" "${opts[@]}"
      $PY sharing --primary "$PRIMARY_URL" --url-a "$URL_replica_1" --url-b "$URL_replica_2" --reps "$REPS" \
        --seed "$((100 + p))" --out "$RES/mac-$mode-sharing-$p.json"
      load "mac-$mode-load-$p"
      capture "mac-$mode-load-$p" remote=1 "mac=$mode"
      stop_fleet
    done
  done
  machine="$(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1))"
  $PY mac --dir "$RES" --pairs "$MAC_PAIRS" --machine "$machine"
fi

step "summary (results in $RES; $(( $(date +%s) - T0 )) s)"
machine="$(nproc) cores ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), $(free -g | awk '/^Mem:/ {print $2}') GiB RAM"
# Every (b) run in the results directory, also those of an earlier invocation with other parts.
runs=() with=() without=()
for f in "$RES"/without-*.json; do
  [[ -e $f && $f != *-info.json ]] || continue
  p=${f##*/without-}; p=${p%.json}
  [[ -e $RES/with-$p.json ]] || continue
  runs+=("without-$p" "with-$p"); with+=("with-$p"); without+=("without-$p")
done
ref=""
[[ ${#without[@]} -gt 0 ]] && ref=${without[0]}
$PY summary --dir "$RES" --runs "${runs[@]}" --with-runs "${with[@]}" --without-runs "${without[@]}" \
  --reference "$ref" --machine "$machine"
