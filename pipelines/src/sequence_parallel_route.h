// SequenceParallelRoute: the executor's route for prompts too long for one worker. A prompt of at
// least `threshold_tokens` runs on the whole group (seqparallel/sp_group.h) from ring prefill to
// its last sharded decode step, on the scheduler thread; the group's workers are that one run's,
// and the batch of short runs resumes when it ends. No KV reuse on this route (the prompt is not
// looked up or published): a prompt this long is one document read once. A failed collective
// leaves the group aborted: from then on long prompts run on one worker instead of hanging.
// When the group spills (seqparallel/kv_spill.h), a run whose KV does not fit the workers' pools
// takes this route too, whatever its length (a group of one worker exists for that alone), and
// its prefill runs in chunks between which the older KV leaves the pool.
//
// The unit owns the group and its broken flag; it talks to the run loop through RunLoop (the next
// token of a run, whether it was cancelled, room in rank 0's pool).
// Thread-safety: takes() may be called from any thread (the retrieval threads ask it before the
// reuse lookup); everything else runs on the scheduler thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>

#include "ragd/common/status.h"
#include "ragd/seqparallel/perf_model.h"
#include "ragd/seqparallel/sp_group.h"
#include "run_state.h"

namespace ragd::pipelines {

// KV blocks a run of `tokens` (prompt + max new tokens) holds in one pool: its tokens' blocks plus
// the one a decode step may open. The batch's admission and the route's one-worker share use it.
inline int64_t run_kv_blocks(int64_t tokens, int block_size) { return (tokens + block_size - 1) / block_size + 1; }

class SequenceParallelRoute {
 public:
  // What the route asks of the run loop (scheduler thread).
  class RunLoop {
   public:
    // Advances run `sid` by the token sampled from `logits`: "" = go on, else the finish reason.
    virtual std::string next_token(uint64_t sid, std::span<const float> logits) = 0;
    // The client cancelled run `sid` meanwhile.
    virtual bool cancelled(uint64_t sid) = 0;
    // At least `blocks` free blocks in rank 0's pool (unpinned cached KV may be evicted).
    virtual bool ensure_free(int64_t blocks) = 0;
    // Prefill progress of run `sid` (after each prefill step; done = total once it has ended, however).
    virtual void prefill_progress(uint64_t sid, int64_t done, int64_t total) = 0;

   protected:
    ~RunLoop() = default;
  };

  struct Limits {
    int64_t threshold_tokens = 16384;  // prompts at least this long go to a group of 2+ workers
    int64_t pool_blocks = 0;           // each worker's KV pool
    int block_size = 16;
    int chunk_tokens = 0;              // prefill step per worker of a run that fits (0 = one step)
    int spill_chunk_tokens = 8192;     // ... of a run that spills
    // Elastic degree: with rates (seqparallel/perf_model.h, e.g. `ragctl plan`'s), each run goes to
    // the number of workers the model predicts to finish it soonest (prefill + max_tokens decode
    // steps), among those whose pools hold its share unless the group spills; without, to all.
    std::optional<seqparallel::KernelRates> rates;
    engine::ModelConfig model;
    double kv_bytes_per_token_layer = 0;  // the pool's K+V bytes of one token in one layer
  };
  // `group`: its rank 0 is the executor's model, which must outlive this unit.
  SequenceParallelRoute(std::unique_ptr<seqparallel::SpGroup> group, const Limits& limits);

  // Whether a run of `prompt_tokens` + up to `max_new_tokens` goes to the group: the group is
  // healthy and the prompt long (2+ workers), or its KV exceeds the pools and the group spills.
  bool takes(int64_t prompt_tokens, int64_t max_new_tokens) const;
  // The group moves KV out of full pools (a run's KV may exceed them).
  bool spills() const { return spills_; }
  int workers() const { return workers_; }
  // The workers a run of this size goes to (Limits::rates), 1 .. workers().
  int degree(int64_t prompt_tokens, int64_t max_new_tokens) const;
  // KV blocks each worker holds for a run of this size at its degree: its admission share.
  int64_t kv_blocks_per_worker(int64_t prompt_tokens, int64_t decode_tokens) const {
    return group_->driver().kv_blocks_per_worker(prompt_tokens, decode_tokens, degree(prompt_tokens, decode_tokens));
  }

  struct Outcome {
    Status status;           // a failed collective (the group is aborted) or no room in rank 0's pool
    std::string reason;      // the finish reason when status is OK
    double prefill_ms = 0;   // the ring prefill's time
    int degree = 0;          // workers that held the run
    seqparallel::SpillStats spill;  // rank 0's spill (zeros when nothing left its pool)
  };
  // Runs `state` (prompt and sampling state of run `sid`) on the group to its end.
  Outcome run(uint64_t sid, RunState& state, RunLoop& loop);

 private:
  // KV blocks the fullest worker holds for the run: more than its pool = the run spills.
  bool exceeds_pool(int64_t prompt_tokens, int64_t max_new_tokens, int degree) const;

  std::unique_ptr<seqparallel::SpGroup> group_;
  const Limits limits_;
  const int workers_;
  const bool spills_;
  // Set (scheduler thread) when a collective failed and the group is aborted; read by any thread
  // through takes(), so group_ itself never changes while serving.
  std::atomic<bool> broken_{false};
};

}  // namespace ragd::pipelines
