#!/usr/bin/env bash
# The real side of the simulator validation (docs/benchmarks.md, "Fleet simulator"): one workload's
# load levels, each run twice (run 1 of every level, then run 2, so that drift shows as spread),
# against a fresh daemon per run. Hold the build lock around it, so that the runs are quiet:
#   flock /tmp/ragd-build.lock bench/sim/real-runs.sh A|B|B-c4|c2|C-fcfs|C-sjf|C-r2|A-none|calib|calib-load|calib-c4|tiny|D|E|DE-heavy [REPEATS]
# Results: $VAL_DIR/NAME-RUN.json (bench JSON), NAME-RUN.txt, NAME-RUN.load (load average before).
# Environment as validate.sh (VAL_DIR; BUILD: the folder whose bin/ holds the ragd and ragctl to run,
# default build: copy them to a folder of their own first, so that a rebuild of build/ during the
# runs does not change the binary under measurement; PIPELINES), and FIRST_RUN (default 1): the
# number of the first repeat (FIRST_RUN=3 ... 4 adds runs 3-6 beside existing runs 1-2).
set -euo pipefail
cd "$(dirname "$0")/../.."
V=bench/sim/validation
group=$1 repeats=${2:-2}
run() {  # NAME CONFIG TOPICS BENCH_ARGS...
  local name=$1 config=$2 topics=$3
  shift 3
  bench/sim/validate.sh "$name-$k" "$config" "$topics" -- "$@" > /dev/null
  echo "$name-$k $(date -u +%T) $(cat "${VAL_DIR:-/tmp/ragd-simval}/$name-$k.load")"
}
first=${FIRST_RUN:-1}
for k in $(seq "$first" $((first + repeats - 1))); do
  case $group in
    A)
      run uniform-r1 $V/ragd.toml 200 --workload $V/uniform.jsonl --rate 1
      run uniform-r2 $V/ragd.toml 200 --workload $V/uniform.jsonl --rate 2
      run uniform-c2 $V/ragd.toml 200 --workload $V/uniform.jsonl --concurrency 2 ;;
    B)
      run zipf-r2 $V/ragd.toml 12 --workload $V/zipf.jsonl --rate 2
      run zipf-r6 $V/ragd.toml 12 --workload $V/zipf.jsonl --rate 6
      run zipf-c4 $V/ragd.toml 12 --workload $V/zipf.jsonl --concurrency 4 ;;
    C-fcfs)
      run mixed-fcfs-r1 $V/ragd.toml 12 --workload $V/mixed.jsonl --rate 1
      run mixed-fcfs-r2 $V/ragd.toml 12 --workload $V/mixed.jsonl --rate 2
      run mixed-fcfs-c2 $V/ragd.toml 12 --workload $V/mixed.jsonl --concurrency 2 ;;
    C-sjf)
      run mixed-sjf-r1 $V/ragd-sjf.toml 12 --workload $V/mixed.jsonl --rate 1
      run mixed-sjf-r2 $V/ragd-sjf.toml 12 --workload $V/mixed.jsonl --rate 2 ;;
    C-r2)  # more repeats of C at 2 req/s, fcfs and sjf in alternation (the policies' p99 ordering)
      run mixed-fcfs-r2 $V/ragd.toml 12 --workload $V/mixed.jsonl --rate 2
      run mixed-sjf-r2 $V/ragd-sjf.toml 12 --workload $V/mixed.jsonl --rate 2 ;;
    calib)  # calibration (bench/sim/calibrate.py): one client; mostly hits, mostly misses, the
            # same misses without reuse (pipeline qa-none: nothing published)
      run calib-hit $V/ragd.toml 12 --workload $V/calib-hit.jsonl --concurrency 1
      run calib-miss $V/ragd.toml 200 --workload $V/calib-miss.jsonl --concurrency 1
      run calib-miss-none $V/ragd.toml 200 --workload $V/calib-miss-none.jsonl --concurrency 1 ;;
    calib-load)  # calibration of what one client does not show: the mostly-hit requests arriving
                 # at an idle engine (2 req/s) and batched with each other (4 clients)
      run calib-hit-r2 $V/ragd.toml 12 --workload $V/calib-hit.jsonl --rate 2
      run calib-hit-c4 $V/ragd.toml 12 --workload $V/calib-hit.jsonl --concurrency 4 ;;
    B-c4)  # more repeats of B at 4 clients (closed loop: which requests share a step varies run to run)
      run zipf-c4 $V/ragd.toml 12 --workload $V/zipf.jsonl --concurrency 4 ;;
    c2)  # more repeats of the 2-client closed loops of A and C (which long prompts collide varies
         # run to run)
      run uniform-c2 $V/ragd.toml 200 --workload $V/uniform.jsonl --concurrency 2
      run mixed-fcfs-c2 $V/ragd.toml 12 --workload $V/mixed.jsonl --concurrency 2 ;;
    calib-c4)  # more repeats of the 4-client calibration run
      run calib-hit-c4 $V/ragd.toml 12 --workload $V/calib-hit.jsonl --concurrency 4 ;;
    A-none)  # workload A without reuse (pipeline qa-none): the miss overhead of reuse, against A
      run uniform-none-c2 $V/ragd.toml 200 --workload $V/uniform-none.jsonl --concurrency 2 ;;
    tiny)  # workload B at 10 req/s on a 64 MiB pool (overload: 429s, copies skipped)
      run zipf-tiny-r10 $V/ragd-tiny-pool.toml 12 --workload $V/zipf.jsonl --rate 10 ;;
    D)  # written after the validation (the check on another machine): light, heavy and past the
        # validated region (stress); rates RATE_LIGHT / RATE_HEAVY / RATE_STRESS (2, 5, 7 req/s)
      run zipf12-light $V/ragd.toml 32 --workload $V/zipf12.jsonl --rate "${RATE_LIGHT:-2}"
      run zipf12-heavy $V/ragd.toml 32 --workload $V/zipf12.jsonl --rate "${RATE_HEAVY:-5}"
      run zipf12-stress $V/ragd.toml 32 --workload $V/zipf12.jsonl --rate "${RATE_STRESS:-7}" ;;
    E)  # likewise, workload E (1, 3, 4 req/s)
      run wide-light $V/ragd.toml 64 --workload $V/wide.jsonl --rate "${RATE_LIGHT:-1}"
      run wide-heavy $V/ragd.toml 64 --workload $V/wide.jsonl --rate "${RATE_HEAVY:-3}"
      run wide-stress $V/ragd.toml 64 --workload $V/wide.jsonl --rate "${RATE_STRESS:-4}" ;;
    DE-heavy)  # more repeats of D's and E's heavy and stress levels (their run-to-run spread is wide)
      run zipf12-heavy $V/ragd.toml 32 --workload $V/zipf12.jsonl --rate "${RATE_HEAVY_D:-5}"
      run zipf12-stress $V/ragd.toml 32 --workload $V/zipf12.jsonl --rate "${RATE_STRESS_D:-7}"
      run wide-heavy $V/ragd.toml 64 --workload $V/wide.jsonl --rate "${RATE_HEAVY_E:-3}"
      run wide-stress $V/ragd.toml 64 --workload $V/wide.jsonl --rate "${RATE_STRESS_E:-4}" ;;
    *) echo "unknown group $group" >&2; exit 2 ;;
  esac
done
