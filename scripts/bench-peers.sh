#!/usr/bin/env bash
# make bench-peers: ragd's CPU engine against llama.cpp on the same weights and the same token ids.
#
#   scripts/bench-peers.sh [BUILD_DIR]          (default build; `make bench-peers` builds first)
#
# 1. llama.cpp: prebuilt libllama / libggml from the node-llama-cpp npm package (pinned below,
#    installed into BUILD/peers/npm, no download of anything else) and the llama.cpp headers from
#    the source bundle shipped in it; bench/peers/llama_driver.c is compiled against them.
# 2. A random-weight model (ragctl make-model --preset small --dtype f32, kept in BUILD/peers) is
#    converted by `ragctl convert-gguf` to GGUF f32, f16, bf16 and q8_0.
# 3. Correctness gate: 16 greedy tokens after a fixed 32-token prompt of ids must be identical for
#    ragd f32 and llama.cpp F32 (with an f32 KV cache, like ragd's); the script fails otherwise.
#    For bf16 / f16 / q8 the length of the identical prefix is reported, for information.
# 4. Timing: prefill of 128 and 512 tokens (one forward step / llama_decode) and 64 single-token
#    decode steps after a 128-token prompt, at 1 and 2 threads, for f32, bf16 (ragd --weights bf16
#    vs GGUF BF16), f16 and q8 (ragd --weights q8 vs GGUF Q8_0). ragd and llama.cpp alternate run
#    by run (who goes first flips every round); each figure is the median over ROUNDS runs, each a
#    fresh process with an untimed warm-up. The markdown table (tok/s of both and ragd/llama) is
#    printed and written to BUILD/peers/results.md.
#
# Environment (defaults in brackets):
#   ROUNDS [3]                runs per figure
#   PEERS_FORMATS ["f32 bf16 f16 q8"], PEERS_THREADS ["1 2"], PEERS_PREFILL ["128 512"]
#   PEERS_DECODE [64]         decode steps after a prompt of each length in PEERS_DECODE_PROMPT
#                             ["128"; a list gives decode rows at several contexts]; 0 = none
#   PEERS_PRESET [small]      make-model preset; PEERS_MODEL=DIR uses an existing f32/bf16 model dir
#   PEERS_LLAMA_KV [f16]      llama.cpp KV cache type in the timed runs (its default)
#   PEERS_RAGD_KV [f32]       ragd KV pool type in the timed runs: f32 | bf16 | int8 (the greedy
#                             check always runs f32 KV on both sides)
#   PEERS_ATTENTION [0]       1: ragd also reports the share of prefill and decode time spent in
#                             attention (a layer hook times it; columns "attn %")
#   OMP_WAIT_POLICY [PASSIVE] ragd's OpenMP threads (PASSIVE as ragd's own binaries and make use)
#   PEERS_RAGD_SPIN [10000]   GOMP_SPINCOUNT for ragd: how long its idle threads spin before they
#                             sleep (llama.cpp's thread pool spins too); 0 = sleep at once
# Example quick run: ROUNDS=1 PEERS_FORMATS=f32 PEERS_THREADS=2 PEERS_PREFILL=128 make bench-peers
set -euo pipefail

BUILD=${1:-build}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PEERS="$BUILD/peers"
ROUNDS=${ROUNDS:-3}
FORMATS=${PEERS_FORMATS:-"f32 bf16 f16 q8"}
THREADS=${PEERS_THREADS:-"1 2"}
PREFILLS=${PEERS_PREFILL:-"128 512"}
DECODE=${PEERS_DECODE:-64}
DECODE_PROMPTS=${PEERS_DECODE_PROMPT:-128}
RAGD_KV=${PEERS_RAGD_KV:-f32}
ATTENTION=${PEERS_ATTENTION:-0}
PRESET=${PEERS_PRESET:-small}
MODEL=${PEERS_MODEL:-$PEERS/model-$PRESET-f32}
LLAMA_KV=${PEERS_LLAMA_KV:-f16}
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-PASSIVE}
RAGD_SPIN=${PEERS_RAGD_SPIN:-10000}
# 32 token ids from the trained part of every preset's vocabulary (all presets have >= 512 ids).
PROMPT="331,460,329,458,327,456,325,454,323,452,321,450,319,448,317,446,315,444,313,442,311,440,309,438,307,436,305,434,303,432,301,430"
GREEDY_TOKENS=16

PEER_SCRIPT=bench-peers
source "$ROOT/scripts/llama-peer.sh"  # die, log, llama.cpp's libraries and headers, build_peer_driver
RAGCTL="$BUILD/bin/ragctl"
RAGD_DRIVER="$BUILD/bin/ragd_peer_driver"
ensure_ragd_targets ragctl ragd_peer_driver
LLAMA_DRIVER="$PEERS/llama_driver"
build_peer_driver llama_driver

# ---- model and GGUF files -----------------------------------------------------------------------
if [[ ! -f "$MODEL/config.json" ]]; then
  [[ -z "${PEERS_MODEL:-}" ]] || die "PEERS_MODEL=$MODEL has no config.json"
  log "making a random $PRESET model (f32) in $MODEL"
  "$RAGCTL" make-model --preset "$PRESET" --dtype f32 --out "$MODEL"
fi
gguf_type() { case $1 in q8) echo q8_0 ;; *) echo "$1" ;; esac; }
gguf_path() { echo "$PEERS/gguf/$(basename "$MODEL")-$(gguf_type "$1").gguf"; }
mkdir -p "$PEERS/gguf"
for fmt in f32 $FORMATS; do
  out=$(gguf_path "$fmt")
  newest=$(ls -t "$MODEL"/*.safetensors "$MODEL/config.json" | head -1)
  if [[ ! -f "$out" || "$newest" -nt "$out" || "$RAGCTL" -nt "$out" ]]; then
    "$RAGCTL" convert-gguf --model "$MODEL" --out "$out" --type "$(gguf_type "$fmt")"
  fi
done

# ---- drivers --------------------------------------------------------------------------------------
# run_ragd FMT THREADS PREFILL DECODE MODE [KV] / run_llama FMT THREADS PREFILL DECODE MODE [KV]
run_ragd() {
  local extra=()
  [[ "$ATTENTION" != 1 || "$5" != time ]] || extra=(--attention-share)
  GOMP_SPINCOUNT=$RAGD_SPIN "$RAGD_DRIVER" "$MODEL" "$2" "$PROMPT" "$3" "$4" "$5" --weights "$1" \
    --kv-dtype "${6:-$RAGD_KV}" "${extra[@]}" 2>"$PEERS/last-ragd.log"
}
run_llama() { "$LLAMA_DRIVER" "$(gguf_path "$1")" "$2" "$PROMPT" "$3" "$4" "$5" --kv "${6:-$LLAMA_KV}" 2>"$PEERS/last-llama.log"; }
greedy_ragd() { run_ragd "$1" 2 32 "$GREEDY_TOKENS" greedy f32 | sed -n 's/^tokens: //p'; }
greedy_llama() { run_llama "$1" 2 32 "$GREEDY_TOKENS" greedy f32 | sed -n 's/^tokens: //p'; }
# Number of leading tokens two comma lists share.
same_prefix() {
  awk -v a="$1" -v b="$2" 'BEGIN { n = split(a, x, ","); split(b, y, ","); for (i = 1; i <= n && x[i] == y[i]; i++); print i - 1 }'
}

log "greedy check: ragd f32 vs llama.cpp F32, $GREEDY_TOKENS tokens after a 32-token prompt"
R=$(greedy_ragd f32) || die "ragd driver failed: $(tail -3 "$PEERS/last-ragd.log")"
L=$(greedy_llama f32) || die "llama driver failed: $(tail -3 "$PEERS/last-llama.log")"
if [[ -z "$R" || "$R" != "$L" ]]; then
  echo "bench-peers: GREEDY MISMATCH between ragd f32 and llama.cpp F32 (first $(same_prefix "$R" "$L") of $GREEDY_TOKENS identical)" >&2
  echo "  ragd:      $R" >&2
  echo "  llama.cpp: $L" >&2
  die "the GGUF conversion or one engine is wrong; no timings are taken"
fi
echo "greedy f32: identical ($R)" >&2
BACKEND=$(sed -n 's/.*loaded CPU backend from .*\/\(libggml-cpu-[^ ]*\.so\).*/\1/p' "$PEERS/last-llama.log" | head -1)
AGREE=""
for fmt in $FORMATS; do
  [[ "$fmt" == f32 ]] && continue
  r=$(greedy_ragd "$fmt") || die "ragd driver failed ($fmt): $(tail -3 "$PEERS/last-ragd.log")"
  l=$(greedy_llama "$fmt") || die "llama driver failed ($fmt): $(tail -3 "$PEERS/last-llama.log")"
  AGREE+="${AGREE:+, }$fmt $(same_prefix "$r" "$l")/$GREEDY_TOKENS"
done

# ---- timing ---------------------------------------------------------------------------------------
RUNS="$PEERS/runs"
rm -rf "$RUNS"
LOAD_START=$(cut -d' ' -f1-3 /proc/loadavg)
if awk -v l="${LOAD_START%% *}" 'BEGIN { exit !(l > 0.5) }'; then
  echo "bench-peers: warning: load average $LOAD_START before timing; other work on these cores skews the figures (2 threads most)" >&2
fi
mkdir -p "$RUNS"
# measure ENGINE FMT THREADS PREFILL DECODE: appends prefill and decode seconds to the sample files.
measure() {
  local engine=$1 fmt=$2 t=$3 p=$4 d=$5 out
  out=$("run_$engine" "$fmt" "$t" "$p" "$d" time) || die "$engine driver failed ($fmt, $t threads, prefill $p): $(tail -3 "$PEERS/last-$engine.log")"
  read -r _ ps _ ds _ aps _ ads <<<"$out"
  echo "$ps" >>"$RUNS/$engine-$fmt-$t-prefill$p"
  if ((d > 0)); then echo "$ds" >>"$RUNS/$engine-$fmt-$t-decode$p"; fi
  if [[ -n "${aps:-}" ]]; then
    awk -v a="$aps" -v s="$ps" 'BEGIN { print a / s }' >>"$RUNS/attn-$fmt-$t-prefill$p"
    if ((d > 0)); then awk -v a="$ads" -v s="$ds" 'BEGIN { print a / s }' >>"$RUNS/attn-$fmt-$t-decode$p"; fi
  fi
}
# Prefill lengths measured; a run whose prompt is one of the decode prompts also decodes (the
# prefill of that prompt counts as a prefill figure too).
PLAN=()
if ((DECODE > 0)); then DPS=" $DECODE_PROMPTS "; else DPS=" "; fi
for p in $PREFILLS; do
  if [[ "$DPS" == *" $p "* ]]; then PLAN+=("$p:$DECODE"); else PLAN+=("$p:0"); fi
done
for dp in $DPS; do
  [[ " $PREFILLS " == *" $dp "* ]] || PLAN+=("$dp:$DECODE")
done
total=$((ROUNDS * $(wc -w <<<"$THREADS") * $(wc -w <<<"$FORMATS") * ${#PLAN[@]} * 2))
n=0
for ((r = 1; r <= ROUNDS; r++)); do
  if ((r % 2)); then order="ragd llama"; else order="llama ragd"; fi
  for t in $THREADS; do
    for fmt in $FORMATS; do
      for job in "${PLAN[@]}"; do
        for engine in $order; do
          n=$((n + 1))
          if [[ -t 2 ]]; then
            printf '\r== timing %d/%d: round %d, %s threads, %s, prefill %s, decode %s, %s   ' \
              "$n" "$total" "$r" "$t" "$fmt" "${job%%:*}" "${job##*:}" "$engine" >&2
          fi
          measure "$engine" "$fmt" "$t" "${job%%:*}" "${job##*:}"
        done
      done
    done
  done
  [[ -t 2 ]] || log "timing: round $r of $ROUNDS done ($n of $total runs)"
done
[[ ! -t 2 ]] || echo >&2

median() { sort -g "$1" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# row LABEL FMT THREADS FILE-SUFFIX TOKENS
row() {
  local label=$1 fmt=$2 t=$3 f=$4 tokens=$5 attn=""
  [[ -f "$RUNS/ragd-$fmt-$t-$f" && -f "$RUNS/llama-$fmt-$t-$f" ]] || return 0
  if [[ "$ATTENTION" == 1 && -f "$RUNS/attn-$fmt-$t-$f" ]]; then attn=$(median "$RUNS/attn-$fmt-$t-$f"); fi
  awk -v fmt="$fmt" -v t="$t" -v label="$label" -v n="$tokens" -v rs="$(median "$RUNS/ragd-$fmt-$t-$f")" \
    -v ls="$(median "$RUNS/llama-$fmt-$t-$f")" -v attn="$attn" -v show="$ATTENTION" \
    'BEGIN { printf "| %s | %s | %s | %.1f | %.1f | %.2f |", fmt, t, label, n / rs, n / ls, ls / rs;
             if (show == 1) printf " %s |", attn == "" ? "" : sprintf("%.0f %%", 100 * attn);
             printf "\n" }'
}
RESULTS="$PEERS/results.md"
{
  echo "# ragd vs llama.cpp on the CPU"
  echo
  echo "- machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1), $(nproc) cores; load average before timing $LOAD_START, after $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- model: $MODEL ($(sed -n 's/.*"hidden_size": \([0-9]*\).*/hidden \1/p' "$MODEL/config.json"), $(sed -n 's/.*"num_hidden_layers": \([0-9]*\).*/\1 layers/p' "$MODEL/config.json"), $(sed -n 's/.*"vocab_size": \([0-9]*\).*/vocab \1/p' "$MODEL/config.json"))"
  echo "- llama.cpp: prebuilt $LLAMA_RELEASE from node-llama-cpp $NODE_LLAMA_CPP_VERSION, CPU backend ${BACKEND:-?}, KV cache $LLAMA_KV, flash attention auto, n_ubatch 512, persistent thread pool"
  echo "- ragd: ragd_peer_driver, KV cache $RAGD_KV, OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-(unset)}, GOMP_SPINCOUNT=$RAGD_SPIN"
  echo "- greedy, $GREEDY_TOKENS tokens after 32 prompt ids: f32 identical (checked); identical prefix at other formats: ${AGREE:-(none run)}"
  echo "- tok/s from the median of $ROUNDS run(s); prefill = one step over the prompt; decode = $DECODE single-token steps after a prompt of the length shown"
  [[ "$ATTENTION" != 1 ]] || echo "- attn %: share of ragd's prefill / decode wall time spent in attention (all layers), median"
  echo
  if [[ "$ATTENTION" == 1 ]]; then
    echo "| format | threads | phase | ragd tok/s | llama.cpp tok/s | ragd/llama | ragd attn % |"
    echo "|---|---|---|---|---|---|---|"
  else
    echo "| format | threads | phase | ragd tok/s | llama.cpp tok/s | ragd/llama |"
    echo "|---|---|---|---|---|---|"
  fi
  for fmt in $FORMATS; do
    for t in $THREADS; do
      for p in $PREFILLS; do row "prefill $p" "$fmt" "$t" "prefill$p" "$p"; done
      if ((DECODE > 0)); then
        for dp in $DECODE_PROMPTS; do row "decode $DECODE @$dp" "$fmt" "$t" "decode$dp" "$DECODE"; done
      fi
    done
  done
} >"$RESULTS"
cat "$RESULTS"
echo "(written to $RESULTS)" >&2
