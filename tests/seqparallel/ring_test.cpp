// Ring-attention prefill and sharded decode over the threads transport, against one worker
// running the same model (kLogitTol):
//   - logits at every prompt position, for 1-4 workers, every partition, lengths not divisible by
//     2P, two model shapes (GQA 2 and GQA 3 with odd sizes), KV block sizes 16 and 7;
//   - greedy decode continues with the same 64 tokens and logits; each token's KV is stored on
//     exactly one worker, and each worker holds tokens_held_per_worker() tokens;
//   - a worker that holds no token (a prompt shorter than 2P) still relays and decodes;
//   - a 32k-token prompt of the `tiny` shape with 2 and 4 workers;
//   - a failing worker fails every worker instead of hanging them;
//   - over NCCL where two or more GPUs are present.
#include <gtest/gtest.h>

#include <mutex>
#include <string>

#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/ring_attention.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "ragd/seqparallel/thread_communicator.h"
#include "sp_fixture.h"

namespace ragd::seqparallel {
namespace {

using namespace testing;  // NOLINT

struct Case {
  bool odd = false;
  int workers = 2;
  PartitionKind kind = PartitionKind::kZigzag;
  int length = 257;
  int block_size = 16;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF32;
  bool nccl = false;  // the ranks talk over NCCL (one CUDA device each) instead of threads
  int chunk = 0;      // ShardedSequence's max_chunk_tokens (0: the whole shard in one step)
};

// The ranks of a case.
std::vector<std::unique_ptr<Communicator>> make_group(const Case& c) {
  if (!c.nccl) return make_thread_group(c.workers).value();
  auto g = make_nccl_group(c.workers);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(g).value() : std::vector<std::unique_ptr<Communicator>>{};
}

std::string name(const Case& c) {
  return std::string(partition_name(c.kind)) + " P=" + std::to_string(c.workers) + " L=" + std::to_string(c.length) +
         (c.odd ? " odd" : " tiny") + " bs=" + std::to_string(c.block_size) + " kv " +
         std::string(kernels::kv_dtype_name(c.kv_dtype)) + (c.nccl ? " nccl" : "") +
         (c.chunk > 0 ? " chunk=" + std::to_string(c.chunk) : "");
}

// Ring prefill with every position's logits; returns the worst deviation from the reference.
double ring_prefill_error(const Case& c, const Reference& ref, const std::vector<int32_t>& prompt,
                          int64_t* bytes_sent = nullptr) {
  const engine::ModelConfig cfg = sp_config(c.odd);
  auto comms = make_group(c);
  if (comms.empty()) return INFINITY;
  auto shards = partition(c.length, c.workers, c.kind).value();
  std::vector<int64_t> rows;
  for (auto& s : shards) rows.push_back(s.size());
  std::mutex mu;
  double worst = 0.0;
  auto st = run_ranks(comms, [&](Communicator& comm) -> Status {
    auto model = sp_model(cfg, 64u << 20, c.block_size, c.kv_dtype);
    if (model == nullptr) return Status::Internal("model");
    const Shard& mine = shards[comm.rank()];
    std::vector<int32_t> toks;
    for (int32_t p : mine.positions) toks.push_back(prompt[p]);
    ShardInput in{toks, mine.positions, engine::SeqStep::Logits::kAll};
    engine::BlockTable table;
    engine::StepOutput out;
    StepTimes t;
    RAGD_RETURN_IF_ERROR(ring_prefill(*model, comm, rows, in, &table, &out, &t));
    double w = 0.0;
    for (size_t i = 0; i < mine.positions.size(); ++i) {
      w = std::max(w, max_abs_diff(out.row(static_cast<int>(i)), ref.prompt_logits[mine.positions[i]]));
    }
    if (table.num_tokens() != mine.size()) return Status::Internal("shard table size");
    for (int i = 0; i < table.num_tokens(); ++i) {
      if (table.position(i) != mine.positions[i]) return Status::Internal("shard table positions");
    }
    table.release(model->kv_pool());
    std::lock_guard lock(mu);
    worst = std::max(worst, w);
    if (bytes_sent != nullptr) *bytes_sent += t.bytes_sent;
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << name(c) << ": " << s.to_string();
  return worst;
}

TEST(RingPrefill, EqualsOneWorkerAtEveryPosition) {
  for (bool odd : {false, true}) {
    const engine::ModelConfig cfg = sp_config(odd);
    for (int length : {257, 1001}) {
      auto prompt = random_tokens(length, 11 + length, cfg.vocab_size);
      auto ref_model = sp_model(cfg);
      const Reference ref = reference(*ref_model, prompt, 0);
      for (auto kind : {PartitionKind::kZigzag, PartitionKind::kContiguous, PartitionKind::kStriped}) {
        for (int workers : {1, 2, 3, 4}) {
          if (kind != PartitionKind::kZigzag && workers == 3) continue;
          Case c{odd, workers, kind, length, (workers == 3 ? 7 : 16)};
          const double e = ring_prefill_error(c, ref, prompt);
          EXPECT_LE(e, kLogitTol) << name(c);
        }
      }
    }
  }
}

// The sequence a case runs with `decode` decode steps (the KV share's input).
SpSequence sp_sequence(const Case& c, int decode) {
  SpSequence s;
  s.prompt_tokens = c.length;
  s.decode_tokens = decode;
  s.workers = c.workers;
  s.kind = c.kind;
  s.max_chunk_tokens = c.chunk;
  s.block_size = c.block_size;
  return s;
}

// Prefill + decode through ShardedSequence; the tokens each worker generated greedily (they must
// agree) and the worst logit deviation from the reference.
struct SpRun {
  std::vector<std::vector<int32_t>> generated;  // per rank
  double worst = 0.0;
  std::vector<int64_t> shard_tokens;
  std::vector<std::vector<int>> owners;  // per rank: owner of each decode step
  int64_t prefill_bytes = 0;             // sent by all ranks during the prefill
};

SpRun run_sharded(const Case& c, const std::vector<int32_t>& prompt, const Reference& ref, int decode,
                  size_t pool_bytes = 64u << 20) {
  const engine::ModelConfig cfg = sp_config(c.odd);
  auto comms = make_group(c);
  SpRun run;
  if (comms.empty()) return run;
  run.generated.resize(c.workers);
  run.shard_tokens.resize(c.workers);
  run.owners.resize(c.workers);
  std::mutex mu;
  auto st = run_ranks(comms, [&](Communicator& comm) -> Status {
    auto model = sp_model(cfg, pool_bytes, c.block_size, c.kv_dtype);
    if (model == nullptr) return Status::Internal("model");
    ShardedSequence seq(*model, comm, c.kind, c.chunk);
    std::vector<float> logits;
    RAGD_RETURN_IF_ERROR(seq.prefill(prompt, &logits));
    double w = max_abs_diff(logits, ref.prompt_logits.back());
    std::vector<int32_t> gen;
    std::vector<int> owners;
    for (int i = 0; i < decode; ++i) {
      gen.push_back(argmax(logits));
      RAGD_RETURN_IF_ERROR(seq.decode(gen.back(), &logits));
      if (i < static_cast<int>(ref.decode_logits.size())) w = std::max(w, max_abs_diff(logits, ref.decode_logits[i]));
    }
    std::lock_guard lock(mu);
    run.generated[comm.rank()] = gen;
    run.shard_tokens[comm.rank()] = seq.shard_tokens();
    run.prefill_bytes += seq.prefill_times().bytes_sent;
    run.worst = std::max(run.worst, w);
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << name(c) << ": " << s.to_string();
  return run;
}

// Chunked prefill (activations bounded by the chunk): the same logits and greedy continuation as
// one worker, with every rank's earlier chunks travelling again in later ring steps. Chunk 1 is the
// extreme (one token per rank per step); 37 leaves a short last range in which some ranks have
// nothing new and only send their earlier KV.
TEST(ShardedDecode, ChunkedPrefillEqualsOneWorker) {
  const engine::ModelConfig cfg = sp_config(true);
  auto prompt = random_tokens(257, 9, cfg.vocab_size);
  auto ref_model = sp_model(cfg);
  const Reference ref = reference(*ref_model, prompt, 16);
  for (int workers : {2, 3}) {
    for (auto kind : {PartitionKind::kZigzag, PartitionKind::kContiguous}) {
      if (kind != PartitionKind::kZigzag && workers == 3) continue;
      Case whole{true, workers, kind, 257};
      const SpRun base = run_sharded(whole, prompt, ref, 16);
      for (int chunk : {37, 1}) {
        Case c = whole;
        c.chunk = chunk;
        SpRun run = run_sharded(c, prompt, ref, 16);
        EXPECT_LE(run.worst, kLogitTol) << name(c);
        for (int r = 0; r < workers; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c) << " rank " << r;
        EXPECT_GT(run.prefill_bytes, base.prefill_bytes) << name(c) << ": earlier chunks travel again";
        EXPECT_EQ(run.shard_tokens, tokens_held_per_worker(sp_sequence(c, 16))) << name(c);
      }
    }
  }
}

// A rank whose shard is complete while another still has rows: its second step sends only its
// earlier KV (the relay path), and the other rank's late queries still see it.
TEST(RingPrefill, RankWithOnlyEarlierKvStillSendsIt) {
  const engine::ModelConfig cfg = sp_config(false);
  const int length = 41;
  auto prompt = random_tokens(length, 23, cfg.vocab_size);
  auto ref_model = sp_model(cfg);
  const Reference ref = reference(*ref_model, prompt, 0);
  auto shards = partition(length, 2, PartitionKind::kZigzag).value();
  // Zigzag over 2: rank 0 holds [0, a) and [b, 41), rank 1 [a, b). Steps in position order:
  // step 1: rank 0 [0, a), rank 1 [a, b); step 2: rank 0 [b, 41), rank 1 nothing.
  int64_t half0 = 0;
  while (shards[0].positions[half0] < shards[1].positions.front()) ++half0;
  const std::vector<std::vector<int64_t>> upto = {{half0, shards[1].size()}, {shards[0].size(), shards[1].size()}};
  auto comms = make_thread_group(2).value();
  std::mutex mu;
  double worst = 0.0;
  auto st = run_ranks(comms, [&](Communicator& comm) -> Status {
    auto model = sp_model(cfg);
    const int r = comm.rank();
    const Shard& mine = shards[r];
    std::vector<int32_t> toks;
    for (int32_t p : mine.positions) toks.push_back(prompt[p]);
    engine::BlockTable table;
    int64_t done = 0;
    double w = 0.0;
    for (const auto& u : upto) {
      ShardInput in{std::span<const int32_t>(toks).subspan(done, u[r] - done),
                    std::span<const int32_t>(mine.positions).subspan(done, u[r] - done), engine::SeqStep::Logits::kAll};
      engine::StepOutput out;
      RAGD_RETURN_IF_ERROR(ring_prefill(*model, comm, u, in, &table, &out, nullptr));
      for (int64_t i = 0; i < u[r] - done; ++i) {
        w = std::max(w, max_abs_diff(out.row(static_cast<int>(i)), ref.prompt_logits[mine.positions[done + i]]));
      }
      done = u[r];
    }
    if (table.num_tokens() != mine.size()) return Status::Internal("shard table size");
    table.release(model->kv_pool());
    std::lock_guard lock(mu);
    worst = std::max(worst, w);
    return Status::OK();
  });
  for (auto& s : st) EXPECT_TRUE(s.ok()) << s.to_string();
  EXPECT_LE(worst, kLogitTol);
}

// Positions of a later chunk must continue the shard: a step that goes back is refused on the
// rank that sees it, and the group fails together.
TEST(RingPrefill, ChunkThatGoesBackIsRefused) {
  const engine::ModelConfig cfg = sp_config(false);
  auto comms = make_thread_group(1).value();
  auto model = sp_model(cfg);
  engine::BlockTable table;
  const std::vector<int32_t> toks = {1, 2, 3}, pos1 = {0, 5, 9}, pos2 = {7};
  const std::vector<int64_t> rows1 = {3}, rows2 = {4};
  ASSERT_TRUE(ring_prefill(*model, *comms[0], rows1, ShardInput{toks, pos1}, &table, nullptr, nullptr).ok());
  const Status st = ring_prefill(*model, *comms[0], rows2, ShardInput{std::span(toks).subspan(0, 1), pos2}, &table,
                                 nullptr, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("ascend past"), std::string::npos) << st.message();
  table.release(model->kv_pool());
}

TEST(ShardedDecode, ContinuesLikeOneWorkerFor64Tokens) {
  for (bool odd : {false, true}) {
    const engine::ModelConfig cfg = sp_config(odd);
    auto prompt = random_tokens(777, 5, cfg.vocab_size);
    auto ref_model = sp_model(cfg);
    const Reference ref = reference(*ref_model, prompt, 64);
    for (int workers : {2, 4}) {
      for (auto kind : {PartitionKind::kZigzag, PartitionKind::kContiguous}) {
        Case c{odd, workers, kind, 777};
        SpRun run = run_sharded(c, prompt, ref, 64);
        EXPECT_LE(run.worst, kLogitTol) << name(c);
        for (int r = 0; r < workers; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c) << " rank " << r;
        int64_t total = 0;
        for (int64_t n : run.shard_tokens) total += n;
        EXPECT_EQ(total, 777 + 64) << name(c) << ": every token's KV on exactly one worker";
        // Exactly the share the executor sizes pools by (equal, otherwise empty pools here).
        EXPECT_EQ(run.shard_tokens, tokens_held_per_worker(sp_sequence(c, 64))) << name(c);
        // Most room first: the shards stay within one block of each other's size... plus rounding.
        const auto [lo, hi] = std::minmax_element(run.shard_tokens.begin(), run.shard_tokens.end());
        EXPECT_LE(*hi - *lo, 2 * c.block_size) << name(c);
      }
    }
  }
}

TEST(ShardedDecode, WorkerWithoutTokens) {
  const engine::ModelConfig cfg = sp_config(false);
  for (int length : {1, 3, 7}) {
    auto prompt = random_tokens(length, 99, cfg.vocab_size);
    auto ref_model = sp_model(cfg);
    const Reference ref = reference(*ref_model, prompt, 12);
    Case c{false, 4, PartitionKind::kZigzag, length};
    SpRun run = run_sharded(c, prompt, ref, 12);
    EXPECT_LE(run.worst, kLogitTol) << name(c);
    for (int r = 0; r < 4; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c);
    EXPECT_EQ(run.shard_tokens, tokens_held_per_worker(sp_sequence(c, 12))) << name(c);
  }
}

// The same over NCCL, where a machine has two or more GPUs (the KV blocks are this CPU
// engine's, staged through device memory); skipped elsewhere with the reason.
TEST(RingPrefill, OverNcclEqualsOneWorkerAndDecodesAlike) {
  int devices = 0;
  if (Status why = nccl_available(&devices); !why.ok()) GTEST_SKIP() << why.to_string();
  if (devices < 2) GTEST_SKIP() << "needs 2 CUDA devices for 2 NCCL ranks, has " << devices;
  const engine::ModelConfig cfg = sp_config(false);
  auto prompt = random_tokens(1001, 31, cfg.vocab_size);
  auto ref_model = sp_model(cfg);
  const Reference ref = reference(*ref_model, prompt, 16);
  for (int workers = 2; workers <= std::min(4, devices); workers += 2) {
    Case c{false, workers, PartitionKind::kZigzag, 1001};
    c.nccl = true;
    EXPECT_LE(ring_prefill_error(c, ref, prompt), kLogitTol) << name(c);
    SpRun run = run_sharded(c, prompt, ref, 16);
    EXPECT_LE(run.worst, kLogitTol) << name(c);
    for (int r = 0; r < workers; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c) << " rank " << r;
  }
}

// With bf16 or int8 KV, ring blocks travel in the pool's type, so a remote key is exactly the
// value its owner stores and the sharded run equals one worker of the same KV dtype; the ring sends
// half (bf16) or about a quarter (int8, scales included) of the f32 bytes. Rounding amplifies the
// ring's different summation order: a K value of the second layer that differs from one worker's by
// 1e-7 can round to the neighbouring stored step (int8: 1/127 of its row's largest value; bf16: 2^-8
// of the value itself), so the bounds are 1e-2 for int8 (measured 1.3e-3; int8 itself moves logits
// by ~0.5 % of their range, kv_dtype_test.cpp) and 2e-3 for bf16 (usually no value flips and the
// deviation is f32-like; the AddressSanitizer build, whose code differs, measured 1.6e-4), and
// greedy tokens must still agree.
TEST(RingPrefill, StoredKvDtypesEqualOneWorkerOfTheSameDtype) {
  const engine::ModelConfig cfg = sp_config(false);
  const int length = 1001;
  auto prompt = random_tokens(length, 17, cfg.vocab_size);
  int64_t f32_bytes = 0;
  {
    auto ref_model = sp_model(cfg);
    const Reference ref = reference(*ref_model, prompt, 0);
    EXPECT_LE(ring_prefill_error(Case{false, 3, PartitionKind::kZigzag, length, 7}, ref, prompt, &f32_bytes), kLogitTol);
  }
  for (auto dt : {kernels::KvDtype::kBF16, kernels::KvDtype::kInt8}) {
    auto ref_model = sp_model(cfg, 64u << 20, 16, dt);
    const Reference ref = reference(*ref_model, prompt, 32);
    Case c{false, 3, PartitionKind::kZigzag, length, 7, dt};
    int64_t bytes = 0;
    const double tol = dt == kernels::KvDtype::kInt8 ? 1e-2 : 2e-3;
    EXPECT_LE(ring_prefill_error(c, ref, prompt, &bytes), tol) << name(c);
    const double ratio = static_cast<double>(bytes) / f32_bytes;
    // Positions (4 bytes a token) travel in every format.
    EXPECT_LT(ratio, dt == kernels::KvDtype::kBF16 ? 0.53 : 0.36) << name(c);
    c.workers = 2;
    SpRun run = run_sharded(c, prompt, ref, 32);
    EXPECT_LE(run.worst, tol) << name(c);
    for (int r = 0; r < 2; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c);
    std::printf("%s KV: ring bytes %.3f of f32's, worst logit deviation from one worker %.2g\n",
                std::string(kernels::kv_dtype_name(dt)).c_str(), ratio, run.worst);
  }
}

TEST(RingPrefill, LongPromptTinyShape32k) {
  const engine::ModelConfig cfg = sp_config(false);
  const int length = 32 * 1024 + 5;
  auto prompt = random_tokens(length, 3, cfg.vocab_size);
  auto ref_model = sp_model(cfg, 256u << 20);
  const Reference ref = reference(*ref_model, prompt, 64);
  ref_model.reset();
  for (int workers : {2, 4}) {
    Case c{false, workers, PartitionKind::kZigzag, length};
    EXPECT_LE(ring_prefill_error(c, ref, prompt), kLogitTol) << name(c);
    SpRun run = run_sharded(c, prompt, ref, 64, 256u << 20);
    EXPECT_LE(run.worst, kLogitTol) << name(c);
    for (int r = 0; r < workers; ++r) EXPECT_EQ(run.generated[r], ref.generated) << name(c);
  }
}

TEST(RingPrefill, AFailingWorkerFailsTheGroup) {
  const engine::ModelConfig cfg = sp_config(false);
  auto comms = make_thread_group(3).value();
  auto prompt = random_tokens(50, 1, cfg.vocab_size);
  auto shards = partition(50, 3, PartitionKind::kZigzag).value();
  std::vector<int64_t> rows;
  for (auto& s : shards) rows.push_back(s.size());
  auto st = run_ranks(comms, [&](Communicator& comm) -> Status {
    auto model = sp_model(cfg);
    const Shard& mine = shards[comm.rank()];
    std::vector<int32_t> toks;
    for (int32_t p : mine.positions) toks.push_back(prompt[p]);
    if (comm.rank() == 1) toks.back() = cfg.vocab_size + 5;  // out of the vocabulary
    ShardInput in{toks, mine.positions, engine::SeqStep::Logits::kNone};
    engine::BlockTable table;
    Status s = ring_prefill(*model, comm, rows, in, &table, nullptr, nullptr);
    table.release(model->kv_pool());
    return s;
  });
  // Rank 1 reports its own error; the others learn which rank failed and why.
  EXPECT_NE(st[1].message().find("outside the vocabulary"), std::string::npos) << st[1].to_string();
  for (int r : {0, 2}) {
    EXPECT_NE(st[r].message().find("rank 1 failed its prefill"), std::string::npos) << st[r].to_string();
    EXPECT_NE(st[r].message().find("outside the vocabulary"), std::string::npos) << st[r].to_string();
  }
}

TEST(RingPrefill, RejectsInconsistentInputs) {
  const engine::ModelConfig cfg = sp_config(false);
  auto comms = make_thread_group(1).value();
  auto model = sp_model(cfg);
  std::vector<int32_t> toks = {1, 2, 3}, pos = {0, 2, 1};
  engine::BlockTable t;
  std::vector<int64_t> rows = {3};
  Status s = ring_prefill(*model, *comms[0], rows, ShardInput{toks, pos}, &t, nullptr, nullptr);
  EXPECT_NE(s.message().find("ascend"), std::string::npos) << s.to_string();
  auto comms2 = make_thread_group(1).value();
  rows = {4};
  pos = {0, 1, 2};
  s = ring_prefill(*model, *comms2[0], rows, ShardInput{toks, pos}, &t, nullptr, nullptr);
  EXPECT_NE(s.message().find("shard size after the step is 4"), std::string::npos) << s.to_string();
}

}  // namespace
}  // namespace ragd::seqparallel
