#!/usr/bin/env bash
# make eval: answer accuracy of a model on the held-out QA set (examples/qa_eval: 320 passages, 400
# questions, entities never seen in training), end to end (ingest -> retrieval -> prompt ->
# greedy generation) and with the gold passage forced into the context, for every exact reuse mode,
# and for the approximate modes against full prefill.
#   EVAL_MODEL (default models/ragd-qa), EVAL_DIR (default data/eval), EVAL_LIMIT (default all)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
MODEL=${EVAL_MODEL:-models/ragd-qa}
DIR=${EVAL_DIR:-data/eval}
mkdir -p "$DIR"
"$BIN/ragctl" ingest examples/qa_eval/corpus.jsonl --data "$DIR/data" --model "$MODEL" > "$DIR/ingest.log"
args=()
[[ -n "${EVAL_LIMIT:-}" ]] && args+=(--limit "$EVAL_LIMIT")
# The default pipeline's four passages per prompt, every exact reuse mode, retrieved and gold context.
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --reuse none,prefix,knowledge_tree --context both --json "$DIR/report.json" "${args[@]}" 2> "$DIR/eval.log"
# One passage per prompt: with --context gold that passage is the gold one (reading alone).
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --top-k 1 --reuse none --context both --json "$DIR/report_top1.json" "${args[@]}" 2>> "$DIR/eval.log"
# Approximate reuse (default four passages, gold passage in context): full prefill vs naive
# concatenation (cacheblend:0) vs CacheBlend (15 %) vs EPIC (16 tokens), raw (self-check off) ...
# The runs above left every question's exact path in the SSD tier: start the KV cache empty, so
# that documents are blended rather than found whole.
rm -rf "$DIR/data/kvcache"
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --reuse none,cacheblend:0,cacheblend:0.15,epic:16 --context gold --no-blend-check \
  --json "$DIR/report_blend.json" "${args[@]}" 2>> "$DIR/eval.log"
# ... and as served (the self-check may turn a mode into exact reuse: see the approx column).
rm -rf "$DIR/data/kvcache"
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --reuse cacheblend,epic --context gold --json "$DIR/report_blend_served.json" "${args[@]}" 2>> "$DIR/eval.log"
# Iterative RAG (retrieval again every 2 generated tokens, the question + the last 8 tokens as the
# query): sequential vs PipeRAG's one-interval-stale query vs RaLMSpec speculation (identical to
# sequential by construction).
mkdir -p "$DIR/pipelines"
cat > "$DIR/pipelines/iter.toml" <<'TOML'
[pipeline]
name = "iter"
description = "iterative RAG for the accuracy harness"
[retriever]
top_k = 4
[iterative]
retrieval_interval = 2
query_window = 8
TOML
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --pipelines "$DIR/pipelines" --pipeline iter --reuse knowledge_tree --overlap none,piperag,speculative \
  --context retrieved --json "$DIR/report_iterative.json" "${args[@]}" 2>> "$DIR/eval.log"
# Extractive answers (pipelines/src/extractive.h): the same four-passage pipeline, generation
# restricted to spans of the prompt.
cat > "$DIR/pipelines/extractive.toml" <<'TOML'
[pipeline]
name = "extractive"
description = "the default pipeline with answers copied verbatim from the prompt"
[retriever]
top_k = 4
[generation]
extractive = true
TOML
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --pipelines "$DIR/pipelines" --pipeline extractive --reuse none --context both \
  --json "$DIR/report_extractive.json" "${args[@]}" 2>> "$DIR/eval.log"
# Reranking (pipelines/src/reranker.h, configs/pipelines/qa-rerank.toml): four passages retrieved,
# the model scores each by log P(question | passage), the best one makes the prompt.
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --pipelines configs/pipelines --pipeline qa-rerank --reuse none --context both \
  --json "$DIR/report_rerank.json" "${args[@]}" 2>> "$DIR/eval.log"
# Per-query configuration (configs/pipelines/qa-adapt.toml and its fitted qa-adapt.profile, fitted on
# a question set apart from this one: bench/adapt/sweep.sh): the policy's choice per question.
"$BIN/ragctl" eval --questions examples/qa_eval/questions.jsonl --model "$MODEL" --data "$DIR/data" \
  --pipelines configs/pipelines --pipeline qa-adapt --adapt auto --reuse none --context retrieved \
  --json "$DIR/report_adapt.json" "${args[@]}" 2>> "$DIR/eval.log"
echo "per-question results: $DIR/report.json, $DIR/report_top1.json, $DIR/report_blend.json, $DIR/report_blend_served.json, $DIR/report_iterative.json, $DIR/report_extractive.json, $DIR/report_rerank.json, $DIR/report_adapt.json"
# Where the wrong answers come from (a passage of the prompt: selection; none: garbled copying).
python3 tools/train/error_analysis.py --report "$DIR/report.json" --context gold
