#!/usr/bin/env bash
# The OpenAI clients people use, unchanged, against a real ragd (clients_test.mjs): the official
# `openai` SDK, LangChain.js (@langchain/openai) and LlamaIndex.TS (@llamaindex/openai), pinned in
# package-lock.json. ragd runs on a free loopback port with the trained QA model, a slice of its
# corpus and a temp data directory; the test stops it by PID.
# Usage: run.sh BIN_DIR. Exit 77 = skipped (ctest SKIP_RETURN_CODE): node, the clients
# (`make clients-test-deps`, which needs the npm registry) or the ragd/ragctl binaries missing.
set -u
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
. "$root/tests/ragd_start.sh"
bin="${1:?usage: run.sh BIN_DIR}"
if ! command -v node >/dev/null 2>&1; then echo "SKIP: node is not installed"; exit 77; fi
if [ ! -d "$here/node_modules/openai" ] || [ ! -d "$here/node_modules/@langchain/openai" ] ||
   [ ! -d "$here/node_modules/@llamaindex/openai" ]; then
  if ! (cd "$here" && npm ci --offline --no-audit --no-fund >/dev/null 2>&1); then
    echo "SKIP: the OpenAI clients are not installed in $here/node_modules (run 'make clients-test-deps';" \
         "it needs the npm registry)"
    exit 77
  fi
fi
if [ ! -x "$bin/ragd" ] || [ ! -x "$bin/ragctl" ]; then echo "SKIP: $bin/ragd or $bin/ragctl is not built"; exit 77; fi
model="$root/models/ragd-qa"
if [ ! -f "$model/model.safetensors" ]; then echo "SKIP: $model is missing"; exit 77; fi

tmp="$(mktemp -d)"
cleanup() { ragd_stop; rm -rf "$tmp"; }
trap cleanup EXIT

head -n 60 "$root/examples/qa_eval/corpus.jsonl" >"$tmp/corpus.jsonl"
"$bin/ragctl" ingest "$tmp/corpus.jsonl" --data "$tmp/data" --model "$model" >"$tmp/ingest.log" 2>&1 \
  || { echo "ragctl ingest failed:"; cat "$tmp/ingest.log"; exit 1; }
# The shipped pipelines, plus one that numbers its passages (citations as annotations).
mkdir -p "$tmp/pipelines"
cp "$root"/configs/pipelines/*.toml "$tmp/pipelines/"
sed -e 's/^name = "default"/name = "cited"/' -e 's/^\[prompt\]/[prompt]\nnumber_passages = true/' \
  "$root/configs/pipelines/default.toml" >"$tmp/pipelines/cited.toml"
# ... and one whose answers end with their sources (for clients that keep only the text).
sed -e 's/^name = "default"/name = "footnoted"/' -e 's/^\[prompt\]/[prompt]\nnumber_passages = true\nsources_footer = true/' \
  "$root/configs/pipelines/default.toml" >"$tmp/pipelines/footnoted.toml"

ragd_start "$tmp" ragd 60 "$bin/ragd" --model "$model" --data "$tmp/data" --pipelines "$tmp/pipelines" \
  --listen 127.0.0.1:0
ragd_wait_ready 60
echo "ragd at $ragd_addr"
RAGD_URL="$ragd_addr" CORPUS="$tmp/corpus.jsonl" node "$here/clients_test.mjs"
rc=$?
if [ $rc -ne 0 ]; then echo "--- ragd stderr (tail)"; tail -n 40 "$tmp/err.log"; fi
exit $rc
