// CacheBlend / EPIC repair (kv_blend.h) with the model on a GPU: the same flow as kv_blend_test.cpp
// (head prefill, chunk KV computed after the head, placed with re-rotated keys, selective repair
// through the layer hooks, tail prefill) on the CUDA backend, against dense prefill of the same
// prompt on the same GPU and against the same flow on the CPU backend.
// Tolerances, relative to the last logit row's range: GPU blend with every row repaired vs GPU dense
// 1 % (engine vs engine on one device; the steps differ, so bf16 roundings of activations land
// differently); GPU vs CPU 3 % (as in tests/engine/cuda_backend_test.cpp: the GPU rounds activations,
// Q and P to bf16). Skips without a CUDA device; RAGD_CUDA_TEST_DEVICE=cpu runs the "GPU" side on the
// CPU backend as a check of the tests themselves.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "blend_layout.h"
#include "model_fixture.h"
#include "ragd/kernels/cuda/device.h"
#include "ragd/pipelines/kv_blend.h"

namespace ragd::pipelines {
namespace {

using engine::BlockTable;
using engine::SeqStep;
using engine::testing::random_tokens;

// max |a - b| over the row, as a fraction of b's range.
double range_err(const std::vector<float>& a, const std::vector<float>& b) {
  const auto [lo, hi] = std::minmax_element(b.begin(), b.end());
  double d = 0.0;
  for (size_t i = 0; i < b.size(); ++i) d = std::max(d, std::fabs(static_cast<double>(a[i]) - b[i]));
  return d / std::max(1e-6, static_cast<double>(*hi - *lo));
}

using Layout = testing::BlendLayout;

class KvBlendCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* env = std::getenv("RAGD_CUDA_TEST_DEVICE");
    const std::string gpu_device = env && *env ? env : "cuda:0";
    std::string why;
    if (gpu_device != "cpu" && kernels::cuda::device_count(&why) == 0) GTEST_SKIP() << "no CUDA device: " << why;
    // The CUDA kernels take head_dim 32 / 64 / 128: four layers of 4 × 32 (GQA 2).
    cfg_ = engine::testing::tiny_config(engine::testing::Variant::kLlama);
    cfg_.num_hidden_layers = 4;
    cfg_.head_dim = 32;
    cfg_.hidden_size = 128;
    cfg_.intermediate_size = 192;
    w_ = engine::testing::tiny_weights(cfg_, 7, true);
    tokens_ = random_tokens(L_.total(), 99);
    for (const bool on_gpu : {true, false}) {
      engine::ModelOptions o;
      o.device = on_gpu ? gpu_device : "cpu";
      o.kv_block_size = 8;
      o.kv_pool_bytes = 16u << 20;
      auto m = engine::Model::create(cfg_, engine::WeightStore::from_tensors(w_.tensors), o);
      ASSERT_TRUE(m.ok()) << o.device << ": " << m.status().to_string();
      (on_gpu ? gpu_ : cpu_) = std::move(m).value();
    }
  }

  std::vector<float> step(engine::Model& m, BlockTable& t, std::span<const int32_t> toks) {
    return engine::testing::one_step(m, t, toks, SeqStep::Logits::kLast).logits;
  }
  std::span<const int32_t> span(int b, int n) const { return std::span<const int32_t>(tokens_).subspan(b, n); }

  std::vector<float> dense(engine::Model& m) {
    BlockTable t;
    auto out = step(m, t, tokens_);
    t.release(m.kv_pool());
    return out;
  }

  std::vector<float> blended(engine::Model& m, ReuseMode mode, const BlendParams& p, BlendStats* stats = nullptr) {
    BlockTable t;
    step(m, t, span(0, L_.head));
    std::vector<std::span<const int32_t>> docs;
    for (size_t i = 0; i < L_.starts.size(); ++i) docs.push_back(span(L_.starts[i], L_.lens[i]));
    auto kv = compute_chunk_kv(m, t, L_.head, docs);
    EXPECT_TRUE(kv.ok()) << kv.status().to_string();
    std::vector<BlendDoc> placed;
    for (size_t i = 0; kv.ok() && i < docs.size(); ++i) {
      const Status st = place_chunk(m, (*kv)[i], t);
      EXPECT_TRUE(st.ok()) << st.to_string();
      placed.push_back({L_.starts[i], L_.lens[i], i == 0});
    }
    EXPECT_EQ(t.num_tokens(), L_.region_end());
    auto r = repair(m, t, tokens_, placed, mode, p);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok() && stats) *stats = *r;
    auto out = step(m, t, span(L_.region_end(), L_.tail));
    t.release(m.kv_pool());
    return out;
  }

  engine::ModelConfig cfg_;
  engine::testing::TinyWeights w_;
  std::unique_ptr<engine::Model> gpu_, cpu_;
  Layout L_;
  std::vector<int32_t> tokens_;
};

// Repairing every placed row (CacheBlend r = 1, EPIC k >= the document length) is dense prefill.
TEST_F(KvBlendCuda, RepairingEveryRowIsDensePrefill) {
  BlendParams cacheblend, epic;
  cacheblend.recompute_ratio = 1.0;
  epic.epic_k = 4096;
  for (const auto& [mode, p, name] : {std::tuple{ReuseMode::kCacheBlend, cacheblend, "cacheblend r=1"},
                                      std::tuple{ReuseMode::kEpic, epic, "epic whole documents"}}) {
    BlendStats st;
    const double e = range_err(blended(*gpu_, mode, p, &st), dense(*gpu_));
    std::printf("gpu %s vs gpu dense: %.3f %% of the range\n", name, 100 * e);
    EXPECT_LT(e, 0.01) << name;
    EXPECT_EQ(st.placed, L_.lens[1] + L_.lens[2]) << name;
    EXPECT_EQ(st.repaired, st.placed) << name;
  }
}

TEST_F(KvBlendCuda, NaiveConcatenationDiffersAndMoreRecomputeGetsCloser) {
  const std::vector<float> want = dense(*gpu_);
  auto run = [&](double r) {
    BlendParams p;
    p.recompute_ratio = r;
    return range_err(blended(*gpu_, ReuseMode::kCacheBlend, p), want);
  };
  const double e0 = run(0.0), e50 = run(0.5), e100 = run(1.0);
  std::printf("gpu cacheblend vs dense: r=0 %.3f %%, r=0.5 %.3f %%, r=1 %.3f %% of the range\n", 100 * e0, 100 * e50,
              100 * e100);
  EXPECT_GT(e0, 0.03) << "placing chunk KV without repair should change the logits beyond the tolerance";
  EXPECT_LT(e50, e0);
  EXPECT_LT(e100, 0.01);
}

TEST_F(KvBlendCuda, EpicMatchesTheCpuBackend) {
  // EPIC's selection (the first k tokens of each displaced document) does not depend on values, so
  // both backends repair the same rows.
  BlendParams p;
  p.epic_k = 5;
  BlendStats sg, sc;
  const std::vector<float> g = blended(*gpu_, ReuseMode::kEpic, p, &sg);
  const std::vector<float> c = blended(*cpu_, ReuseMode::kEpic, p, &sc);
  EXPECT_EQ(sg.repaired, sc.repaired);
  const double e = range_err(g, c);
  std::printf("gpu epic k=5 vs cpu epic k=5: %.3f %% of the range\n", 100 * e);
  EXPECT_LT(e, 0.03);
}

}  // namespace
}  // namespace ragd::pipelines
