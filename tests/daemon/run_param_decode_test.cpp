// The run parameter decoder (run_param_decode.h) over JSON bodies, on both routes: every enum
// choice decodes, a wrong one is a 400 naming the field and listing the choices, `top_k` is the
// passages retrieved on the ragd routes and sampling top-k on the OpenAI routes, and the OpenAI
// body parser (parse_openai_request) takes its run parameters through the same table.
#include "openai_encode.h"
#include "run_param_decode.h"
#include "test_util.h"

namespace ragd::testing {
namespace {

using namespace ragd::daemon;
using pipelines::ParamDef;
using pipelines::ParamType;
using pipelines::RunRequest;

// Decodes `body` on `route` into `out`.
ApiError decode(const std::string& body, RunRoute route, RunRequest* out) {
  JsonBody b;
  EXPECT_FALSE(b.parse(body).failed()) << body;
  const simdjson::dom::object o = b.object();
  return decode_run_params(Fields(o), route, out);
}


TEST(RunParamDecode, EveryEnumChoiceDecodesOnEveryRouteAndAWrongOneListsThem) {
  int checked = 0;
  for (const ParamDef& d : pipelines::run_param_defs()) {
    if (d.type != ParamType::kEnum) continue;
    for (RunRoute route : pipelines::kRunRoutes) {
      if (!d.on(route)) continue;
      const std::string name(d.name(route));
      for (const std::string& choice : d.choice_names()) {
        RunRequest by_json, by_table;
        ApiError e = decode("{\"" + name + "\": \"" + choice + "\"}", route, &by_json);
        ASSERT_FALSE(e.failed()) << name << " " << choice << ": " << e.message;
        // The decoded request holds the value the row sets for that name (resolved values: the
        // pipelines table test).
        ASSERT_TRUE(d.set(by_table, choice).ok());
        EXPECT_EQ(by_json.reuse, by_table.reuse);
        EXPECT_EQ(by_json.overlap, by_table.overlap);
        EXPECT_EQ(by_json.retrieval_mode, by_table.retrieval_mode);
        EXPECT_EQ(by_json.adapt_objective, by_table.adapt_objective);
        ++checked;
      }
      RunRequest r;
      ApiError e = decode("{\"" + name + "\": \"fastest\"}", route, &r);
      EXPECT_EQ(e.status, 400);
      EXPECT_EQ(e.param, name);
      EXPECT_EQ(e.message, "field '" + name + "' must be one of " + d.choices() + "; got 'fastest'");
    }
  }
  EXPECT_GT(checked, 10);
}

TEST(RunParamDecode, TopKIsPassagesOnRagdAndSamplingOnOpenAi) {
  RunRequest ragd;
  ASSERT_FALSE(decode(R"({"top_k": 5})", RunRoute::kRagd, &ragd).failed());
  EXPECT_EQ(ragd.retrieval_top_k, 5);
  EXPECT_FALSE(ragd.sampling.top_k.has_value());
  RunRequest oai;
  ASSERT_FALSE(decode(R"({"top_k": 500, "retrieval_top_k": 3})", RunRoute::kOpenAi, &oai).failed());
  EXPECT_EQ(oai.retrieval_top_k, 3);
  EXPECT_EQ(oai.sampling.top_k, 500);
  // Each name keeps its own range and message.
  RunRequest r;
  ApiError e = decode(R"({"top_k": 65})", RunRoute::kRagd, &r);
  EXPECT_EQ(e.param, "top_k");
  EXPECT_NE(e.message.find("[1, 64]"), std::string::npos) << e.message;
  e = decode(R"({"retrieval_top_k": 65})", RunRoute::kOpenAi, &r);
  EXPECT_EQ(e.param, "retrieval_top_k");
  EXPECT_NE(e.message.find("[1, 64]"), std::string::npos) << e.message;
  ASSERT_FALSE(decode(R"({"top_k": 65})", RunRoute::kOpenAi, &r).failed());
  // A route's fields only: the other route's names are not run parameters there.
  RunRequest none;
  ASSERT_FALSE(decode(R"({"retrieval_top_k": 3, "presence_penalty": 1, "stop_token_ids": [1]})", RunRoute::kRagd, &none).failed());
  EXPECT_EQ(none.retrieval_top_k, -1);
  EXPECT_FALSE(none.sampling.presence_penalty.has_value());
  EXPECT_TRUE(none.sampling.stop_token_ids.empty());
  ASSERT_FALSE(decode(R"({"reuse": "epic", "logprobs": true})", RunRoute::kOpenAi, &none).failed());
  EXPECT_FALSE(none.reuse.has_value());
  EXPECT_FALSE(none.want_logprobs);
}

TEST(RunParamDecode, OpenAiBodiesTakeTheirRunParametersFromTheTable) {
  auto parse = [](const std::string& body, bool chat, OaiRequest* out) {
    JsonBody b;
    EXPECT_FALSE(b.parse(body).failed()) << body;
    const simdjson::dom::object o = b.object();
    return parse_openai_request(Fields(o), chat, out);
  };
  OaiRequest q;
  ASSERT_FALSE(parse(R"({"prompt": "p", "top_k": 40, "max_tokens": 9, "max_completion_tokens": 7,
                         "presence_penalty": 0.5, "frequency_penalty": -0.5, "repetition_penalty": 1.2,
                         "stop_token_ids": [2, 3], "stop": "END", "seed": 4, "retrieval_top_k": 2,
                         "retrieval_mode": "dense", "min_p": 0.1})",
                     false, &q)
                   .failed());
  const pipelines::RunSampling& ov = q.run.sampling;
  EXPECT_EQ(ov.top_k, 40);
  EXPECT_EQ(ov.max_tokens, 7);  // max_completion_tokens wins over max_tokens
  EXPECT_EQ(ov.temperature, 1.0f);  // OpenAI's default
  EXPECT_EQ(ov.seed, 4u);
  EXPECT_TRUE(q.seeded);
  EXPECT_EQ(ov.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(q.run.sampling.presence_penalty, 0.5f);
  EXPECT_EQ(q.run.sampling.frequency_penalty, -0.5f);
  EXPECT_EQ(q.run.sampling.repetition_penalty, 1.2f);
  EXPECT_EQ(q.run.sampling.stop_token_ids, (std::vector<int32_t>{2, 3}));
  EXPECT_FLOAT_EQ(q.run.sampling.min_p.value_or(0), 0.1f);
  EXPECT_EQ(q.run.retrieval_top_k, 2);
  EXPECT_EQ(q.run.retrieval_mode, retrieval::RetrievalMode::kDense);
  // The messages are those of the hand-written decoder this replaced.
  struct Bad {
    const char* body;
    const char* param;
    const char* message;
  };
  for (const Bad& b : {
           Bad{R"({"prompt": "p", "presence_penalty": 3})", "presence_penalty", "field 'presence_penalty' is out of range [-2, 2], got 3"},
           Bad{R"({"prompt": "p", "repetition_penalty": 0})", "repetition_penalty", "field 'repetition_penalty' is out of range [0.01, 10], got 0"},
           Bad{R"({"prompt": "p", "top_k": -1})", "top_k", nullptr},
           Bad{R"({"prompt": "p", "max_completion_tokens": 0})", "max_completion_tokens", nullptr},
           Bad{R"({"prompt": "p", "stop_token_ids": 5})", "stop_token_ids", "field 'stop_token_ids' must be an array of token ids"},
           Bad{R"({"prompt": "p", "stop_token_ids": [1, -2]})", "stop_token_ids",
               "field 'stop_token_ids' must be an array of token ids (integers >= 0)"},
           Bad{R"({"prompt": "p", "stop": ["a", "b", "c", "d", "e"]})", "stop", "field 'stop' has more than 4 sequences"},
           Bad{R"({"prompt": "p", "retrieval_mode": "vector"})", "retrieval_mode", nullptr},
       }) {
    OaiRequest r;
    ApiError e = parse(b.body, false, &r);
    EXPECT_EQ(e.status, 400) << b.body;
    EXPECT_EQ(e.param, b.param) << b.body;
    if (b.message) {
      EXPECT_EQ(e.message, b.message) << b.body;
    }
  }
}

}  // namespace
}  // namespace ragd::testing
