#!/usr/bin/env bash
# make train-model: reproduces the committed QA model under models/ragd-qa/ from nothing but this
# repository: data generation (tools/train/make_data.py), ragd's own BPE tokenizer, episode
# encoding through the default pipeline's prompt builder, CPU training with PyTorch (Debian's
# python3-torch; resumable, wall-clock budget), export, the parity fixture and the evaluation.
# Two phases, as the committed model was trained:
#   1. from scratch: one question per episode, curriculum by answer loss (TRAIN_MINUTES, default 90);
#   2. continued from phase 1 on fresh episodes with 4 questions each (the first in the pipeline's
#      prompt, 3 follow-up turns), starting at stage 0 again (TRAIN2_MINUTES, default 115; 0 skips);
#   3. continued from phase 2 on another fresh set of such episodes, at the last curriculum stage,
#      with a new warm-up and cosine decay (TRAIN3_MINUTES, default 120; 0 skips).
#   TRAIN_DIR (default data/train), MODEL_OUT (default models/ragd-qa), TRAIN_THREADS (default 2)
set -euo pipefail
BUILD=${1:-build}
BIN="$BUILD/bin"
TRAIN_DIR=${TRAIN_DIR:-data/train}
MODEL_OUT=${MODEL_OUT:-models/ragd-qa}
MINUTES=${TRAIN_MINUTES:-90}
PY=${PYTHON_TORCH:-/usr/bin/python3}

if ! "$PY" -c 'import torch, numpy' 2>/dev/null; then
  echo "train-model: installing python3-torch and python3-numpy (Debian)"
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-torch python3-numpy
fi

mkdir -p "$TRAIN_DIR"
if [[ ! -f "$TRAIN_DIR/stage2.jsonl" ]]; then
  python3 tools/train/make_data.py --out "$TRAIN_DIR" --seed 1 --turns 1 --eval-dir examples/qa_eval
fi
if [[ ! -f "$TRAIN_DIR/tokenizer.json" ]]; then
  "$BIN/ragctl" train-tokenizer --text "$TRAIN_DIR/tokenizer_text.txt" --vocab 2000 --pad-to 2048 \
    --no-digit-merges --out "$TRAIN_DIR/tokenizer.json"
fi
for s in stage0 stage1 stage2 val; do
  [[ -f "$TRAIN_DIR/$s.bin" ]] || "$BIN/ragctl" encode-episodes --tokenizer "$TRAIN_DIR/tokenizer.json" \
    --in "$TRAIN_DIR/$s.jsonl" --out "$TRAIN_DIR/$s.bin"
done

SHAPE=(--hidden 192 --layers 4 --heads 6 --kv-heads 2 --ffn 512 --batch-tokens 2500 --threads "${TRAIN_THREADS:-2}")

# Phase 1. Resumes from $TRAIN_DIR/run/ckpt.pt when present.
"$PY" tools/train/train.py --data "$TRAIN_DIR" --out "$TRAIN_DIR/run" --minutes "$MINUTES" "${SHAPE[@]}" --lr 2e-3
# The last state of the run (the held-out check during training is too noisy to pick by).
"$PY" tools/train/export_ckpt.py --run "$TRAIN_DIR/run" --out "$TRAIN_DIR/phase1"
cp "$TRAIN_DIR/tokenizer.json" "$TRAIN_DIR/phase1/"
LOG1="$TRAIN_DIR/run/log.jsonl"
FINAL="$TRAIN_DIR/phase1"

# Phase 2: the same tokenizer, new episodes (another seed), 4 questions each.
MINUTES2=${TRAIN2_MINUTES:-115}
if [[ "$MINUTES2" != 0 ]]; then
  P2="$TRAIN_DIR/phase2"
  mkdir -p "$P2"
  [[ -f "$P2/stage2.jsonl" ]] || python3 tools/train/make_data.py --out "$P2" --seed 3 --turns 4
  cp "$TRAIN_DIR/tokenizer.json" "$P2/"
  for s in stage0 stage1 stage2 val; do
    [[ -f "$P2/$s.bin" ]] || "$BIN/ragctl" encode-episodes --tokenizer "$P2/tokenizer.json" --in "$P2/$s.jsonl" --out "$P2/$s.bin"
  done
  "$PY" tools/train/train.py --data "$P2" --out "$P2/run" --minutes "$MINUTES2" "${SHAPE[@]}" --lr 1.5e-3 \
    --init-from "$TRAIN_DIR/phase1"
  "$PY" tools/train/export_ckpt.py --run "$P2/run" --out "$P2/final"
  cp "$TRAIN_DIR/tokenizer.json" "$P2/final/"
  FINAL="$P2/final"
fi

# Phase 3: the same again on new episodes (another seed), from the last stage.
MINUTES3=${TRAIN3_MINUTES:-120}
if [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 ]]; then
  P3="$TRAIN_DIR/phase3"
  mkdir -p "$P3"
  [[ -f "$P3/stage2.jsonl" ]] || python3 tools/train/make_data.py --out "$P3" --seed 4 --turns 4
  cp "$TRAIN_DIR/tokenizer.json" "$P3/"
  for s in stage0 stage1 stage2 val; do
    [[ -f "$P3/$s.bin" ]] || "$BIN/ragctl" encode-episodes --tokenizer "$P3/tokenizer.json" --in "$P3/$s.jsonl" --out "$P3/$s.bin"
  done
  "$PY" tools/train/train.py --data "$P3" --out "$P3/run" --minutes "$MINUTES3" "${SHAPE[@]}" --lr 1e-3 \
    --init-from "$FINAL" --start-stage 2
  "$PY" tools/train/export_ckpt.py --run "$P3/run" --out "$P3/final"
  cp "$TRAIN_DIR/tokenizer.json" "$P3/final/"
  FINAL="$P3/final"
fi

mkdir -p "$MODEL_OUT"
cp "$FINAL/config.json" "$FINAL/model.safetensors" "$FINAL/tokenizer.json" "$MODEL_OUT/"
cp "$LOG1" "$MODEL_OUT/training_log_run1.jsonl"
if [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 ]]; then
  cp "$TRAIN_DIR/phase2/run/log.jsonl" "$MODEL_OUT/training_log_run2.jsonl"
  cp "$TRAIN_DIR/phase3/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
elif [[ "$MINUTES2" != 0 ]]; then
  cp "$TRAIN_DIR/phase2/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
fi
"$PY" tools/train/parity_fixture.py --model "$MODEL_OUT" --out tests/engine_io/data/qa_model_logits.bin
echo "train-model: model in $MODEL_OUT; evaluate with: make eval"
