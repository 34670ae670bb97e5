// The prompt both KV-blending tests build: [head 11][doc 29][doc 22][doc 21][tail 6] = 89 tokens
// (odd sizes, not multiples of the block size 8), and their fixture: a tiny random model, a dense
// table and a blended one over that prompt.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "model_fixture.h"
#include "ragd/pipelines/kv_blend.h"

namespace ragd::pipelines::testing {

struct BlendLayout {
  int head = 11;
  std::vector<int> starts = {11, 40, 62};
  std::vector<int> lens = {29, 22, 21};
  int tail = 6;
  int total() const { return starts.back() + lens.back() + tail; }
  int region_end() const { return starts.back() + lens.back(); }
};

class BlendFixture : public ::testing::Test {
 protected:
  // The model: `layers` layers of the tiny Llama config, weights from `weight_seed`; the prompt's
  // tokens from `token_seed`.
  void open_model(int layers, uint64_t weight_seed, uint64_t token_seed) {
    cfg_ = engine::testing::tiny_config(engine::testing::Variant::kLlama);
    cfg_.num_hidden_layers = layers;
    w_ = engine::testing::tiny_weights(cfg_, weight_seed, false);
    engine::ModelOptions o;
    o.kv_block_size = 8;
    o.kv_pool_bytes = 16u << 20;
    auto m = engine::Model::create(cfg_, engine::WeightStore::from_tensors(w_.tensors), o);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    model_ = std::move(m).value();
    tokens_ = engine::testing::random_tokens(L_.total(), token_seed);
  }
  void TearDown() override {
    if (model_)
      for (engine::BlockTable* t : {&dense_, &blend_}) t->release(model_->kv_pool());
  }
  std::vector<float> step(engine::BlockTable& t, std::span<const int32_t> toks, engine::SeqStep::Logits mode) {
    return engine::testing::one_step(*model_, t, toks, mode).logits;
  }
  std::span<const int32_t> span(int b, int n) const { return std::span<const int32_t>(tokens_).subspan(b, n); }
  // Head prefill into the blended table, chunk KV computed after the head, placed in order;
  // returns the placed documents (the first in place).
  std::vector<BlendDoc> place() {
    step(blend_, span(0, L_.head), engine::SeqStep::Logits::kNone);
    std::vector<std::span<const int32_t>> docs;
    for (size_t i = 0; i < L_.starts.size(); ++i) docs.push_back(span(L_.starts[i], L_.lens[i]));
    auto kv = compute_chunk_kv(*model_, blend_, L_.head, docs);
    EXPECT_TRUE(kv.ok()) << kv.status().to_string();
    std::vector<BlendDoc> placed;
    for (size_t i = 0; i < docs.size(); ++i) {
      EXPECT_EQ((*kv)[i].first_position, L_.head);
      Status st = place_chunk(*model_, (*kv)[i], blend_);
      EXPECT_TRUE(st.ok()) << st.to_string();
      placed.push_back({L_.starts[i], L_.lens[i], i == 0});
    }
    return placed;
  }

  engine::ModelConfig cfg_;
  engine::testing::TinyWeights w_;
  std::unique_ptr<engine::Model> model_;
  BlendLayout L_;
  std::vector<int32_t> tokens_;
  engine::BlockTable dense_, blend_;
};

}  // namespace ragd::pipelines::testing
