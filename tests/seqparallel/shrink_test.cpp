// ShardedSequence::shrink: a sequence prefilled on P ranks decodes on fewer after its KV moved to
// them. Checked against one large pool's greedy decode (the oracle) and against the same group
// decoding without the move, for f32 / bf16 / int8 pools, several (P, degree) pairs, an odd prompt
// length, and receivers whose pools must spill what they take.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "ragd/seqparallel/sharded_sequence.h"
#include "ragd/seqparallel/thread_communicator.h"
#include "sp_fixture.h"

namespace ragd::seqparallel {
namespace {

using namespace testing;  // NOLINT: the fixture's helpers

struct Outcome {
  std::vector<int32_t> generated;
  std::vector<std::vector<float>> logits;  // rank 0's: what each generated token was chosen from
  std::vector<int64_t> held;               // tokens per rank after the run
  std::vector<bool> retired;
  std::vector<size_t> free_blocks, pool_blocks;
  std::vector<Status> st;
  std::vector<bool> late_decode_refused;   // a retired rank's decode says so instead of blocking
};

// Prefills `prompt` on `workers` ranks, shrinks to `degree` (0 = no shrink), decodes `decode`
// greedy tokens.
Outcome run_group(const engine::ModelConfig& cfg, const std::vector<int32_t>& prompt, int workers, int degree,
                  int decode, size_t pool_bytes, kernels::KvDtype dt, const SpillOptions& spill = {}) {
  auto comms = make_thread_group(workers).value();
  Outcome o;
  o.held.assign(workers, 0);
  o.retired.assign(workers, false);
  o.free_blocks.assign(workers, 0);
  o.pool_blocks.assign(workers, 0);
  o.late_decode_refused.assign(workers, false);
  std::mutex mu;
  o.st = run_ranks(comms, [&](Communicator& comm) -> Status {
    auto model = sp_model(cfg, pool_bytes, 16, dt);
    if (model == nullptr) return Status::Internal("model");
    std::vector<int32_t> gen;
    std::vector<std::vector<float>> steps;
    {
      ShardedSequence seq(*model, comm, PartitionKind::kZigzag, 37, spill);
      std::vector<float> logits;
      RAGD_RETURN_IF_ERROR(seq.prefill(prompt, &logits));
      if (degree > 0) RAGD_RETURN_IF_ERROR(seq.shrink(degree));
      if (seq.holds_kv()) {
        for (int i = 0; i < decode; ++i) {
          gen.push_back(argmax(logits));
          steps.push_back(logits);
          RAGD_RETURN_IF_ERROR(seq.decode(gen.back(), &logits));
        }
      } else {
        std::vector<float> none;
        const Status late = seq.decode(1, &none);
        std::lock_guard lk(mu);
        o.late_decode_refused[comm.rank()] = late.code() == StatusCode::kFailedPrecondition;
      }
      std::lock_guard lk(mu);
      o.held[comm.rank()] = seq.shard_tokens();
      o.retired[comm.rank()] = !seq.holds_kv();
      if (comm.rank() == 0) {
        o.generated = gen;
        o.logits = steps;
      }
      if (!seq.holds_kv()) o.free_blocks[comm.rank()] = model->kv_pool().free_blocks();
    }
    std::lock_guard lk(mu);
    o.pool_blocks[comm.rank()] = model->kv_pool().num_blocks();
    return Status::OK();
  });
  return o;
}

TEST(ShardedSequenceShrink, DecodeOnFewerRanksGivesTheSameTokens) {
  const engine::ModelConfig cfg = sp_config(true);
  const int length = 1001, decode = 20;
  const auto prompt = random_tokens(length, 31, cfg.vocab_size);
  for (kernels::KvDtype dt : {kernels::KvDtype::kF32, kernels::KvDtype::kBF16, kernels::KvDtype::kInt8}) {
    auto ref_model = sp_model(cfg, 64u << 20, 16, dt);
    const Reference ref = reference(*ref_model, prompt, decode);
    for (auto [workers, degree] : {std::pair{2, 1}, {3, 1}, {3, 2}, {4, 2}, {4, 1}}) {
      const std::string what = std::string(kernels::kv_dtype_name(dt)) + " P=" + std::to_string(workers) + " -> " +
                               std::to_string(degree);
      const Outcome same = run_group(cfg, prompt, workers, 0, decode, 64u << 20, dt);
      const Outcome o = run_group(cfg, prompt, workers, degree, decode, 64u << 20, dt);
      for (int r = 0; r < workers; ++r) {
        ASSERT_TRUE(same.st[r].ok()) << what << ": " << same.st[r].to_string();
        ASSERT_TRUE(o.st[r].ok()) << what << " rank " << r << ": " << o.st[r].to_string();
      }
      // int8 re-quantizes what it receives: the same tokens, logits within a looser bound.
      const double tol = dt == kernels::KvDtype::kInt8 ? 2e-3 : kLogitTol;
      EXPECT_EQ(o.generated, same.generated) << what;
      EXPECT_EQ(o.generated, ref.generated) << what;
      ASSERT_EQ(o.logits.size(), same.logits.size());
      double worst = 0;
      for (size_t i = 0; i < o.logits.size(); ++i) worst = std::max(worst, max_abs_diff(o.logits[i], same.logits[i]));
      EXPECT_LE(worst, tol) << what;
      int64_t total = 0;
      for (int r = 0; r < workers; ++r) {
        EXPECT_EQ(o.retired[r], r >= degree) << what << " rank " << r;
        if (r >= degree) {
          EXPECT_EQ(o.held[r], 0) << what << " rank " << r;
          EXPECT_EQ(o.free_blocks[r], o.pool_blocks[r]) << what << " rank " << r << " kept blocks";
          EXPECT_TRUE(o.late_decode_refused[r]) << what << " rank " << r;
        }
        total += o.held[r];
      }
      EXPECT_EQ(total, length + decode) << what;  // every token on exactly one rank
    }
  }
}

// Receivers whose pools cannot take what arrives spill their oldest slots (their own and received
// ones, in no position order) to host memory and still decode the oracle's tokens; without a
// spill the move is refused with the pool named.
TEST(ShardedSequenceShrink, ReceiversSpillWhatTheirPoolsCannotTake) {
  const engine::ModelConfig cfg = sp_config(false);  // 512 bytes of f32 KV a token
  const int length = 1001, decode = 24;
  const auto prompt = random_tokens(length, 23, cfg.vocab_size);
  auto ref_model = sp_model(cfg);
  const Reference ref = reference(*ref_model, prompt, decode);
  const size_t pool_bytes = 30 * 16 * 512;  // 30 blocks: 480 tokens, less than the 1001 + 24 on one rank
  SpillOptions spill;
  spill.dram_bytes = int64_t{1} << 30;
  for (auto [workers, degree] : {std::pair{3, 1}, {4, 2}}) {
    const std::string what = "P=" + std::to_string(workers) + " -> " + std::to_string(degree);
    const Outcome o = run_group(cfg, prompt, workers, degree, decode, pool_bytes, kernels::KvDtype::kF32, spill);
    for (int r = 0; r < workers; ++r) ASSERT_TRUE(o.st[r].ok()) << what << " rank " << r << ": " << o.st[r].to_string();
    EXPECT_EQ(o.generated, ref.generated) << what;
    // o.logits[i]: what token i was chosen from (the prefill's, then decode step i - 1's).
    ASSERT_EQ(o.logits.size(), static_cast<size_t>(decode));
    double worst = max_abs_diff(o.logits[0], ref.prompt_logits.back());
    for (size_t i = 1; i < o.logits.size(); ++i)
      worst = std::max(worst, max_abs_diff(o.logits[i], ref.decode_logits[i - 1]));
    EXPECT_LE(worst, kLogitTol) << what;
    int64_t total = 0;
    for (int r = 0; r < workers; ++r) total += o.held[r];
    EXPECT_EQ(total, length + decode) << what;
  }
  const Outcome refused = run_group(cfg, prompt, 3, 1, decode, pool_bytes, kernels::KvDtype::kF32);
  ASSERT_EQ(refused.st[0].code(), StatusCode::kResourceExhausted) << refused.st[0].to_string();
  EXPECT_NE(refused.st[0].message().find("KV spill is off"), std::string::npos) << refused.st[0].to_string();
}

TEST(ShardedSequenceShrink, BadDegreesAndOrderAreRefused) {
  const engine::ModelConfig cfg = sp_config(false);
  auto comms = make_thread_group(1).value();
  auto model = sp_model(cfg);
  ShardedSequence seq(*model, *comms[0]);
  EXPECT_EQ(seq.shrink(1).code(), StatusCode::kFailedPrecondition);  // before prefill
  const auto prompt = random_tokens(40, 3, cfg.vocab_size);
  std::vector<float> logits;
  ASSERT_TRUE(seq.prefill(prompt, &logits).ok());
  EXPECT_EQ(seq.shrink(0).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(seq.shrink(2).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(seq.shrink(1).ok());  // the whole group: nothing moves
  EXPECT_TRUE(seq.holds_kv());
  EXPECT_TRUE(seq.decode(argmax(logits), &logits).ok());
}

}  // namespace
}  // namespace ragd::seqparallel
