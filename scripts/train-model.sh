#!/usr/bin/env bash
# make train-model: reproduces the committed QA model under models/ragd-qa/ from nothing but this
# repository: data generation (tools/train/make_data.py), ragd's own BPE tokenizer, episode
# encoding through the default pipeline's prompt builder, CPU training with PyTorch (Debian's
# python3-torch; resumable, wall-clock budget), export, the parity fixture and the evaluation.
# Four phases, as the committed model was trained:
#   1. from scratch: one question per episode, curriculum by answer loss (TRAIN_MINUTES, default 90);
#   2. continued from phase 1 on fresh episodes with 4 questions each (the first in the pipeline's
#      prompt, 3 follow-up turns), starting at stage 0 again (TRAIN2_MINUTES, default 115; 0 skips);
#   3. continued from phase 2 on another fresh set of such episodes, at the last curriculum stage,
#      with a new warm-up and cosine decay (TRAIN3_MINUTES, default 120; 0 skips);
#   4. the same again on a fifth set (seed 6), the answer loss weighted up (context LM weight 0.05
#      instead of 0.2) (TRAIN4_MINUTES, default 92; 0 skips).
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

# A continued phase: fresh 4-question episodes of seed $2 in $TRAIN_DIR/$1, $3 minutes from the
# model in $FINAL (the tokenizer stays), extra train.py arguments after; $FINAL becomes its export.
continue_phase() {
  local dir="$TRAIN_DIR/$1" seed=$2 minutes=$3
  shift 3
  mkdir -p "$dir"
  [[ -f "$dir/stage2.jsonl" ]] || python3 tools/train/make_data.py --out "$dir" --seed "$seed" --turns 4
  cp "$TRAIN_DIR/tokenizer.json" "$dir/"
  for s in stage0 stage1 stage2 val; do
    [[ -f "$dir/$s.bin" ]] || "$BIN/ragctl" encode-episodes --tokenizer "$dir/tokenizer.json" --in "$dir/$s.jsonl" --out "$dir/$s.bin"
  done
  "$PY" tools/train/train.py --data "$dir" --out "$dir/run" --minutes "$minutes" "${SHAPE[@]}" --init-from "$FINAL" "$@"
  "$PY" tools/train/export_ckpt.py --run "$dir/run" --out "$dir/final"
  cp "$TRAIN_DIR/tokenizer.json" "$dir/final/"
  FINAL="$dir/final"
}

# Phase 2: new episodes (seed 3), 4 questions each, from curriculum stage 0.
MINUTES2=${TRAIN2_MINUTES:-115}
if [[ "$MINUTES2" != 0 ]]; then continue_phase phase2 3 "$MINUTES2" --lr 1.5e-3; fi
# Phase 3: the same again on other episodes (seed 4), from the last stage.
MINUTES3=${TRAIN3_MINUTES:-120}
if [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 ]]; then continue_phase phase3 4 "$MINUTES3" --lr 1e-3 --start-stage 2; fi
# Phase 4: other episodes (seed 6), the answer loss weighted up.
MINUTES4=${TRAIN4_MINUTES:-92}
if [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 && "$MINUTES4" != 0 ]]; then
  continue_phase phase4 6 "$MINUTES4" --lr 1e-3 --start-stage 2 --ctx-weight 0.05 --seed 6
fi

mkdir -p "$MODEL_OUT"
cp "$FINAL/config.json" "$FINAL/model.safetensors" "$FINAL/tokenizer.json" "$MODEL_OUT/"
cp "$LOG1" "$MODEL_OUT/training_log_run1.jsonl"
if [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 && "$MINUTES4" != 0 ]]; then
  cp "$TRAIN_DIR/phase2/run/log.jsonl" "$MODEL_OUT/training_log_run2.jsonl"
  cp "$TRAIN_DIR/phase3/run/log.jsonl" "$MODEL_OUT/training_log_run3.jsonl"
  cp "$TRAIN_DIR/phase4/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
elif [[ "$MINUTES2" != 0 && "$MINUTES3" != 0 ]]; then
  cp "$TRAIN_DIR/phase2/run/log.jsonl" "$MODEL_OUT/training_log_run2.jsonl"
  cp "$TRAIN_DIR/phase3/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
elif [[ "$MINUTES2" != 0 ]]; then
  cp "$TRAIN_DIR/phase2/run/log.jsonl" "$MODEL_OUT/training_log.jsonl"
fi
"$PY" tools/train/parity_fixture.py --model "$MODEL_OUT" --out tests/engine_io/data/qa_model_logits.bin
echo "train-model: model in $MODEL_OUT; evaluate with: make eval"
