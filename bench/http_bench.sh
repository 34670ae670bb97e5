#!/usr/bin/env bash
# HTTP overhead of the daemon's transport and routing: wrk at 64 connections on /healthz and on a
# tiny non-model route (/v1/models: authenticates, routes and serializes JSON).
# Prints req/s, p50 and p99 latency per route.
#
#   bench/http_bench.sh [BIN_DIR] [DURATION_S] [THREADS]
#
# Uses bin/ragd_fake_server (the real Server + Api over the test runtime; no model needed).
set -euo pipefail
bin="${1:-build/bin}"
dur="${2:-10}"
threads="${3:-2}"
command -v wrk >/dev/null || { echo "wrk not installed (apt-get install wrk)"; exit 1; }
server="$bin/ragd_fake_server"
[ -x "$server" ] || { echo "$server not built (cmake --build BUILD --target ragd_fake_server)"; exit 1; }
tmp="$(mktemp -d)"
"$server" --listen 127.0.0.1:0 >"$tmp/out" 2>"$tmp/err" &
pid=$!
trap 'kill -TERM $pid 2>/dev/null; wait $pid 2>/dev/null; rm -rf "$tmp"' EXIT
for _ in $(seq 1 100); do grep -q "listening" "$tmp/out" && break; sleep 0.1; done
url="$(sed -n 's/^ragd listening on //p' "$tmp/out")"
echo "server: $url (ragd_fake_server, RAGD_LOG_LEVEL=${RAGD_LOG_LEVEL:-info}), wrk -t$threads -c64 -d${dur}s"
for route in /healthz /v1/models; do
  out="$(wrk -t"$threads" -c64 -d"${dur}s" --latency "$url$route")"
  rps="$(echo "$out" | awk '/Requests\/sec/ {print $2}')"
  p99="$(echo "$out" | awk '$1=="99%" {print $2}')"
  p50="$(echo "$out" | awk '$1=="50%" {print $2}')"
  errs="$(echo "$out" | awk '/Non-2xx/ {print $4}')"
  printf "%-12s req/s %10s   p50 %8s   p99 %8s   non-2xx %s\n" "$route" "$rps" "$p50" "$p99" "${errs:-0}"
done
