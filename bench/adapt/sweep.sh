#!/usr/bin/env bash
# Per-query configuration under load (docs/benchmarks.md, "Adaptive configuration under load").
# Fits qa-adapt's profile on a question set generated apart from the held-out one, then serves the
# 400 held-out questions at 1, 4 and 16 concurrent clients with every candidate forced (the fixed
# configurations) and with the policy choosing (auto), through the daemon. Run it under the build
# lock so that nothing else runs beside the timings:
#
#   flock /tmp/ragd-build.lock env [BUILD=build] [OUT=/tmp/adapt] [LIMIT=0] [LEVELS="1 4 16"] [SLO=250] \
#     bench/adapt/sweep.sh
#
# Writes OUT/fit.txt (the fit's report), OUT/c<N>.txt / .json (one run per load level) and
# configs/pipelines/qa-adapt.profile (the fitted profile, beside the spec).
set -euo pipefail
BUILD=${BUILD:-build}
OUT=${OUT:-/tmp/adapt}
LIMIT=${LIMIT:-0}
LEVELS=${LEVELS:-"1 4 16"}
FIT_LEVELS=${FIT_LEVELS:-"1,16"}
RUNS=${RUNS:-"k1,k2-rerank1,k4-rerank1,k4,auto"}
SLO=${SLO:-250}  # ms: the TTFT target of the second adaptive run
RAGD=$BUILD/bin/ragd
RAGCTL=$BUILD/bin/ragctl
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
start() {  # start DATA: the daemon on a free port; URL is set
  "$RAGD" --model models/ragd-qa --data "$1" --pipelines configs/pipelines --listen 127.0.0.1:0 \
    --log-level warn >"$OUT/ragd.out" 2>"$OUT/ragd.err" &
  PID=$!
  for _ in $(seq 1 300); do
    URL=$(grep -o 'http://[0-9.:]*' "$OUT/ragd.out" | head -1 || true)
    if [ -n "$URL" ] && curl -sf "$URL/readyz" >/dev/null; then return 0; fi
    sleep 0.2
  done
  echo "ragd did not become ready" >&2
  exit 1
}
stop() { kill "$PID" && wait "$PID" || true; }
trap 'if [ -n "$PID" ]; then kill "$PID" 2>/dev/null || true; fi' EXIT

lim=()
[ "$LIMIT" -gt 0 ] && lim=(--limit "$LIMIT")

# 1. Fit on the fit set (the held-out questions are not seen here). The reranker's head cache is
#    warmed first by one pass, as on a serving replica.
rm -f configs/pipelines/qa-adapt.profile
start "$OUT/data_fit"
"$RAGCTL" eval --url "$URL" --questions "$OUT/fit_set/questions.jsonl" --pipeline qa-adapt --adapt k4-rerank1 \
  --concurrency 4 "${lim[@]}" >/dev/null
"$RAGCTL" eval --url "$URL" --questions "$OUT/fit_set/questions.jsonl" --pipeline qa-adapt --pipelines configs/pipelines \
  --fit-adapt --fit-concurrency "$FIT_LEVELS" "${lim[@]}" | tee "$OUT/fit.txt"
stop

# 2. The held-out questions at each load level: every candidate forced, and the policy's choice.
start "$OUT/data_held"
"$RAGCTL" eval --url "$URL" --questions examples/qa_eval/questions.jsonl --pipeline qa-adapt --adapt k4-rerank1 \
  --concurrency 4 "${lim[@]}" >/dev/null
for c in $LEVELS; do
  "$RAGCTL" eval --url "$URL" --questions examples/qa_eval/questions.jsonl --pipeline qa-adapt --adapt "$RUNS" \
    --concurrency "$c" "${lim[@]}" --json "$OUT/c$c.json" | tee "$OUT/c$c.txt"
  # The policy with a TTFT target (balanced keeps to it when a candidate is predicted to).
  "$RAGCTL" eval --url "$URL" --questions examples/qa_eval/questions.jsonl --pipeline qa-adapt --adapt auto \
    --slo-ttft-ms "$SLO" --concurrency "$c" "${lim[@]}" --json "$OUT/c$c-slo.json" | tee "$OUT/c$c-slo.txt"
done
stop
PID=""
