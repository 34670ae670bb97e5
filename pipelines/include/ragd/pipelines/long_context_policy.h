// Which runs go to the long-context route (the sequence-parallel group, which may also spill KV
// out of full pools), and to how many of its workers: the one rule, used by the daemon's route
// (pipelines/src/sequence_parallel_route.h) and by the simulator's model of it (sim/).
//
//   takes:   with 2+ workers, a prompt of at least threshold_tokens whose chosen degree is above 1,
//            or whose KV exceeds one pool when the group spills; with one worker, a run whose KV
//            exceeds the pool when the group spills. Everything else stays in the batch.
//   degree:  with rates (seqparallel/perf_model.h), the number of workers the performance model
//            predicts to finish the run soonest (prefill + max_tokens decode steps; the fewer on a
//            tie) among those whose pools hold its share, unless the group spills; without rates,
//            every worker.
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
  int degree(int64_t prompt_tokens, int64_t max_new_tokens) const;
  bool takes(int64_t prompt_tokens, int64_t max_new_tokens) const;
  // The performance model's times of the run at `degree` workers (rates required).
  seqparallel::Prediction predict(int64_t prompt_tokens, int degree) const;
};

}  // namespace ragd::pipelines
