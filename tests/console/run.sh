#!/usr/bin/env bash
# Browser test of the web console: Debian's Chromium driven by playwright-core (console_test.mjs)
# against the real `ragd` on a free loopback port, with a temp data directory.
# Usage: run.sh BIN_DIR. Exit 77 = skipped (ctest SKIP_RETURN_CODE): node, chromium,
# playwright-core (run `make console-test-deps`) or the ragd/ragctl binaries missing.
# Writes docs/console-ask.png and docs/console-live.png (RAGD_CONSOLE_SCREENSHOTS=0: don't).
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/tests/ragd_start.sh"
bin="${1:?usage: run.sh BIN_DIR}"
chromium="${RAGD_CHROMIUM:-$(command -v chromium || true)}"
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed"; exit 77; fi
if [ -z "$chromium" ] || [ ! -x "$chromium" ]; then
  echo "SKIP: Debian's chromium is not installed (make console-test-deps, or set RAGD_CHROMIUM)"; exit 77
fi
if [ ! -d "$here/node_modules/playwright-core" ]; then
  if ! (cd "$here" && npm ci --offline --no-audit --no-fund >/dev/null 2>&1); then
    echo "SKIP: $here/node_modules/playwright-core is missing (run 'make console-test-deps')"; exit 77
  fi
fi
if [ ! -x "$bin/ragd" ] || [ ! -x "$bin/ragctl" ]; then echo "SKIP: $bin/ragd or $bin/ragctl is not built"; exit 77; fi

tmp="$(mktemp -d)"
cleanup() { ragd_stop; rm -rf "$tmp"; }
trap cleanup EXIT

# The committed trained model answers the corpus's questions; a tiny random one still streams.
model="$root/models/ragd-qa"
if [ ! -f "$model/config.json" ] || [ ! -f "$model/model.safetensors" ] || [ ! -f "$model/tokenizer.json" ]; then
  model="$tmp/model"
  "$bin/ragctl" make-model --preset tiny --seed 1 --out "$model" >"$tmp/make-model.log" 2>&1 \
    || { echo "ragctl make-model failed:"; cat "$tmp/make-model.log"; exit 1; }
fi
# A slice of the QA corpus, ingested offline (shared documents).
head -n 40 "$root/examples/qa_eval/corpus.jsonl" >"$tmp/corpus.jsonl"
"$bin/ragctl" ingest "$tmp/corpus.jsonl" --data "$tmp/data" --model "$model" >"$tmp/ingest.log" 2>&1 \
  || { echo "ragctl ingest failed:"; cat "$tmp/ingest.log"; exit 1; }

# Auth on: an admin key (full cache view) for the console; a small body limit so that the
# "too large" error is cheap to provoke.
ragd_start "$tmp" ragd 60 "$bin/ragd" --model "$model" --data "$tmp/data" --listen 127.0.0.1:0 \
  --admin-key sk-console-admin=ops --api-key sk-console-user=acme --set server.max_body_bytes=262144
echo "ragd at $ragd_addr (model $model)"

shots="$root/docs"
[ "${RAGD_CONSOLE_SCREENSHOTS:-1}" = "0" ] && shots="$tmp/shots"
mkdir -p "$shots"
RAGD_URL="$ragd_addr" RAGD_ADMIN_KEY=sk-console-admin CHROMIUM="$chromium" SCREENSHOT_DIR="$shots" \
  PROFILE_DIR="$tmp/profile" node "$here/console_test.mjs"
rc=$?
[ $rc -ne 0 ] && { echo "--- ragd log (tail) ---"; tail -40 "$tmp/err.log"; }
exit $rc
