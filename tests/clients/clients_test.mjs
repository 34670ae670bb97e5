// The OpenAI clients people use, unchanged, against a real ragd (started by run.sh at RAGD_URL):
// only the base URL and the model name are ragd's. Each check prints "ok" or "FAIL"; any failure
// exits 1.
import assert from "node:assert/strict";
import OpenAI from "openai";
import { ChatOpenAI, OpenAIEmbeddings } from "@langchain/openai";
import { tool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { OpenAI as LlamaOpenAI } from "@llamaindex/openai";
import { z } from "zod";

const base = process.env.RAGD_URL + "/v1";
const apiKey = "sk-not-checked";  // ragd runs without keys here; the SDKs insist on one
const question = "Who studied the sea urchin at Wouthton?";  // examples/qa_eval: passage qa-0000
const goldDoc = "qa-0000";

let failures = 0;
async function check(name, fn) {
  try {
    await fn();
    console.log(`ok    ${name}`);
  } catch (e) {
    failures++;
    console.log(`FAIL  ${name}\n      ${(e && e.stack) || e}`);
  }
}

const client = new OpenAI({ baseURL: base, apiKey, maxRetries: 0 });
const models = (await client.models.list()).data.map((m) => m.id);
const generator = models.find((m) => !m.includes(":") && m !== "ragd");
console.log(`models: ${models.join(", ")}`);

// --- the official openai SDK
await check("openai: /v1/models lists the generator and the pipelines", async () => {
  assert.ok(generator, "no generator id");
  assert.ok(models.includes("pipeline:default"), "pipeline:default missing");
  assert.ok(models.includes("pipeline:cited"), "pipeline:cited missing");
});

let plain = "";
await check("openai: chat completion", async () => {
  const r = await client.chat.completions.create({
    model: generator, temperature: 0, max_tokens: 12,
    messages: [{ role: "user", content: "Name a reef animal." }],
  });
  plain = r.choices[0].message.content;
  assert.equal(typeof plain, "string");
  assert.ok(plain.length > 0);
  assert.ok(["stop", "length"].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens > 0 && r.usage.completion_tokens <= 12);
});

await check("openai: streamed chat equals the unstreamed one (greedy)", async () => {
  const stream = await client.chat.completions.create({
    model: generator, temperature: 0, max_tokens: 12, stream: true,
    messages: [{ role: "user", content: "Name a reef animal." }],
  });
  let text = "", finish = null;
  for await (const chunk of stream) {
    for (const c of chunk.choices) {
      text += c.delta?.content ?? "";
      finish = c.finish_reason ?? finish;
    }
  }
  assert.equal(text, plain);
  assert.ok(finish);
});

await check("openai: a pipeline as the model retrieves and answers with sources", async () => {
  const r = await client.chat.completions.create({
    model: "pipeline:default", temperature: 0, max_tokens: 16,
    messages: [{ role: "user", content: question }],
  });
  assert.equal(r.model, "pipeline:default");
  assert.ok(r.choices[0].message.content.length > 0);
  const sources = r.ragd?.sources ?? [];
  assert.ok(sources.length > 0, "no ragd.sources");
  assert.ok(sources.some((s) => s.doc_id === goldDoc), `gold ${goldDoc} not among ${sources.map((s) => s.doc_id)}`);
  for (const s of sources) {
    assert.equal(typeof s.title, "string");
    assert.ok(Number.isInteger(s.byte_begin) && s.byte_end > s.byte_begin);
  }
});

await check("openai: a pipeline that numbers its passages: annotations point at [n] markers", async () => {
  const r = await client.chat.completions.create({
    model: "pipeline:cited", temperature: 0, max_tokens: 16,
    messages: [{ role: "user", content: question }],
  });
  const msg = r.choices[0].message;
  const markers = [...msg.content.matchAll(/\[(\d+)\]/g)];
  const ann = msg.annotations ?? [];
  // Every annotation is a url_citation over a marker of the answer; the small model rarely writes
  // markers, so none may be there.
  assert.ok(ann.length <= markers.length + 8);
  const cps = [...msg.content];
  for (const a of ann) {
    assert.equal(a.type, "url_citation");
    const span = cps.slice(a.url_citation.start_index, a.url_citation.end_index).join("");
    assert.match(span, /^\[[\d, ]+\]$/);
  }
  assert.ok((r.ragd?.sources ?? []).length > 0);
});

await check("openai: response_format json_schema gives JSON that validates", async () => {
  const r = await client.chat.completions.create({
    model: generator, temperature: 0.7, seed: 5, max_tokens: 64,
    messages: [{ role: "user", content: "Give the name and the year." }],
    response_format: {
      type: "json_schema",
      json_schema: {
        name: "fact", strict: true,
        schema: {
          type: "object", additionalProperties: false, required: ["name", "year"],
          properties: { name: { type: "string", maxLength: 24 }, year: { type: "integer", minimum: 1000, maximum: 2100 } },
        },
      },
    },
  });
  const c = r.choices[0];
  assert.equal(c.finish_reason, "stop", `finish ${c.finish_reason}: ${c.message.content}`);
  const v = JSON.parse(c.message.content);
  assert.deepEqual(Object.keys(v).sort(), ["name", "year"]);
  assert.equal(typeof v.name, "string");
  assert.ok(v.name.length <= 24);
  assert.ok(Number.isInteger(v.year) && v.year >= 1000 && v.year <= 2100);
});

await check("openai: n = 3 choices, one request", async () => {
  const r = await client.chat.completions.create({
    model: generator, temperature: 1.0, seed: 9, max_tokens: 8, n: 3,
    messages: [{ role: "user", content: "Name a reef animal." }],
  });
  assert.equal(r.choices.length, 3);
  assert.deepEqual(r.choices.map((c) => c.index).sort(), [0, 1, 2]);
});

await check("openai: legacy completions and embeddings", async () => {
  const c = await client.completions.create({ model: generator, prompt: "The reef", max_tokens: 6, temperature: 0 });
  assert.ok(c.choices[0].text.length > 0);
  const e = await client.embeddings.create({ model: generator, input: ["coral reef", "sourdough"] });
  assert.equal(e.data.length, 2);
  assert.ok(e.data[0].embedding.length > 0);
});

await check("openai: a field ragd does not implement is a 400 naming it", async () => {
  await assert.rejects(
    client.chat.completions.create({
      model: generator, max_tokens: 4, messages: [{ role: "user", content: "hi" }], logit_bias: { "1": 5 },
    }),
    (e) => e.status === 400 && /logit_bias/.test(e.message),
  );
});

// A function the model may call; arguments are constrained to its schema.
const weatherParams = {
  type: "object",
  properties: { city: { type: "string", maxLength: 20 }, unit: { enum: ["celsius", "fahrenheit"] } },
  required: ["city", "unit"],
  additionalProperties: false,
};
const weatherTool = { type: "function", function: { name: "get_weather", description: "Current weather in a city.", parameters: weatherParams } };
function checkWeatherArgs(args) {
  const a = typeof args === "string" ? JSON.parse(args) : args;
  assert.equal(typeof a.city, "string");
  assert.ok(["celsius", "fahrenheit"].includes(a.unit), JSON.stringify(a));
  assert.deepEqual(Object.keys(a).sort(), ["city", "unit"]);
}

await check("openai: a tool-calling round trip (tool_calls, then the tool's result, then an answer)", async () => {
  const messages = [{ role: "user", content: "What is the weather in Oslo?" }];
  const r = await client.chat.completions.create({
    model: generator, temperature: 0.7, seed: 3, max_tokens: 80, messages, tools: [weatherTool], tool_choice: "required",
  });
  const msg = r.choices[0].message;
  assert.equal(r.choices[0].finish_reason, "tool_calls");
  assert.ok(msg.tool_calls && msg.tool_calls.length >= 1, JSON.stringify(msg));
  for (const c of msg.tool_calls) {
    assert.ok(c.id.startsWith("call_"));
    assert.equal(c.function.name, "get_weather");
    checkWeatherArgs(c.function.arguments);
  }
  messages.push(msg);
  for (const c of msg.tool_calls) messages.push({ role: "tool", tool_call_id: c.id, content: JSON.stringify({ temperature: 3 }) });
  const answer = await client.chat.completions.create({ model: generator, temperature: 0, max_tokens: 12, messages, tools: [weatherTool] });
  assert.ok(["stop", "length", "tool_calls"].includes(answer.choices[0].finish_reason));
  // Streamed: the SDK's stream helper puts the deltas back together into the same calls.
  const stream = client.chat.completions.stream({
    model: generator, temperature: 0.7, seed: 3, max_tokens: 80, messages: messages.slice(0, 1), tools: [weatherTool], tool_choice: "required",
  });
  const final = await stream.finalChatCompletion();
  assert.deepEqual(final.choices[0].message.tool_calls.map((c) => [c.function.name, c.function.arguments]),
                   msg.tool_calls.map((c) => [c.function.name, c.function.arguments]));
});

// --- LangChain.js
const lc = (model, extra = {}) =>
  new ChatOpenAI({ model, apiKey, configuration: { baseURL: base }, temperature: 0, maxTokens: 12, maxRetries: 0, ...extra });

await check("langchain: invoke and stream", async () => {
  const m = lc(generator);
  const r = await m.invoke("Name a reef animal.");
  assert.equal(r.content, plain);
  let text = "";
  for await (const chunk of await m.stream("Name a reef animal.")) text += chunk.content;
  assert.equal(text, plain);
});

await check("langchain: a pipeline as the model answers the corpus's question", async () => {
  const r = await lc("pipeline:default", { maxTokens: 16 }).invoke(question);
  assert.ok(typeof r.content === "string" && r.content.length > 0);
  assert.equal(r.response_metadata.model_name ?? r.response_metadata.model, "pipeline:default");
});

await check("langchain: a RAG answer with its sources, nothing but the base URL and the model name", async () => {
  const r = await lc("pipeline:footnoted", { maxTokens: 16 }).invoke(question);
  const text = String(r.content);
  const at = text.indexOf("\n\nSources:\n");
  assert.ok(at >= 0, `no sources in ${JSON.stringify(text)}`);
  const lines = text.slice(at + "\n\nSources:\n".length).split("\n");
  assert.ok(lines.length >= 1 && lines.every((l, i) => l.startsWith(`[${i + 1}] `)), JSON.stringify(lines));
  assert.ok(lines.some((l) => l.includes("Coral Reefs at Wouthton") && l.includes("/v1/documents/qa-0000")),
            `gold passage not cited: ${JSON.stringify(lines)}`);
  // Streamed, the same text.
  let streamed = "";
  for await (const chunk of await lc("pipeline:footnoted", { maxTokens: 16 }).stream(question)) streamed += chunk.content;
  assert.equal(streamed, text);
});

await check("langchain: withStructuredOutput (JSON schema) returns a validated object", async () => {
  const schema = z.object({ name: z.string().max(24), year: z.number().int().min(1000).max(2100) });
  const m = lc(generator, { temperature: 0.7, maxTokens: 64 }).withStructuredOutput(schema, { method: "jsonSchema", name: "fact" });
  const v = await m.invoke("Give the name and the year.");
  schema.parse(v);
});

await check("langchain: bindTools round trip with a forced tool, then the ToolMessage", async () => {
  const getWeather = tool(async ({ city }) => JSON.stringify({ city, temperature: 3 }), {
    name: "get_weather",
    description: "Current weather in a city.",
    schema: z.object({ city: z.string().max(20), unit: z.enum(["celsius", "fahrenheit"]) }),
  });
  const m = lc(generator, { temperature: 0.7, maxTokens: 80 }).bindTools([getWeather], { tool_choice: "get_weather" });
  const ai = await m.invoke("What is the weather in Oslo?");
  assert.equal(ai.tool_calls.length, 1, JSON.stringify(ai));
  assert.equal(ai.tool_calls[0].name, "get_weather");
  checkWeatherArgs(ai.tool_calls[0].args);
  const result = await getWeather.invoke(ai.tool_calls[0].args);
  const answer = await lc(generator).bindTools([getWeather]).invoke([
    ["user", "What is the weather in Oslo?"], ai, new ToolMessage({ content: result, tool_call_id: ai.tool_calls[0].id }),
  ]);
  assert.ok(answer.content !== undefined);
});

await check("langchain: withStructuredOutput through function calling", async () => {
  const schema = z.object({ name: z.string().max(24), year: z.number().int().min(1000).max(2100) });
  const m = lc(generator, { temperature: 0.7, maxTokens: 64 }).withStructuredOutput(schema, { method: "functionCalling", name: "fact" });
  schema.parse(await m.invoke("Give the name and the year."));
});

await check("langchain: embeddings", async () => {
  const e = new OpenAIEmbeddings({ model: "embedding:hashing", apiKey, configuration: { baseURL: base }, maxRetries: 0 });
  const v = await e.embedQuery("coral reef");
  assert.ok(v.length > 0);
});

// --- LlamaIndex.TS
const li = (model) => new LlamaOpenAI({ model, apiKey, baseURL: base, temperature: 0, maxTokens: 12, maxRetries: 0 });

await check("llamaindex: chat and stream", async () => {
  const m = li(generator);
  const r = await m.chat({ messages: [{ role: "user", content: "Name a reef animal." }] });
  assert.equal(r.message.content, plain);
  let text = "";
  for await (const chunk of await m.chat({ messages: [{ role: "user", content: "Name a reef animal." }], stream: true }))
    text += chunk.delta;
  assert.equal(text, plain);
});

await check("llamaindex: a pipeline as the model, sources in the raw response", async () => {
  const r = await li("pipeline:default").chat({ messages: [{ role: "user", content: question }] });
  assert.ok(String(r.message.content).length > 0);
  const sources = r.raw?.ragd?.sources ?? [];
  assert.ok(sources.some((s) => s.doc_id === goldDoc), "gold passage not in the raw response's sources");
});

await check("llamaindex: a tool call with tools and tool_choice, then the tool's result", async () => {
  const weather = { metadata: { name: "get_weather", description: "Current weather in a city.", parameters: weatherParams } };
  const m = new LlamaOpenAI({ model: generator, apiKey, baseURL: base, temperature: 0.7, maxTokens: 80, maxRetries: 0,
                              additionalChatOptions: { tool_choice: "required", parallel_tool_calls: false } });
  const r = await m.chat({ messages: [{ role: "user", content: "What is the weather in Oslo?" }], tools: [weather] });
  const calls = r.message.options?.toolCall ?? [];
  assert.equal(calls.length, 1, JSON.stringify(r.message));
  assert.equal(calls[0].name, "get_weather");
  checkWeatherArgs(calls[0].input);
  const answer = await li(generator).chat({
    messages: [
      { role: "user", content: "What is the weather in Oslo?" },
      r.message,
      { role: "user", content: JSON.stringify({ temperature: 3 }), options: { toolResult: { id: calls[0].id, result: "3", isError: false } } },
    ],
    tools: [weather],
  });
  assert.ok(typeof answer.message.content === "string");
});

console.log(failures ? `${failures} check(s) failed` : "all checks passed");
process.exit(failures ? 1 : 0);
