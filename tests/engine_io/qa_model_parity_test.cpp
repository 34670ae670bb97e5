// The committed QA model (models/ragd-qa) against logits computed by the independent PyTorch
// implementation it was trained with (tools/train/llama.py). The fixture is committed
// (tests/engine_io/data/qa_model_logits.bin); the torch-based ctest regenerates it into a temp
// file first and points RAGD_QA_LOGITS at it, so the same comparison runs against a fresh torch run.
// Tolerance: max |logit difference| <= 1e-4 over every stored row (fp32 both sides, same bf16 weights).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "ragd/engine/model.h"

namespace ragd::engine {
namespace {

constexpr double kTol = 1e-4;

struct Row {
  uint32_t pos;
  std::vector<float> logits;
};
struct Prompt {
  std::vector<int32_t> ids;
  std::vector<Row> rows;
};

bool read_fixture(const std::string& path, uint32_t* vocab, std::vector<Prompt>* out, std::string* err) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return *err = path + ": cannot open", false;
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string b = ss.str();
  size_t off = 0;
  auto take = [&](void* dst, size_t n) {
    if (off + n > b.size()) return false;
    std::memcpy(dst, b.data() + off, n);
    off += n;
    return true;
  };
  char magic[8];
  uint32_t n = 0;
  if (!take(magic, 8) || std::memcmp(magic, "RAGDLOG1", 8) || !take(&n, 4) || !take(vocab, 4))
    return *err = path + ": bad header", false;
  for (uint32_t p = 0; p < n; ++p) {
    Prompt pr;
    uint32_t len = 0, rows = 0;
    if (!take(&len, 4)) return *err = "truncated", false;
    pr.ids.resize(len);
    if (!take(pr.ids.data(), 4ull * len) || !take(&rows, 4)) return *err = "truncated", false;
    for (uint32_t r = 0; r < rows; ++r) {
      Row row;
      row.logits.resize(*vocab);
      if (!take(&row.pos, 4) || !take(row.logits.data(), 4ull * *vocab)) return *err = "truncated", false;
      pr.rows.push_back(std::move(row));
    }
    out->push_back(std::move(pr));
  }
  return off == b.size() ? true : (*err = "trailing bytes", false);
}

TEST(QaModelParity, LogitsMatchPyTorchReference) {
  const std::string model_dir = std::string(RAGD_SOURCE_DIR) + "/models/ragd-qa";
  const char* env = std::getenv("RAGD_QA_LOGITS");
  const std::string fixture = env && *env ? env : std::string(RAGD_SOURCE_DIR) + "/tests/engine_io/data/qa_model_logits.bin";
  ASSERT_TRUE(std::filesystem::exists(model_dir + "/config.json")) << model_dir << " is missing";
  uint32_t vocab = 0;
  std::vector<Prompt> prompts;
  std::string err;
  ASSERT_TRUE(read_fixture(fixture, &vocab, &prompts, &err)) << err;
  ASSERT_GE(prompts.size(), 2u);

  ModelOptions o;
  o.num_threads = 1;
  auto m = Model::load(model_dir, o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  Model& model = **m;
  ASSERT_EQ(static_cast<uint32_t>(model.config().vocab_size), vocab);

  bool saw_long = false;
  for (const auto& p : prompts) {
    saw_long |= p.ids.size() > 1000;
    // Chunked prefill (odd chunk size) so the comparison also covers attention over cached KV.
    BlockTable t;
    std::vector<float> all;
    for (size_t b = 0; b < p.ids.size(); b += 257) {
      const size_t n = std::min<size_t>(257, p.ids.size() - b);
      SeqStep s{&t, std::span(p.ids).subspan(b, n), SeqStep::Logits::kAll};
      StepOutput out;
      ASSERT_TRUE(model.forward({&s, 1}, &out).ok());
      all.insert(all.end(), out.logits.begin(), out.logits.end());
    }
    t.release(model.kv_pool());
    double worst = 0;
    for (const auto& r : p.rows) {
      ASSERT_LT(r.pos, p.ids.size());
      for (uint32_t v = 0; v < vocab; ++v) {
        const double got = all[static_cast<size_t>(r.pos) * vocab + v];
        ASSERT_TRUE(std::isfinite(got));
        worst = std::max(worst, std::abs(got - r.logits[v]));
      }
    }
    EXPECT_LE(worst, kTol) << "prompt of " << p.ids.size() << " tokens";
    std::printf("prompt of %zu tokens: max |logit - torch| = %.2e over %zu rows\n", p.ids.size(), worst, p.rows.size());
  }
  EXPECT_TRUE(saw_long) << "the fixture must hold a prompt of over 1,000 tokens";
}

}  // namespace
}  // namespace ragd::engine
