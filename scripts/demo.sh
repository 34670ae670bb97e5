#!/usr/bin/env bash
# make demo: makes the default model, ingests a sample corpus, starts ragd, runs a RAG query through
# the pipeline API and through the streaming client, runs it again to show knowledge-tree KV reuse,
# and stops the daemon. Everything lives under data/demo (delete it to start over).
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
DEMO=${RAGD_DEMO_DIR:-data/demo}
PRESET=${RAGD_DEMO_PRESET:-small}
PORT=${RAGD_DEMO_PORT:-$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')}
QUESTION=${RAGD_DEMO_QUESTION:-"What did Greta Holm write about the meltwater and the outwash plain of Felmere?"}
mkdir -p "$DEMO"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. default model ($PRESET preset, random weights, real Llama-family layout)"
if [[ ! -f "$DEMO/model/config.json" ]]; then
  "$BIN/ragctl" make-model --preset "$PRESET" --seed 1 --out "$DEMO/model"
else
  echo "reusing $DEMO/model"
fi

step "2. sample corpus and ingestion"
if [[ ! -d "$DEMO/corpus" ]]; then
  python3 examples/make_corpus.py --out "$DEMO/corpus" --docs 120 --seed 7
fi
"$BIN/ragctl" ingest "$DEMO/corpus" --data "$DEMO/data" --model "$DEMO/model"

step "3. start ragd on 127.0.0.1:$PORT"
"$BIN/ragd" --model "$DEMO/model" --data "$DEMO/data" --listen "127.0.0.1:$PORT" > "$DEMO/ragd.log" 2>&1 &
RAGD_PID=$!
cleanup() { kill -TERM "$RAGD_PID" 2>/dev/null && wait "$RAGD_PID" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 300); do
  if curl -fs "http://127.0.0.1:$PORT/readyz" >/dev/null 2>&1; then break; fi
  if ! kill -0 "$RAGD_PID" 2>/dev/null; then echo "ragd exited; log:"; cat "$DEMO/ragd.log"; exit 1; fi
  sleep 0.2
done
curl -fs "http://127.0.0.1:$PORT/readyz"; echo

run_query() {
  curl -fs -X POST "http://127.0.0.1:$PORT/v1/pipelines/default/runs" \
    -H 'Content-Type: application/json' \
    -d "{\"query\": \"$QUESTION\", \"max_tokens\": 24, \"temperature\": 0}"
}

step "4. RAG query through the pipeline API (first run: documents prefilled)"
FIRST=$(run_query)
echo "$FIRST" | python3 -m json.tool

step "5. the same question through the streaming client (WebSocket)"
"$BIN/ragctl" stream "$QUESTION" --url "ws://127.0.0.1:$PORT/v1/stream" --max-tokens 24

step "6. again through the pipeline API: document KV comes from the knowledge tree"
SECOND=$(run_query)
python3 - "$FIRST" "$SECOND" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
def reused(r):
    u = r["usage"]["reused_tokens"]
    return u["hbm"] + u["dram"] + u["ssd"]
print(f"first run : prompt {a['usage']['prompt_tokens']:5d} tokens, reused {reused(a):5d}, "
      f"recomputed {a['usage']['recomputed_tokens']:5d}, TTFT {a['timings']['ttft_ms']:8.1f} ms")
print(f"second run: prompt {b['usage']['prompt_tokens']:5d} tokens, reused {reused(b):5d}, "
      f"recomputed {b['usage']['recomputed_tokens']:5d}, TTFT {b['timings']['ttft_ms']:8.1f} ms")
if a["output"] == b["output"]:
    print("greedy outputs identical: reuse is exact")
else:
    print("WARNING: outputs differ between runs"); sys.exit(1)
if reused(b) <= reused(a):
    print("WARNING: second run reused no more tokens than the first"); sys.exit(1)
PY

step "7. stop"
cleanup
trap - EXIT
echo "done (daemon log: $DEMO/ragd.log)"
