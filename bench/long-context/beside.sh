#!/usr/bin/env bash
# Short requests beside a long one. One daemon (`tiny` shape, max_position_embeddings raised, a
# 16 MiB pool so that an N-token prompt takes the long-context route and spills); first SHORT
# short completions on the idle daemon (the baseline), then one N-token completion (streamed) and,
# while it prefills, the same short completions one after another. Prints their latencies idle
# and beside the long run, and the long run's TTFT with and without them (the latter from a second
# run of the long request alone).
#   bench/long-context/beside.sh BUILD_DIR WORK_DIR [N] [SHORT]     (default 131072, 20)
set -euo pipefail
build=$(cd "$1" && pwd); work=$2; n=${3:-131072}; short=${4:-20}
mkdir -p "$work"; work=$(cd "$work" && pwd)
# shellcheck source=bench/long-context/common.sh
source "$(dirname "$0")/common.sh"
model=$work/model
long_model "$build" "$model"
data=$work/data; rm -rf "$data"; log=$work/ragd.log
"$build/bin/ragd" --model "$model" --data "$data" --listen 127.0.0.1:0 --set runtime.kv_pool_bytes=16777216 >"$log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
port=$(ready_port "$log")
python3 - "$port" "$n" "$short" <<'PY'
import json, random, statistics, sys, threading, time, urllib.request
port, n, short = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
base = f"http://127.0.0.1:{port}"
name = next(m["id"] for m in json.loads(urllib.request.urlopen(f"{base}/v1/models").read())["data"]
            if m.get("ragd", {}).get("kind") == "generator")
def post(body):
    req = urllib.request.Request(f"{base}/v1/completions", json.dumps(body).encode(), {"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=7200)
def one_short(i):
    t0 = time.time()
    r = json.loads(post({"model": name, "prompt": f"question {i}: what does the harbor log say?", "max_tokens": 16,
                         "temperature": 0, "ignore_eos": True}).read())
    assert len(r["choices"][0]["text"]) >= 0
    return time.time() - t0
random.seed(n)
ids = [random.randrange(3, 500) for _ in range(n)]
def long_run(out):
    t0 = time.time()
    with post({"model": name, "prompt": ids, "max_tokens": 16, "temperature": 0, "ignore_eos": True, "stream": True,
               "stream_options": {"include_usage": True}}) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data:") and line != "data: [DONE]":
                ev = json.loads(line[5:])
                if ev.get("choices") and ev["choices"][0].get("text") is not None and "ttft" not in out:
                    out["ttft"] = time.time() - t0
                if ev.get("ragd", {}).get("usage"): out["usage"] = ev["ragd"]["usage"]
    out["end"] = time.time() - t0
idle = [one_short(i) for i in range(short)]
out = {}
t = threading.Thread(target=long_run, args=(out,)); t.start()
while True:  # the long run's prefill is under way
    lc = json.loads(urllib.request.urlopen(f"{base}/v1/cache/stats").read())["executor"]["long_context"]
    if lc.get("prefill_done_tokens", 0) > 0: break
    time.sleep(0.05)
beside = [one_short(i) for i in range(short)]
during = "ttft" not in out
t.join()
alone = {}
long_run(alone)
ms = lambda xs: f"p50 {statistics.median(xs)*1000:.0f} ms, max {max(xs)*1000:.0f} ms"
print(f"{short} short completions (16 tokens) idle: {ms(idle)}")
print(f"the same while a {n:,}-token prompt prefills on the long-context route: {ms(beside)} "
      f"(all answered before its first token: {during})")
print(f"the long run: TTFT {out['ttft']:.1f} s with the short requests beside it, {alone['ttft']:.1f} s alone; "
      f"sp_workers {out['usage'].get('sp_workers')}, KV spilled {out['usage'].get('kv_spilled_tokens')} tokens")
PY
