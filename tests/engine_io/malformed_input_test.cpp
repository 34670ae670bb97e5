// Randomly mutated config.json, tokenizer.json and safetensors files must produce a Status (or a
// working object), never a crash, hang or out-of-bounds read (run under RAGD_ASAN to check the
// last). Seeded, so failures reproduce.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/tokenizer.h"

using namespace ragd::engine;
namespace fs = std::filesystem;

namespace {

std::string mutate(std::string s, std::mt19937_64& rng) {
  const int edits = 1 + static_cast<int>(rng() % 4);
  static const std::string interesting = "{}[]\":,0123456789-e.\\ nul tru fals";
  for (int i = 0; i < edits && !s.empty(); ++i) {
    const size_t pos = rng() % s.size();
    switch (rng() % 4) {
      case 0: s[pos] = interesting[rng() % interesting.size()]; break;
      case 1: s.erase(pos, 1 + rng() % 8); break;
      case 2: s.insert(pos, 1, interesting[rng() % interesting.size()]); break;
      default: s[pos] = static_cast<char>(rng() & 0xff);
    }
  }
  return s;
}

}  // namespace

TEST(MalformedInput, MutatedConfigJson) {
  ModelConfig base;
  base.hidden_size = 64;
  base.intermediate_size = 176;
  base.num_hidden_layers = 2;
  base.num_attention_heads = 4;
  base.num_key_value_heads = 2;
  base.head_dim = 16;
  base.vocab_size = 300;
  base.max_position_embeddings = 512;
  base.rope_scaling = {RopeScaling::Type::kLlama3, 8, 1, 4, 8192};
  base.eos_token_ids = {1, 2};
  const std::string json = base.to_json();
  std::mt19937_64 rng(1);
  int ok = 0, bad = 0;
  for (int i = 0; i < 2000; ++i) {
    auto r = ModelConfig::from_json(mutate(json, rng), "config.json");
    if (r.ok()) {
      ++ok;
      EXPECT_TRUE(r->validate().ok());
    } else {
      ++bad;
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  EXPECT_GT(bad, 0);
  EXPECT_GT(ok, 0);
}

TEST(MalformedInput, MutatedTokenizerJson) {
  BpeTrainOptions o;
  o.vocab_size = 300;
  auto json = train_byte_level_bpe("the theme then there these the other", o);
  ASSERT_TRUE(json.ok());
  std::mt19937_64 rng(2);
  int bad = 0;
  for (int i = 0; i < 300; ++i) {
    auto r = Tokenizer::from_json(mutate(*json, rng), "tokenizer.json");
    if (!r.ok()) {
      ++bad;
      EXPECT_NE(r.status().message().find("tokenizer.json"), std::string::npos) << r.status().message();
      continue;
    }
    auto ids = (*r)->encode("the other <|eot_id|> theme \xF0\x9F\x98\x80 \xFF");
    (void)(*r)->decode(ids);
  }
  EXPECT_GT(bad, 0);
}

TEST(MalformedInput, MutatedSafetensorsHeader) {
  const fs::path dir = fs::temp_directory_path() / ("ragd_fuzz_st_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  std::map<std::string, OwnedTensor> ts;
  ts["a"] = {DType::kF32, {3, 5}, std::vector<uint8_t>(60, 1)};
  ts["b"] = {DType::kBF16, {7}, std::vector<uint8_t>(14, 2)};
  const std::string good = (dir / "good.safetensors").string();
  ASSERT_TRUE(write_safetensors(good, ts).ok());
  std::ifstream in(good, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), {});
  std::mt19937_64 rng(3);
  int bad = 0;
  for (int i = 0; i < 200; ++i) {
    std::string m = bytes;
    // Mutate the header region (length prefix included), keeping the data.
    uint64_t hlen = 0;
    for (int k = 7; k >= 0; --k) hlen = (hlen << 8) | static_cast<uint8_t>(m[k]);
    std::string head = mutate(m.substr(0, 8 + hlen), rng);
    m = head + m.substr(8 + hlen);
    const std::string path = (dir / "x.safetensors").string();
    std::ofstream(path, std::ios::binary | std::ios::trunc) << m;
    auto r = WeightStore::open_file(path);
    if (!r.ok()) {
      ++bad;
      EXPECT_NE(r.status().message().find("x.safetensors"), std::string::npos) << r.status().message();
      continue;
    }
    for (const auto& name : (*r)->names()) {
      auto v = (*r)->get(name);
      ASSERT_TRUE(v.ok());
      std::vector<float> f(v->numel());
      v->to_f32(f.data());
    }
    (void)(*r)->checksum();
  }
  EXPECT_GT(bad, 150);
  fs::remove_all(dir);
}
