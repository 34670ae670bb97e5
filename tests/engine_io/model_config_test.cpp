// ModelConfig: parsing real-shaped configs, defaults, round trip, and one test per bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ragd/engine/model_config.h"

using ragd::StatusCode;
using ragd::engine::Architecture;
using ragd::engine::ModelConfig;
using ragd::engine::RopeScaling;
using ::testing::HasSubstr;

namespace {

const char* kLlama3 = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama",
  "hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
  "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 128256,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "rope_scaling": {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"},
  "tie_word_embeddings": false, "bos_token_id": 128000, "eos_token_id": [128001, 128008, 128009],
  "torch_dtype": "bfloat16"})";

ragd::Status parse_err(const std::string& json) {
  auto r = ModelConfig::from_json(json, "config.json");
  EXPECT_FALSE(r.ok()) << json;
  return r.status();
}

// A minimal valid config with one field replaced (or removed when value is empty).
std::string with_field(const std::string& key, const std::string& value) {
  std::vector<std::pair<std::string, std::string>> f = {
      {"architectures", "[\"LlamaForCausalLM\"]"}, {"hidden_size", "64"}, {"intermediate_size", "176"},
      {"num_hidden_layers", "2"}, {"num_attention_heads", "4"}, {"num_key_value_heads", "2"}, {"vocab_size", "300"}};
  bool found = false;
  for (auto& [k, v] : f)
    if (k == key) { v = value; found = true; }
  if (!found) f.emplace_back(key, value);
  std::string s = "{";
  for (auto& [k, v] : f) {
    if (v.empty()) continue;
    if (s.size() > 1) s += ",";
    s += "\"" + k + "\":" + v;
  }
  return s + "}";
}

}  // namespace

TEST(ModelConfig, ParsesLlama3) {
  auto r = ModelConfig::from_json(kLlama3, "config.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const ModelConfig& c = *r;
  EXPECT_EQ(c.architecture, Architecture::kLlama);
  EXPECT_EQ(c.head_dim, 128);
  EXPECT_EQ(c.num_key_value_heads, 8);
  EXPECT_EQ(c.q_dim(), 4096);
  EXPECT_EQ(c.kv_dim(), 1024);
  EXPECT_FLOAT_EQ(c.rms_norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.rope_theta, 500000.0f);
  EXPECT_EQ(c.rope_scaling.type, RopeScaling::Type::kLlama3);
  EXPECT_FLOAT_EQ(c.rope_scaling.factor, 8.0f);
  EXPECT_EQ(c.rope_scaling.original_max_position_embeddings, 8192);
  EXPECT_EQ(c.eos_token_ids, (std::vector<int>{128001, 128008, 128009}));
  EXPECT_EQ(c.bos_token_id, 128000);
  EXPECT_EQ(c.torch_dtype, "bfloat16");
  EXPECT_FALSE(c.attention_bias);
}

TEST(ModelConfig, DefaultsAndQwen2Bias) {
  auto r = ModelConfig::from_json(
      R"({"model_type":"qwen2","hidden_size":896,"intermediate_size":4864,"num_hidden_layers":24,
          "num_attention_heads":14,"vocab_size":151936,"eos_token_id":151643,"rope_theta":1000000,
          "tie_word_embeddings":true,"sliding_window":32768,"use_sliding_window":false,"rope_scaling":null})",
      "q/config.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, Architecture::kQwen2);
  EXPECT_TRUE(r->attention_bias);
  EXPECT_TRUE(r->tie_word_embeddings);
  EXPECT_EQ(r->num_key_value_heads, 14);  // defaults to heads
  EXPECT_EQ(r->head_dim, 64);             // hidden / heads
  EXPECT_EQ(r->sliding_window, 0);        // use_sliding_window false
  EXPECT_EQ(r->eos_token_ids, std::vector<int>{151643});
  EXPECT_EQ(r->rope_scaling.type, RopeScaling::Type::kNone);
  EXPECT_FLOAT_EQ(r->rope_theta, 1e6f);
}

TEST(ModelConfig, MistralAndLinearRope) {
  auto r = ModelConfig::from_json(with_field("architectures", "[\"MistralForCausalLM\"]").insert(1,
      "\"rope_scaling\":{\"type\":\"linear\",\"factor\":2.5},\"sliding_window\":4096,"), "config.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->architecture, Architecture::kMistral);
  EXPECT_EQ(r->rope_scaling.type, RopeScaling::Type::kLinear);
  EXPECT_FLOAT_EQ(r->rope_scaling.factor, 2.5f);
  EXPECT_EQ(r->sliding_window, 4096);
}

TEST(ModelConfig, ToJsonRoundTripsAndHashIsStable) {
  for (const std::string& src : {std::string(kLlama3), with_field("architectures", "[\"Qwen2ForCausalLM\"]"),
                                 with_field("head_dim", "32")}) {
    auto a = ModelConfig::from_json(src, "a");
    ASSERT_TRUE(a.ok()) << a.status().to_string();
    auto b = ModelConfig::from_json(a->to_json(), "b");
    ASSERT_TRUE(b.ok()) << b.status().to_string() << "\n" << a->to_json();
    EXPECT_EQ(a->shape_hash(), b->shape_hash());
    EXPECT_EQ(b->to_json(), a->to_json());
    EXPECT_EQ(a->eos_token_ids, b->eos_token_ids);
    EXPECT_EQ(a->head_dim, b->head_dim);
    EXPECT_EQ(a->attention_bias, b->attention_bias);
  }
}

TEST(ModelConfig, ShapeHashSeesEveryShapeField) {
  auto base = *ModelConfig::from_json(kLlama3, "c");
  auto h0 = base.shape_hash();
  auto differs = [&](auto mutate) {
    ModelConfig c = base;
    mutate(c);
    return c.shape_hash() != h0;
  };
  EXPECT_TRUE(differs([](ModelConfig& c) { c.num_hidden_layers = 31; }));
  EXPECT_TRUE(differs([](ModelConfig& c) { c.num_key_value_heads = 4; }));
  EXPECT_TRUE(differs([](ModelConfig& c) { c.rope_theta = 10000; }));
  EXPECT_TRUE(differs([](ModelConfig& c) { c.rope_scaling.factor = 4; }));
  EXPECT_TRUE(differs([](ModelConfig& c) { c.architecture = Architecture::kMistral; }));
  EXPECT_FALSE(differs([](ModelConfig& c) { c.eos_token_ids = {1}; }));
}

TEST(ModelConfigErrors, InvalidJson) {
  EXPECT_THAT(parse_err("{\"hidden_size\": 64,").message(), HasSubstr("config.json: invalid JSON"));
}

TEST(ModelConfigErrors, MissingField) {
  auto st = parse_err(with_field("hidden_size", ""));
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(st.message(), HasSubstr("config.json: field 'hidden_size' is missing"));
}

TEST(ModelConfigErrors, IllTypedField) {
  EXPECT_THAT(parse_err(with_field("num_hidden_layers", "\"two\"")).message(),
              HasSubstr("field 'num_hidden_layers' must be an integer"));
  EXPECT_THAT(parse_err(with_field("vocab_size", "300.5")).message(), HasSubstr("field 'vocab_size' must be an integer"));
  EXPECT_THAT(parse_err(with_field("rms_norm_eps", "\"x\"")).message(), HasSubstr("field 'rms_norm_eps' must be a number"));
  EXPECT_THAT(parse_err(with_field("tie_word_embeddings", "1")).message(),
              HasSubstr("field 'tie_word_embeddings' must be true or false"));
  EXPECT_THAT(parse_err(with_field("eos_token_id", "[1, \"x\"]")).message(), HasSubstr("field 'eos_token_id'"));
}

TEST(ModelConfigErrors, NonPositive) {
  EXPECT_THAT(parse_err(with_field("hidden_size", "0")).message(), HasSubstr("field 'hidden_size' must be an integer >= 1"));
  EXPECT_THAT(parse_err(with_field("rope_theta", "-1")).message(), HasSubstr("field 'rope_theta' must be a positive number"));
}

// Fields valid one by one whose products do not fit the sizes computed from them (found by fuzzing:
// q_dim() overflowed int).
TEST(ModelConfigErrors, DerivedSizesThatOverflowAreRefused) {
  std::string j = with_field("num_attention_heads", "65536");
  j.insert(1, "\"head_dim\":65536,\"num_key_value_heads\":1,");
  EXPECT_THAT(parse_err(j).message(), HasSubstr("(num_attention_heads + 2 x num_key_value_heads) x head_dim"));
  EXPECT_THAT(parse_err(with_field("intermediate_size", "1500000000")).message(), HasSubstr("2 x intermediate_size"));
  std::string v = with_field("vocab_size", "2000000000");
  v.replace(v.find("\"hidden_size\":64"), 16, "\"hidden_size\":4096");
  EXPECT_THAT(parse_err(v).message(), HasSubstr("vocab_size x hidden_size"));
}

TEST(ModelConfigErrors, UnknownArchitecture) {
  auto st = parse_err(with_field("architectures", "[\"GPTNeoXForCausalLM\"]"));
  EXPECT_THAT(st.message(), HasSubstr("unsupported architecture [GPTNeoXForCausalLM]"));
  auto st2 = parse_err(with_field("architectures", "").insert(1, "\"model_type\":\"gemma\","));
  EXPECT_THAT(st2.message(), HasSubstr("field 'model_type': unsupported architecture 'gemma'"));
  EXPECT_THAT(parse_err(with_field("architectures", "")).message(), HasSubstr("field 'architectures' is missing"));
}

TEST(ModelConfigErrors, HeadsDoNotDivideHidden) {
  EXPECT_THAT(parse_err(with_field("num_attention_heads", "5")).message(),
              HasSubstr("field 'num_attention_heads' (5) must divide hidden_size (64)"));
}

TEST(ModelConfigErrors, KvHeadsDoNotDivideHeads) {
  EXPECT_THAT(parse_err(with_field("num_key_value_heads", "3")).message(),
              HasSubstr("field 'num_key_value_heads' (3) must divide num_attention_heads (4)"));
}

TEST(ModelConfigErrors, OddHeadDim) {
  EXPECT_THAT(parse_err(with_field("head_dim", "15")).message(), HasSubstr("field 'head_dim' (15) must be a positive even"));
}

TEST(ModelConfigErrors, BadRopeScaling) {
  EXPECT_THAT(parse_err(with_field("rope_scaling", "{\"type\":\"yarn\",\"factor\":4}")).message(),
              HasSubstr("field 'rope_scaling.type' 'yarn' is not supported"));
  EXPECT_THAT(parse_err(with_field("rope_scaling", "{\"rope_type\":\"llama3\",\"factor\":8}")).message(),
              HasSubstr("field 'rope_scaling.low_freq_factor' is missing"));
  EXPECT_THAT(parse_err(with_field("rope_scaling", "[1]")).message(), HasSubstr("field 'rope_scaling' must be an object"));
}

TEST(ModelConfigErrors, EosOutOfVocab) {
  EXPECT_THAT(parse_err(with_field("eos_token_id", "300")).message(),
              HasSubstr("field 'eos_token_id' (300) must be in [0, vocab_size=300)"));
}

TEST(ModelConfigErrors, MissingFileNamesPath) {
  auto r = ModelConfig::from_json_file("/nonexistent/dir/config.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/dir/config.json"));
}
