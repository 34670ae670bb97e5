// LayerNorm / GELU kernels against double references; the BERT encoder: packing invariance, bad
// checkpoints, and parity with an independent PyTorch forward pass (bert_reference.py, skipped
// without python3-torch) on random bert-tiny and bge-small shapes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <random>

#include "encoder_test_util.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/encoder_dir.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/wordpiece.h"
#include "ragd/kernels/encoder_ops.h"

namespace ragd::engine {
namespace {

using namespace ragd::encoder_testing;

std::vector<float> random_vec(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (auto& x : v) x = d(rng);
  return v;
}

TEST(EncoderOps, LayerNormMatchesDoubleReference) {
  for (int dim : {7, 33, 384, 769}) {
    const int rows = 13;
    auto x = random_vec(static_cast<size_t>(rows) * dim, 1, 3.0f);
    for (auto& v : x) v += 5.0f;  // a large mean: the variance must not cancel
    auto w = random_vec(dim, 2), b = random_vec(dim, 3);
    std::vector<float> y(x.size());
    kernels::layer_norm(x.data(), rows, dim, dim, w.data(), b.data(), 1e-12f, y.data(), dim);
    double max_err = 0;
    for (int r = 0; r < rows; ++r) {
      double mean = 0, var = 0;
      for (int i = 0; i < dim; ++i) mean += x[r * dim + i];
      mean /= dim;
      for (int i = 0; i < dim; ++i) var += (x[r * dim + i] - mean) * (x[r * dim + i] - mean);
      var /= dim;
      for (int i = 0; i < dim; ++i) {
        const double ref = (x[r * dim + i] - mean) / std::sqrt(var + 1e-12) * w[i] + b[i];
        max_err = std::max(max_err, std::abs(ref - y[r * dim + i]));
      }
    }
    EXPECT_LT(max_err, 2e-5) << "dim " << dim;
    // In place.
    kernels::layer_norm(x.data(), rows, dim, dim, w.data(), b.data(), 1e-12f, x.data(), dim);
    EXPECT_EQ(x, y);
  }
}

TEST(EncoderOps, GeluMatchesDoubleReference) {
  const int rows = 7, dim = 129;
  auto x0 = random_vec(static_cast<size_t>(rows) * dim, 4, 3.0f);
  auto bias = random_vec(dim, 5, 0.5f);
  for (auto kind : {kernels::GeluKind::kErf, kernels::GeluKind::kTanh}) {
    auto x = x0;
    kernels::bias_gelu(rows, dim, bias.data(), x.data(), dim, kind);
    double max_err = 0;
    for (int r = 0; r < rows; ++r)
      for (int i = 0; i < dim; ++i) {
        const double v = static_cast<double>(x0[r * dim + i]) + bias[i];
        const double ref = kind == kernels::GeluKind::kErf
                               ? 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0)))
                               : 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
        max_err = std::max(max_err, std::abs(ref - x[r * dim + i]));
      }
    EXPECT_LT(max_err, 1e-5);
  }
}

Result<std::unique_ptr<BertModel>> tiny_model(int num_labels = 0) {
  BertConfig c = *bert_preset_config("bert-tiny");
  if (num_labels) c.architecture = "BertForSequenceClassification", c.num_labels = num_labels;
  auto store = WeightStore::from_tensors(random_bert_tensors(c, 7));
  return BertModel::create(c, *store, "tiny");
}

EncoderInput random_input(int n, uint32_t seed, int vocab, bool pair) {
  std::mt19937 rng(seed);
  EncoderInput in;
  for (int i = 0; i < n; ++i) {
    in.ids.push_back(static_cast<int32_t>(rng() % vocab));
    in.type_ids.push_back(pair && i > n / 2 ? 1 : 0);
  }
  return in;
}

TEST(BertModel, PackedBatchEqualsOneByOne) {
  auto m = tiny_model();
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<EncoderInput> batch = {random_input(7, 1, 4096, false), random_input(33, 2, 4096, true),
                                     random_input(1, 3, 4096, false), random_input(128, 4, 4096, false)};
  std::vector<float> all;
  ASSERT_TRUE((*m)->forward(batch, &all).ok());
  size_t row = 0;
  const int h = (*m)->config().hidden_size;
  double max_err = 0;
  for (const auto& in : batch) {
    std::vector<float> one;
    ASSERT_TRUE((*m)->forward(std::span(&in, 1), &one).ok());
    for (size_t i = 0; i < one.size(); ++i) {
      ASSERT_TRUE(std::isfinite(one[i]));
      max_err = std::max(max_err, static_cast<double>(std::abs(one[i] - all[row * h + i])));
    }
    row += in.ids.size();
  }
  EXPECT_LT(max_err, 1e-5);
  // Over-long, out-of-vocabulary and empty inputs are errors naming the input, not crashes.
  std::vector<EncoderInput> bad = {random_input(129, 5, 4096, false)};
  std::vector<float> out;
  EXPECT_NE((*m)->forward(bad, &out).message().find("129 tokens"), std::string::npos);
  bad = {random_input(3, 5, 4096, false)};
  bad[0].ids[1] = 5000;
  EXPECT_FALSE((*m)->forward(bad, &out).ok());
  bad = {EncoderInput{}};
  EXPECT_FALSE((*m)->forward(bad, &out).ok());
}

TEST(BertModel, BadCheckpointsNameTheFile) {
  auto dir = temp_dir("bad_ckpt");
  EncoderDirOptions o;
  o.config = *bert_preset_config("bert-tiny");
  ASSERT_TRUE(write_random_encoder_dir(dir.string(), o).ok());
  ASSERT_TRUE(BertModel::load(dir.string()).ok());
  std::string cfg = read_file(dir / "config.json");
  // Unknown architecture.
  std::string arch = cfg;
  arch.replace(arch.find("\"BertModel\""), 11, "\"GPT2Model\"");
  write_file(dir / "config.json", arch);
  auto r = BertModel::load(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("config.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("GPT2Model"), std::string::npos) << r.status().message();
  // Wrong dims: config says 128 hidden, the tensors have 64.
  std::string dims = cfg;
  dims.replace(dims.find("\"hidden_size\": 64"), 17, "\"hidden_size\": 128");
  write_file(dir / "config.json", dims);
  r = BertModel::load(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("model.safetensors"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[4096, 64]"), std::string::npos) << r.status().message();
  // Missing tensors: one layer more than stored.
  std::string layers = cfg;
  layers.replace(layers.find("\"num_hidden_layers\": 2"), 22, "\"num_hidden_layers\": 3");
  write_file(dir / "config.json", layers);
  r = BertModel::load(dir.string());
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("encoder.layer.2."), std::string::npos) << r.status().message();
  std::filesystem::remove_all(dir);
}

// CLS pooling + L2 normalisation by hand (the encoder embedder is tested in encoder_embedder_test).
void parity(const std::string& preset, DType dtype, double tol) {
  auto dir = temp_dir("parity_" + preset);
  EncoderDirOptions o;
  o.config = *bert_preset_config(preset);
  o.dtype = dtype;
  o.seed = 11;
  ASSERT_TRUE(write_random_encoder_dir(dir.string(), o).ok());
  auto model = BertModel::load(dir.string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto tok = WordPieceTokenizer::from_file_wordpiece((dir / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok());
  const int max_len = std::min(512, (*model)->config().max_tokens());
  std::vector<std::string> texts = {
      "What is the capital of France?",
      "Café naïve résumé Ångström — accents everywhere, ÉCOLE.",
      "北京欢迎你 東京 mixed日本語text",
      "pneumonoultramicroscopicsilicovolcanoconiosis " + std::string(120, 'x') + " tokenization",
      "a"};
  std::string longtext;
  for (int i = 0; i < 400; ++i) longtext += "the retrieval system indexes passages number " + std::to_string(i) + ". ";
  texts.push_back(longtext);  // over max_len: truncated
  std::vector<EncoderInput> batch;
  for (const auto& t : texts) batch.push_back((*tok)->encode_single(t, max_len));
  EXPECT_EQ(static_cast<int>(batch.back().ids.size()), max_len);
  std::vector<float> hid;
  ASSERT_TRUE((*model)->forward(batch, &hid).ok());
  const int h = (*model)->config().hidden_size;
  std::vector<float> emb;
  size_t row = 0;
  for (const auto& in : batch) {
    double n = 0;
    for (int d = 0; d < h; ++d) n += double(hid[row * h + d]) * hid[row * h + d];
    for (int d = 0; d < h; ++d) emb.push_back(static_cast<float>(hid[row * h + d] / std::sqrt(n)));
    row += in.ids.size();
  }
  std::string list = "[";
  for (size_t i = 0; i < texts.size(); ++i) list += (i ? "," : "") + json_quote(texts[i]);
  write_file(dir / "texts.json", list + "]");
  const std::optional<double> delta = reference_max_delta(
      "embed " + quote_arg(dir) + " " + quote_arg(dir / "texts.json") + " " + quote_arg(dir / "ref.bin"),
      dir / "ref.bin", emb);
  if (!delta) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "python3-torch not installed: no PyTorch reference";
  }
  const double max_err = *delta;
  std::printf("parity %s (%s weights): max |delta| = %.3g over %zu texts x %d dims\n", preset.c_str(),
              std::string(dtype_name(dtype)).c_str(), max_err, texts.size(), h);
  EXPECT_LT(max_err, tol);
  std::filesystem::remove_all(dir);
}

TEST(BertModel, ParityWithTorchTiny) { parity("bert-tiny", DType::kF32, 1e-5); }
TEST(BertModel, ParityWithTorchBgeSmall) { parity("bge-small", DType::kF32, 1e-4); }

TEST(BertModel, ClassifierHead) {
  auto m = tiny_model(1);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::vector<EncoderInput> batch = {random_input(9, 1, 4096, true), random_input(20, 2, 4096, true)};
  std::vector<float> logits;
  ASSERT_TRUE((*m)->classify(batch, &logits).ok());
  ASSERT_EQ(logits.size(), 2u);
  EXPECT_NE(logits[0], logits[1]);
  auto plain = tiny_model();
  EXPECT_FALSE((*plain)->classify(batch, &logits).ok());
}

}  // namespace
}  // namespace ragd::engine

namespace ragd::engine {
namespace {

// Cross-encoder scores of (question, passage) pairs against the PyTorch reference (pooler + classifier).
void reranker_parity(const std::string& preset, double tol) {
  auto dir = temp_dir("rerank_" + preset);
  EncoderDirOptions o;
  o.config = *bert_preset_config(preset);
  o.config.architecture = "BertForSequenceClassification";
  o.config.num_labels = 1;
  o.seed = 5;
  ASSERT_TRUE(write_random_encoder_dir(dir.string(), o).ok());
  auto model = BertModel::load(dir.string());
  ASSERT_TRUE(model.ok()) << model.status().to_string();
  auto tok = WordPieceTokenizer::from_file_wordpiece((dir / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok());
  std::string longp;
  for (int i = 0; i < 300; ++i) longp += "Passage sentence " + std::to_string(i) + " about café prices. ";
  std::vector<std::pair<std::string, std::string>> pairs = {
      {"what is the capital of France?", "Paris is the capital and largest city of France."},
      {"北京在哪里", "北京是中国的首都。"},
      {"résumé tips", longp},  // truncated: the passage loses tokens, the question keeps its own
      {"a", "b"}};
  std::vector<EncoderInput> batch;
  for (const auto& [q, p] : pairs) batch.push_back((*tok)->encode_pair(q, p, (*model)->config().max_tokens()));
  std::vector<float> logits;
  ASSERT_TRUE((*model)->classify(batch, &logits).ok());
  std::string list = "[";
  for (size_t i = 0; i < pairs.size(); ++i)
    list += (i ? "," : "") + std::string("[") + json_quote(pairs[i].first) + "," + json_quote(pairs[i].second) + "]";
  write_file(dir / "pairs.json", list + "]");
  const std::optional<double> delta = reference_max_delta(
      "score " + quote_arg(dir) + " " + quote_arg(dir / "pairs.json") + " " + quote_arg(dir / "ref.bin"),
      dir / "ref.bin", logits);
  if (!delta) {
    std::filesystem::remove_all(dir);
    GTEST_SKIP() << "python3-torch not installed: no PyTorch reference";
  }
  const double max_err = *delta;
  std::printf("reranker parity %s: max |delta score| = %.3g over %zu pairs (scores %.3f .. %.3f)\n", preset.c_str(),
              max_err, pairs.size(), *std::min_element(logits.begin(), logits.end()),
              *std::max_element(logits.begin(), logits.end()));
  EXPECT_LT(max_err, tol);
  std::filesystem::remove_all(dir);
}

TEST(BertModel, RerankerParityWithTorchTiny) { reranker_parity("bert-tiny", 1e-5); }
TEST(BertModel, RerankerParityWithTorchBgeSmall) { reranker_parity("bge-small", 1e-4); }
TEST(BertModel, RerankerParityWithTorchBgeBase) { reranker_parity("bge-base", 1e-4); }

}  // namespace
}  // namespace ragd::engine
