// Decoder embedders ("model" embedder over a Llama-family checkpoint with sentence-transformers
// files): last-token pooling reads the hidden state of an appended EOS, CLS the first position,
// mean all; prefixes; truncation keeps the EOS; identities keep the old form for mean pooling.
// Expected vectors come from Model::embed on hand-built id sequences (the engine's forward is
// checked against its naive reference in tests/engine), normalised here.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "encoder_test_util.h"
#include "ragd/engine/model.h"
#include "ragd/engine/presets.h"
#include "ragd/engine/random_weights.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/sentence_pooling.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {
namespace {

namespace fs = std::filesystem;
using namespace ragd::engine;
using namespace ragd::encoder_testing;

class TempDir {
 public:
  TempDir() : path_(temp_dir("decoder_" + std::to_string(counter_++))) {}
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir(TempDir&& o) noexcept : path_(std::move(o.path_)) { o.path_.clear(); }
  const fs::path& path() const { return path_; }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

struct DecoderDir {
  TempDir tmp;
  std::shared_ptr<const Tokenizer> tok;
};

// A tiny random decoder checkpoint; with `pooling` its sentence-transformers files.
DecoderDir make_decoder_dir(const std::string& pooling, int max_seq_length = 0) {
  DecoderDir d;
  ModelConfig c = preset_config("tiny").value();
  BpeTrainOptions topts;
  topts.vocab_size = 400;
  topts.pad_to = c.vocab_size;
  const std::string tok_json = train_byte_level_bpe(builtin_training_text(), topts).value();
  auto tok = Tokenizer::from_json(tok_json, "tokenizer.json").value();
  c.bos_token_id = tok->bos_id().value_or(-1);
  c.eos_token_ids = {*tok->token_to_id("<|end_of_text|>")};
  write_file(d.tmp.path() / "config.json", c.to_json());
  write_file(d.tmp.path() / "tokenizer.json", tok_json);
  EXPECT_TRUE(write_safetensors((d.tmp.path() / "model.safetensors").string(), random_weight_tensors(c, 11)).ok());
  if (!pooling.empty()) {
    const PoolingSpec spec{.pooling = parse_sentence_pooling(pooling).value(), .normalize = true,
                           .max_seq_length = max_seq_length};
    EXPECT_TRUE(write_sentence_pooling(d.tmp.path().string(), c.hidden_size, spec).ok());
  }
  d.tok = std::shared_ptr<const Tokenizer>(std::move(tok));
  return d;
}

std::vector<float> expected(const DecoderDir& d, std::vector<int32_t> ids, SentencePooling p) {
  ModelOptions mo;
  mo.kv_pool_bytes = 16ull << 20;
  auto m = Model::load(d.tmp.path().string(), mo).value();
  std::vector<float> h;
  EXPECT_TRUE(m->embed(ids, &h, p).ok());
  double n = 0;
  for (float v : h) n += static_cast<double>(v) * v;
  for (float& v : h) v = static_cast<float>(v / std::sqrt(n));
  return h;
}

double max_delta(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double m = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

constexpr double kTol = 1e-6;  // the same forward pass on both sides; only the normalisation differs

std::unique_ptr<Embedder> open(const DecoderDir& d, const std::string& query_prefix = "", int max_tokens = 512) {
  EmbedderOptions o;
  o.name = "model";
  o.model_dir = d.tmp.path().string();
  o.query_prefix = query_prefix;
  o.max_tokens = max_tokens;
  auto e = make_embedder(o, d.tok);
  EXPECT_TRUE(e.ok()) << e.status().to_string();
  return e.ok() ? std::move(*e) : nullptr;
}

TEST(DecoderEmbedder, LastTokenPoolingReadsTheAppendedEos) {
  const DecoderDir d = make_decoder_dir("lasttoken");
  auto e = open(d);
  ASSERT_NE(e, nullptr);
  EXPECT_NE(e->identity().find("/pool=lasttoken/eos=1/prefix=none"), std::string::npos) << e->identity();
  const std::string text = "the retrieval index answers the question";
  std::string_view texts[] = {text};
  std::vector<float> got;
  ASSERT_TRUE(e->embed(texts, &got).ok());
  std::vector<int32_t> ids = d.tok->encode(text, true, false);
  ids.push_back(*d.tok->token_to_id("<|end_of_text|>"));
  EXPECT_LT(max_delta(got, expected(d, ids, SentencePooling::kLastToken)), kTol);
  // Not the state of the last word (the EOS matters) and not the mean.
  ids.pop_back();
  EXPECT_GT(max_delta(got, expected(d, ids, SentencePooling::kLastToken)), 1e-3);
  EXPECT_GT(max_delta(got, expected(d, ids, SentencePooling::kMean)), 1e-3);
}

TEST(DecoderEmbedder, QueryPrefixAndTruncationKeepTheEos) {
  const DecoderDir d = make_decoder_dir("lasttoken");
  const std::string prefix = "Instruct: find the passage\nQuery: ";
  auto e = open(d, prefix, /*max_tokens=*/9);
  ASSERT_NE(e, nullptr);
  const std::string q = "which index holds the documents of the second tenant";
  std::string_view qs[] = {q};
  std::vector<float> got;
  ASSERT_TRUE(e->embed_queries(qs, &got).ok());
  std::vector<int32_t> ids = d.tok->encode(prefix + q, true, false);
  ASSERT_GT(ids.size(), 8u);
  ids.resize(8);
  ids.push_back(*d.tok->token_to_id("<|end_of_text|>"));
  EXPECT_LT(max_delta(got, expected(d, ids, SentencePooling::kLastToken)), kTol);
  // Documents get no query prefix.
  std::vector<float> doc;
  ASSERT_TRUE(e->embed(qs, &doc).ok());
  EXPECT_GT(max_delta(got, doc), 1e-3);
}

TEST(DecoderEmbedder, ClsMeanAndFilesOrOption) {
  const DecoderDir cls = make_decoder_dir("cls", /*max_seq_length=*/6);
  auto e = open(cls);
  ASSERT_NE(e, nullptr);
  const std::string text = "passages are embedded once at ingest";
  std::string_view texts[] = {text};
  std::vector<float> got;
  ASSERT_TRUE(e->embed(texts, &got).ok());
  std::vector<int32_t> ids = cls.tok->encode(text, true, false);
  EXPECT_LT(max_delta(got, expected(cls, ids, SentencePooling::kCls)), kTol);
  EXPECT_NE(e->identity().find("/max=6/pool=cls/eos=0"), std::string::npos) << "max_seq_length caps the input";

  // No sentence-transformers files: mean pooling, and the identity of corpora built before.
  const DecoderDir plain = make_decoder_dir("");
  auto m = open(plain, "", 64);
  ASSERT_NE(m, nullptr);
  EXPECT_EQ(m->identity().find("/pool="), std::string::npos) << m->identity();
  ASSERT_TRUE(m->embed(texts, &got).ok());
  EXPECT_LT(max_delta(got, expected(plain, plain.tok->encode(text, true, false), SentencePooling::kMean)), kTol);
}

TEST(DecoderEmbedder, BadPoolingIsRefusedNamingTheFile) {
  const DecoderDir d = make_decoder_dir("lasttoken");
  write_file(d.tmp.path() / "1_Pooling" / "config.json", R"({"pooling_mode_max_tokens": true})");
  EmbedderOptions o;
  o.name = "model";
  o.model_dir = d.tmp.path().string();
  auto e = make_embedder(o, d.tok);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("1_Pooling"), std::string::npos) << e.status().to_string();
  EXPECT_NE(e.status().message().find("pooling_mode_max_tokens"), std::string::npos) << e.status().to_string();
  o.pooling = "max";
  e = make_embedder(o, d.tok);
  ASSERT_FALSE(e.ok());
  EXPECT_NE(e.status().message().find("'max'"), std::string::npos) << e.status().to_string();
}

}  // namespace
}  // namespace ragd::retrieval
