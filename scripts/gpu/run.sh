#!/usr/bin/env bash
# Runs on the GPU machine, from the repo root, after scripts/gpu-check.sh prepared build-gpu-carry/.
# Writes under $OUT (default ./gpu-out; at most 8 files, so that a remote runner with a file limit returns them all): tests.log
# (nvidia-smi, the CUDA tests), engine.md / engine.csv (bench_engine_cuda, llama3-8b), attention.log /
# attention.csv (vs PyTorch SDPA), rates.json (kernel rates for `ragctl plan --rates`, from the two
# benches: scripts/gpu/rates.py), e2e.log (the RAG pipeline and CacheBlend / EPIC on the GPU) and
# memcheck.log when compute-sanitizer is there. Each step has a time limit. All default steps take
# more than one 10-minute device call now; one call fits STEPS="tests attention engine" with
# ENGINE_ARGS="--batches 1,32,64" (about 8 minutes, estimated). ENGINE_ARGS adds flags to the engine
# bench.
# STEPS (default "tests engine attention e2e blend demo memcheck") picks the steps ("demo": make demo's
# script with the model on the GPU, ragd over HTTP and WebSocket, into e2e.log); "profile" (not in the
# default) appends Nsight Compute's per-kernel times of two batch-1 decode steps to engine.md.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
# shellcheck source=scripts/gpu/env.sh
source "$(dirname "$0")/env.sh"

STEPS=" ${STEPS:-tests engine attention e2e blend demo memcheck} "
want() { [[ "$STEPS" == *" $1 "* ]]; }
nvidia-smi > "$OUT/tests.log" 2>&1  # in tests.log: at most 8 files under $OUT
export RAGD_SOURCE_DIR=$PWD
rc=0 erc=0 brc=0 mrc=0
# Canary for the prefill kernels (any step): the first of wgmma (pipelined, serial), mma.sync whose
# prefill tests pass serves the rest of the run, so that a faulty kernel does not spoil the other
# measurements; the tests step below still runs (and reports) every kernel.
prefill_ok() {  # $1: the long-chunk instance of the kernel; then VAR=value settings
  local chunk=$1
  shift
  env "$@" timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
    --gtest_filter="Shapes/Prefill*:PrefillKernelChoice.*:LongChunk/*/$chunk" > /tmp/ragd_canary.log 2>&1
}
if prefill_ok wgmma RAGD_CUDA_WGMMA=1; then
  echo "canary: prefill kernel $("$CARRY/bin/bench_attention_cuda" --print-kernel) passes its tests" | tee -a "$OUT/tests.log"
elif prefill_ok wgmma_serial RAGD_PREFILL_SM90_SCHEDULE=serial; then
  export RAGD_PREFILL_SM90_SCHEDULE=serial
  { echo "canary: the pipelined wgmma prefill FAILED; the rest of the run uses the serial schedule"
    tail -25 /tmp/ragd_canary.log; } | tee -a "$OUT/tests.log"
else
  export RAGD_CUDA_WGMMA=0
  { echo "canary: the wgmma prefill FAILED (both schedules); the rest of the run uses mma.sync"
    tail -25 /tmp/ragd_canary.log; } | tee -a "$OUT/tests.log"
fi
if want tests; then
  {
    # (the warp-specialised instance runs below, on its own: a hang there costs only that run)
    env -u RAGD_CUDA_WGMMA -u RAGD_PREFILL_SM90_SCHEDULE timeout 100 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
      --gtest_filter='-*/wgmma_ws'
    echo "test_kernels_cuda rc=$?"
    # The prefill tests on the other kernels the dispatcher can pick (the default above is the
    # pipelined Hopper wgmma kernel on an H100 / H200): its serial and warp-specialised schedules,
    # the mma.sync kernel (both tile shapes).
    for sched in serial ws; do
      RAGD_PREFILL_SM90_SCHEDULE=$sched timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
        --gtest_filter="Shapes/Prefill*:LongChunk/*/wgmma_$sched"
      echo "test_kernels_cuda (wgmma, $sched schedule) rc=$?"
    done
    RAGD_CUDA_WGMMA=0 timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 --gtest_filter='Shapes/Prefill*'
    echo "test_kernels_cuda (mma.sync) rc=$?"
    RAGD_CUDA_WGMMA=0 RAGD_PREFILL_ROWS_PER_WARP=16 timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
      --gtest_filter='Shapes/Prefill*'
    echo "test_kernels_cuda (mma.sync, 16 rows per warp) rc=$?"
    timeout 110 "$CARRY/bin/test_engine_cuda" --gtest_brief=1
    echo "test_engine_cuda rc=$?"
    RAGD_CUDA_DECODE_PIPELINE=0 timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
      --gtest_filter='Shapes/DecodeCuda.*'
    echo "test_kernels_cuda (decode without load pipelining) rc=$?"
    # Dependent launches (opt-in RAGD_CUDA_PDL=1): the kernels they touch, launched that way.
    RAGD_CUDA_PDL=1 timeout 60 "$CARRY/bin/test_kernels_cuda" --gtest_brief=1 \
      --gtest_filter='DecodeFusedCuda.*:Shapes/DecodeCuda.*:Dtypes/ElementwiseCuda.*:MiscCuda.*'
    echo "test_kernels_cuda (dependent launches) rc=$?"
    timeout 60 "$CARRY/bin/test_pipelines_cuda" --gtest_brief=1
    echo "test_pipelines_cuda rc=$?"
    # NCCL: one rank per GPU (two ranks cannot share one), so one GPU runs the one-rank collectives.
    timeout 60 "$CARRY/bin/test_seqparallel" --gtest_brief=1 --gtest_filter='Nccl*'
    echo "test_seqparallel (NCCL) rc=$?"
  } 2>&1 | grep -vE ' info \[' | tee -a "$OUT/tests.log"
  rc=$(grep -c ' rc=[1-9]' "$OUT/tests.log")
fi
if want engine; then
  # ENGINE_ARGS: more flags for the engine bench (e.g. --batches 1,32,64 to fit a shorter call).
  # shellcheck disable=SC2086
  timeout 220 "$CARRY/bin/bench_engine_cuda" --preset llama3-8b --csv "$OUT/engine.csv" ${ENGINE_ARGS:-} 2>&1 |
    tee "$OUT/engine.md"
  erc=${PIPESTATUS[0]}
fi
if want attention; then
  PYTHONUNBUFFERED=1 timeout 90 python3 scripts/gpu/attention_vs_sdpa.py --bench "$CARRY/bin/bench_attention_cuda" \
    --out "$OUT" 2>&1 | tee "$OUT/attention.log"
  brc=${PIPESTATUS[0]}
  # The same prefill on the other kernels, same run: the wgmma kernel's warp-specialised and serial
  # schedules and the mma.sync kernel (what every other GPU runs).
  echo "# paged decode without load pipelining (RAGD_CUDA_DECODE_PIPELINE=0; the rows above have it)" |
    tee -a "$OUT/attention.log"
  RAGD_CUDA_DECODE_PIPELINE=0 timeout 40 "$CARRY/bin/bench_attention_cuda" --tokens 4096 --heads 32 --kv-heads 8 \
    --head-dim 128 --iters 5 --decode-batches 1,8,32 --decode-len 4096,32768 2>&1 | grep '^decode' |
    tee -a "$OUT/attention.log"
  for sw in RAGD_PREFILL_SM90_SCHEDULE=ws RAGD_PREFILL_SM90_SCHEDULE=serial RAGD_CUDA_WGMMA=0; do
    echo "# the same prefill with $sw" | tee -a "$OUT/attention.log"
    env "$sw" timeout 40 "$CARRY/bin/bench_attention_cuda" --tokens 4096,16384,65536 --heads 32 \
      --kv-heads 8 --head-dim 128 --iters 5 --decode-batches 1 --decode-len 4096 2>&1 | tee -a "$OUT/attention.log"
  done
fi
# Kernel rates for `ragctl plan --rates` (seqparallel/perf_model.h), from the two benches above.
if [ -f "$OUT/engine.csv" ] && [ -f "$OUT/attention.csv" ]; then
  python3 scripts/gpu/rates.py --engine "$OUT/engine.csv" --attention "$OUT/attention.csv" --layers 32 --kv-heads 8 \
    --head-dim 128 --device "$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1), llama3-8b shape" \
    > "$OUT/rates.json" && cat "$OUT/rates.json"
fi
# At most 8 files under $OUT: the attention summary goes into attention.log.
if [ -f "$OUT/attention.md" ]; then cat "$OUT/attention.md" >> "$OUT/attention.log" && rm "$OUT/attention.md"; fi
if want e2e; then
  timeout 45 "$CARRY/bin/bench_e2e" --device cuda:0 --requests 40 --sched-requests 0 --out /tmp/ragd_e2e 2>&1 |
    grep -vE ' info \[' > "$OUT/e2e.log"
fi
if want blend; then
  timeout 120 "$CARRY/bin/bench_blend" --model models/ragd-qa --device cuda:0 --cases 24 --requests 60 \
    --out /tmp/ragd_blend 2>&1 | grep -vE ' info \[' >> "$OUT/e2e.log"
  tail -30 "$OUT/e2e.log"
fi
if want demo; then
  RAGD_DEMO_DEVICE=cuda:0 RAGD_DEMO_DIR=/tmp/ragd_demo timeout 90 bash scripts/demo.sh "$CARRY" >> "$OUT/e2e.log" 2>&1
  echo "demo on cuda:0 rc=$?" | tee -a "$OUT/e2e.log"
fi
if want profile; then
  # Per-kernel time of two batch-1 decode steps of llama3-8b launched kernel by kernel (GEMV on,
  # graphs off; RAGD_PROFILE_DECODE brackets them), from Nsight Compute, summed by kernel.
  NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1 || true)
  if [ -n "$NCU" ]; then
    RAGD_PROFILE_DECODE=1 timeout 240 "$NCU" --profile-from-start off --metrics gpu__time_duration.sum --csv \
      --print-units base "$CARRY/bin/bench_engine_cuda" --preset llama3-8b --batches 1 --steps 4 --prefill 512 \
      --prompt 512 > /tmp/ragd_ncu.csv 2> /tmp/ragd_ncu.err
    echo "ncu rc=$?" | tee -a "$OUT/engine.md"
    python3 scripts/gpu/kernel_times.py /tmp/ragd_ncu.csv --steps 2 2>&1 | tee -a "$OUT/engine.md"
    tail -5 /tmp/ragd_ncu.err >> "$OUT/engine.md"
  else
    echo "profile: ncu not found" | tee -a "$OUT/engine.md"
  fi
fi
# Out-of-bounds / misaligned accesses the numerical tests might not notice (last: it is slow).
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if want memcheck && [ -n "$SAN" ]; then
  timeout 40 "$SAN" --tool memcheck --error-exitcode 3 "$CARRY/bin/test_engine_cuda" \
    --gtest_filter='*CudaVsCpu*d64_h4*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
  mrc=$?
  timeout 40 "$SAN" --tool memcheck --error-exitcode 3 "$CARRY/bin/test_kernels_cuda" \
    --gtest_filter='Shapes/Prefill*:*Linear*' --gtest_brief=1 >> "$OUT/memcheck.log" 2>&1
  mrc=$(( mrc != 0 ? mrc : $? ))
  tail -5 "$OUT/memcheck.log"
fi
echo "run.sh: failed test binaries=$rc, engine bench rc=$erc, attention bench rc=$brc, memcheck rc=$mrc"
exit $(( rc != 0 ? 1 : (erc != 0 ? erc : (brc != 0 ? brc : mrc)) ))
