#!/usr/bin/env bash
# `mpirun -np 2 ragd` end to end: rank 0 serves HTTP, rank 1 holds half of a long prompt's KV. A
# greedy completion of a prompt over runtime.sp_threshold_tokens must report sp_workers = 2 and
# equal the text of a one-process ragd on the same model; a short prompt stays on rank 0; an idle
# rank uses almost no CPU (< 10 % of a core); SIGTERM to mpiexec stops both ranks.
#   mpi_ragd_check.sh RAGD RAGCTL MPIEXEC
set -euo pipefail
RAGD=$1 RAGCTL=$2 MPIEXEC=$3
dir=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  sleep 1
  for p in "${pids[@]}"; do kill -KILL "$p" 2>/dev/null || true; done
  pkill -KILL -f "$dir/" 2>/dev/null || true  # ranks of a killed mpiexec
  rm -rf "$dir"
}
trap cleanup EXIT
"$RAGCTL" make-model --preset tiny --out "$dir/model" > /dev/null 2>&1
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none OMP_NUM_THREADS=1

address() {  # address LOG: waits for the "ragd listening on" line of a server's log
  for _ in $(seq 1 300); do
    if grep -q "ragd listening on" "$1"; then
      sed -n 's/.*ragd listening on http:\/\/\([^ ]*\).*/\1/p' "$1" | head -1
      return 0
    fi
    sleep 0.1
  done
  echo "no address in $1:" >&2; cat "$1" >&2; return 1
}
wait_ready() {
  for _ in $(seq 1 300); do
    curl -sf "http://$1/readyz" > /dev/null && return 0
    sleep 0.1
  done
  echo "$1 never became ready"; return 1
}
common=(--model "$dir/model" --listen 127.0.0.1:0 --set runtime.num_threads=1 --set runtime.sp_threshold_tokens=256)
"$MPIEXEC" --allow-run-as-root --oversubscribe -np 2 "$RAGD" "${common[@]}" --data "$dir/d1" > "$dir/mpi.log" 2>&1 &
pids+=($!)
"$RAGD" "${common[@]}" --data "$dir/d2" > "$dir/one.log" 2>&1 &
pids+=($!)
mpi_addr=$(address "$dir/mpi.log")
one_addr=$(address "$dir/one.log")
wait_ready "$mpi_addr"
wait_ready "$one_addr"

long=$(python3 -c "print(' '.join(['the harbor log lists ships, tides and the keeper of the light']*40))")
complete() {  # complete ADDR PROMPT
  curl -sf "http://$1/v1/completions" -H 'content-type: application/json' \
    -d "$(python3 -c 'import json,sys; print(json.dumps({"prompt": sys.argv[1], "max_tokens": 16, "temperature": 0}))' "$2")"
}
field() { python3 -c 'import json,sys; d=json.load(sys.stdin); print(eval(sys.argv[1]))' "$1"; }
a=$(complete "$mpi_addr" "$long")
b=$(complete "$one_addr" "$long")
sp=$(echo "$a" | field 'd["ragd"]["usage"].get("sp_workers", 0)')
ta=$(echo "$a" | field 'repr(d["choices"][0]["text"])')
tb=$(echo "$b" | field 'repr(d["choices"][0]["text"])')
pt=$(echo "$a" | field 'd["usage"]["prompt_tokens"]')
[[ "$sp" == 2 ]] || { echo "FAIL: long prompt ($pt tokens) did not run on 2 ranks (sp_workers=$sp)"; exit 1; }
[[ "$ta" == "$tb" ]] || { echo "FAIL: 2 ranks gave $ta, one process $tb"; exit 1; }
s=$(complete "$mpi_addr" "a short prompt")
sps=$(echo "$s" | field 'd["ragd"]["usage"].get("sp_workers", 0)')
[[ "$sps" == 0 ]] || { echo "FAIL: a short prompt ran sequence-parallel"; exit 1; }
# An idle group costs no CPU: rank 1 waits for rank 0's next command sleeping, not spinning (and
# rank 0 waits on its queue).
argv0() { tr '\0' '\n' < "/proc/$1/cmdline" 2>/dev/null | head -1; }
ranks=$(for p in $(pgrep -f "$dir/d1"); do if [[ "$(argv0 "$p")" == */ragd ]]; then echo "$p"; fi; done)
[[ $(echo "$ranks" | wc -w) == 2 ]] || { echo "FAIL: expected 2 ragd ranks, found: $ranks"; exit 1; }
cpu() { local t=0; for p in $ranks; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat"))); done; echo $t; }
c0=$(cpu); sleep 2; c1=$(cpu)
ticks=$((c1 - c0)); hz=$(getconf CLK_TCK)
(( ticks * 10 < hz * 2 )) || { echo "FAIL: the idle ranks used $ticks ticks of CPU in 2 s (hz $hz)"; exit 1; }
kill -TERM "${pids[0]}"
for _ in $(seq 1 100); do
  pgrep -f "$dir/d1" > /dev/null || break
  sleep 0.1
done
if pgrep -f "$dir/d1" > /dev/null; then echo "FAIL: a rank is still running after SIGTERM"; exit 1; fi
echo "PASS: $pt-token prompt on 2 MPI ranks = one process ($ta); short prompt on rank 0; clean stop"
