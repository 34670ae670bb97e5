#!/usr/bin/env bash
# A short soak of the real daemon (a few seconds): bench_soak's mix of SSE and WebSocket runs, plain
# runs and uploads, a third of the streams dropped after their first token and a third cancelled,
# then every check of bench_soak (idle again, every KV block back, counters consistent, /healthz
# answered throughout); then SIGTERM must stop the daemon with status 0.
# Resident memory at the end must be within MAX_RSS_GROWTH of its value a quarter of the way in.
#   soak_check.sh RAGD RAGCTL BENCH_SOAK [CLIENTS] [SECONDS] [MAX_RSS_GROWTH]
set -euo pipefail
RAGD=$1 RAGCTL=$2 SOAK=$3 CLIENTS=${4:-24} SECONDS_=${5:-4} MAX_RSS=${6:-0.05}
dir=$(mktemp -d)
pid=""
cleanup() {
  [[ -z "$pid" ]] || kill -KILL "$pid" 2>/dev/null || true
  rm -rf "$dir"
}
trap cleanup EXIT
if ! "$RAGCTL" make-model --preset tiny --out "$dir/model" > "$dir/make-model.log" 2>&1; then
  echo "ragctl make-model failed:"
  cat "$dir/make-model.log"
  exit 1
fi
# hbm_cache off: no block is held by the cache, so an idle pool must be entirely free. Every client
# comes from 127.0.0.1, so the per-address connection cap is off; the tenant and queue limits are
# raised so that the load reaches the engine instead of 429s.
# The logs exist before the daemon starts: the loop below reads out.log at once, and the background
# job may not have opened its redirections yet (set -e would end the script on sed's error).
: > "$dir/out.log"
: > "$dir/err.log"
"$RAGD" --model "$dir/model" --data "$dir/data" --listen 127.0.0.1:0 --threads 2 \
  --set runtime.hbm_cache=false --set runtime.num_threads=1 --set limits.max_concurrent_per_tenant=4096 \
  --set runtime.max_queue=4096 --set server.max_connections_per_client=0 \
  > "$dir/out.log" 2> "$dir/err.log" &
pid=$!
addr=""
for _ in $(seq 1 300); do
  addr=$(sed -n 's/.*ragd listening on http:\/\/\([^ ]*\).*/\1/p' "$dir/out.log" 2>/dev/null | head -1 || true)
  [[ -n "$addr" ]] && break
  sleep 0.1
done
[[ -n "$addr" ]] || { echo "ragd printed no address"; cat "$dir/err.log"; exit 1; }
for _ in $(seq 1 300); do
  curl -sf "http://$addr/readyz" > /dev/null && break
  sleep 0.1
done
status=0
"$SOAK" --url "http://$addr" --clients "$CLIENTS" --seconds "$SECONDS_" --max-tokens 32 --settle-ms 20000 \
  --pid "$pid" --max-rss-growth "$MAX_RSS" || status=$?
kill -TERM "$pid"
exit_code=0
wait "$pid" || exit_code=$?
pid=""
if ((exit_code != 0)); then
  echo "ragd exited with $exit_code after SIGTERM"
  tail -20 "$dir/err.log"
  exit 1
fi
if ((status != 0)); then
  echo "--- daemon log (last 30 lines)"
  tail -30 "$dir/err.log"
fi
exit "$status"
