// Tool calling through the real daemon (tiny random model, loopback port): tool_choice required,
// a named function, auto, parallel_tool_calls false, n > 1, streamed tool-call deltas that add up
// to the non-streamed answer of the same seed, follow-up turns with tool results, and the 400s
// that name the field. Arguments are checked against their schema's bounds; the random model
// cannot call tools on its own, so every valid call here is the constraint's doing.
#include <set>

#include "real_daemon.h"

namespace ragd::testing {
namespace {

const char* kTools =
    R"("tools":[{"type":"function","function":{"name":"get_weather","description":"Current weather for a city.","parameters":)"
    R"({"type":"object","properties":{"city":{"type":"string","maxLength":16},"days":{"type":"integer","minimum":1,"maximum":7},)"
    R"("unit":{"enum":["celsius","fahrenheit"]}},"required":["city","unit"],"additionalProperties":false}}},)"
    R"({"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{}}}}])";

struct Call {
  std::string id, name, arguments;
};

class ToolsE2eTest : public E2eTest {
 protected:
  std::string body(const std::string& extra, int seed = 7, int max_tokens = 300) {
    return R"({"model":"model","messages":[{"role":"user","content":"What is the weather in Oslo?"}],"temperature":1,"seed":)" +
           std::to_string(seed) + R"(,"max_tokens":)" + std::to_string(max_tokens) + "," + kTools + extra + "}";
  }
  std::vector<Call> calls_of(const Json& j, const std::string& choice = "/choices/0") {
    std::vector<Call> v;
    if (!j.has(choice + "/message/tool_calls")) return v;
    for (size_t i = 0; i < j.size(choice + "/message/tool_calls"); ++i) {
      const std::string p = choice + "/message/tool_calls/" + std::to_string(i);
      EXPECT_EQ(j.str(p + "/type"), "function");
      v.push_back({j.str(p + "/id"), j.str(p + "/function/name"), j.str(p + "/function/arguments")});
    }
    return v;
  }
  // The call names a tool and its arguments follow that tool's schema.
  void check_call(const Call& c) {
    EXPECT_EQ(c.id.rfind("call_", 0), 0u) << c.id;
    Json a(c.arguments);
    ASSERT_TRUE(a.ok) << c.arguments;
    ASSERT_EQ(a.root.type(), simdjson::dom::element_type::OBJECT) << c.arguments;
    if (c.name == "get_weather") {
      EXPECT_LE(a.str("/city").size(), 16u * 4) << c.arguments;
      const std::string unit = a.str("/unit");
      EXPECT_TRUE(unit == "celsius" || unit == "fahrenheit") << c.arguments;
      if (a.has("/days")) {
        EXPECT_TRUE(a.num("/days") >= 1 && a.num("/days") <= 7) << c.arguments;
      }
      simdjson::dom::object o;
      ASSERT_FALSE(a.root.get_object().get(o));
      for (auto [k, v] : o) {
        (void)v;
        EXPECT_TRUE(k == "city" || k == "days" || k == "unit") << c.arguments;
      }
    } else {
      EXPECT_EQ(c.name, "get_time");
      EXPECT_EQ(c.arguments, "{}");
    }
  }
};

TEST_F(ToolsE2eTest, RequiredNamedAndSingleCalls) {
  start_daemon("tools_required");
  size_t total = 0;
  for (int seed = 1; seed <= 6; ++seed) {
    auto r = call("POST", "/v1/chat/completions", body(R"(,"tool_choice":"required")", seed));
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    EXPECT_EQ(j.str("/choices/0/finish_reason"), "tool_calls") << r.body;
    EXPECT_TRUE(j.at("/choices/0/message/content").is_null()) << r.body;
    const auto calls = calls_of(j);
    ASSERT_FALSE(calls.empty()) << r.body;
    std::set<std::string> ids;
    for (const Call& c : calls) check_call(c), ids.insert(c.id);
    EXPECT_EQ(ids.size(), calls.size()) << "ids are distinct";
    total += calls.size();
  }
  EXPECT_GE(total, 6u);
  // A named function: exactly one call of it; OpenAI's finish_reason for a forced call is "stop".
  for (int seed = 1; seed <= 3; ++seed) {
    auto r = call("POST", "/v1/chat/completions",
                  body(R"(,"tool_choice":{"type":"function","function":{"name":"get_weather"}})", seed));
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    const auto calls = calls_of(j);
    ASSERT_EQ(calls.size(), 1u) << r.body;
    EXPECT_EQ(calls[0].name, "get_weather");
    check_call(calls[0]);
    EXPECT_EQ(j.str("/choices/0/finish_reason"), "stop");
  }
  // parallel_tool_calls false: one call at most; n = 2: each choice its own calls and ids.
  auto r = call("POST", "/v1/chat/completions", body(R"(,"tool_choice":"required","parallel_tool_calls":false,"n":2)", 3));
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  ASSERT_EQ(j.size("/choices"), 2u);
  std::set<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    const auto calls = calls_of(j, "/choices/" + std::to_string(i));
    ASSERT_EQ(calls.size(), 1u) << r.body;
    check_call(calls[0]);
    ids.insert(calls[0].id);
  }
  EXPECT_EQ(ids.size(), 2u) << r.body;
}

TEST_F(ToolsE2eTest, AutoStreamingAndFollowUps) {
  start_daemon("tools_stream");
  // auto: text, or calls that parse (the random model mostly writes text).
  for (int seed = 1; seed <= 4; ++seed) {
    auto r = call("POST", "/v1/chat/completions", body("", seed, 60));
    ASSERT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    for (const Call& c : calls_of(j)) check_call(c);
    if (calls_of(j).empty()) {
      EXPECT_TRUE(j.at("/choices/0/message/content").is_string()) << r.body;
    }
  }
  // Streaming: the deltas put together are the non-streamed answer of the same seed.
  for (const std::string& choice : {std::string(R"("required")"), std::string(R"({"type":"function","function":{"name":"get_weather"}})")}) {
    auto whole = call("POST", "/v1/chat/completions", body(R"(,"tool_choice":)" + choice, 5));
    ASSERT_EQ(whole.status, 200) << whole.body;
    const auto expected = calls_of(Json(whole.body));
    std::vector<Call> calls;
    std::string finish, content;
    int role_chunks = 0;
    daemon::SseParser p([&](const std::string&, const std::string& d) {
      if (d == "[DONE]") return;
      Json j(d);
      std::string_view sv;
      if (!j.root.at_pointer("/choices/0/delta/role").get_string().get(sv)) ++role_chunks;
      if (!j.root.at_pointer("/choices/0/delta/content").get_string().get(sv)) content += sv;
      if (!j.root.at_pointer("/choices/0/finish_reason").get_string().get(sv)) finish = sv;
      simdjson::dom::array tcs;
      if (j.root.at_pointer("/choices/0/delta/tool_calls").get_array().get(tcs)) return;
      for (auto tc : tcs) {
        int64_t index = -1;
        ASSERT_FALSE(tc["index"].get_int64().get(index));
        std::string_view id, name, args;
        if (!tc["id"].get_string().get(id)) {
          ASSERT_EQ(static_cast<size_t>(index), calls.size()) << d;
          ASSERT_FALSE(tc.at_pointer("/function/name").get_string().get(name)) << d;
          calls.push_back({std::string(id), std::string(name), ""});
        }
        ASSERT_LT(static_cast<size_t>(index), calls.size()) << d;
        if (!tc.at_pointer("/function/arguments").get_string().get(args)) calls[static_cast<size_t>(index)].arguments += args;
      }
    });
    HttpClient c("127.0.0.1", d_.port(), 60000);
    auto s = c.request_stream("POST", "/v1/chat/completions", body(R"(,"stream":true,"tool_choice":)" + choice, 5), {},
                              [&](std::string_view d) {
                                p.feed(d);
                                return true;
                              });
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(role_chunks, 1);
    EXPECT_EQ(content, "");
    EXPECT_EQ(finish, Json(whole.body).str("/choices/0/finish_reason"));
    ASSERT_EQ(calls.size(), expected.size()) << whole.body;
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i].name, expected[i].name);
      EXPECT_EQ(calls[i].arguments, expected[i].arguments);
      EXPECT_EQ(calls[i].id, expected[i].id.substr(0, 5) + calls[i].id.substr(5)) << "ids are call_...";
    }
  }
  // A follow-up: the assistant's calls (content null) and the tool's result, then an answer.
  auto r = call("POST", "/v1/chat/completions",
                R"({"model":"model","max_tokens":20,"temperature":0,)" + std::string(kTools) +
                    R"(,"messages":[{"role":"user","content":"Weather in Oslo?"},)"
                    R"({"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"unit\":\"celsius\"}"}}]},)"
                    R"({"role":"tool","tool_call_id":"call_1","content":"{\"temperature\": 3}"}],"tool_choice":"none"})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_TRUE(Json(r.body).at("/choices/0/message/content").is_string()) << r.body;
  EXPECT_FALSE(Json(r.body).has("/choices/0/message/tool_calls")) << r.body;
  EXPECT_GT(Json(r.body).num("/usage/prompt_tokens"), 30) << "the tools and the tool result are in the prompt";
}

TEST_F(ToolsE2eTest, BadToolRequestsAreNamed) {
  start_daemon("tools_errors");
  auto bad = call("POST", "/v1/chat/completions", body(R"(,"tool_choice":{"type":"function","function":{"name":"get_stock"}})"));
  expect_error(bad, 400, "invalid_request", "get_stock");
  EXPECT_EQ(Json(bad.body).str("/error/param"), "tool_choice") << bad.body;
  expect_error(call("POST", "/v1/chat/completions", body(R"(,"tool_choice":"sometimes")")), 400, "invalid_request", "tool_choice");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"model":"model","messages":[{"role":"user","content":"x"}],"tools":[{"type":"retrieval"}]})"),
               400, "invalid_request", "tools[0].type");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"model":"model","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","properties":{"a":{"not":{}}}}}}]})"),
               400, "invalid_request", "not");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"model":"model","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"a b"}}]})"),
               400, "invalid_request", "name");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"model":"model","messages":[{"role":"user","content":"x"}],"tool_choice":"required"})"),
               400, "invalid_request", "no tools");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"model":"model","messages":[{"role":"tool","content":"3"}]})"), 400, "invalid_request", "tool_call_id");
  expect_error(call("POST", "/v1/chat/completions", body(R"(,"tool_choice":"required","response_format":{"type":"json_object"})")), 400,
               "invalid_request", "response_format");
  expect_error(call("POST", "/v1/chat/completions", body(R"(,"pipeline":"default")")), 400, "invalid_request", "pipeline");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"x",)" + std::string(kTools) + "}"), 400, "invalid_request",
               "/v1/chat/completions");
  // The daemon keeps serving.
  EXPECT_EQ(get("/readyz").status, 200);
}

}  // namespace
}  // namespace ragd::testing
