// Which runs go to the long-context route (the sequence-parallel group, which may also spill KV
// out of full pools), and to how many of its workers: the one rule, used by the daemon's route
// (pipelines/src/sequence_parallel_route.h) and by the simulator's model of it (sim/).
//
//   takes:   with 2+ workers, a prompt of at least threshold_tokens whose chosen degree is above 1,
//            or whose KV exceeds one pool when the group spills; with one worker, a run whose KV
//            exceeds the pool when the group spills. Everything else stays in the batch.
//   plan:    with rates (seqparallel/perf_model.h), the degrees of prefill (P) and decode (D <= P)
//            the performance model predicts to finish the run soonest: prefill at P, then, when D <
//            P, the move of ranks [D, P)'s shards to the first D (ShardedSequence::shrink,
//            seqparallel::predict_shrink_s), then max_tokens decode steps at D; among degrees whose pools hold their
//            share (at P for the prefill, at D after the move) unless the group spills; on a tie the
//            fewer prefill workers, then no move. LoongServe's elastic scale-down between the
//            phases: decode reads all the KV every step, so past some length fewer workers with
//            more KV each beat the per-layer all-gather of many. Without rates: every worker for
//            both.
//
// Thread-safety: a value type; the methods are const and pure.
#pragma once

#include <cstdint>
#include <optional>

#include "ragd/engine/model_config.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/perf_model.h"

namespace ragd::pipelines {

// KV blocks a run of `tokens` (prompt + max new tokens) holds in one pool: its tokens' blocks plus
// the one a decode step may open. The batch's admission and the route's one-worker share use it.
inline int64_t run_kv_blocks(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size + 1; }

struct LongContextPolicy {
  int workers = 1;                   // the group's ranks (rank 0 included)
  int64_t threshold_tokens = 16384;  // prompts at least this long go to a group of 2+ workers
  int64_t pool_blocks = 0;           // each worker's KV pool
  int block_size = 16;
  int chunk_tokens = 0;              // prefill step per worker of a run that fits (0 = one step)
  seqparallel::PartitionKind partition = seqparallel::PartitionKind::kZigzag;
  bool spills = false;               // the group moves KV out of full pools
  std::optional<seqparallel::KernelRates> rates;  // elastic degree; none = every worker
  engine::ModelConfig model;
  double kv_bytes_per_token_layer = 0;  // the pool's K+V bytes of one token in one layer

  // KV blocks the fullest of `degree` workers holds for the run (seqparallel::kv_blocks_per_worker;
  // one worker: run_kv_blocks).
  int64_t blocks_per_worker(int64_t prompt_tokens, int64_t max_new_tokens, int degree) const;
  // More than a pool holds: the run spills.
  bool exceeds_pool(int64_t prompt_tokens, int64_t max_new_tokens, int degree) const {
    return blocks_per_worker(prompt_tokens, max_new_tokens, degree) > pool_blocks;
  }
  struct Plan {
    int prefill = 1;   // workers that prefill (and hold the run's KV until the move)
    int decode = 1;    // workers that decode after the move (== prefill: no move)
    double seconds = 0;  // predicted (0 without rates)
  };
  Plan plan(int64_t prompt_tokens, int64_t max_new_tokens) const;
  int degree(int64_t prompt_tokens, int64_t max_new_tokens) const { return plan(prompt_tokens, max_new_tokens).prefill; }
  // Predicted seconds to move the KV of ranks [to, from) to the first `to` (rates required;
  // seqparallel::predict_shrink_s).
  double move_s(int64_t prompt_tokens, int from, int to) const;
  bool takes(int64_t prompt_tokens, int64_t max_new_tokens) const;
  // The performance model's times of the run at `degree` workers (rates required).
  seqparallel::Prediction predict(int64_t prompt_tokens, int degree) const;
};

}  // namespace ragd::pipelines
