#!/bin/sh
# What the assembler says about the performance-critical CUDA kernels, checked without a GPU (CI):
# no register spills or local-memory stack in any of them, no wgmma serialised by the compiler
# (ptxas C7520: it inserts waits when it cannot prove the asynchronous operands safe, which silently
# costs the Hopper kernels their overlap), and the Hopper files really contain the warpgroup MMA,
# mbarrier and register-reallocation instructions (not a body compiled out).
# Usage: check_ptxas_report.sh NVCC INCLUDE_DIR... -- SOURCE...
set -u
nvcc=$1
shift
incs=""
while [ "$#" -gt 0 ] && [ "$1" != "--" ]; do
  incs="$incs -I$1"
  shift
done
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
for src in "$@"; do
  name=$(basename "$src" .cu)
  # shellcheck disable=SC2086
  if ! "$nvcc" $incs -O2 -std=c++20 --expt-relaxed-constexpr -gencode=arch=compute_90a,code=sm_90a \
      -Xptxas -v -c "$src" -o "$tmp/$name.o" > "$tmp/$name.log" 2>&1; then
    echo "FAIL $name: does not compile"; cat "$tmp/$name.log"; fail=1; continue
  fi
  kernels=$(grep -c "Compiling entry function" "$tmp/$name.log")
  spills=$(grep -E "[1-9][0-9]* bytes (spill stores|spill loads|stack frame)" "$tmp/$name.log" | head -3)
  serial=$(grep "C7520" "$tmp/$name.log" | head -3)
  if [ -n "$spills" ]; then echo "FAIL $name: spills or stack"; echo "$spills"; fail=1; fi
  if [ -n "$serial" ]; then echo "FAIL $name: wgmma serialised by the compiler"; echo "$serial"; fail=1; fi
  case "$name" in
    *sm90*)
      # shellcheck disable=SC2086
      "$nvcc" $incs -O2 -std=c++20 --expt-relaxed-constexpr -arch=compute_90a -ptx "$src" -o "$tmp/$name.ptx" \
        > /dev/null 2>&1 || { echo "FAIL $name: no PTX"; fail=1; continue; }
      for ins in wgmma.mma_async wgmma.wait_group fence.proxy.async; do
        grep -q "$ins" "$tmp/$name.ptx" || { echo "FAIL $name: no $ins in the PTX"; fail=1; }
      done
      case "$name" in
        *_ws) for ins in setmaxnreg mbarrier.try_wait.parity bar.arrive; do
                grep -q "$ins" "$tmp/$name.ptx" || { echo "FAIL $name: no $ins in the PTX"; fail=1; }
              done ;;
      esac
      ;;
  esac
  echo "$name: $kernels kernels; $(grep -o 'Used [0-9]* registers' "$tmp/$name.log" | sort -t' ' -k2 -n | tail -1) at most"
done
[ "$fail" -eq 0 ] && echo "ok: no spills, no serialised wgmma"
exit "$fail"
