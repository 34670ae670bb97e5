// Shared fixture for the model tests: a tiny random model built in memory, one-sequence steps,
// seeded tokens and the mixed absolute / relative error used against the double reference.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include "ragd/engine/model.h"
#include "tiny_model.h"

namespace ragd::engine::testing {

// Logits are O(1..10); the engine runs fp32 (sgemm, fp32 softmax) against a double reference.
inline constexpr double kRefTol = 5e-5;   // max |a - b| / (1 + |b|), engine vs reference
inline constexpr double kSelfTol = 2e-5;  // engine vs engine with a different batching / paging

inline std::vector<int32_t> random_tokens(int n, uint32_t seed, int vocab = 97) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(g() % vocab);
  return t;
}

inline double err(std::span<const float> a, const std::vector<double>& b) {
  double e = 0.0;
  for (size_t i = 0; i < b.size(); ++i) e = std::max(e, std::fabs(a[i] - b[i]) / (1.0 + std::fabs(b[i])));
  return e;
}
inline double err(std::span<const float> a, std::span<const float> b) {
  return err(a, std::vector<double>(b.begin(), b.end()));
}

// Runs one step of a single sequence on `m`.
inline StepOutput one_step(Model& m, BlockTable& t, std::span<const int32_t> toks, SeqStep::Logits mode) {
  SeqStep s{&t, toks, mode};
  StepOutput out;
  const Status st = m.forward({&s, 1}, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  return out;
}

struct Fixture {
  ModelConfig cfg;
  TinyWeights w;
  std::unique_ptr<Model> model;

  explicit Fixture(Variant v, int block_size = 16, size_t pool_bytes = 8u << 20, uint32_t seed = 1,
                   WeightFormat weights = WeightFormat::kAuto, kernels::KvDtype kv_dtype = kernels::KvDtype::kF32) {
    cfg = tiny_config(v);
    w = tiny_weights(cfg, seed, v == Variant::kBf16);
    ModelOptions o;
    o.weights = weights;
    o.kv_block_size = block_size;
    o.kv_pool_bytes = pool_bytes;
    o.kv_dtype = kv_dtype;
    auto r = Model::create(cfg, WeightStore::from_tensors(w.tensors), o);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) model = std::move(r).value();
  }

  StepOutput step(BlockTable& t, std::span<const int32_t> toks, SeqStep::Logits mode) {
    return one_step(*model, t, toks, mode);
  }
};

}  // namespace ragd::engine::testing
