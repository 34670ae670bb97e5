// The official OpenAI Node SDK, unchanged, against ragd: models, chat completions (plain and
// streaming), completions, embeddings, and error mapping. RAGD_URL=http://127.0.0.1:PORT.
import assert from 'node:assert/strict';
import OpenAI from 'openai';

const base = process.env.RAGD_URL;
const apiKey = process.env.RAGD_API_KEY ?? 'sk-test';
assert.ok(base, 'RAGD_URL not set');

// Wait for /readyz (the real daemon loads its model first).
for (let i = 0; ; i++) {
  try {
    const r = await fetch(`${base}/readyz`);
    if (r.status === 200) break;
  } catch (e) { /* not listening yet */ }
  if (i > 600) throw new Error('daemon never became ready');
  await new Promise((res) => setTimeout(res, 100));
}

const client = new OpenAI({ baseURL: `${base}/v1`, apiKey, maxRetries: 0 });

const models = await client.models.list();
assert.ok(models.data.length >= 1, 'no models listed');
const model = models.data[0].id;
console.log(`model: ${model}`);

// Non-streaming chat completion.
const chat = await client.chat.completions.create({
  model,
  messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'What is a KV cache?' }],
  max_tokens: 8,
  temperature: 0,
  seed: 7,
  logprobs: true,
});
assert.equal(chat.object, 'chat.completion');
assert.equal(chat.choices.length, 1);
assert.equal(chat.choices[0].message.role, 'assistant');
assert.equal(typeof chat.choices[0].message.content, 'string');
assert.ok(['stop', 'length'].includes(chat.choices[0].finish_reason), chat.choices[0].finish_reason);
assert.ok(chat.usage.completion_tokens >= 1 && chat.usage.completion_tokens <= 8);
assert.equal(chat.usage.total_tokens, chat.usage.prompt_tokens + chat.usage.completion_tokens);
assert.equal(chat.choices[0].logprobs.content.length, chat.usage.completion_tokens);
console.log(`chat: ${JSON.stringify(chat.choices[0].message.content)} (${chat.usage.completion_tokens} tokens)`);

// Streaming chat completion: same seed and greedy sampling give the same text.
const stream = await client.chat.completions.create({
  model,
  messages: [{ role: 'system', content: 'Answer briefly.' }, { role: 'user', content: 'What is a KV cache?' }],
  max_tokens: 8,
  temperature: 0,
  seed: 7,
  stream: true,
  stream_options: { include_usage: true },
});
let text = '';
let chunks = 0;
let finish = null;
let usage = null;
for await (const chunk of stream) {
  chunks++;
  assert.equal(chunk.object, 'chat.completion.chunk');
  if (chunk.usage) usage = chunk.usage;
  for (const c of chunk.choices) {
    if (c.delta?.content) text += c.delta.content;
    if (c.finish_reason) finish = c.finish_reason;
  }
}
assert.ok(chunks >= 2, `only ${chunks} chunks`);
assert.ok(finish, 'no finish_reason');
assert.ok(usage && usage.completion_tokens >= 1, 'no usage chunk');
assert.equal(text, chat.choices[0].message.content, 'streamed text differs from the non-streamed one');
console.log(`stream: ${chunks} chunks, ${JSON.stringify(text)}`);

// Legacy completions.
const cmpl = await client.completions.create({ model, prompt: 'Once upon a time', max_tokens: 4, temperature: 0 });
assert.equal(cmpl.object, 'text_completion');
assert.equal(typeof cmpl.choices[0].text, 'string');

// Embeddings (the SDK asks for base64 and decodes it).
const emb = await client.embeddings.create({ model, input: ['alpha beta', 'gamma'] });
assert.equal(emb.data.length, 2);
assert.ok(emb.data[0].embedding.length > 0);
const norm = Math.hypot(...emb.data[1].embedding);
assert.ok(Number.isFinite(norm) && norm > 0, `bad embedding norm ${norm}`);
console.log(`embeddings: dim ${emb.data[0].embedding.length}`);

// A pipeline as the model: listed by /v1/models, its answer carries ragd.sources.
assert.ok(models.data.some((m) => m.id === 'pipeline:default'), 'pipeline:default is not listed');
await fetch(`${base}/v1/documents`, {
  method: 'POST',
  headers: { 'Content-Type': 'application/json', Authorization: `Bearer ${apiKey}` },
  body: JSON.stringify({ id: 'kv', text: 'The KV cache stores the attention keys and values of earlier tokens.' }),
});
const rag = await client.chat.completions.create({
  model: 'pipeline:default',
  messages: [{ role: 'user', content: 'What does the KV cache store?' }],
  max_tokens: 4,
  temperature: 0,
});
assert.equal(rag.model, 'pipeline:default');
assert.ok(Array.isArray(rag.ragd?.sources) && rag.ragd.sources.length >= 1, 'no sources');
console.log(`pipeline: ${rag.ragd.sources.length} sources, first ${rag.ragd.sources[0].doc_id}`);

// n > 1: one choice per index.
const two = await client.chat.completions.create({
  model, messages: [{ role: 'user', content: 'Say something.' }], n: 2, max_tokens: 3, temperature: 0.8, seed: 3,
});
assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);

// Errors surface as SDK exceptions with the status and message.
await assert.rejects(
  client.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }], temperature: 5 }),
  (e) => e instanceof OpenAI.APIError && e.status === 400 && /temperature/.test(e.message));
await assert.rejects(
  new OpenAI({ baseURL: `${base}/v1`, apiKey: 'wrong-key', maxRetries: 0 }).models.list(),
  (e) => e instanceof OpenAI.AuthenticationError && e.status === 401);
console.log('openai sdk: all checks passed');
