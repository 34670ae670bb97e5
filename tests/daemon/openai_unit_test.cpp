// The OpenAI routes' pure parts: model ids (openai_models.h), citations (openai_citations.h) and
// the multi-turn query rule (rag_query.h).
#include "openai_citations.h"
#include "openai_fields.h"
#include "openai_models.h"
#include "rag_query.h"
#include "test_util.h"

namespace ragd::testing {
namespace {

using namespace ragd::daemon;

pipelines::Source source(const std::string& id, const std::string& url = "") {
  pipelines::Source s;
  s.doc_id = id;
  s.title = "T " + id;
  s.url = url;
  return s;
}

TEST(OpenAiCitations, MarkersAreCodePointSpansOfInRangeNumbers) {
  const std::vector<CitationContext> ctx = {{0, {source("a"), source("b")}}};
  // "é" is two bytes, one code point: indices after it are one less than byte offsets.
  const std::string answer = "Zé eats grass [1]. Also [2, 1] and [3] and [x] and [1";
  auto c = find_citations(answer, ctx);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].start_index, 14u);
  EXPECT_EQ(c[0].end_index, 17u);
  EXPECT_EQ(c[0].source_index, 0u);
  EXPECT_EQ(c[1].start_index, 24u);  // "[2, 1]": one citation per number, the same span
  EXPECT_EQ(c[1].end_index, 30u);
  EXPECT_EQ(c[1].source_index, 1u);
  EXPECT_EQ(c[2].source_index, 0u);
  EXPECT_EQ(c[2].start_index, 24u);
  EXPECT_TRUE(find_citations("[1]", {}).empty());
  EXPECT_TRUE(find_citations("[0] [00001]", ctx).empty());
}

TEST(OpenAiCitations, LaterContextsApplyFromTheirByte) {
  const std::vector<CitationContext> ctx = {{0, {source("a")}}, {4, {source("x"), source("y")}}};
  auto c = find_citations("[1] [1] [2]", ctx);
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[0].context, 0u);
  EXPECT_EQ(c[1].context, 1u);
  EXPECT_EQ(c[2].context, 1u);
  EXPECT_EQ(c[2].source_index, 1u);
}

TEST(OpenAiCitations, AnnotationsJson) {
  JsonWriter w;
  write_url_citations(w, "ok [2]", {{0, {source("a b/c"), source("k", "https://x.example/k")}}});
  Json j(w.take());
  ASSERT_EQ(j.size(""), 1u);
  EXPECT_EQ(j.str("/0/type"), "url_citation");
  EXPECT_EQ(j.num("/0/url_citation/start_index"), 3);
  EXPECT_EQ(j.num("/0/url_citation/end_index"), 6);
  EXPECT_EQ(j.str("/0/url_citation/url"), "https://x.example/k");
  EXPECT_EQ(j.str("/0/url_citation/doc_id"), "k");
  EXPECT_EQ(document_route("a b/c"), "/v1/documents/a%20b%2Fc");
}

TEST(OpenAiCitations, SourcesFooterNumberedOrNot) {
  pipelines::Source a = source("a b", "");
  a.section = {"Habitat", "Water"};
  a.page = 3;
  pipelines::Source k = source("k", "https://x.example/k");
  pipelines::Source a2 = a;  // another passage of the same section
  a2.chunk_id = 7;
  const std::vector<pipelines::Source> all = {a, k, a2};
  EXPECT_EQ(sources_footer(all, true),
            "\n\nSources:\n[1] T a b \u2014 /v1/documents/a%20b (Habitat > Water, page 3)\n"
            "[2] T k \u2014 https://x.example/k\n[3] T a b \u2014 /v1/documents/a%20b (Habitat > Water, page 3)");
  EXPECT_EQ(sources_footer(all, false),
            "\n\nSources:\nT a b \u2014 /v1/documents/a%20b (Habitat > Water, page 3)\nT k \u2014 https://x.example/k");
  pipelines::Source untitled = source("u");
  untitled.title.clear();
  untitled.page = 9;
  EXPECT_EQ(sources_footer({untitled}, false), "\n\nSources:\nu \u2014 /v1/documents/u (page 9)");
  EXPECT_EQ(sources_footer({}, true), "");
}

TEST(RagQuery, LastUserTurnsOldestFirst) {
  std::vector<engine::ChatMessage> m = {{"system", "be brief"}, {"user", "one"},  {"assistant", "A"},
                                        {"user", "two"},         {"user", "  "},    {"assistant", "B"},
                                        {"user", "three"},       {"user", "four"}};
  EXPECT_EQ(rag_query(m, 1), "four");
  EXPECT_EQ(rag_query(m), "two\nthree\nfour");  // blank turns do not count
  EXPECT_EQ(rag_query(m, 10), "one\ntwo\nthree\nfour");
  EXPECT_EQ(rag_query({{"system", "x"}}), "");
}

TEST(ModelIds, PrefixedPipelinesAliasesAndTheGeneratorFirst) {
  ModelCatalog c;
  c.models.push_back({ServedModel::Kind::kGenerator, "llama", "", "", false});
  c.models.push_back({ServedModel::Kind::kPipeline, "pipeline:docs", "docs", "", true});
  c.models.push_back({ServedModel::Kind::kPipeline, "pipeline:llama", "llama", "", false});
  ServedModel m;
  ASSERT_FALSE(c.resolve("", &m).failed());
  EXPECT_EQ(m.id, "llama");
  ASSERT_FALSE(c.resolve("ragd", &m).failed());
  EXPECT_EQ(m.kind, ServedModel::Kind::kGenerator);
  ASSERT_FALSE(c.resolve("llama", &m).failed());  // the model keeps its name
  EXPECT_EQ(m.kind, ServedModel::Kind::kGenerator);
  ASSERT_FALSE(c.resolve("pipeline:llama", &m).failed());
  EXPECT_EQ(m.pipeline, "llama");
  ASSERT_FALSE(c.resolve("docs", &m).failed());
  EXPECT_EQ(m.id, "pipeline:docs");
  ApiError e = c.resolve("gpt-4o", &m);
  EXPECT_EQ(e.status, 404);
  EXPECT_NE(e.message.find("'gpt-4o'"), std::string::npos) << e.message;
  EXPECT_NE(e.message.find("pipeline:docs"), std::string::npos) << e.message;
  EXPECT_EQ(ModelCatalog::generator_id("pipeline:x"), "ragd");
  EXPECT_EQ(ModelCatalog::generator_id("Llama-3-8B"), "Llama-3-8B");
}


TEST(OpenAiFields, ImplementedIgnoredOrRefusedByName) {
  auto check = [](const std::string& body, bool chat) {
    JsonBody b;
    EXPECT_FALSE(b.parse(body).failed()) << body;
    const simdjson::dom::object o = b.object();
    return check_request_fields(Fields(o), chat);
  };
  EXPECT_FALSE(check(R"({"model":"m","messages":[],"n":2,"user":"u","store":false,"logit_bias":{},"tools":null})", true).failed());
  EXPECT_FALSE(check(R"({"prompt":"p","echo":false,"response_format":{"type":"text"},"pipeline":"default"})", false).failed());
  ApiError e = check(R"({"messages":[],"logit_bias":{"1":5}})", true);
  EXPECT_EQ(e.status, 400);
  EXPECT_EQ(e.param, "logit_bias");
  EXPECT_NE(e.message.find("not implemented"), std::string::npos) << e.message;
  e = check(R"({"messages":[],"temprature":1})", true);
  EXPECT_EQ(e.param, "temprature");
  EXPECT_NE(e.message.find("unknown field"), std::string::npos) << e.message;
  EXPECT_NE(check(R"({"prompt":"p","top_logprobs":1})", false).message.find("/v1/chat/completions"), std::string::npos);
  EXPECT_NE(check(R"({"messages":[],"prompt":"p"})", true).message.find("/v1/completions"), std::string::npos);
}

}  // namespace
}  // namespace ragd::testing
