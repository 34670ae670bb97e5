#!/usr/bin/env bash
# Runs openai_sdk.mjs against a daemon on a free loopback port. Usage: run.sh BIN_DIR
# Uses the real bin/ragd with a tiny random model when ragd and ragctl are built, otherwise
# bin/ragd_fake_server (real HTTP layer, fake runtime). Exit 77 = skipped.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
bin="${1:?usage: run.sh BIN_DIR}"
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed"; exit 77; fi
if [ ! -d "$here/node_modules/openai" ]; then
  if ! (cd "$here" && npm ci --offline --no-audit --no-fund >/dev/null 2>&1); then
    echo "SKIP: node_modules/openai missing and 'npm ci --offline' failed (run 'npm ci' in $here)"; exit 77
  fi
fi
tmp="$(mktemp -d)"
pid=""
cleanup() { if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$tmp"; }
trap cleanup EXIT
if [ -x "$bin/ragd" ] && [ -x "$bin/ragctl" ] && [ -z "${RAGD_SDK_USE_FAKE:-}" ]; then
  "$bin/ragctl" make-model --preset tiny --out "$tmp/model" >"$tmp/make-model.log" 2>&1 \
    || { echo "ragctl make-model failed:"; cat "$tmp/make-model.log"; exit 1; }
  "$bin/ragd" --model "$tmp/model" --data "$tmp/data" --listen 127.0.0.1:0 --api-key sk-test=acme \
    >"$tmp/out.log" 2>"$tmp/err.log" &
  pid=$!
  echo "server: ragd (tiny random model)"
elif [ -x "$bin/ragd_fake_server" ]; then
  "$bin/ragd_fake_server" --api-key sk-test=acme >"$tmp/out.log" 2>"$tmp/err.log" &
  pid=$!
  echo "server: ragd_fake_server (fake runtime)"
else
  echo "SKIP: neither $bin/ragd nor $bin/ragd_fake_server is built"; exit 77
fi
for _ in $(seq 1 300); do
  addr="$(sed -n 's/^ragd listening on \(http:\/\/.*\)$/\1/p' "$tmp/out.log" 2>/dev/null | head -1 || true)"
  [ -n "$addr" ] && break
  if ! kill -0 "$pid" 2>/dev/null; then echo "server exited:"; cat "$tmp/err.log"; exit 1; fi
  sleep 0.1
done
[ -n "$addr" ] || { echo "server did not print its address"; cat "$tmp/err.log"; exit 1; }
RAGD_URL="$addr" RAGD_API_KEY=sk-test node "$here/openai_sdk.mjs"
rc=$?
[ $rc -ne 0 ] && { echo "--- server log ---"; tail -50 "$tmp/err.log"; }
exit $rc
