# Sourced by the GPU machine's scripts (run.sh, train.sh) from the repo root: unpacks the binaries
# that scripts/gpu-check.sh packed into $CARRY and puts their libraries, the machine's cuBLAS 13 and
# NCCL (the toolkit's lib64 and/or the pip wheels that PyTorch uses) on LD_LIBRARY_PATH.
CARRY=${CARRY:-build-gpu-carry}
if [ -f "$CARRY/carry.tar.xz" ] && [ ! -x "$CARRY/bin/test_engine_cuda" ]; then
  tar -C "$CARRY" -xJf "$CARRY/carry.tar.xz" 2>/dev/null ||
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$CARRY/carry.tar.xz" "$CARRY"
fi
if [ ! -x "$CARRY/bin/test_engine_cuda" ]; then
  echo "gpu: $CARRY/bin/test_engine_cuda missing: run scripts/gpu-check.sh on the build machine and carry $CARRY" >&2
  exit 1
fi

# cuBLAS 13 and NCCL from the machine: the toolkit's lib64 and/or the pip wheels that PyTorch uses.
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
        for f in (glob.glob(os.path.join(base, "**", "libcublas*.so*"), recursive=True) +
                  glob.glob(os.path.join(base, "**", "libnccl*.so*"), recursive=True)):
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
