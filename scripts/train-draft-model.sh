#!/usr/bin/env bash
# make train-draft-model: models/ragd-draft, a 2-layer draft model for speculative decoding
# (`speculative = { method = "draft", draft_model = "models/ragd-draft" }`), distilled from
# models/ragd-qa-quote (tools/train/distill.py) on fresh episodes made like the quote model's second
# run (make_data.py --seed 37 --scale 0.15 --turns 4 --fresh-names --quote-fraction 0.5, encoded by
# `ragctl encode-episodes`). The student keeps the teacher's tokenizer, width and heads, starts from
# the teacher's embeddings and the two teacher layers that agree most with it, and learns the
# teacher's next-token distribution (KL). Deterministic (seeded, fixed step count, one thread);
# about 35 minutes on one CPU core.
#   DRAFT_TRAIN_DIR (default data/train-draft), DRAFT_MODEL_OUT (default models/ragd-draft),
#   DRAFT_TEACHER (default models/ragd-qa-quote), DRAFT_STEPS (default 800), DRAFT_LAYERS (default 2),
#   TRAIN_THREADS (default 1), RAGCTL (default BUILD/bin/ragctl).
set -euo pipefail
BUILD=${1:-build}
RAGCTL=${RAGCTL:-$BUILD/bin/ragctl}
DIR=${DRAFT_TRAIN_DIR:-data/train-draft}
OUT=${DRAFT_MODEL_OUT:-models/ragd-draft}
TEACHER=${DRAFT_TEACHER:-models/ragd-qa-quote}
source "$(dirname "$0")/torch-python.sh" train-draft-model
mkdir -p "$DIR"
if [[ ! -f "$DIR/val.bin" ]]; then
  python3 tools/train/make_data.py --out "$DIR" --seed 37 --scale 0.15 --turns 4 --fresh-names --quote-fraction 0.5
  cp "$TEACHER/tokenizer.json" "$DIR/"
  for s in stage1 stage2 val; do
    "$RAGCTL" encode-episodes --tokenizer "$DIR/tokenizer.json" --in "$DIR/$s.jsonl" --out "$DIR/$s.bin"
  done
fi
rm -rf "$DIR/run"
nice "$PY" tools/train/distill.py --teacher "$TEACHER" --data "$DIR" --out "$DIR/run" --layers "${DRAFT_LAYERS:-2}" \
  --steps "${DRAFT_STEPS:-800}" --batch-tokens 2048 --lr 1e-3 --warmup 20 --ctx-weight 0.1 \
  --threads "${TRAIN_THREADS:-1}" --seed 41 2>&1 | tee "$DIR/distill.log"
mkdir -p "$OUT"
cp "$DIR/run/final/config.json" "$DIR/run/final/model.safetensors" "$OUT/"
cp "$TEACHER/tokenizer.json" "$OUT/"
cp "$DIR/run/log.jsonl" "$OUT/training_log.jsonl"
# Agreement with the teacher on fresh episodes (seed 38, half quotations): all answer tokens and
# the quotations' (answers of 30 tokens or more), teacher-forced.
EVAL=${DIR}-eval
if [[ ! -f "$EVAL/stage2.bin" ]]; then
  mkdir -p "$EVAL"
  python3 tools/train/make_data.py --out "$EVAL" --seed 38 --scale 0.01 --turns 4 --fresh-names --quote-fraction 0.5
  "$RAGCTL" encode-episodes --tokenizer "$TEACHER/tokenizer.json" --in "$EVAL/stage2.jsonl" --out "$EVAL/stage2.bin"
fi
nice "$PY" tools/train/distill.py --teacher "$TEACHER" --data "$DIR" --out "$DIR/run" --evaluate "$OUT" \
  --eval-file "$EVAL/stage2.bin" --val 40 --threads "${TRAIN_THREADS:-1}" | tee "$OUT/eval.json"
echo "train-draft-model: model in $OUT"
