#!/usr/bin/env bash
# make train-quote-model: models/ragd-qa-quote, the QA model continued on quotation questions —
# the copy-heavy workload of speculative decoding (bench_speculative --mode qa with
# examples/qa_eval/quote_questions.jsonl). Two runs on fresh episodes (training names and places
# made up anew, 4 questions each): run 1 from models/ragd-qa (seed 31, 35 % of the questions ask to
# quote the gold passage whole, 70 minutes, peak lr 5e-4), run 2 from run 1's model (seed 37, 50 %,
# 60 minutes, peak lr 3e-4) (tools/train/make_data.py --quote-fraction); the other questions keep
# the model's earlier skills. CPU by default (about 130 minutes on 2 cores; QUOTE_MINUTES and
# QUOTE_MINUTES2), resumable.
#   QUOTE_TRAIN_DIR (default data/train-quote; run 2 in ${QUOTE_TRAIN_DIR}2), QUOTE_MODEL_OUT
#   (default models/ragd-qa-quote), QUOTE_DEVICE (default cpu), TRAIN_THREADS (default 2), RAGCTL
#   (default BUILD/bin/ragctl).
set -euo pipefail
BUILD=${1:-build}
RAGCTL=${RAGCTL:-$BUILD/bin/ragctl}
DIR=${QUOTE_TRAIN_DIR:-data/train-quote}
OUT=${QUOTE_MODEL_OUT:-models/ragd-qa-quote}
source "$(dirname "$0")/torch-python.sh" train-quote-model
# One run: episodes (seed, quote fraction) into $1, trained from $4 for $5 minutes at peak lr $6.
run() {
  local dir=$1 seed=$2 quote=$3 init=$4 minutes=$5 lr=$6
  mkdir -p "$dir"
  if [[ ! -f "$dir/val.bin" ]]; then
    python3 tools/train/make_data.py --out "$dir" --seed "$seed" --scale 0.15 --turns 4 --fresh-names --quote-fraction "$quote"
    cp models/ragd-qa/tokenizer.json "$dir/"
    for s in stage0 stage1 stage2 val; do
      "$RAGCTL" encode-episodes --tokenizer "$dir/tokenizer.json" --in "$dir/$s.jsonl" --out "$dir/$s.bin"
    done
  fi
  "$PY" tools/train/train.py --data "$dir" --out "$dir/run" --device "${QUOTE_DEVICE:-cpu}" --minutes "$minutes" \
    --hidden 384 --layers 8 --heads 6 --kv-heads 2 --ffn 896 --batch-tokens 2048 --lr "$lr" --warmup 20 --ctx-weight 0.1 \
    --init-from "$init" --start-stage 2 --threads "${TRAIN_THREADS:-2}" --eval-minutes 6 --ckpt-minutes 3 --seed "$seed"
  "$PY" tools/train/export_ckpt.py --run "$dir/run" --out "$dir/final"
  cp models/ragd-qa/tokenizer.json "$dir/final/"
}
run "$DIR" 31 0.35 models/ragd-qa "${QUOTE_MINUTES:-70}" 5e-4
run "${DIR}2" 37 0.5 "$DIR/final" "${QUOTE_MINUTES2:-60}" 3e-4
mkdir -p "$OUT"
cp "${DIR}2/final/config.json" "${DIR}2/final/model.safetensors" "$OUT/"
cp models/ragd-qa/tokenizer.json "$OUT/"
{ sed 's/^{/{"run": 1, /' "$DIR/run/log.jsonl"; sed 's/^{/{"run": 2, /' "${DIR}2/run/log.jsonl"; } > "$OUT/training_log.jsonl"
echo "train-quote-model: model in $OUT"
