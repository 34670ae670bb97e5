// Shared by the sequence-parallel tests: random-weight models of a few shapes (one per rank, same
// seed: the ranks hold identical weights, as MPI ranks loading one checkpoint do), a greedy
// single-worker reference, and a runner that starts one thread per rank and aborts the group when
// a rank fails (so a broken rank fails the test instead of hanging it).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <random>
#include <span>
#include <thread>
#include <vector>

#include "ragd/engine/model.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kernels/threads.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/nccl_communicator.h"
#include "ragd/seqparallel/thread_communicator.h"

namespace ragd::seqparallel::testing {

// Logits are O(1..10); a ring sums attention in another order than one worker does.
inline constexpr double kLogitTol = 1e-4;  // max |a - b| (absolute)

// head_dim 16, GQA 2 (the `tiny` preset's shape) or head_dim 16, GQA 3 with an odd hidden size.
inline engine::ModelConfig sp_config(bool odd) {
  engine::ModelConfig c;
  c.architecture = engine::Architecture::kLlama;
  c.hidden_size = odd ? 48 : 64;
  c.num_hidden_layers = 2;
  c.num_attention_heads = odd ? 3 : 4;
  c.num_key_value_heads = odd ? 1 : 2;
  c.head_dim = 16;
  c.intermediate_size = odd ? 136 : 176;
  c.vocab_size = odd ? 301 : 512;
  c.max_position_embeddings = 1 << 20;
  c.rms_norm_eps = 1e-5f;
  return c;
}

inline std::unique_ptr<engine::Model> sp_model(const engine::ModelConfig& cfg, size_t pool_bytes = 64u << 20,
                                               int block_size = 16,
                                               kernels::KvDtype kv_dtype = kernels::KvDtype::kF32) {
  engine::ModelOptions o;
  o.kv_dtype = kv_dtype;
  o.kv_pool_bytes = pool_bytes;
  o.kv_block_size = block_size;
  o.num_threads = 1;
  auto r = engine::Model::create(cfg, engine::make_random_weights(cfg, 7), o);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

inline std::vector<int32_t> random_tokens(int n, uint32_t seed, int vocab) {
  std::mt19937 g(seed);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(g() % vocab);
  return t;
}

inline int32_t argmax(std::span<const float> v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

inline double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  double e = a.size() == b.size() ? 0.0 : INFINITY;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) e = std::max(e, static_cast<double>(std::fabs(a[i] - b[i])));
  return e;
}

// One worker, no sequence parallelism: logits of every prompt position, then `decode` greedy tokens
// with the logits of each.
struct Reference {
  std::vector<std::vector<float>> prompt_logits;  // [n][vocab]
  std::vector<int32_t> generated;
  std::vector<std::vector<float>> decode_logits;  // logits after prompt + generated[0..i]
};

inline Reference reference(engine::Model& m, const std::vector<int32_t>& prompt, int decode) {
  Reference ref;
  engine::BlockTable t;
  engine::SeqStep s{&t, prompt, engine::SeqStep::Logits::kAll};
  engine::StepOutput out;
  Status st = m.forward({&s, 1}, &out);
  EXPECT_TRUE(st.ok()) << st.to_string();
  for (size_t i = 0; i < prompt.size() && st.ok(); ++i) {
    auto r = out.row(static_cast<int>(i));
    ref.prompt_logits.emplace_back(r.begin(), r.end());
  }
  int32_t next = st.ok() ? argmax(ref.prompt_logits.back()) : 0;
  for (int i = 0; i < decode && st.ok(); ++i) {
    ref.generated.push_back(next);
    engine::SeqStep d{&t, std::span<const int32_t>(&ref.generated.back(), 1), engine::SeqStep::Logits::kLast};
    st = m.forward({&d, 1}, &out);
    EXPECT_TRUE(st.ok()) << st.to_string();
    ref.decode_logits.emplace_back(out.logits.begin(), out.logits.end());
    next = argmax(out.logits);
  }
  t.release(m.kv_pool());
  return ref;
}

// Runs fn(rank) on one thread per communicator; a rank whose fn fails aborts the group.
inline std::vector<Status> run_ranks(std::vector<std::unique_ptr<Communicator>>& comms,
                                     const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> st(comms.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < comms.size(); ++r) {
    threads.emplace_back([&, r] {
      kernels::set_num_threads(1);
      st[r] = fn(*comms[r]);
      if (!st[r].ok()) comms[r]->abort(st[r]);
    });
  }
  for (auto& t : threads) t.join();
  return st;
}

// n NCCL ranks (rank r on device r) over a threads bootstrap, each joining from its own thread.
inline Result<std::vector<std::unique_ptr<Communicator>>> make_nccl_group(int n) {
  RAGD_ASSIGN_OR_RETURN(auto boots, make_thread_group(n));
  std::vector<Result<std::unique_ptr<Communicator>>> made;
  for (int r = 0; r < n; ++r) made.emplace_back(Status::Internal("not joined"));
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    threads.emplace_back([&, r] { made[r] = make_nccl_communicator(std::move(boots[r]), r); });
  }
  for (auto& t : threads) t.join();
  std::vector<std::unique_ptr<Communicator>> out;
  for (auto& m : made) {
    if (!m.ok()) return m.status();
    out.push_back(std::move(m).value());
  }
  return out;
}

}  // namespace ragd::seqparallel::testing
