#!/usr/bin/env bash
# make bench-peers-embed: ragd's BERT encoder against llama.cpp's embedding mode on the same weights
# and the same token ids.
#
#   scripts/bench-peers-embed.sh [BUILD_DIR]    (default build; the make target builds first)
#
# 1. llama.cpp as in `make bench-peers` (scripts/llama-peer.sh: the node-llama-cpp npm build);
#    bench/peers/llama_embed_driver.c is compiled against it, bench/peers/ragd_embed_driver.cpp is
#    the ragd twin (same command line, same synthetic passages of raw ids, see the driver).
# 2. Random-weight encoders (ragctl make-model --preset bge-small / bge-base, f32, CLS pooling +
#    normalize, kept in BUILD/peers) are converted by `ragctl convert-gguf` to GGUF f32.
# 3. Agreement gate: 4 passages of 64 tokens embedded by both; the script fails unless every pair of
#    vectors has cosine >= 0.999 (the max |Δ| per element is reported: llama.cpp's GELU reads an
#    f16 table, so the two differ around 1e-4).
# 4. Timing: EMBED_PASSAGES passages of each length in EMBED_TOKENS, batches of EMBED_BATCH, at
#    EMBED_THREADS threads, after an untimed warm-up batch; ragd and llama.cpp alternate run by run
#    (who goes first flips every round); each figure is the median over ROUNDS fresh processes.
#    The markdown table (passages/s of both, ragd/llama) is printed and written to
#    BUILD/peers/embed-results.md.
#
# Environment (defaults in brackets): ROUNDS [3], EMBED_PRESETS ["bge-small bge-base"],
#   EMBED_TOKENS ["128 512"], EMBED_BATCH [32], EMBED_PASSAGES [32], EMBED_THREADS [2],
#   EMBED_LLAMA_TYPES ["f32 f16"] (GGUF types llama.cpp runs; ragd always runs its f32 weights),
#   OMP_WAIT_POLICY [PASSIVE].
set -euo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PEERS="$BUILD/peers"
ROUNDS=${ROUNDS:-3}
PRESETS=${EMBED_PRESETS:-"bge-small bge-base"}
TOKENS=${EMBED_TOKENS:-"128 512"}
BATCH=${EMBED_BATCH:-32}
PASSAGES=${EMBED_PASSAGES:-32}
THREADS=${EMBED_THREADS:-2}
LLAMA_TYPES=${EMBED_LLAMA_TYPES:-"f32 f16"}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}

PEER_SCRIPT=bench-peers-embed
source "$ROOT/scripts/llama-peer.sh"  # die, log, llama.cpp's libraries and headers, build_peer_driver
RAGCTL="$BUILD/bin/ragctl"
RAGD_DRIVER="$BUILD/bin/ragd_embed_driver"
ensure_ragd_targets ragctl ragd_embed_driver
LLAMA_DRIVER="$PEERS/llama_embed_driver"
build_peer_driver llama_embed_driver

model_dir() { echo "$PEERS/enc-$1-f32"; }
gguf() { echo "$PEERS/gguf/enc-$1-${2:-f32}.gguf"; }
mkdir -p "$PEERS/gguf"
for p in $PRESETS; do
  dir=$(model_dir "$p")
  if [[ ! -f "$dir/config.json" ]]; then
    log "making a random $p encoder (f32) in $dir"
    "$RAGCTL" make-model --preset "$p" --out "$dir" >/dev/null
  fi
  for ty in f32 $LLAMA_TYPES; do
    if [[ ! -f "$(gguf "$p" "$ty")" || "$RAGCTL" -nt "$(gguf "$p" "$ty")" ]]; then
      "$RAGCTL" convert-gguf --model "$dir" --out "$(gguf "$p" "$ty")" --type "$ty"
    fi
  done
done

# ---- agreement gate -------------------------------------------------------------------------------
compare() {  # FILE_A FILE_B -> "min_cos max_abs"
  python3 - "$1" "$2" <<'PY'
import math, sys
def load(p):
    out = {}
    for line in open(p):
        k, v = line.split(":", 1)
        out[k] = [float(x) for x in v.split(",")]
    return out
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys() and a, "the drivers embedded different passages"
cos = min(sum(x * y for x, y in zip(a[k], b[k])) /
          (math.sqrt(sum(x * x for x in a[k])) * math.sqrt(sum(y * y for y in b[k]))) for k in a)
dmax = max(abs(x - y) for k in a for x, y in zip(a[k], b[k]))
print(f"{cos:.6f} {dmax:.2e}")
PY
}
declare -A AGREE
for p in $PRESETS; do
  "$RAGD_DRIVER" "$(model_dir "$p")" "$THREADS" 64 4 4 dump >"$PEERS/embed-ragd.txt"
  "$LLAMA_DRIVER" "$(gguf "$p")" "$THREADS" 64 4 4 dump >"$PEERS/embed-llama.txt" 2>"$PEERS/last-llama-embed.log"
  read -r cos dmax < <(compare "$PEERS/embed-ragd.txt" "$PEERS/embed-llama.txt")
  log "$p: min cosine $cos, max |delta| $dmax"
  python3 -c "import sys; sys.exit(0 if float('$cos') >= 0.999 else 1)" ||
    die "$p: ragd and llama.cpp embeddings disagree (min cosine $cos < 0.999)"
  AGREE[$p]="$cos / $dmax"
done

# ---- timing -------------------------------------------------------------------------------------------
median() { python3 -c "import statistics, sys; print(statistics.median(float(x) for x in sys.argv[1:]))" "$@"; }
secs() { sed -n 's/^seconds \([0-9.]*\)$/\1/p'; }
OUT="$PEERS/embed-results.md"
{
  echo "| encoder | tokens | batch | threads | llama.cpp GGUF | ragd passages/s (f32) | llama.cpp passages/s | ragd / llama | agreement f32 (min cos / max abs diff) |"
  echo "|---|---:|---:|---:|---|---:|---:|---:|---|"
} >"$OUT"
for p in $PRESETS; do
  for t in $TOKENS; do
    for ty in $LLAMA_TYPES; do
      r=() l=()
      for ((i = 0; i < ROUNDS; ++i)); do
        run_r() { r+=("$("$RAGD_DRIVER" "$(model_dir "$p")" "$THREADS" "$t" "$BATCH" "$PASSAGES" time | secs)"); }
        run_l() { l+=("$("$LLAMA_DRIVER" "$(gguf "$p" "$ty")" "$THREADS" "$t" "$BATCH" "$PASSAGES" time 2>>"$PEERS/last-llama-embed.log" | secs)"); }
        if ((i % 2 == 0)); then run_r; run_l; else run_l; run_r; fi
      done
      rs=$(median "${r[@]}") ls=$(median "${l[@]}")
      line=$(python3 -c "r, l, n = $rs, $ls, $PASSAGES; print(f'{n / r:.1f} | {n / l:.1f} | {l / r:.2f}x')")
      echo "| $p | $t | $((BATCH < PASSAGES ? BATCH : PASSAGES)) | $THREADS | $ty | $line | ${AGREE[$p]} |" | tee -a "$OUT" >&2
    done
  done
done
{
  echo
  echo "- ragd: $(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?'), f32 weights, OpenBLAS sgemm, packed batches; llama.cpp: prebuilt $LLAMA_RELEASE from node-llama-cpp $NODE_LLAMA_CPP_VERSION, CPU backend $(sed -n 's/.*libggml-cpu-\([a-z0-9]*\)\.so.*/\1/p' "$PEERS/last-llama-embed.log" | head -1)"
  echo "- medians of $ROUNDS runs, $PASSAGES passages each, alternating engines"
} >>"$OUT"
cat "$OUT"
