#!/usr/bin/env bash
# The simulated side of the validation (docs/benchmarks.md, "Fleet simulator") and the table:
# every row of bench/sim/real-runs.sh that has real runs simulated on RATES, then bench/sim/compare.py against the
# real runs (NAME-1.json, NAME-2.json in $VAL_DIR).
#   bench/sim/sim-runs.sh RATES [MODEL]      (MODEL default $VAL_DIR/model)
# Every real run of a row is compared (NAME-1.json, NAME-2.json and any further repeats).
# Environment: VAL_DIR, BUILD (its bin/ragctl simulates) or RAGCTL (that binary); REPS=N also
# simulates every row with N replications of the per-request noise (sim-NAME-rep.json; seed SEED,
# default 1) and prints a second table: the deterministic run and the replications' median against
# the real runs (bench/sim/compare.py), the targets counted on the median.
# Every row replays its first real run's prompt and answer lengths and arrival instants (the
# same requests: a generated workload gives every question the same token count); A and B add the
# documents the real retriever returns for each request (--retrieved, bench/sim/retrieved.py);
# C is qa-none (nothing is reused).
set -euo pipefail
cd "$(dirname "$0")/../.."
RAGCTL=${RAGCTL:-${BUILD:-build}/bin/ragctl}
DIR=${VAL_DIR:-/tmp/ragd-simval}
V=bench/sim/validation
rates=$1 model=${2:-$DIR/model}
REPS=${REPS:-0} SEED=${SEED:-1}
sim() {  # NAME CONFIG ARGS... (rows without a first real run are skipped)
  local name=$1 config=$2
  shift 2
  [ -e "$DIR/$name-1.json" ] || return 0
  "$RAGCTL" simulate --config "$config" --rates "$rates" --model "$model" --json "$DIR/sim-$name.json" "$@" \
    > "$DIR/sim-$name.txt"
  if [ "$REPS" -gt 0 ]; then
    "$RAGCTL" simulate --config "$config" --rates "$rates" --model "$model" --json "$DIR/sim-$name-rep.json" \
      --replications "$REPS" --seed "$SEED" "$@" > "$DIR/sim-$name-rep.txt"
  fi
}
# A and B: each request's own prompt and answer lengths (its question's tokens) and arrival
# instant from the row's first real run, the documents the real retriever returned for it, a
# 45-token prompt head.
# A runs folder may carry the retrieved lists of the retriever its runs were measured with
# (runs-1f8544a.tar.xz does: the retriever before lexical search was the default); else the
# current retriever's, in bench/sim/validation.
retrieved() { if [ -e "$DIR/$1.retrieved.jsonl" ]; then echo "$DIR/$1.retrieved.jsonl"; else echo "$V/$1.retrieved.jsonl"; fi; }
A=(--retrieved "$(retrieved uniform)" --set prefix_tokens=45)
B=(--retrieved "$(retrieved zipf)" --set prefix_tokens=45)
sim uniform-r1 $V/ragd.toml --workload "trace:$DIR/uniform-r1-1.json" "${A[@]}"
sim uniform-r2 $V/ragd.toml --workload "trace:$DIR/uniform-r2-1.json" "${A[@]}"
sim uniform-c2 $V/ragd.toml --workload "trace:$DIR/uniform-c2-1.json" "${A[@]}" --set concurrency=2
sim zipf-r2 $V/ragd.toml --workload "trace:$DIR/zipf-r2-1.json" "${B[@]}"
sim zipf-r6 $V/ragd.toml --workload "trace:$DIR/zipf-r6-1.json" "${B[@]}"
sim zipf-c4 $V/ragd.toml --workload "trace:$DIR/zipf-c4-1.json" "${B[@]}" --set concurrency=4
sim mixed-fcfs-r1 $V/ragd.toml --workload "trace:$DIR/mixed-fcfs-r1-1.json"
sim mixed-fcfs-r2 $V/ragd.toml --workload "trace:$DIR/mixed-fcfs-r2-1.json"
sim mixed-fcfs-c2 $V/ragd.toml --workload "trace:$DIR/mixed-fcfs-c2-1.json" --set concurrency=2
sim mixed-sjf-r1 $V/ragd-sjf.toml --workload "trace:$DIR/mixed-sjf-r1-1.json"
sim mixed-sjf-r2 $V/ragd-sjf.toml --workload "trace:$DIR/mixed-sjf-r2-1.json"
# D and E: written after the validation (the check on a machine the rates were not fitted on).
D=(--retrieved "$(retrieved zipf12)" --set prefix_tokens=45)
E=(--retrieved "$(retrieved wide)" --set prefix_tokens=45)
sim zipf12-light $V/ragd.toml --workload "trace:$DIR/zipf12-light-1.json" "${D[@]}"
sim zipf12-heavy $V/ragd.toml --workload "trace:$DIR/zipf12-heavy-1.json" "${D[@]}"
sim zipf12-stress $V/ragd.toml --workload "trace:$DIR/zipf12-stress-1.json" "${D[@]}"
sim wide-light $V/ragd.toml --workload "trace:$DIR/wide-light-1.json" "${E[@]}"
sim wide-heavy $V/ragd.toml --workload "trace:$DIR/wide-heavy-1.json" "${E[@]}"
sim wide-stress $V/ragd.toml --workload "trace:$DIR/wide-stress-1.json" "${E[@]}"
rows=() reps=()
row() {
  local real
  [ -e "$DIR/$2-1.json" ] || return 0
  real=$(ls "$DIR/$2"-[0-9].json | sort -V | paste -sd,)
  rows+=("$1" "$DIR/sim-$2.json" "$real")
  reps+=("$1" "$DIR/sim-$2.json,$DIR/sim-$2-rep.json" "$real")
}
row "A uniform, 1 req/s" uniform-r1
row "A uniform, 2 req/s" uniform-r2
row "A uniform, 2 clients" uniform-c2
row "B Zipf(0.9), 2 req/s" zipf-r2
row "B Zipf(0.9), 6 req/s" zipf-r6
row "B Zipf(0.9), 4 clients" zipf-c4
row "C mixed, fcfs, 1 req/s" mixed-fcfs-r1
row "C mixed, fcfs, 2 req/s" mixed-fcfs-r2
row "C mixed, fcfs, 2 clients" mixed-fcfs-c2
row "C mixed, sjf, 1 req/s" mixed-sjf-r1
row "C mixed, sjf, 2 req/s" mixed-sjf-r2
row "D Zipf(1.2), light" zipf12-light
row "D Zipf(1.2), heavy" zipf12-heavy
row "D Zipf(1.2), stress" zipf12-stress
row "E Zipf(0.6), light" wide-light
row "E Zipf(0.6), heavy" wide-heavy
row "E Zipf(0.6), stress" wide-stress
python3 bench/sim/compare.py "${rows[@]}"
if [ "$REPS" -gt 0 ]; then
  echo
  python3 bench/sim/compare.py "${reps[@]}"
fi
