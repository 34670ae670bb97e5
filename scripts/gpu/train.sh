#!/usr/bin/env bash
# Runs the GPU phase of `make train-model`'s gpu recipe (scripts/train-model.sh) on a machine with
# a GPU and PyTorch, from the repo root, with the ragctl that scripts/gpu-check.sh packed into
# build-gpu-carry/. Writes under $OUT: config.json, log.jsonl (the training curve), train.log and
# the weights in pieces of at most 15 MiB (cat model.safetensors.part* > model.safetensors).
# Env: MINUTES (training budget, default 4.5), WORK (default /tmp/ragd_train), TRAIN_DATA_ARGS (see
# scripts/train-model.sh).
set -euo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
# shellcheck source=scripts/gpu/env.sh
source "$(dirname "$0")/env.sh"
WORK=${WORK:-/tmp/ragd_train}
mkdir -p "$WORK"
cp models/ragd-qa/tokenizer.json "$WORK/"  # the committed tokenizer: no need to train it again
PYTHONUNBUFFERED=1 TRAIN_RECIPE=gpu TRAIN_FIXTURE=0 RAGCTL="$CARRY/bin/ragctl" TRAIN_DIR="$WORK" \
  MODEL_OUT="$WORK/model" TRAIN_GPU_MINUTES="${MINUTES:-4.5}" bash scripts/train-model.sh 2>&1 | tee "$OUT/train.log" || true
cp "$WORK/model/config.json" "$OUT/" 2>/dev/null || true
cp "$WORK/model/training_log.jsonl" "$OUT/log.jsonl" 2>/dev/null || true
split -b 15M -d "$WORK/model/model.safetensors" "$OUT/model.safetensors.part" 2>/dev/null || true
