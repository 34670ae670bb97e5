#!/usr/bin/env bash
# Runs on the GPU machine, from the repo root, after scripts/gpu-check.sh prepared build-gpu-carry/.
# Writes under $OUT (default ./gpu-out): nvidia-smi.txt, test_kernels_cuda.log/.xml,
# attention.log, attention.csv, attention.md, and memcheck.log when compute-sanitizer is there.
set -uo pipefail
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
CARRY=${CARRY:-build-gpu-carry}
if [ ! -x "$CARRY/bin/test_kernels_cuda" ]; then
  echo "run.sh: $CARRY/bin/test_kernels_cuda missing: run scripts/gpu-check.sh on the build machine and carry $CARRY" >&2
  exit 1
fi

# cuBLAS 13 from the machine: the toolkit's lib64 and/or the pip wheels that PyTorch uses.
libdirs="$PWD/$CARRY/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && libdirs="$libdirs:$d"
done
pylibs=$(python3 - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    seen = set()
    for base in nvidia.__path__:
        for f in glob.glob(os.path.join(base, "**", "libcublas*.so*"), recursive=True):
            d = os.path.dirname(f)
            if d not in seen:
                seen.add(d)
                print(d)
except Exception:
    pass
PY
)
for d in $pylibs; do libdirs="$libdirs:$d"; done
export LD_LIBRARY_PATH="$libdirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"

nvidia-smi > "$OUT/nvidia-smi.txt" 2>&1
rc=0
"$CARRY/bin/test_kernels_cuda" --gtest_output="xml:$OUT/test_kernels_cuda.xml" 2>&1 | tee "$OUT/test_kernels_cuda.log"
rc=${PIPESTATUS[0]}
PYTHONUNBUFFERED=1 python3 scripts/gpu/attention_vs_sdpa.py --bench "$CARRY/bin/bench_attention_cuda" --out "$OUT" \
  2>&1 | tee "$OUT/attention.log"
brc=${PIPESTATUS[0]}
# Out-of-bounds / misaligned accesses the numerical tests might not notice (last: it is slow).
mrc=0
SAN=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -n "$SAN" ]; then
  timeout 300 "$SAN" --tool memcheck --error-exitcode 3 "$CARRY/bin/test_kernels_cuda" \
    --gtest_filter='*Cuda*' --gtest_brief=1 > "$OUT/memcheck.log" 2>&1
  mrc=$?
  tail -5 "$OUT/memcheck.log"
fi
echo "run.sh: tests rc=$rc, attention bench rc=$brc, memcheck rc=$mrc"
exit $(( rc != 0 ? rc : (brc != 0 ? brc : mrc) ))
