#!/usr/bin/env bash
# make train-model: reproduces the committed QA model under models/ragd-qa/ from nothing but this
# repository: data generation (tools/train/make_data.py), ragd's own BPE tokenizer, episode
# encoding through the default pipeline's prompt builder, training with PyTorch (resumable,
# wall-clock budget), export, the parity fixture and the evaluation.
#
# Two recipes (TRAIN_RECIPE=gpu|cpu; default gpu when PyTorch sees a CUDA device, else cpu):
#   gpu — the committed model (12.2 M parameters, 8 layers x 384), from scratch on a GPU: eight
#     episode sets (seeds 11-18, 4 questions per episode, training names and places made up anew for
#     every episode: --fresh-names), bf16 autocast, batches of 64 k tokens, TRAIN_GPU_MINUTES
#     (default 4.5; an H200 trains ~0.7 M tokens/s).
#   cpu — the earlier 1.97 M-parameter model (4 layers x 192), four CPU phases:
#     1. from scratch: one question per episode, curriculum by answer loss (TRAIN_MINUTES, default 90);
#     2. continued from phase 1 on fresh episodes with 4 questions each (the first in the pipeline's
#        prompt, 3 follow-up turns), starting at stage 0 again (TRAIN2_MINUTES, default 115; 0 skips);
#     3. continued from phase 2 on another fresh set of such episodes, at the last curriculum stage,
#        with a new warm-up and cosine decay (TRAIN3_MINUTES, default 120; 0 skips);
#     4. the same again on a fifth set (seed 6), the answer loss weighted up (context LM weight 0.05
#        instead of 0.2) (TRAIN4_MINUTES, default 92; 0 skips).
#   TRAIN_DIR (default data/train), MODEL_OUT (default models/ragd-qa), TRAIN_THREADS (default 2),
#   RAGCTL (default BUILD/bin/ragctl), TRAIN_FIXTURE=0 (skip the parity fixture), TRAIN_DATA_ARGS
#   (more make_data.py flags for the gpu recipe's episode sets, e.g. --retrieval-like; empty for the
#   committed model).
set -euo pipefail
BUILD=${1:-build}
RAGCTL=${RAGCTL:-$BUILD/bin/ragctl}
TRAIN_DIR=${TRAIN_DIR:-data/train}
MODEL_OUT=${MODEL_OUT:-models/ragd-qa}
MINUTES=${TRAIN_MINUTES:-90}
source "$(dirname "$0")/torch-python.sh" train-model

RECIPE=${TRAIN_RECIPE:-}
if [[ -z "$RECIPE" ]]; then
  if "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>/dev/null; then RECIPE=gpu; else RECIPE=cpu; fi
fi
echo "train-model: recipe $RECIPE"

# The tokenizer (both recipes) is trained on the text of the first episode set (seed 1), which is
# also the cpu recipe's phase-1 data; the evaluation set is written beside it.
mkdir -p "$TRAIN_DIR"
if [[ ! -f "$TRAIN_DIR/stage2.jsonl" && ( ! -f "$TRAIN_DIR/tokenizer.json" || "$RECIPE" == cpu ) ]]; then
  python3 tools/train/make_data.py --out "$TRAIN_DIR" --seed 1 --turns 1 --eval-dir examples/qa_eval
fi
if [[ ! -f "$TRAIN_DIR/tokenizer.json" ]]; then
  "$RAGCTL" train-tokenizer --text "$TRAIN_DIR/tokenizer_text.txt" --vocab 2000 --pad-to 2048 \
    --no-digit-merges --out "$TRAIN_DIR/tokenizer.json"
fi
if [[ "$RECIPE" == cpu ]]; then
  for s in stage0 stage1 stage2 val; do
    [[ -f "$TRAIN_DIR/$s.bin" ]] || "$RAGCTL" encode-episodes --tokenizer "$TRAIN_DIR/tokenizer.json" \
      --in "$TRAIN_DIR/$s.jsonl" --out "$TRAIN_DIR/$s.bin"
  done
fi

# A continued phase: episodes of seed $2 in $TRAIN_DIR/$1 (make_data.py arguments in DATA_ARGS), $3
# minutes from the model in $FINAL (the tokenizer stays), extra train.py arguments after; $FINAL
# becomes its export.
continue_phase() {
  local dir="$TRAIN_DIR/$1" seed=$2 minutes=$3
  shift 3
  mkdir -p "$dir"
  [[ -f "$dir/stage2.jsonl" ]] || python3 tools/train/make_data.py --out "$dir" --seed "$seed" --turns 4 ${DATA_ARGS:-}
  cp "$TRAIN_DIR/tokenizer.json" "$dir/"
  for s in stage0 stage1 stage2 val; do
    [[ -f "$dir/$s.bin" ]] || "$RAGCTL" encode-episodes --tokenizer "$dir/tokenizer.json" --in "$dir/$s.jsonl" --out "$dir/$s.bin"
  done
  "$PY" tools/train/train.py --data "$dir" --out "$dir/run" --minutes "$minutes" "${SHAPE[@]}" --init-from "$FINAL" "$@"
  "$PY" tools/train/export_ckpt.py --run "$dir/run" --out "$dir/final"
  cp "$TRAIN_DIR/tokenizer.json" "$dir/final/"
  FINAL="$dir/final"
}

if [[ "$RECIPE" == gpu ]]; then
  SHAPE=(--hidden 384 --layers 8 --heads 6 --kv-heads 2 --ffn 896)
  # Eight episode sets, generated in parallel.
  dirs=""
  for seed in ${TRAIN_SEEDS:-11 12 13 14 15 16 17 18}; do
    d="$TRAIN_DIR/gpu$seed"
    dirs="${dirs:+$dirs,}$d"
    (
      mkdir -p "$d"
      cp "$TRAIN_DIR/tokenizer.json" "$d/"
      if [[ ! -f "$d/val.bin" ]]; then
        python3 tools/train/make_data.py --out "$d" --seed "$seed" --turns 4 --fresh-names ${TRAIN_DATA_ARGS:-} > /dev/null
        for s in stage0 stage1 stage2 val; do
          "$RAGCTL" encode-episodes --tokenizer "$d/tokenizer.json" --in "$d/$s.jsonl" --out "$d/$s.bin" > /dev/null
          rm "$d/$s.jsonl"
        done
      fi
    ) &
  done
  wait
  "$PY" tools/train/train.py --device cuda --data "$dirs" --out "$TRAIN_DIR/gpu_run" --minutes "${TRAIN_GPU_MINUTES:-4.5}" \
    "${SHAPE[@]}" --batch-tokens 65536 --lr 2e-3 --ctx-weight 0.1 --seed 21 --threads 4 --eval-minutes 0.5 --ckpt-minutes 1
  "$PY" tools/train/export_ckpt.py --run "$TRAIN_DIR/gpu_run" --out "$TRAIN_DIR/gpu_final"
  cp "$TRAIN_DIR/tokenizer.json" "$TRAIN_DIR/gpu_final/"
  LOG1="$TRAIN_DIR/gpu_run/log.jsonl"
  FINAL="$TRAIN_DIR/gpu_final"
  mkdir -p "$MODEL_OUT"
  cp "$FINAL/config.json" "$FINAL/model.safetensors" "$FINAL/tokenizer.json" "$MODEL_OUT/"
  rm -f "$MODEL_OUT"/training_log*.jsonl
  cp "$LOG1" "$MODEL_OUT/training_log.jsonl"
else
  SHAPE=(--hidden 192 --layers 4 --heads 6 --kv-heads 2 --ffn 512 --batch-tokens 2500 --threads "${TRAIN_THREADS:-2}")

  # Phase 1. Resumes from $TRAIN_DIR/run/ckpt.pt when present.
  "$PY" tools/train/train.py --data "$TRAIN_DIR" --out "$TRAIN_DIR/run" --minutes "$MINUTES" "${SHAPE[@]}" --lr 2e-3
  # The last state of the run (the held-out check during training is too noisy to pick by).
  "$PY" tools/train/export_ckpt.py --run "$TRAIN_DIR/run" --out "$TRAIN_DIR/phase1"
  cp "$TRAIN_DIR/tokenizer.json" "$TRAIN_DIR/phase1/"
  LOG1="$TRAIN_DIR/run/log.jsonl"
  FINAL="$TRAIN_DIR/phase1"

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
fi
if [[ "${TRAIN_FIXTURE:-1}" != 0 ]]; then
  "$PY" tools/train/parity_fixture.py --model "$MODEL_OUT" --ragctl "$RAGCTL" --out tests/engine_io/data/qa_model_logits.bin
fi
echo "train-model: model in $MODEL_OUT; evaluate with: make eval"
