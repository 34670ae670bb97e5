#!/usr/bin/env bash
# Prepares a CUDA check for a machine with a GPU (CUDA 13 driver and libraries, PyTorch).
#   1. builds the CUDA kernel and engine tests and the attention, engine and end-to-end benchmarks
#      here (nvcc, no GPU needed);
#   2. collects the binaries and the non-system shared libraries they need into build-gpu-carry/
#      (gitignored; glibc, libstdc++, libgcc_s, cuBLAS and the CUDA driver stay behind: the GPU
#      machine has its own);
#   3. prints the one command to run on the GPU machine, from the root of a copy of this tree that
#      includes build-gpu-carry/. It runs scripts/gpu/run.sh, which writes everything under $OUT.
# Env: RAGD_GPU_BUILD_DIR (default build, the tree `make build` uses: no second build), JOBS (default 1).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${RAGD_GPU_BUILD_DIR:-$ROOT/build}
CARRY=$ROOT/build-gpu-carry
export CCACHE_BASEDIR=$ROOT CCACHE_NOHASHDIR=1

if [ ! -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc >/dev/null; then
  echo "gpu-check: nvcc not found (install the CUDA toolkit or put nvcc on PATH)" >&2
  exit 1
fi
cmake -S "$ROOT" -B "$BUILD" -G Ninja -DRAGD_CUDA=ON >/dev/null
if ! grep -q '^RAGD_CUDA:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  echo "gpu-check: $BUILD is configured with RAGD_CUDA=OFF" >&2
  exit 1
fi
BINS=(test_kernels_cuda test_engine_cuda test_pipelines_cuda test_seqparallel bench_attention_cuda bench_engine_cuda bench_e2e bench_blend ragd ragctl)
cmake --build "$BUILD" --target "${BINS[@]}" ragd_cuda_module -j"${JOBS:-1}"

rm -rf "$CARRY"
mkdir -p "$CARRY/bin" "$CARRY/lib"
for b in "${BINS[@]}"; do
  # Line tables are enough for a backtrace; full debug info would not fit a 64 MiB transfer.
  objcopy --strip-debug "$BUILD/bin/$b" "$CARRY/bin/$b"
done
# The CUDA backend module the binaries load on a GPU request: found in lib/ beside bin/.
objcopy --strip-debug "$BUILD/lib/libragd_cuda.so" "$CARRY/lib/libragd_cuda.so"
for b in "$CARRY"/bin/* "$CARRY/lib/libragd_cuda.so"; do ldd "$b"; done | awk '/=> \//{print $1, $3}' | sort -u |
  while read -r name path; do
    case "$name" in
      libc.so*|libm.so*|libpthread.so*|libdl.so*|librt.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) continue ;;
      libcublas*|libcublasLt*|libnccl*|libcuda.so*|libcudart.so*|libnvidia*) continue ;;
    esac
    cp -L "$path" "$CARRY/lib/$name"
  done

# The libraries (OpenBLAS alone is 36 MB) do not fit a 64 MiB transfer as they are: one xz archive
# (about a fifth of the size) travels instead, unpacked by scripts/gpu/run.sh.
raw_kib=$(du -sk "$CARRY" | cut -f1)
tar -C "$CARRY" -cf - bin lib | xz -T0 -6 > "$CARRY.tar.xz.tmp"
rm -rf "$CARRY/bin" "$CARRY/lib"
mv "$CARRY.tar.xz.tmp" "$CARRY/carry.tar.xz"
size_kib=$(du -sk "$CARRY" | cut -f1)
echo "gpu-check: $CARRY/carry.tar.xz holds ${#BINS[@]} binaries and their libraries: ${raw_kib} KiB, ${size_kib} KiB packed" >&2
if [ "$size_kib" -gt $((60 * 1024)) ]; then
  echo "gpu-check: $CARRY is over 60 MiB; it will not travel" >&2
  exit 1
fi
cat <<'CMD'
Run on the GPU machine (repo root = a copy of this tree plus build-gpu-carry/; results under $OUT):

  bash scripts/gpu/run.sh

With a remote runner: command "bash scripts/gpu/run.sh", with build-gpu-carry/ copied along.
CMD
