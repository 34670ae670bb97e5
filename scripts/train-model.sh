#!/usr/bin/env bash
# make train-model: reproduces the committed QA model under models/ragd-qa/ from nothing but this
# repository: data generation (tools/train/make_data.py), ragd's own BPE tokenizer, episode
# encoding through the default pipeline's prompt builder, CPU training with PyTorch (Debian's
# python3-torch; resumable, wall-clock budget), export, the parity fixture and the evaluation.
#   TRAIN_MINUTES (default 90), TRAIN_TURNS (questions per training episode, default 1),
#   TRAIN_DIR (default data/train), MODEL_OUT (default models/ragd-qa)
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
  python3 tools/train/make_data.py --out "$TRAIN_DIR" --seed 1 --turns "${TRAIN_TURNS:-1}" --eval-dir examples/qa_eval
fi
if [[ ! -f "$TRAIN_DIR/tokenizer.json" ]]; then
  "$BIN/ragctl" train-tokenizer --text "$TRAIN_DIR/tokenizer_text.txt" --vocab 2000 --pad-to 2048 \
    --no-digit-merges --out "$TRAIN_DIR/tokenizer.json"
fi
for s in stage0 stage1 stage2 val; do
  [[ -f "$TRAIN_DIR/$s.bin" ]] || "$BIN/ragctl" encode-episodes --tokenizer "$TRAIN_DIR/tokenizer.json" \
    --in "$TRAIN_DIR/$s.jsonl" --out "$TRAIN_DIR/$s.bin"
done

# Resumes from $TRAIN_DIR/run/ckpt.pt when present.
"$PY" tools/train/train.py --data "$TRAIN_DIR" --out "$TRAIN_DIR/run" --minutes "$MINUTES" \
  --hidden 192 --layers 4 --heads 6 --kv-heads 2 --ffn 512 --batch-tokens 2500 --lr 2e-3 --threads "${TRAIN_THREADS:-2}"

# The last state of the run (the held-out check during training is too noisy to pick by).
"$PY" tools/train/export_ckpt.py --run "$TRAIN_DIR/run" --out "$MODEL_OUT"
cp "$TRAIN_DIR/tokenizer.json" "$MODEL_OUT/"
cp "$TRAIN_DIR/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
"$PY" tools/train/parity_fixture.py --model "$MODEL_OUT" --out tests/engine_io/data/qa_model_logits.bin
echo "train-model: model in $MODEL_OUT; evaluate with: make eval"
