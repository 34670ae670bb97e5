#!/usr/bin/env bash
# The QA set end to end with BERT-family retrieval models: ingest -> search -> cross-encoder
# rerank -> answer, on the held-out questions (examples/qa_eval), beside the hashing embedder and
# the generator's own reranker (UPR) on the same corpus and model.
#
#   scripts/eval-encoders.sh [BUILD_DIR]     (make eval-encoders)
#
# The encoders are random-weight bge-small shapes made by `ragctl make-model` (this project trains
# no embedder): their accuracy shows only that the path works; their timings are real. Per
# pipeline the table gives EM, gold@k (the gold passage among the prompt's passages), TTFT p50 /
# p99 and questions/s, from `ragctl eval` (one question in flight).
# Environment: EVAL_MODEL [models/ragd-qa], EVAL_DIR [data/eval-encoders], EVAL_LIMIT (first N
# questions), EVAL_ENCODER [bge-small].
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
MODEL=${EVAL_MODEL:-models/ragd-qa}
DIR=${EVAL_DIR:-data/eval-encoders}
ENC=${EVAL_ENCODER:-bge-small}
mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd)
args=()
[[ -n "${EVAL_LIMIT:-}" ]] && args+=(--limit "$EVAL_LIMIT")

[[ -f "$DIR/embedder/config.json" ]] || "$BIN/ragctl" make-model --preset "$ENC" --out "$DIR/embedder" --seed 1
[[ -f "$DIR/reranker/config.json" ]] || "$BIN/ragctl" make-model --preset "$ENC" --reranker --out "$DIR/reranker" --seed 2
rm -rf "$DIR/data-hashing" "$DIR/data-encoder"
/usr/bin/time -f "ingest hashing: %e s, max RSS %M KB" \
  "$BIN/ragctl" ingest examples/qa_eval/corpus.jsonl --data "$DIR/data-hashing" --model "$MODEL" --quiet
/usr/bin/time -f "ingest $ENC encoder: %e s, max RSS %M KB" \
  "$BIN/ragctl" ingest examples/qa_eval/corpus.jsonl --data "$DIR/data-encoder" --model "$MODEL" --quiet \
  --embedder model --embedder-model "$DIR/embedder" \
  --query-prefix "Represent this sentence for searching relevant passages: "

mkdir -p "$DIR/pipelines"
cat >"$DIR/pipelines/top4.toml" <<'TOML'
[pipeline]
name = "top4"
description = "four passages retrieved, all in the prompt"
[retriever]
top_k = 4
[generation]
max_tokens = 16
TOML
cat >"$DIR/pipelines/upr.toml" <<'TOML'
[pipeline]
name = "upr"
description = "four passages retrieved, reranked by the generator, the best in the prompt"
[retriever]
top_k = 4
rerank = 1
[generation]
max_tokens = 16
TOML
cat >"$DIR/pipelines/ce.toml" <<TOML
[pipeline]
name = "ce"
description = "four passages retrieved, reranked by the cross-encoder, the best in the prompt"
[retriever]
top_k = 4
rerank = 1
rerank_model = "$DIR/reranker"
[generation]
max_tokens = 16
TOML
run() {  # DATA PIPELINE LABEL
  echo "== $3" >&2
  "$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/$1" \
    --pipelines "$DIR/pipelines" --pipeline "$2" --reuse none --context retrieved \
    --json "$DIR/report-$3.json" "${args[@]}" 2>>"$DIR/eval.log" | tee "$DIR/out-$3.txt" | tail -1 >&2
}
run data-hashing top4 hashing-top4
run data-hashing upr hashing-upr
run data-encoder top4 encoder-top4
run data-encoder ce encoder-ce
python3 - "$DIR" <<'PY'
import json, sys
d = sys.argv[1]
print("| retrieval | pipeline | EM | gold@k | TTFT p50 ms | TTFT p99 ms | questions/s |")
print("|---|---|---:|---:|---:|---:|---:|")
for label, what in [("hashing-top4", "hashing embedder | top 4"), ("hashing-upr", "hashing embedder | top 4, generator rerank, best 1"),
                    ("encoder-top4", "bge-small encoder (random) | top 4"),
                    ("encoder-ce", "bge-small encoder (random) | top 4, bge-small cross-encoder (random), best 1")]:
    r = json.load(open(f"{d}/report-{label}.json"))
    s = r["runs"][0]
    print(f"| {what} | {100*s['exact_match']:.1f}% | {100*s['gold_retrieved']:.1f}% | {s['ttft_p50_ms']:.1f} | "
          f"{s['ttft_p99_ms']:.1f} | {s['questions_per_second']:.2f} |")
PY
