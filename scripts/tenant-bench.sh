#!/usr/bin/env bash
# Tenant isolation benchmarks end to end (bench/TENANT_BENCH.md): bench_tenant_flood for every
# scheduler config x stream count, then bench_rerank_probe. Each invocation starts its own bin/ragd
# on a free loopback port (models/ragd-qa, the QA corpus ingested into a temp dir) and stops it.
#
#   scripts/tenant-bench.sh [BUILD] [OUT]      (from the repository root)
#
# BUILD (default build) holds bin/bench_tenant_flood and bin/bench_rerank_probe; RAGD_BIN (default
# BUILD/bin) the ragd and ragctl they run. OUT (default data/tenant-bench) receives one JSON per
# invocation and summary.txt. Environment: STREAMS ("24 48"), CONFIGS ("default fair": default = no
# --set, fair = --set runtime.scheduler=fair), WINDOW_S (40), TAIL_S (60), TRIALS (40),
# SHARED_TRIALS (40), LOCK (/tmp/ragd-build.lock: every measurement runs under `flock LOCK` so that
# no build competes for the cores; empty = no lock), SKIP_FLOOD=1 / SKIP_PROBE=1.
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-data/tenant-bench}
RAGD_BIN=${RAGD_BIN:-$BUILD/bin}
STREAMS=${STREAMS:-"24 48"}
CONFIGS=${CONFIGS:-"default fair"}
WINDOW_S=${WINDOW_S:-40}
TAIL_S=${TAIL_S:-60}
TRIALS=${TRIALS:-40}
SHARED_TRIALS=${SHARED_TRIALS:-40}
LOCK=${LOCK-/tmp/ragd-build.lock}
mkdir -p "$OUT"
locked() { if [[ -n "$LOCK" ]]; then flock "$LOCK" "$@"; else "$@"; fi; }
commit="$(git rev-parse --short HEAD 2>/dev/null || echo unknown)"
[[ -n "$(git status --porcelain --untracked-files=no 2>/dev/null)" ]] && commit="$commit-dirty"
{
  echo "tenant-bench: commit $commit, ragd $RAGD_BIN/ragd ($(stat -c %y "$RAGD_BIN/ragd" 2>/dev/null | cut -d. -f1)), $(date -u +%FT%TZ)"
} | tee "$OUT/summary.txt"
if [[ "${SKIP_FLOOD:-0}" != 1 ]]; then
  for cfg in $CONFIGS; do
    set_args=()
    [[ "$cfg" == fair ]] && set_args=(--config runtime.scheduler=fair)
    for n in $STREAMS; do
      echo "== bench_tenant_flood config=$cfg streams=$n" | tee -a "$OUT/summary.txt"
      locked "$BUILD/bin/bench_tenant_flood" --bin "$RAGD_BIN" --streams "$n" --seconds "$WINDOW_S" --tail "$TAIL_S" \
        "${set_args[@]}" --json "$OUT/flood-$cfg-$n.json" | tee -a "$OUT/summary.txt" || echo "  (exit status $?)" | tee -a "$OUT/summary.txt"
    done
  done
fi
if [[ "${SKIP_PROBE:-0}" != 1 ]]; then
  echo "== bench_rerank_probe" | tee -a "$OUT/summary.txt"
  locked "$BUILD/bin/bench_rerank_probe" --bin "$RAGD_BIN" --trials "$TRIALS" --shared-trials "$SHARED_TRIALS" \
    --json "$OUT/probe.json" | tee -a "$OUT/summary.txt" || echo "  (exit status $?)" | tee -a "$OUT/summary.txt"
fi
echo "tenant-bench: results in $OUT (summary.txt, *.json)"
