// Structured output through the real daemon (tiny random model, loopback port): response_format
// json_schema / json_object, guided_regex / guided_choice / guided_json on both routes, streaming,
// a pipeline as the model, max_tokens cuts, and the 400s that name the field and the keyword.
// Skipped with a message when bin/ragd or bin/ragctl is not built.
#include <regex>

#include "real_daemon.h"

namespace ragd::testing {
namespace {

const char* kAnswerSchema =
    R"({"type":"object","properties":{"answer":{"type":"string","maxLength":24},"score":{"type":"integer","minimum":1,"maximum":5},)"
    R"("tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":2}},"required":["answer","score"],"additionalProperties":false})";

class StructuredE2eTest : public E2eTest {
 protected:
  std::string chat(const std::string& extra, int max_tokens = 400) {
    return R"({"model":"model","messages":[{"role":"user","content":"Rate the zebras."}],"temperature":1,"seed":7,"max_tokens":)" +
           std::to_string(max_tokens) + extra + "}";
  }
  // The answer of a non-streaming chat completion, checked to be finished by `finish`.
  std::string content(const daemon::ClientResponse& r, const std::string& finish = "stop") {
    EXPECT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    EXPECT_EQ(j.str("/choices/0/finish_reason"), finish) << r.body;
    return j.str("/choices/0/message/content");
  }
};

TEST_F(StructuredE2eTest, ChatFollowsTheSchema) {
  start_daemon("so_chat");
  for (int seed = 1; seed <= 6; ++seed) {
    const std::string body = R"({"model":"model","messages":[{"role":"user","content":"Rate the zebras."}],"temperature":1,"seed":)" +
                             std::to_string(seed) + R"(,"max_tokens":400,"response_format":{"type":"json_schema","json_schema":{"name":"rating","strict":true,"schema":)" +
                             kAnswerSchema + "}}}";
    const std::string text = content(call("POST", "/v1/chat/completions", body));
    Json v(text);
    ASSERT_TRUE(v.ok) << text;
    const int64_t score = v.num("/score");
    EXPECT_TRUE(score >= 1 && score <= 5) << text;
    EXPECT_LE(v.str("/answer").size(), 24u * 4) << text;
  }
  // Any JSON object.
  const std::string obj = content(call("POST", "/v1/chat/completions", chat(R"(,"response_format":{"type":"json_object"})")));
  EXPECT_TRUE(Json(obj).ok) << obj;
  EXPECT_EQ(obj.front(), '{');
  // A cut by max_tokens says so.
  content(call("POST", "/v1/chat/completions",
               chat(R"(,"guided_json":{"type":"string","minLength":50})", 3)), "length");
}

TEST_F(StructuredE2eTest, CompletionsRegexAndChoice) {
  start_daemon("so_completions");
  const std::regex re("[a-c]{3}-[0-9]{2}(x|yz)?");
  for (int seed = 1; seed <= 5; ++seed) {
    auto r = call("POST", "/v1/completions",
                  R"({"prompt":"Code:","temperature":1,"max_tokens":50,"seed":)" + std::to_string(seed) +
                      R"(,"guided_regex":"[a-c]{3}-[0-9]{2}(x|yz)?"})");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string text = Json(r.body).str("/choices/0/text");
    EXPECT_TRUE(std::regex_match(text, re)) << text;
    r = call("POST", "/v1/completions", R"({"prompt":"Verdict:","temperature":1,"max_tokens":50,"seed":)" + std::to_string(seed) +
                                            R"(,"guided_choice":["supported","refuted","not enough info"]})");
    ASSERT_EQ(r.status, 200) << r.body;
    const std::string choice = Json(r.body).str("/choices/0/text");
    EXPECT_TRUE(choice == "supported" || choice == "refuted" || choice == "not enough info") << choice;
    EXPECT_EQ(Json(r.body).str("/choices/0/finish_reason"), "stop");
  }
  // n choices: each run has its own matcher.
  auto r = call("POST", "/v1/completions", R"({"prompt":"Verdict:","temperature":1,"max_tokens":50,"seed":11,"n":3,)"
                                           R"("guided_choice":["supported","refuted","not enough info"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  ASSERT_EQ(j.size("/choices"), 3u) << r.body;
  for (int i = 0; i < 3; ++i) {
    const std::string c = j.str("/choices/" + std::to_string(i) + "/text");
    EXPECT_TRUE(c == "supported" || c == "refuted" || c == "not enough info") << r.body;
  }
}

TEST_F(StructuredE2eTest, StreamingAndPipelineAsModel) {
  start_daemon("so_stream");
  auto r = call("POST", "/v1/documents",
                R"({"documents":[{"id":"zebra","title":"Zebras","text":"The zebras of the Oakfield sanctuary eat grass at dawn."}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  // Streaming: the deltas put together are the JSON value.
  std::string text;
  std::string finish;
  daemon::SseParser p([&](const std::string&, const std::string& d) {
    if (d == "[DONE]") return;
    Json j(d);
    std::string_view sv;
    if (!j.root.at_pointer("/choices/0/delta/content").get_string().get(sv)) text += sv;
    if (!j.root.at_pointer("/choices/0/finish_reason").get_string().get(sv)) finish = sv;
  });
  HttpClient c("127.0.0.1", d_.port(), 60000);
  auto s = c.request_stream("POST", "/v1/chat/completions",
                            R"({"model":"pipeline:default","stream":true,"temperature":1,"seed":3,"max_tokens":400,)"
                            R"("messages":[{"role":"user","content":"What do zebras eat?"}],)"
                            R"("response_format":{"type":"json_schema","json_schema":{"name":"a","schema":)" +
                                std::string(kAnswerSchema) + "}}}",
                            {}, [&](std::string_view d) {
                              p.feed(d);
                              return true;
                            });
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(finish, "stop");
  EXPECT_TRUE(Json(text).ok) << text;
  EXPECT_TRUE(Json(text).has("/score")) << text;
  // The ragd pipeline-run API takes the same constraints as run parameters.
  r = call("POST", "/v1/pipelines/default/runs",
           R"({"query":"What do zebras eat?","temperature":1,"seed":5,"max_tokens":50,"guided_choice":["grass","meat"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  const std::string out = Json(r.body).str("/output");
  EXPECT_TRUE(out == "grass" || out == "meat") << r.body;
  EXPECT_EQ(Json(r.body).str("/finish_reason"), "stop");
  r = call("POST", "/v1/pipelines/default/runs",
           R"({"query":"q","max_tokens":400,"temperature":1,"guided_json":)" + std::string(kAnswerSchema) + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Json(Json(r.body).str("/output")).has("/score")) << r.body;
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"q","guided_regex":"a","guided_choice":["b"]})"), 400,
               "invalid_request", "only one of");
}

TEST_F(StructuredE2eTest, BadConstraintsAreNamed) {
  start_daemon("so_errors");
  expect_error(call("POST", "/v1/chat/completions",
                    chat(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"array","uniqueItems":true}}})")),
               400, "invalid_request", "uniqueItems");
  auto bad = call("POST", "/v1/chat/completions",
                  chat(R"(,"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","multipleOf":2}}})"));
  expect_error(bad, 400, "invalid_request", "multipleOf");
  EXPECT_EQ(Json(bad.body).str("/error/param"), "response_format.json_schema.schema") << bad.body;
  bad = call("POST", "/v1/completions", R"({"prompt":"x","guided_regex":"a{3,1}"})");
  expect_error(bad, 400, "invalid_request", "m < n");
  EXPECT_EQ(Json(bad.body).str("/error/param"), "guided_regex") << bad.body;
  expect_error(call("POST", "/v1/chat/completions", chat(R"(,"response_format":{"type":"yaml"})")), 400, "invalid_request",
               "response_format.type");
  expect_error(call("POST", "/v1/chat/completions", chat(R"(,"response_format":{"type":"json_object"},"guided_regex":"a+")")), 400,
               "invalid_request", "guided_regex");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x","guided_regex":"(a)\\1"})"), 400, "invalid_request", "guided_regex");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x","guided_choice":[]})"), 400, "invalid_request", "guided_choice");
  // The daemon keeps serving.
  EXPECT_EQ(get("/readyz").status, 200);
}

}  // namespace
}  // namespace ragd::testing
