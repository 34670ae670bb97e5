#!/usr/bin/env bash
# make train-quote-model: models/ragd-qa-quote, the QA model continued on quotation questions —
# the copy-heavy workload of speculative decoding (bench_speculative --mode qa with
# examples/qa_eval/quote_questions.jsonl). From models/ragd-qa, on fresh episodes (seed 31, training
# names and places made up anew, 4 questions each) of which 35 % of the questions ask to quote the
# gold passage whole (tools/train/make_data.py --quote-fraction); the other questions keep the
# model's earlier skills. CPU by default (about 70 minutes on 2 cores; QUOTE_MINUTES), resumable.
#   QUOTE_TRAIN_DIR (default data/train-quote), QUOTE_MODEL_OUT (default models/ragd-qa-quote),
#   QUOTE_DEVICE (default cpu), TRAIN_THREADS (default 2), RAGCTL (default BUILD/bin/ragctl).
set -euo pipefail
BUILD=${1:-build}
RAGCTL=${RAGCTL:-$BUILD/bin/ragctl}
DIR=${QUOTE_TRAIN_DIR:-data/train-quote}
OUT=${QUOTE_MODEL_OUT:-models/ragd-qa-quote}
source "$(dirname "$0")/torch-python.sh" train-quote-model
mkdir -p "$DIR"
if [[ ! -f "$DIR/val.bin" ]]; then
  python3 tools/train/make_data.py --out "$DIR" --seed 31 --scale 0.15 --turns 4 --fresh-names --quote-fraction 0.35
  cp models/ragd-qa/tokenizer.json "$DIR/"
  for s in stage0 stage1 stage2 val; do
    "$RAGCTL" encode-episodes --tokenizer "$DIR/tokenizer.json" --in "$DIR/$s.jsonl" --out "$DIR/$s.bin"
  done
fi
"$PY" tools/train/train.py --data "$DIR" --out "$DIR/run" --device "${QUOTE_DEVICE:-cpu}" --minutes "${QUOTE_MINUTES:-70}" \
  --hidden 384 --layers 8 --heads 6 --kv-heads 2 --ffn 896 --batch-tokens 2048 --lr 5e-4 --warmup 20 --ctx-weight 0.1 \
  --init-from models/ragd-qa --start-stage 2 --threads "${TRAIN_THREADS:-2}" --eval-minutes 6 --ckpt-minutes 3 --seed 31
"$PY" tools/train/export_ckpt.py --run "$DIR/run" --out "$DIR/final"
mkdir -p "$OUT"
cp "$DIR/final/config.json" "$DIR/final/model.safetensors" "$OUT/"
cp models/ragd-qa/tokenizer.json "$OUT/"
cp "$DIR/run/log.jsonl" "$OUT/training_log.jsonl"
echo "train-quote-model: model in $OUT"
