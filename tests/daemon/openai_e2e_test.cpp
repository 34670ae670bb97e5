// The OpenAI-compatible routes against the real daemon (tiny random model, temp data directory,
// loopback port): pipelines as models (GET /v1/models, model = a pipeline id on both completion
// routes, sources and annotations, streaming, multi-turn queries, tenant scope). Skipped with a
// message when bin/ragd or bin/ragctl is not built.
#include <set>

#include "ragd/engine/tokenizer.h"
#include "real_daemon.h"

namespace ragd::testing {
namespace {

class OpenAiE2eTest : public E2eTest {
 protected:
  // Pipelines of the test: "cite" numbers its passages; "model" is named like the generator (the
  // model directory is dir_/model), so its bare name is the generator's id.
  std::string write_pipelines(const std::string& name) {
    fs::path p = dir_ / (name + "_pipelines");
    fs::create_directories(p);
    std::ofstream(p / "cite.toml") << "[pipeline]\nname = \"cite\"\ndescription = \"numbered passages\"\n"
                                      "[retriever]\ntop_k = 2\n[prompt]\nnumber_passages = true\n";
    std::ofstream(p / "model.toml") << "[pipeline]\nname = \"model\"\n[retriever]\ntop_k = 1\n";
    return p.string();
  }
  void ingest_zoo() {
    auto r = call("POST", "/v1/documents",
                  R"({"documents":[{"id":"zebra","title":"Zebras at Oakfield","url":"https://zoo.example/zebra",)"
                  R"("text":"The zebras of the Oakfield sanctuary eat grass and drink water at dawn. The oldest zebra is twenty years old."},)"
                  R"({"id":"owl","title":"Owls at Pinecrest","text":"The owls of the Pinecrest reserve hunt mice at night."},)"
                  R"({"id":"trout","title":"Trout at Millbrook","text":"The trout of the Millbrook stream swim upstream in spring."}]})");
    ASSERT_EQ(r.status, 200) << r.body;
  }
  std::string chat(const std::string& model, const std::string& messages, const std::string& extra = "") {
    return R"({"model":")" + model + R"(","messages":)" + messages + R"(,"max_tokens":3,"temperature":0)" + extra + "}";
  }
  static std::string user(const std::string& text) { return R"([{"role":"user","content":")" + text + R"("}])"; }
  // Every data line of an SSE response, parsed.
  std::vector<std::string> sse_data(const std::string& target, const std::string& body, const daemon::Headers& h = {}) {
    std::vector<std::string> out;
    daemon::SseParser p([&](const std::string&, const std::string& d) { out.push_back(d); });
    HttpClient c("127.0.0.1", d_.port(), 60000);
    auto r = c.request_stream("POST", target, body, h, [&](std::string_view d) {
      p.feed(d);
      return true;
    });
    EXPECT_TRUE(r.ok());
    return out;
  }
};

TEST_F(OpenAiE2eTest, ModelsListThePipelines) {
  start_daemon("oa_models", {"--pipelines", write_pipelines("oa_models")});
  auto r = get("/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  std::set<std::string> ids;
  for (size_t i = 0; i < j.size("/data"); ++i) ids.insert(j.str("/data/" + std::to_string(i) + "/id"));
  // A new data directory gets the shipped term vectors (runtime.embedder = auto).
  EXPECT_EQ(ids, (std::set<std::string>{"model", "pipeline:default", "pipeline:cite", "pipeline:model", "embedding:termvec"})) << r.body;
  EXPECT_EQ(j.str("/data/0/id"), "model");  // the generator first
  EXPECT_EQ(j.str("/data/0/ragd/kind"), "generator");
  // One model, by its id or an alias: a bare pipeline name, unless it is the generator's id.
  r = get("/v1/models/pipeline:cite");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/ragd/kind"), "pipeline");
  EXPECT_EQ(Json(r.body).str("/ragd/pipeline"), "cite");
  EXPECT_EQ(Json(r.body).str("/parent"), "model");
  EXPECT_EQ(Json(r.body).str("/id"), "pipeline:cite");
  EXPECT_EQ(Json(get("/v1/models/cite").body).str("/id"), "pipeline:cite");
  EXPECT_EQ(Json(get("/v1/models/model").body).str("/id"), "model");
  EXPECT_EQ(Json(get("/v1/models/ragd").body).str("/id"), "model");
  expect_error(get("/v1/models/pipeline:nope"), 404, "model_not_found", "pipeline:nope");
}

TEST_F(OpenAiE2eTest, PipelineAsModelRetrievesOnBothRoutes) {
  start_daemon("oa_runs", {"--pipelines", write_pipelines("oa_runs")});
  ingest_zoo();
  // Chat: sources, an answer, the pipeline's id echoed.
  auto r = call("POST", "/v1/chat/completions", chat("pipeline:default", user("What do the zebras of Oakfield eat?"), R"(,"retrieval_top_k":1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  EXPECT_EQ(j.str("/model"), "pipeline:default");
  EXPECT_EQ(j.str("/object"), "chat.completion");
  ASSERT_EQ(j.size("/ragd/sources"), 1u) << r.body;
  EXPECT_EQ(j.str("/ragd/sources/0/doc_id"), "zebra");
  EXPECT_EQ(j.str("/ragd/sources/0/url"), "https://zoo.example/zebra");
  EXPECT_EQ(j.str("/ragd/sources/0/title"), "Zebras at Oakfield");
  EXPECT_GE(j.num("/usage/completion_tokens"), 1);
  EXPECT_GT(j.num("/ragd/usage/prompt_tokens"), 0);
  EXPECT_FALSE(j.has("/choices/0/message/annotations")) << "default does not number its passages";
  // The bare name is an alias; the pipeline field may agree with the model, not contradict it.
  r = call("POST", "/v1/chat/completions", chat("default", user("What do the zebras of Oakfield eat?"), R"(,"pipeline":"default","retrieval_top_k":1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/ragd/sources/0/doc_id"), "zebra");
  EXPECT_EQ(Json(r.body).str("/model"), "pipeline:default");
  expect_error(call("POST", "/v1/chat/completions", chat("pipeline:default", user("zebras?"), R"(,"pipeline":"cite")")), 400,
               "invalid_request", "pipeline:default");
  // The run's filter and cache_salt, as through the pipeline field: no document has lang = fr.
  r = call("POST", "/v1/chat/completions",
           chat("pipeline:default", user("What do the zebras of Oakfield eat?"), R"(,"filter":{"lang":"fr"},"cache_salt":"s1")"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/ragd/sources"), 0u) << r.body;
  expect_error(call("POST", "/v1/chat/completions", chat("pipeline:default", user("zebras?"), R"(,"filter":{"year":{"gteq":1}})")), 400,
               "invalid_request", "filter key 'year'");
  // Completions: the prompt is the query.
  r = call("POST", "/v1/completions",
           R"({"model":"pipeline:default","prompt":"Where do the owls of Pinecrest hunt?","max_tokens":2,"retrieval_top_k":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/object"), "text_completion");
  EXPECT_EQ(Json(r.body).str("/ragd/sources/0/doc_id"), "owl");
  // The generator's name is the generator, even with a pipeline of that name (reached by its id).
  r = call("POST", "/v1/chat/completions", chat("model", user("What do the zebras of Oakfield eat?")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/ragd/sources"), 0u) << r.body;
  EXPECT_EQ(Json(r.body).str("/model"), "model");
  r = call("POST", "/v1/chat/completions", chat("pipeline:model", user("What do the zebras of Oakfield eat?")));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/ragd/sources"), 1u) << r.body;
  // Unknown models: 404 naming the model, on both routes.
  expect_error(call("POST", "/v1/chat/completions", chat("pipeline:nope", user("x"))), 404, "model_not_found", "pipeline:nope");
  expect_error(call("POST", "/v1/completions", R"({"model":"gpt-4o","prompt":"x"})"), 404, "model_not_found", "gpt-4o");
  // The existing extension field still selects a pipeline under the generator's name.
  r = call("POST", "/v1/chat/completions", chat("model", user("Where do the owls of Pinecrest hunt?"), R"(,"pipeline":"default","retrieval_top_k":1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/ragd/sources/0/doc_id"), "owl");
}

TEST_F(OpenAiE2eTest, StreamingCarriesSourcesAndNumberedPipelinesAnnotate) {
  start_daemon("oa_stream", {"--pipelines", write_pipelines("oa_stream")});
  ingest_zoo();
  // Streaming: a sources chunk (no choices) before any content.
  auto data = sse_data("/v1/chat/completions",
                       chat("pipeline:cite", user("What do the zebras of Oakfield eat?"), R"(,"stream":true)"));
  ASSERT_GE(data.size(), 3u);
  EXPECT_EQ(data.back(), "[DONE]");
  Json first(data.front());
  ASSERT_TRUE(first.ok) << data.front();
  EXPECT_EQ(first.size("/choices"), 0u);
  ASSERT_GE(first.size("/ragd/sources"), 1u) << data.front();
  EXPECT_EQ(first.str("/ragd/sources/0/doc_id"), "zebra");
  EXPECT_EQ(first.str("/model"), "pipeline:cite");
  // Numbered passages: the answer carries its annotations (this random model rarely writes "[n]":
  // each one found must span a marker and name a source; unit_test.cpp checks the spans).
  for (const std::string body : {chat("pipeline:cite", user("What do the zebras of Oakfield eat?"), R"(,"max_tokens":24)"),
                                 chat("pipeline:cite", user("[1] [2] zebras [1]"), R"(,"max_tokens":24)")}) {
    auto r = call("POST", "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    ASSERT_TRUE(j.has("/choices/0/message/annotations")) << r.body;
    const std::string content = j.str("/choices/0/message/content");
    for (size_t i = 0; i < j.size("/choices/0/message/annotations"); ++i) {
      const std::string a = "/choices/0/message/annotations/" + std::to_string(i);
      EXPECT_EQ(j.str(a + "/type"), "url_citation");
      const auto b = static_cast<size_t>(j.num(a + "/url_citation/start_index"));
      const auto e = static_cast<size_t>(j.num(a + "/url_citation/end_index"));
      ASSERT_LT(b, e);
      EXPECT_FALSE(j.str(a + "/url_citation/url").empty());
      EXPECT_LT(static_cast<size_t>(j.num(a + "/url_citation/source_index")), j.size("/ragd/sources"));
      (void)content;  // indices are code points; this model's output may hold any character
    }
  }
}

// A follow-up whose referent is in an earlier user turn retrieves with it (rag_query.h).
TEST_F(OpenAiE2eTest, FollowUpsSearchWithTheEarlierTurns) {
  start_daemon("oa_turns");
  ingest_zoo();
  const std::string conv = R"([{"role":"user","content":"Tell me about the Oakfield sanctuary."},)"
                           R"({"role":"assistant","content":"It keeps animals."},)"
                           R"({"role":"user","content":"How old is the oldest one there?"}])";
  auto r = call("POST", "/v1/chat/completions", chat("pipeline:default", conv, R"(,"retrieval_top_k":1)"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/ragd/sources/0/doc_id"), "zebra") << r.body;
  expect_error(call("POST", "/v1/chat/completions", chat("pipeline:default", R"([{"role":"system","content":"hi"}])")), 400,
               "invalid_request", "user message");
}

// Tenant scope holds when the pipeline is the model: B never retrieves A's document.
TEST_F(OpenAiE2eTest, PipelineAsModelKeepsTenantsApart) {
  start_daemon("oa_tenants", {"--api-key", "key-a=alpha", "--api-key", "key-b=beta"});
  const daemon::Headers kA = {{"Authorization", "Bearer key-a"}};
  const daemon::Headers kB = {{"Authorization", "Bearer key-b"}};
  auto r = call("POST", "/v1/documents", R"({"id":"vault","text":"The vault password is swordfish. Keep the vault password secret."})", kA);
  ASSERT_EQ(r.status, 200) << r.body;
  r = call("POST", "/v1/documents",
           R"({"documents":[{"id":"b1","text":"The fruit stall has no password and no vault."},)"
           R"({"id":"b2","text":"The station keeps tickets in a vault."}]})",
           kB);
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string q = chat("pipeline:default", user("What is the vault password?"), R"(,"retrieval_top_k":3,"min_score_ratio":0)");
  r = call("POST", "/v1/chat/completions", q, kA);
  ASSERT_EQ(r.status, 200) << r.body;
  std::set<std::string> seen;
  for (size_t i = 0; i < Json(r.body).size("/ragd/sources"); ++i) seen.insert(Json(r.body).str("/ragd/sources/" + std::to_string(i) + "/doc_id"));
  EXPECT_TRUE(seen.count("vault")) << "positive control: " << r.body;
  for (const std::string route : {"/v1/chat/completions", "/v1/completions"}) {
    const std::string body = route == "/v1/chat/completions"
                                 ? q
                                 : R"({"model":"pipeline:default","prompt":"What is the vault password?","max_tokens":2,"retrieval_top_k":3,"min_score_ratio":0})";
    r = call("POST", route, body, kB);
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    ASSERT_EQ(j.size("/ragd/sources"), 2u) << route << ": " << r.body;  // B's two, nothing of A's
    for (size_t i = 0; i < 2; ++i) EXPECT_NE(j.str("/ragd/sources/" + std::to_string(i) + "/doc_id"), "vault") << route;
    EXPECT_EQ(r.body.find("swordfish"), std::string::npos) << route;
  }
  auto data = sse_data("/v1/chat/completions", q.substr(0, q.size() - 1) + R"(,"stream":true})", kB);
  ASSERT_FALSE(data.empty());
  Json first(data.front());
  ASSERT_EQ(first.size("/ragd/sources"), 2u) << data.front();
  for (const auto& d : data) EXPECT_EQ(d.find("swordfish"), std::string::npos) << d;
  for (const auto& d : data) EXPECT_EQ(d.find("\"vault\""), std::string::npos) << d;
}


// The embedder and the cross-encoder under their own ids (embedding:<name>, rerank:<name>), still
// answering to the generator's; token-id inputs on /v1/embeddings (the served model's ids).
TEST_F(OpenAiE2eTest, EncodersHaveTheirOwnIds) {
  ASSERT_EQ(run_program({kBin + "/ragctl", "make-model", "--preset", "bert-tiny", "--reranker", "--out", (dir_ / "ce-tiny").string()}), 0);
  start_daemon("oa_encoders", {"--set", "runtime.rerank_model_dir=" + (dir_ / "ce-tiny").string(), "--set",
                               "runtime.embedder=hashing"});
  auto r = get("/v1/models");
  ASSERT_EQ(r.status, 200) << r.body;
  std::set<std::string> ids;
  Json j(r.body);
  for (size_t i = 0; i < j.size("/data"); ++i) ids.insert(j.str("/data/" + std::to_string(i) + "/id"));
  EXPECT_TRUE(ids.count("embedding:hashing")) << r.body;
  EXPECT_TRUE(ids.count("rerank:ce-tiny")) << r.body;
  r = get("/v1/models/embedding:hashing");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/ragd/kind"), "embedder");
  EXPECT_EQ(Json(r.body).num("/ragd/dimensions"), 384);
  // Embeddings by the embedder's id, the generator's (as before) or none: the same vectors.
  r = call("POST", "/v1/embeddings", R"({"model":"embedding:hashing","input":"zebras eat grass"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/model"), "embedding:hashing");
  const std::string by_id = Json(r.body).has("/data/0/embedding/3") ? std::to_string(Json(r.body).dbl("/data/0/embedding/3")) : "";
  r = call("POST", "/v1/embeddings", R"({"model":"model","input":"zebras eat grass"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(std::to_string(Json(r.body).dbl("/data/0/embedding/3")), by_id);
  expect_error(call("POST", "/v1/embeddings", R"({"model":"rerank:ce-tiny","input":"x"})"), 400, "invalid_request", "embedding:hashing");
  expect_error(call("POST", "/v1/embeddings", R"({"model":"pipeline:default","input":"x"})"), 400, "invalid_request", "/v1/embeddings");
  expect_error(call("POST", "/v1/chat/completions", chat("embedding:hashing", user("x"))), 400, "invalid_request", "pipeline:default");
  expect_error(call("POST", "/v1/embeddings", R"({"model":"text-embedding-3-small","input":"x"})"), 404, "model_not_found",
               "text-embedding-3-small");
  // Token ids: one array, or an array of them; their text's embedding; usage counts the ids.
  r = call("POST", "/v1/embeddings", R"({"model":"embedding:hashing","input":[[5,6,7],[8,9]]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/data"), 2u);
  EXPECT_EQ(Json(r.body).num("/usage/prompt_tokens"), 5);
  r = call("POST", "/v1/embeddings", R"({"input":[5,6,7]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/data"), 1u);
  EXPECT_EQ(Json(r.body).size("/data/0/embedding"), 384u);
  expect_error(call("POST", "/v1/embeddings", R"({"input":[[1,2],"x"]})"), 400, "invalid_request", "mixes");
  expect_error(call("POST", "/v1/embeddings", R"({"input":[1,-2]})"), 400, "invalid_request", "token id");
  expect_error(call("POST", "/v1/embeddings", R"({"input":[[1,99999999]]})"), 400, "invalid_request", "outside the vocabulary");
  // Rerank by the cross-encoder's id; the response names it.
  const std::string docs = R"(,"query":"what do zebras eat?","documents":["zebras eat grass","owls hunt mice"]})";
  r = call("POST", "/v1/rerank", R"({"model":"rerank:ce-tiny")" + docs);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/model"), "rerank:ce-tiny");
  EXPECT_EQ(Json(r.body).size("/results"), 2u);
  r = call("POST", "/v1/rerank", R"({"model":"model")" + docs);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/model"), "rerank:ce-tiny");
  expect_error(call("POST", "/v1/rerank", R"({"model":"embedding:hashing")" + docs), 400, "invalid_request", "rerank:ce-tiny");
  expect_error(call("POST", "/v1/rerank", R"({"model":"bge-reranker")" + docs), 404, "model_not_found", "bge-reranker");
}


// n > 1: n choices, each sampling with seed + its index (distinct with temperature > 0, identical
// when greedy), the later ones reusing the prompt's KV that the first one computed.
TEST_F(OpenAiE2eTest, SeveralChoices) {
  start_daemon("oa_n");
  auto contents = [](const Json& j, const std::string& field) {
    std::vector<std::string> v;
    for (size_t i = 0; i < j.size("/choices"); ++i) {
      EXPECT_EQ(j.num("/choices/" + std::to_string(i) + "/index"), static_cast<int64_t>(i));
      v.push_back(j.str("/choices/" + std::to_string(i) + field));
    }
    return v;
  };
  const std::string msgs = R"([{"role":"user","content":"Tell me a long story about the sea and the ships on it."}])";
  auto r = call("POST", "/v1/chat/completions", R"({"messages":)" + msgs + R"(,"n":3,"max_tokens":12,"temperature":1.5,"seed":7,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  ASSERT_EQ(j.size("/choices"), 3u) << r.body;
  auto sampled = contents(j, "/message/content");
  EXPECT_EQ(std::set<std::string>(sampled.begin(), sampled.end()).size(), 3u) << r.body;
  EXPECT_EQ(j.num("/usage/completion_tokens"), 36);
  EXPECT_EQ(j.num("/usage/prompt_tokens"), j.num("/ragd/choices/0/usage/prompt_tokens"));
  // The later choices reused the first one's prompt KV.
  for (int i = 1; i < 3; ++i) {
    const std::string u = "/ragd/choices/" + std::to_string(i) + "/usage";
    EXPECT_GT(j.num(u + "/reused_tokens/hbm") + j.num(u + "/reused_tokens/dram") + j.num(u + "/reused_tokens/ssd"), 0) << r.body;
  }
  // Seeded: the same choices again.
  r = call("POST", "/v1/chat/completions", R"({"messages":)" + msgs + R"(,"n":3,"max_tokens":12,"temperature":1.5,"seed":7,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(contents(Json(r.body), "/message/content"), sampled);
  // n = 1 with seed 8 is choice 1 of the request above (seed + index).
  r = call("POST", "/v1/chat/completions", R"({"messages":)" + msgs + R"(,"max_tokens":12,"temperature":1.5,"seed":8,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/choices/0/message/content"), sampled[1]);
  // Greedy: identical choices.
  r = call("POST", "/v1/completions", R"({"prompt":"Once upon a time","n":4,"max_tokens":6,"temperature":0,"logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  auto greedy = contents(Json(r.body), "/text");
  ASSERT_EQ(greedy.size(), 4u);
  for (const auto& g : greedy) EXPECT_EQ(g, greedy[0]);
  EXPECT_EQ(Json(r.body).size("/choices/3/logprobs/tokens"), 6u);
  // Streaming: every choice's chunks carry its index; one finish per choice, one [DONE] (unseeded
  // sampling: ignore_eos keeps a sampled end-of-sequence from cutting a choice short of 5 tokens).
  std::vector<std::string> data;
  {
    daemon::SseParser p([&](const std::string&, const std::string& d) { data.push_back(d); });
    HttpClient c("127.0.0.1", d_.port(), 60000);
    ASSERT_TRUE(c.request_stream("POST", "/v1/chat/completions",
                                 R"({"messages":)" + msgs + R"(,"n":2,"max_tokens":5,"temperature":0.8,"ignore_eos":true,"stream":true,)"
                                 R"("stream_options":{"include_usage":true}})",
                                 {}, [&](std::string_view d) {
                                   p.feed(d);
                                   return true;
                                 }).ok());
  }
  ASSERT_FALSE(data.empty());
  EXPECT_EQ(data.back(), "[DONE]");
  EXPECT_EQ(std::count(data.begin(), data.end(), "[DONE]"), 1);
  int finishes[2] = {0, 0};
  for (size_t i = 0; i + 1 < data.size(); ++i) {
    Json c(data[i]);
    ASSERT_TRUE(c.ok) << data[i];
    if (c.size("/choices") == 0) continue;
    const auto idx = c.num("/choices/0/index");
    ASSERT_TRUE(idx == 0 || idx == 1) << data[i];
    simdjson::dom::element fr = c.at("/choices/0/finish_reason");
    if (!fr.is_null()) ++finishes[idx];
  }
  EXPECT_EQ(finishes[0], 1);
  EXPECT_EQ(finishes[1], 1);
  EXPECT_EQ(Json(data[data.size() - 2]).num("/usage/completion_tokens"), 10) << data[data.size() - 2];
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x","n":17})"), 400, "invalid_request", "'n'");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x","n":2,"best_of":3})"), 400, "invalid_request", "best_of");
}

// prompt as token ids (one array, or several prompts) gives what the same text gives.
TEST_F(OpenAiE2eTest, TokenIdPromptsEqualTextPrompts) {
  start_daemon("oa_ids");
  auto tok = engine::Tokenizer::from_file((dir_ / "model" / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  const std::string text = "The lighthouse keepers climbed the steps every evening";
  std::vector<int32_t> ids = (*tok)->encode(text, false, true);
  if (auto bos = (*tok)->bos_id()) ids.insert(ids.begin(), *bos);  // as a text prompt is prefixed
  std::string arr = "[";
  for (size_t i = 0; i < ids.size(); ++i) arr += (i ? "," : "") + std::to_string(ids[i]);
  arr += "]";
  const std::string tail = R"(,"max_tokens":8,"temperature":0,"logprobs":1})";
  auto by_text = call("POST", "/v1/completions", R"({"prompt":")" + text + "\"" + tail);
  auto by_ids = call("POST", "/v1/completions", R"({"prompt":)" + arr + tail);
  ASSERT_EQ(by_text.status, 200) << by_text.body;
  ASSERT_EQ(by_ids.status, 200) << by_ids.body;
  EXPECT_EQ(Json(by_ids.body).str("/choices/0/text"), Json(by_text.body).str("/choices/0/text"));
  EXPECT_EQ(Json(by_ids.body).num("/usage/prompt_tokens"), static_cast<int64_t>(ids.size()));
  EXPECT_EQ(Json(by_ids.body).num("/usage/prompt_tokens"), Json(by_text.body).num("/usage/prompt_tokens"));
  // Several prompts, text and ids mixed: one choice each, in order.
  auto both = call("POST", "/v1/completions", R"({"prompt":[")" + text + R"(",)" + arr + R"(,"Another prompt"])" + tail);
  ASSERT_EQ(both.status, 200) << both.body;
  Json b(both.body);
  ASSERT_EQ(b.size("/choices"), 3u) << both.body;
  EXPECT_EQ(b.str("/choices/0/text"), Json(by_text.body).str("/choices/0/text"));
  EXPECT_EQ(b.str("/choices/1/text"), Json(by_text.body).str("/choices/0/text"));
  EXPECT_EQ(b.num("/choices/2/index"), 2);
  expect_error(call("POST", "/v1/completions", R"({"prompt":[1,99999999]})"), 400, "invalid_request", "outside the vocabulary");
  expect_error(call("POST", "/v1/completions", R"({"prompt":[1,-5]})"), 400, "invalid_request", "prompt[1]");
  expect_error(call("POST", "/v1/completions", R"({"prompt":[]})"), 400, "invalid_request", "prompt");
  expect_error(call("POST", "/v1/completions", R"({"model":"pipeline:default","prompt":[1,2,3]})"), 400, "invalid_request", "text");
}

// A field that is not implemented is a 400 naming it, unless documented as accepted and ignored.
TEST_F(OpenAiE2eTest, RequestFieldsAreImplementedIgnoredOrRefused) {
  start_daemon("oa_fields");
  const std::string msgs = R"("messages":[{"role":"user","content":"hi"}],"max_tokens":2)";
  expect_error(call("POST", "/v1/chat/completions", "{" + msgs + R"(,"logit_bias":{"5":10}})"), 400, "invalid_request",
               "'logit_bias' is not implemented");
  expect_error(call("POST", "/v1/chat/completions", "{" + msgs + R"(,"tools":[]})"), 400, "invalid_request", "'tools' must not be empty");
  expect_error(call("POST", "/v1/chat/completions", "{" + msgs + R"(,"functions":[{"name":"f"}]})"), 400, "invalid_request",
               "'functions' is not implemented");
  expect_error(call("POST", "/v1/chat/completions", "{" + msgs + R"(,"temprature":0.5})"), 400, "invalid_request",
               "unknown field 'temprature'");
  expect_error(call("POST", "/v1/chat/completions", "{" + msgs + R"(,"prompt":"x"})"), 400, "invalid_request", "'prompt'");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x","top_logprobs":2})"), 400, "invalid_request", "'top_logprobs'");
  auto r = call("POST", "/v1/chat/completions", "{" + msgs + R"(,"user":"u-42","store":false,"metadata":{"k":"v"},"stop":["zz"],"seed":3})");
  EXPECT_EQ(r.status, 200) << r.body;
  r = call("POST", "/v1/completions", R"({"prompt":"hello","max_tokens":3,"user":"u-42","stop_token_ids":[0]})");
  EXPECT_EQ(r.status, 200) << r.body;
}


// logprobs / top_logprobs on both routes: the likeliest tokens of every step, best first, the
// greedy token first among them.
TEST_F(OpenAiE2eTest, TopLogprobsOnBothRoutes) {
  start_daemon("oa_logprobs");
  auto r = call("POST", "/v1/chat/completions",
                R"({"messages":[{"role":"user","content":"Name three colours."}],"max_tokens":5,"temperature":0,)"
                R"("logprobs":true,"top_logprobs":3,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  ASSERT_EQ(j.size("/choices/0/logprobs/content"), 5u) << r.body;
  for (size_t i = 0; i < 5; ++i) {
    const std::string t = "/choices/0/logprobs/content/" + std::to_string(i);
    ASSERT_EQ(j.size(t + "/top_logprobs"), 3u) << r.body;
    EXPECT_NEAR(j.dbl(t + "/top_logprobs/0/logprob"), j.dbl(t + "/logprob"), 1e-4) << "greedy: the likeliest token";
    EXPECT_GE(j.dbl(t + "/top_logprobs/0/logprob"), j.dbl(t + "/top_logprobs/1/logprob"));
    EXPECT_GE(j.dbl(t + "/top_logprobs/1/logprob"), j.dbl(t + "/top_logprobs/2/logprob"));
    EXPECT_LE(j.dbl(t + "/top_logprobs/0/logprob"), 0.0);
  }
  // Without top_logprobs: no alternatives; the same text (the greedy path and the sampled one agree).
  auto plain = call("POST", "/v1/chat/completions",
                    R"({"messages":[{"role":"user","content":"Name three colours."}],"max_tokens":5,"temperature":0,"ignore_eos":true})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  EXPECT_EQ(Json(plain.body).str("/choices/0/message/content"), j.str("/choices/0/message/content"));
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"top_logprobs":2})"), 400,
               "invalid_request", "logprobs");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21})"),
               400, "invalid_request", "top_logprobs");
  // Completions: logprobs = the number of likeliest tokens per step.
  r = call("POST", "/v1/completions", R"({"prompt":"Once upon a time","max_tokens":4,"temperature":0,"logprobs":2,"ignore_eos":true})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json c(r.body);
  ASSERT_EQ(c.size("/choices/0/logprobs/top_logprobs"), 4u) << r.body;
  simdjson::dom::object first;
  ASSERT_FALSE(c.at("/choices/0/logprobs/top_logprobs/0").get_object().get(first));
  EXPECT_GE(first.size(), 1u);
  EXPECT_LE(first.size(), 2u);  // two tokens of the same bytes would share a key
}

}  // namespace
}  // namespace ragd::testing
