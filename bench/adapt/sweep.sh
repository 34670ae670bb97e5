#!/usr/bin/env bash
# Per-query configuration under load (docs/benchmarks.md, "Adaptive configuration under load").
# Three phases; the held-out questions appear in the last one only:
#   1. fit:  qa-adapt's profile on a question set generated apart from the held-out one (every
#            candidate at every FIT_LEVELS load: quality models, mean TTFT and the TTFT quantile);
#   2. slo:  the TTFT target, chosen on the fit questions only (pick_slo.py): the policy runs at the
#            highest load level with each target of a grid relative to the cheapest candidate's p99
#            there; the smallest target it holds (p99 <= target) with EM at least a point above the
#            cheapest's is kept (SLO=MS skips this phase);
#   3. held: the 400 held-out questions at each load level, once: every candidate forced (the fixed
#            configurations), the policy without a target, and with the chosen target (objectives
#            balanced and latency).
# Run it under the build lock so that nothing else runs beside the timings:
#
#   flock /tmp/ragd-build.lock env [BUILD=build] [OUT=/tmp/adapt] [LIMIT=0] [LEVELS="1 4 16"] \
#     [FIT_LEVELS=1,4,16] [QUANTILE=0.99] [SLO_FACTORS="1.0 1.15 1.3 1.5 1.75 2.0"] [SLO=] \
#     [PHASES="fit slo held"] bench/adapt/sweep.sh
#
# Writes OUT/fit.txt (the fit's report), OUT/slo/ and OUT/slo.txt (the target's choice),
# OUT/c<N>*.txt / .json (one run per load level and configuration) and
# configs/pipelines/qa-adapt.profile (the fitted profile, beside the spec).
#
# Every policy run with a target starts a fresh daemon (and warms the reranker's passage cache as the
# others are): its tenant history, which calibrates the predicted quantiles, starts empty, so that no
# run's target inherits another run's misses.
set -euo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/adapt}
LIMIT=${LIMIT:-0}
LEVELS=${LEVELS:-"1 4 16"}
FIT_LEVELS=${FIT_LEVELS:-"1,4,16"}
QUANTILE=${QUANTILE:-0.99}
SLO_FACTORS=${SLO_FACTORS:-"1.0 1.15 1.3 1.5 1.75 2.0"}
SLO=${SLO:-}
PHASES=${PHASES:-"fit slo held"}
RUNS=${RUNS:-"k1,k2-rerank1,k4-rerank1,k4,auto"}
RAGD=$BUILD/bin/ragd
RAGCTL=$BUILD/bin/ragctl
TOP=${FIT_LEVELS##*,}  # the highest fit level: where the target is chosen
mkdir -p "$OUT"

if [ ! -f "$OUT/fit_set/questions.jsonl" ]; then
  python3 tools/train/make_fit_set.py --out "$OUT/fit_set" --seed 20261201
fi
for set in fit held; do
  if [ ! -d "$OUT/data_$set" ]; then
    corpus=$([ $set = fit ] && echo "$OUT/fit_set/corpus.jsonl" || echo examples/qa_eval/corpus.jsonl)
    "$RAGCTL" ingest "$corpus" --data "$OUT/data_$set" --model models/ragd-qa >/dev/null
  fi
done

PID=""
URL=""
lim=()
[ "$LIMIT" -gt 0 ] && lim=(--limit "$LIMIT")
start() {  # start DATA QUESTIONS: the daemon on a free port, the reranker's passage cache warmed; URL is set
  "$RAGD" --model models/ragd-qa --data "$1" --pipelines configs/pipelines --listen 127.0.0.1:0 \
    --log-level warn >"$OUT/ragd.out" 2>"$OUT/ragd.err" &
  PID=$!
  URL=""
  for _ in $(seq 1 300); do
    URL=$(grep -o 'http://[0-9.:]*' "$OUT/ragd.out" | head -1 || true)
    if [ -n "$URL" ] && curl -sf "$URL/readyz" >/dev/null; then break; fi
    URL=""
    sleep 0.2
  done
  if [ -z "$URL" ]; then
    echo "ragd did not become ready" >&2
    exit 1
  fi
  # One pass reranking every question's four passages, as on a serving replica.
  "$RAGCTL" eval --url "$URL" --questions "$2" --pipeline qa-adapt --adapt k4-rerank1 --concurrency 4 "${lim[@]}" \
    >/dev/null
}
stop() {
  kill "$PID" && wait "$PID" || true
  PID=""
}
trap 'if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi' EXIT
FITQ="$OUT/fit_set/questions.jsonl"
HELDQ=examples/qa_eval/questions.jsonl
phase() { [[ " $PHASES " == *" $1 "* ]]; }

# 1. Fit on the fit set (the held-out questions are not seen here).
if phase fit; then
  rm -f configs/pipelines/qa-adapt.profile
  start "$OUT/data_fit" "$FITQ"
  "$RAGCTL" eval --url "$URL" --questions "$FITQ" --pipeline qa-adapt --pipelines configs/pipelines \
    --fit-adapt --fit-concurrency "$FIT_LEVELS" --fit-ttft-quantile "$QUANTILE" "${lim[@]}" | tee "$OUT/fit.txt"
  stop
fi

# 2. The target, from the fit set only: the cheapest candidate's p99 at the top level sets the grid.
if phase slo && [ -z "$SLO" ]; then
  mkdir -p "$OUT/slo"
  start "$OUT/data_fit" "$FITQ"
  "$RAGCTL" eval --url "$URL" --questions "$FITQ" --pipeline qa-adapt --adapt k1 --concurrency "$TOP" "${lim[@]}" \
    --json "$OUT/slo/k1.json" | tee "$OUT/slo/k1.txt"
  stop
  p99=$(python3 -c "import json; print(json.load(open('$OUT/slo/k1.json'))['runs'][0]['ttft_p99_ms'])")
  runs=()
  for f in $SLO_FACTORS; do
    s=$(python3 -c "print(int(round($p99 * $f / 10.0) * 10))")
    start "$OUT/data_fit" "$FITQ"
    "$RAGCTL" eval --url "$URL" --questions "$FITQ" --pipeline qa-adapt --adapt auto --slo-ttft-ms "$s" \
      --concurrency "$TOP" "${lim[@]}" --json "$OUT/slo/auto-$s.json" | tee "$OUT/slo/auto-$s.txt"
    stop
    runs+=("$s=$OUT/slo/auto-$s.json")
  done
  python3 bench/adapt/pick_slo.py --cheap "$OUT/slo/k1.json" --runs "${runs[@]}" --out "$OUT/slo.txt" \
    | tee "$OUT/slo/pick.txt"
fi
[ -n "$SLO" ] && echo "$SLO" >"$OUT/slo.txt"

# 3. The held-out questions at each load level, with the target chosen above.
if phase held; then
  target=$(cat "$OUT/slo.txt")
  for c in $LEVELS; do
    start "$OUT/data_held" "$HELDQ"
    "$RAGCTL" eval --url "$URL" --questions "$HELDQ" --pipeline qa-adapt --adapt "$RUNS" \
      --concurrency "$c" "${lim[@]}" --json "$OUT/c$c.json" | tee "$OUT/c$c.txt"
    stop
    for objective in balanced latency; do
      start "$OUT/data_held" "$HELDQ"
      "$RAGCTL" eval --url "$URL" --questions "$HELDQ" --pipeline qa-adapt --adapt auto --adapt-objective "$objective" \
        --slo-ttft-ms "$target" --concurrency "$c" "${lim[@]}" --json "$OUT/c$c-slo-$objective.json" \
        | tee "$OUT/c$c-slo-$objective.txt"
      stop
    done
  done
fi
