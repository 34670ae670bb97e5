#!/usr/bin/env bash
# One long prompt's greedy answer, the same request through every way ragd can hold its KV, over
# HTTP as a client sends it (`POST /v1/completions`, N token ids, 16 tokens, temperature 0,
# logprobs 5): one worker with every block in the pool (the reference), two in-process workers
# (ring prefill + sharded decode), `mpirun -np 2 ragd`, and one worker whose pool is too small so
# that the KV spills to host memory, then to the SSD file. Prints a table: per configuration the
# workers used, the tokens spilled, the answer against the reference, and the largest difference of
# the chosen tokens' and top-5 log-probabilities. Exits 1 when an answer differs or a log-probability
# differs by more than TOL (default 1e-3).
#
#   bench/long-context/exactness.sh BUILD_DIR WORK_DIR [N]      (default N: 131072)
#   CONFIGS="one sp2 mpi2 spill-dram spill-ssd" ...             which configurations (default: all)
set -euo pipefail
build=$(cd "$1" && pwd); work=$2; n=${3:-131072}
mkdir -p "$work"; work=$(cd "$work" && pwd)
tol=${TOL:-1e-3}
configs=${CONFIGS:-one sp2 mpi2 spill-dram spill-ssd}
# shellcheck source=bench/long-context/common.sh
source "$(dirname "$0")/common.sh"
model=$work/model
long_model "$build" "$model"
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  pkill -KILL -f "$work/data-" 2>/dev/null || true
}
trap cleanup EXIT
mpiexec=$(command -v mpiexec || true)
results=$work/exactness.jsonl; : > "$results"
for cfg in $configs; do
  data=$work/data-$cfg; rm -rf "$data"; log=$work/ragd-$cfg.log
  args=(--model "$model" --data "$data" --listen 127.0.0.1:0)
  case $cfg in
    one) cmd=("$build/bin/ragd" "${args[@]}" --set runtime.sp_workers=1) ;;
    sp2) cmd=("$build/bin/ragd" "${args[@]}" --set runtime.sp_workers=2) ;;
    mpi2)
      [ -n "$mpiexec" ] || { echo "skip mpi2: no mpiexec" >&2; continue; }
      export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
      cmd=("$mpiexec" --allow-run-as-root --oversubscribe -np 2 "$build/bin/ragd" "${args[@]}" --set runtime.num_threads=1) ;;
    spill-dram) cmd=("$build/bin/ragd" "${args[@]}" --set runtime.sp_workers=1 --set runtime.kv_pool_bytes=16777216) ;;
    spill-ssd) cmd=("$build/bin/ragd" "${args[@]}" --set runtime.sp_workers=1 --set runtime.kv_pool_bytes=16777216
                    --set runtime.kv_spill_dram_bytes=0) ;;
    *) echo "unknown configuration $cfg" >&2; exit 2 ;;
  esac
  "${cmd[@]}" >"$log" 2>&1 &
  pid=$!; pids+=("$pid")
  port=$(ready_port "$log")
  [ -n "$port" ] || { echo "$cfg: ragd did not start" >&2; cat "$log" >&2; exit 1; }
  python3 - "$port" "$n" "$cfg" >>"$results" <<'PY'
import json, random, sys, time, urllib.request
port, n, cfg = sys.argv[1], int(sys.argv[2]), sys.argv[3]
random.seed(n)
ids = [random.randrange(3, 500) for _ in range(n)]
models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models").read())["data"]
name = next(m["id"] for m in models if m.get("ragd", {}).get("kind") == "generator")
body = json.dumps({"model": name, "prompt": ids, "max_tokens": 16, "temperature": 0, "ignore_eos": True,
                   "logprobs": 5}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
t0 = time.time()
r = json.loads(urllib.request.urlopen(req, timeout=7200).read())
lp = r["choices"][0]["logprobs"]
u = r.get("ragd", {}).get("usage", {})
print(json.dumps({"config": cfg, "seconds": time.time() - t0, "tokens": lp["tokens"], "logprobs": lp["token_logprobs"],
                  "top": lp["top_logprobs"], "workers": u.get("sp_workers", 1), "spilled": u.get("kv_spilled_tokens", 0)}))
PY
  kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  rm -rf "$data"
done
python3 - "$results" "$tol" "$n" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
tol, n = float(sys.argv[2]), int(sys.argv[3])
ref = next(r for r in rows if r["config"] == "one")
print(f"{n:,}-token prompt, 16 greedy tokens; reference: one worker, every block in the pool")
print("| configuration | seconds | workers | KV spilled (tokens) | answer = reference | max abs diff, chosen log-prob | max abs diff, top-5 log-probs |")
print("|---|---:|---:|---:|---|---:|---:|")
bad = False
for r in rows:
    same = r["tokens"] == ref["tokens"]
    d = max(abs(a - b) for a, b in zip(r["logprobs"], ref["logprobs"]))
    dt = 0.0
    for a, b in zip(r["top"], ref["top"]):
        for k in a.keys() & b.keys():
            dt = max(dt, abs(a[k] - b[k]))
    bad |= (not same) or d > tol or dt > tol
    print(f"| {r['config']} | {r['seconds']:.1f} | {r['workers']} | {r['spilled']:,} | {'yes' if same else 'NO'} | {d:.2e} | {dt:.2e} |")
sys.exit(1 if bad else 0)
PY
