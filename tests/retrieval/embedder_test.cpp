#include "ragd/retrieval/embedder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "ragd/common/hash.h"
#include "ragd/engine/model.h"
#include "test_util.h"

namespace ragd::retrieval {
namespace {

double dot(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

// Naive reference of the hashing embedder (double precision), for texts without stop words.
std::vector<double> reference(const std::vector<std::string>& words, int dim, bool bigrams) {
  std::map<std::string, int> tf;
  for (size_t i = 0; i < words.size(); ++i) {
    ++tf[words[i]];
    if (bigrams && i + 1 < words.size()) ++tf[words[i] + '\x1f' + words[i + 1]];
  }
  std::vector<double> v(static_cast<size_t>(dim), 0.0);
  for (const auto& [f, n] : tf) {
    uint64_t h = xxh3_64(f.data(), f.size());
    double sign = ((h >> 40) & 1) ? -1.0 : 1.0;
    v[h % static_cast<uint64_t>(dim)] += sign * (1.0 + std::log(static_cast<double>(n)));
  }
  double norm = 0;
  for (double x : v) norm += x * x;
  for (double& x : v) x /= std::sqrt(norm);
  return v;
}

TEST(HashingEmbedder, MatchesNaiveReference) {
  for (int dim : {33, 129, 384}) {
    for (bool bigrams : {false, true}) {
      HashingEmbedderOptions o;
      o.dim = dim;
      o.bigrams = bigrams;
      auto e = make_hashing_embedder(o);
      ASSERT_TRUE(e.ok());
      std::string text = "Kalo mine, kalo RUTA vozi; mine-kalo 42 kalo.";
      std::vector<std::string> words = {"kalo", "mine", "kalo", "ruta", "vozi", "mine", "kalo", "42", "kalo"};
      EXPECT_EQ(hashing_words(text), words);
      std::vector<float> out;
      std::string_view texts[] = {text};
      ASSERT_TRUE((*e)->embed(texts, &out).ok());
      ASSERT_EQ(out.size(), static_cast<size_t>(dim));
      auto ref = reference(words, dim, bigrams);
      for (int i = 0; i < dim; ++i) EXPECT_NEAR(out[static_cast<size_t>(i)], ref[static_cast<size_t>(i)], 1e-6) << i;
    }
  }
}

TEST(HashingEmbedder, PluralsFoldToTheSingular) {
  auto e = make_hashing_embedder({});
  const std::pair<std::string_view, std::string_view> same[] = {
      {"glaciers carve valleys", "glacier carve valley"}, {"bodies of churches", "body of church"},
      {"boxes and classes", "box and class"}};
  for (const auto& [a, b] : same) {
    std::vector<float> va, vb;
    std::string_view ta[] = {a}, tb[] = {b};
    ASSERT_TRUE((*e)->embed(ta, &va).ok());
    ASSERT_TRUE((*e)->embed(tb, &vb).ok());
    EXPECT_NEAR(dot(va.data(), vb.data(), va.size()), 1.0, 1e-5) << a << " vs " << b;
  }
  // Words that only look plural stay apart from their stem.
  std::vector<float> vx, vy;
  std::string_view tx[] = {"status"}, ty[] = {"statu"};
  ASSERT_TRUE((*e)->embed(tx, &vx).ok());
  ASSERT_TRUE((*e)->embed(ty, &vy).ok());
  EXPECT_LT(dot(vx.data(), vy.data(), vx.size()), 0.5);
}

TEST(HashingEmbedder, StopWordsDropFromUnigramsOnly) {
  auto e = make_hashing_embedder({});
  std::vector<float> a, b;
  std::string_view t1[] = {"the"};
  ASSERT_TRUE((*e)->embed(t1, &a).ok());
  for (float x : a) EXPECT_EQ(x, 0.0f);  // only a stop word: zero vector, no NaN
  std::string_view t2[] = {"of the"};
  ASSERT_TRUE((*e)->embed(t2, &b).ok());
  EXPECT_NEAR(dot(b.data(), b.data(), b.size()), 1.0, 1e-5);  // the bigram remains
}

TEST(HashingEmbedder, BatchRowsAreNormalisedAndIndependent) {
  auto e = make_hashing_embedder({});
  std::string_view texts[] = {"alpha beta gamma", "delta epsilon", "alpha beta gamma"};
  std::vector<float> out;
  ASSERT_TRUE((*e)->embed(texts, &out).ok());
  const size_t d = static_cast<size_t>((*e)->dim());
  ASSERT_EQ(out.size(), 3 * d);
  for (int r = 0; r < 3; ++r) EXPECT_NEAR(dot(&out[r * d], &out[r * d], d), 1.0, 1e-5);
  EXPECT_NEAR(dot(&out[0], &out[2 * d], d), 1.0, 1e-5);
  EXPECT_LT(std::abs(dot(&out[0], &out[d], d)), 0.3);
}

TEST(HashingEmbedder, IdentityNamesDimension) {
  HashingEmbedderOptions o;
  o.dim = 128;
  EXPECT_EQ((*make_hashing_embedder(o))->identity(), "hashing-v2/d=128/uni+bi");
}

TEST(HashingEmbedder, RejectsBadDimension) {
  HashingEmbedderOptions o;
  o.dim = 8;
  auto e = make_hashing_embedder(o);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("dim"), std::string::npos);
}

TEST(Embedder, UnknownNameListsKnownOnes) {
  EmbedderOptions o;
  o.name = "word2vec";
  auto e = make_embedder(o, nullptr);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("unknown embedder 'word2vec'"), std::string::npos);
  EXPECT_NE(e.status().message().find("hashing, termvec, model"), std::string::npos);
}

TEST(Embedder, ModelWithoutDirectoryIsRefused) {
  EmbedderOptions o;
  o.name = "model";
  auto e = make_embedder(o, nullptr);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("model directory"), std::string::npos);
}

// A stand-in transformer: embed() returns a deterministic function of the token ids.
class FakeModel final : public engine::Model {
 public:
  FakeModel() { cfg_.hidden_size = 33; }
  const engine::ModelConfig& config() const override { return cfg_; }
  Hash128 fingerprint() const override { return Hash128{1, 2}; }
  engine::KvPool& kv_pool() override { std::abort(); }
  std::string_view device() const override { return "cpu"; }
  Status forward(std::span<engine::SeqStep>, engine::StepOutput*) override { return Status::Unimplemented("fake"); }
  Status embed(std::span<const int32_t> tokens, std::vector<float>* out, engine::SentencePooling) override {
    last_len = tokens.size();
    out->assign(33, 0.0f);
    for (size_t i = 0; i < tokens.size(); ++i) (*out)[static_cast<size_t>(tokens[i]) % 33] += 1.0f + 0.5f * static_cast<float>(i % 3);
    return Status::OK();
  }
  size_t last_len = 0;

 private:
  engine::ModelConfig cfg_;
};

TEST(ModelEmbedder, NormalisesPooledStatesAndTruncates) {
  auto vocab = testing::make_vocabulary(50, 3);
  auto tok = std::make_shared<testing::WordTokenizer>(vocab);
  auto model = std::make_unique<FakeModel>();
  FakeModel* raw = model.get();
  ModelEmbedderOptions mo;
  mo.max_tokens = 7;
  auto e = make_model_embedder(std::move(model), tok, mo);
  ASSERT_TRUE(e.ok()) << e.status().to_string();
  EXPECT_EQ((*e)->dim(), 33);
  EXPECT_EQ((*e)->name(), "model");
  EXPECT_NE((*e)->identity().find(Hash128{1, 2}.to_hex()), std::string::npos);
  std::string text = vocab[0] + " " + vocab[1] + " " + vocab[2] + " " + vocab[3] + " " + vocab[4] + " " + vocab[5] +
                     " " + vocab[6] + " " + vocab[7] + " " + vocab[8];
  std::string_view texts[] = {text};
  std::vector<float> out;
  ASSERT_TRUE((*e)->embed(texts, &out).ok());
  EXPECT_EQ(raw->last_len, 7u);
  EXPECT_NEAR(dot(out.data(), out.data(), 33), 1.0, 1e-5);
}

}  // namespace
}  // namespace ragd::retrieval
