#!/usr/bin/env bash
# Runs openai_sdk.mjs against a daemon on a free loopback port. Usage: run.sh BIN_DIR
# Uses the real bin/ragd with a tiny random model when ragd and ragctl are built, otherwise
# bin/ragd_fake_server (real HTTP layer, fake runtime). Exit 77 = skipped.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
. "$here/../../ragd_start.sh"
bin="${1:?usage: run.sh BIN_DIR}"
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed"; exit 77; fi
if [ ! -d "$here/node_modules/openai" ]; then
  if ! (cd "$here" && npm ci --offline --no-audit --no-fund >/dev/null 2>&1); then
    echo "SKIP: node_modules/openai missing and 'npm ci --offline' failed (run 'npm ci' in $here)"; exit 77
  fi
fi
tmp="$(mktemp -d)"
cleanup() { ragd_stop; rm -rf "$tmp"; }
trap cleanup EXIT
if [ -x "$bin/ragd" ] && [ -x "$bin/ragctl" ] && [ -z "${RAGD_SDK_USE_FAKE:-}" ]; then
  "$bin/ragctl" make-model --preset tiny --out "$tmp/model" >"$tmp/make-model.log" 2>&1 \
    || { echo "ragctl make-model failed:"; cat "$tmp/make-model.log"; exit 1; }
  server=("$bin/ragd" --model "$tmp/model" --data "$tmp/data" --listen 127.0.0.1:0 --api-key sk-test=acme)
  echo "server: ragd (tiny random model)"
elif [ -x "$bin/ragd_fake_server" ]; then
  server=("$bin/ragd_fake_server" --api-key sk-test=acme)
  echo "server: ragd_fake_server (fake runtime)"
else
  echo "SKIP: neither $bin/ragd nor $bin/ragd_fake_server is built"; exit 77
fi
ragd_start "$tmp" server 30 "${server[@]}"
RAGD_URL="$ragd_addr" RAGD_API_KEY=sk-test node "$here/openai_sdk.mjs"
rc=$?
[ $rc -ne 0 ] && { echo "--- server log ---"; tail -50 "$tmp/err.log"; }
exit $rc
