#!/usr/bin/env bash
# Multi-turn retrieval of the OpenAI routes' pipeline runs: gold-passage hit rate of the last user
# message alone against the daemon's rule (rag_query.h), on examples/qa_eval/multiturn.jsonl.
#   bench/multiturn/run.sh [build]   (MT_MODEL default models/ragd-qa, MT_DIR default a temp dir)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
MODEL=${MT_MODEL:-models/ragd-qa}
DIR=${MT_DIR:-$(mktemp -d)}
python3 examples/qa_eval/make_multiturn.py > /dev/null
"$BIN/ragctl" ingest examples/qa_eval/corpus.jsonl --data "$DIR/data" --model "$MODEL" > "$DIR/ingest.log"
"$BIN/ragd" --model "$MODEL" --data "$DIR/data" --listen 127.0.0.1:0 --threads 2 > "$DIR/ragd.out" 2> "$DIR/ragd.log" &
PID=$!
trap 'kill $PID 2>/dev/null; wait $PID 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  grep -q "ragd listening on http://" "$DIR/ragd.out" 2>/dev/null && break
  sleep 0.1
done
URL=$(sed -n 's/.*ragd listening on \(http:\/\/[^ ]*\).*/\1/p' "$DIR/ragd.out" | head -1)
until curl -sf "$URL/readyz" > /dev/null; do sleep 0.2; done
for mode in lexical dense hybrid; do
  python3 bench/multiturn/measure.py "$URL" --mode "$mode" --json "$DIR/multiturn_$mode.json"
done
