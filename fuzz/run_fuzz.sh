#!/usr/bin/env bash
# Runs every libFuzzer target of a RAGD_FUZZ build, one after the other, each for SECONDS on a
# copy of its seed corpus (plus its saved regressions), and writes a summary table to
# BUILD/fuzz-results.md. Exit 1 when any target crashed, leaked, timed out or ran out of memory.
# Usage: fuzz/run_fuzz.sh BUILD SECONDS [TARGET...]   (targets: names without fuzz_, default all)
set -uo pipefail

build=${1:?usage: run_fuzz.sh BUILD SECONDS [TARGET...]}
seconds=${2:?usage: run_fuzz.sh BUILD SECONDS [TARGET...]}
shift 2
src=$(cd "$(dirname "$0")" && pwd)
if (($# > 0)); then
  targets=("$@")
else
  targets=()
  for f in "$src"/*_fuzz.cpp; do n=$(basename "$f" _fuzz.cpp); targets+=("$n"); done
fi

results="$build/fuzz-results.md"
work="$build/fuzz-work"
mkdir -p "$work"
{
  echo "# Fuzzing results"
  echo
  echo "$(date -u '+%Y-%m-%d %H:%M UTC'), $seconds s per target, \`$(basename "$build")\` (clang, -fsanitize=fuzzer,address,undefined)"
  echo
  echo "| target | seconds | executions | exec/s | crashes | seed inputs | corpus after |"
  echo "|---|---|---|---|---|---|---|"
} > "$results"

failed=0
for t in "${targets[@]}"; do
  exe="$build/bin/fuzz_$t"
  if [[ ! -x "$exe" ]]; then
    echo "run_fuzz: $exe is missing (build the ragd_fuzz_all target)" >&2
    echo "| $t | - | - | - | not built | - | - |" >> "$results"
    failed=1
    continue
  fi
  corpus="$work/$t/corpus"
  artifacts="$work/$t/artifacts"
  rm -rf "$work/$t"
  mkdir -p "$corpus" "$artifacts"
  cp "$src/corpus/$t"/* "$corpus"/ 2>/dev/null
  if compgen -G "$src/regressions/$t/*" > /dev/null; then cp "$src/regressions/$t"/* "$corpus"/; fi
  seeds=$(find "$corpus" -type f | wc -l)
  log="$work/$t/fuzz.log"
  echo "run_fuzz: $t for $seconds s ($seeds seed inputs)"
  start=$(date +%s)
  RAGD_LOG_LEVEL=off "$exe" "$corpus" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$artifacts/" > "$log" 2>&1
  rc=$?
  took=$(( $(date +%s) - start ))
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  crashes=$(find "$artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  after=$(find "$corpus" -type f | wc -l)
  if ((rc != 0 && crashes == 0)); then crashes="rc $rc"; fi
  echo "| $t | $took | ${execs:-?} | ${rate:-?} | $crashes | $seeds | $after |" >> "$results"
  if [[ "$crashes" != 0 ]]; then
    failed=1
    echo "run_fuzz: $t FAILED; artifacts in $artifacts, log $log" >&2
    grep -m1 -A12 "ERROR: \|==ERROR\|runtime error\|deadly signal" "$log" >&2 || tail -20 "$log" >&2
  fi
done

echo >> "$results"
echo "Crash inputs, logs and grown corpora: \`$work/<target>/\`." >> "$results"
cat "$results"
exit $failed
