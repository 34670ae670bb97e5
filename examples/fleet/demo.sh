#!/usr/bin/env bash
# shellcheck disable=SC2154  # FLEET_URL, URL_replica_N, ... come from the fleet's fleet.env
# make fleet-demo: starts a fleet on loopback (examples/fleet/fleet.sh: Redis, a primary that ingests
# a synthetic corpus, two replicas on its data directory, HAProxy in front), shows one replica
# reusing the document KV another computed, runs `ragctl bench` through HAProxy, prints the requests
# each replica served and the reuse per KV tier (remote = the shared Redis tier), and stops
# everything. Run directory data/fleet-demo (FLEET_DIR); FLEET_DEMO_REQUESTS (60),
# FLEET_DEMO_TOPICS (32), FLEET_DEMO_CONCURRENCY (4); the fleet.sh variables (FLEET_REPLICAS, ...)
# apply.
set -euo pipefail
BUILD=${1:-build}
BIN=$(cd "$BUILD/bin" && pwd)
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export FLEET_DIR=${FLEET_DIR:-data/fleet-demo}
export FLEET_BIN=$BIN
REQUESTS=${FLEET_DEMO_REQUESTS:-60}
TOPICS=${FLEET_DEMO_TOPICS:-32}
CONCURRENCY=${FLEET_DEMO_CONCURRENCY:-4}
export FLEET_CORPUS=synthetic:$TOPICS

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "1. start the fleet in $FLEET_DIR"
trap '"$HERE/fleet.sh" stop' EXIT
"$HERE/fleet.sh" start
# shellcheck disable=SC1091
source "$FLEET_DIR/fleet.env"
REDISCLI_AUTH=$(cat "$REDIS_PASSWORD_FILE"); export REDISCLI_AUTH

step "2. one question on replica-1, then on replica-2: the second loads the documents' KV from Redis"
ask() {  # URL -> the run's JSON
  curl -fs -X POST "$1/v1/pipelines/default/runs" -H 'Content-Type: application/json' \
    -d '{"query": "please explain tomi in detail?", "max_tokens": 16, "temperature": 0}'
}
A=$(ask "$URL_replica_1")
sleep 1  # the first replica writes behind; give Redis the segments
B=$(ask "$URL_replica_2")
python3 - "$A" "$B" <<'PY'
import json, sys
a, b = (json.loads(x) for x in sys.argv[1:3])
for name, r in (("replica-1", a), ("replica-2", b)):
    u, t = r["usage"], r["timings"]
    tiers = ", ".join(f"{k} {v}" for k, v in u["reused_tokens"].items())
    print(f"{name}: prompt {u['prompt_tokens']} tokens, reused {tiers}; recomputed {u['recomputed_tokens']}; "
          f"TTFT {t['ttft_ms']:.1f} ms")
print("greedy outputs identical" if a["output"] == b["output"] else "WARNING: outputs differ")
if b["usage"]["reused_tokens"].get("remote", 0) <= 0:
    print("WARNING: replica-2 reused nothing from the remote tier")
PY

step "3. ragctl bench through HAProxy: $REQUESTS requests, $TOPICS topics, Zipf(0.9), concurrency $CONCURRENCY"
"$BIN/ragctl" bench --url "$FLEET_URL" --topics "$TOPICS" --zipf 0.9 --requests "$REQUESTS" \
  --concurrency "$CONCURRENCY" --json "$FLEET_DIR/bench.json"

step "4. requests per replica (HAProxy stats) and what each replica reused (its /metrics)"
metric() { curl -fs "$1/metrics" | awk -v k="$2" 'index($0, k) == 1 { s += $NF } END { printf "%d", s }'; }
curl -fs "$STATS_URL;csv" | awk -F, '$1 == "ragd_replicas" && $2 != "BACKEND" { print $2, $8 }' |
  while read -r name sessions; do
    var=URL_${name//-/_}
    url=${!var}
    printf '  %-10s %4s requests via HAProxy; runs %s; reused tokens: hbm %s, dram %s, ssd %s, remote %s\n' "$name" "$sessions" \
      "$(metric "$url" 'ragd_runs_total{route="/v1/pipelines')" \
      "$(metric "$url" 'ragd_reused_tokens_total{tier="hbm"}')" "$(metric "$url" 'ragd_reused_tokens_total{tier="dram"}')" \
      "$(metric "$url" 'ragd_reused_tokens_total{tier="ssd"}')" "$(metric "$url" 'ragd_reused_tokens_total{tier="remote"}')"
  done
echo "  redis: $(redis-cli -p "$REDIS_PORT" dbsize) keys, $(redis-cli -p "$REDIS_PORT" info memory | sed -n 's/^used_memory_human:\(.*\)\r$/\1/p') used"

step "5. reuse per tier over the bench (from $FLEET_DIR/bench.json)"
python3 - "$FLEET_DIR/bench.json" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))["runs"][0]
ok = [s for s in run["samples"] if s.get("ok")]
prompt = sum(s["usage"]["prompt_tokens"] for s in ok)
tiers = {t: sum(s["usage"]["reused_tokens"][t] for s in ok) for t in ("hbm", "dram", "ssd", "remote")}
remote_runs = sum(1 for s in ok if s["usage"]["reused_tokens"]["remote"] > 0)
print(f"  {len(ok)} of {len(run['samples'])} requests succeeded; {prompt} prompt tokens")
for t, v in tiers.items():
    print(f"  {t:6s} {v:7d} tokens reused ({100.0 * v / max(prompt, 1):5.1f} % of prompt tokens)")
rec = prompt - sum(tiers.values())
print(f"  {'recomputed':6s} {rec:3d} tokens ({100.0 * rec / max(prompt, 1):5.1f} %)")
print(f"  {remote_runs} requests loaded documents from the remote tier (computed by the other replica)")
PY

step "6. stop"
"$HERE/fleet.sh" stop
trap - EXIT
echo "done (logs in $FLEET_DIR/logs)"
