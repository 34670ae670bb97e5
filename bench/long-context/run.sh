#!/usr/bin/env bash
# One long prompt through ragd's HTTP API, as a user sends it: `POST /v1/completions` with N token
# ids (streamed, greedy), a fresh daemon per length with the default configuration (512 MiB KV
# pool, KV spill on), the `tiny` shape with max_position_embeddings raised to 1,100,000.
# Per length: TTFT, decode tok/s, peak RSS (VmHWM) and RSS before the request, the KV in each tier
# (pool / host memory / SSD, from the response's usage and /metrics), the workers used, and the
# performance model's prediction (`ragctl plan`, rates measured here first).
#
#   bench/long-context/run.sh BUILD_DIR WORK_DIR [N ...]     (default N: 131072 262144 524288 1048576)
#   RAGD_ARGS="--set runtime.kv_spill_dram_bytes=0" ...       extra daemon flags
#   LC_PRESET=small ...                                         the `small` shape instead of `tiny`
set -euo pipefail
build=$(cd "$1" && pwd); work=$2; shift 2
lengths=("$@"); [ ${#lengths[@]} -gt 0 ] || lengths=(131072 262144 524288 1048576)
mkdir -p "$work"; work=$(cd "$work" && pwd)
# shellcheck source=bench/long-context/common.sh
source "$(dirname "$0")/common.sh"
model=$work/model
long_model "$build" "$model"
echo "| tokens | TTFT s | predicted prefill s | decode tok/s | predicted decode tok/s | peak RSS MB | RSS before MB | weights + KV + text MB | KV in pool MB | in host memory MB | on SSD MB | workers |"
echo "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
for n in "${lengths[@]}"; do
  plan=$("$build/bin/ragctl" plan --model "$model" --tokens "$n" --workers 1 --threads "$(nproc)" --json 2>/dev/null)
  data=$work/data-$n; rm -rf "$data"
  log=$work/ragd-$n.log
  # shellcheck disable=SC2086
  "$build/bin/ragd" --model "$model" --data "$data" --listen 127.0.0.1:0 ${RAGD_ARGS:-} >"$log" 2>&1 &
  pid=$!
  trap 'kill $pid 2>/dev/null || true' EXIT
  port=$(ready_port "$log")
  python3 - "$port" "$n" "$pid" "$plan" "$model" <<'PY'
import json, os, random, sys, time, urllib.request
port, n, pid, plan, model = sys.argv[1], int(sys.argv[2]), sys.argv[3], json.loads(sys.argv[4]), sys.argv[5]
def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key): return int(line.split()[1]) * 1024
rss_before = status("VmRSS:")
random.seed(n)
ids = [random.randrange(3, 500) for _ in range(n)]
models = json.loads(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models").read())["data"]
name = next(m["id"] for m in models if m.get("ragd", {}).get("kind") == "generator")
body = json.dumps({"model": name, "prompt": ids, "max_tokens": 16, "temperature": 0, "stream": True,
                   "ignore_eos": True, "stream_options": {"include_usage": True}}).encode()
req = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions", body, {"Content-Type": "application/json"})
t0 = time.time(); first = None; last = None; usage = {}; tokens = 0
with urllib.request.urlopen(req, timeout=7200) as r:
    for raw in r:
        line = raw.decode().strip()
        if not line.startswith("data:") or line == "data: [DONE]": continue
        ev = json.loads(line[5:])
        if ev.get("choices") and ev["choices"][0].get("text") is not None:
            tokens += 1; last = time.time(); first = first or last
        if ev.get("usage"): usage = ev["usage"]
        if ev.get("ragd", {}).get("usage"): usage.update(ev["ragd"]["usage"])
peak = status("VmHWM:")
metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/cache/stats").read().decode()
lc = json.loads(metrics).get("executor", {}).get("long_context", {})
# f32 KV (the default): layers x KV heads x head_dim x 4 bytes x (K, V); tiny 512, small 16,384
cfg = json.load(open(os.path.join(model, "config.json")))
head_dim = cfg.get("head_dim") or cfg["hidden_size"] // cfg["num_attention_heads"]
tok_bytes = 2 * cfg["num_hidden_layers"] * cfg.get("num_key_value_heads", cfg["num_attention_heads"]) * head_dim * 4
spilled = lc.get("spilled_tokens", 0); ssd = lc.get("spilled_ssd_tokens", 0)
weights = sum(os.path.getsize(os.path.join(model, f)) for f in os.listdir(model) if f.endswith(".safetensors"))
need = weights + (n + 16) * tok_bytes + len(json.dumps(ids))
p1 = next(p for p in plan["plans"] if p["workers"] == 1)
pred_prefill = p1.get("prefill_s", 0); pred_decode = p1.get("decode_s", 0)
ttft = first - t0 if first else float("nan")
dec = (tokens - 1) / (last - first) if tokens > 1 else float("nan")
print(f"| {n:,} | {ttft:.1f} | {pred_prefill:.1f} | {dec:.1f} | {1/pred_decode if pred_decode else 0:.1f} | "
      f"{peak/1e6:.0f} | {rss_before/1e6:.0f} | {need/1e6:.0f} | {(n + 16 - spilled) * tok_bytes / 1e6:.0f} | "
      f"{(spilled - ssd) * tok_bytes / 1e6:.0f} | {ssd * tok_bytes / 1e6:.0f} | {lc.get('workers', 0) or 'batch'} |", flush=True)
PY
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$data"
done
