// SequenceParallelRoute: the executor's route for prompts too long for one worker. A prompt of at
// least `threshold_tokens` runs on the whole group (seqparallel/sp_group.h) from ring prefill to
// its last sharded decode step, on the route's own thread, beside the batch: the group's rank 0 is
// a sibling of the executor's model (engine::Model::sibling: the same weights, a KV pool and step
// state of its own), so short requests keep being served on the scheduler thread while a long one
// runs. The kernels' thread team goes to whichever thread asks first; the other steps on its own
// thread (kernels/threads.h), so on a machine whose cores the long run fills, the batch still
// gets a thread. One long run at a time; the next waits in the route's queue.
// No KV reuse on this route (the prompt is not looked up or published): a prompt this long is one
// document read once. A failed collective leaves the group aborted: from then on long prompts run
// on one worker instead of hanging.
// When the group spills (seqparallel/kv_spill.h), a run whose KV does not fit the workers' pools
// takes this route too, whatever its length (a group of one worker exists for that alone), and
// its prefill runs in chunks between which the older KV leaves the pool.
//
// The unit owns rank 0's model, the group and its broken flag; it talks to the run loop through
// RunLoop (the next token of a run, whether it was cancelled, its progress, its end).
// Thread-safety: takes(), degree(), kv_blocks_per_worker() may be called from any thread;
// submit() from the scheduler thread; RunLoop is called on the route's thread.
#pragma once

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <utility>

#include "ragd/common/status.h"
#include "ragd/pipelines/long_context_policy.h"
#include "ragd/seqparallel/perf_model.h"
#include "ragd/seqparallel/sp_group.h"
#include "run_state.h"

namespace ragd::pipelines {


class SequenceParallelRoute {
 public:
  struct Outcome {
    Status status;           // a failed collective (the group is aborted) or no room in rank 0's pool
    std::string reason;      // the finish reason when status is OK
    double prefill_ms = 0;   // the ring prefill's time
    int degree = 0;          // workers that prefilled the run
    int decode_degree = 0;   // workers that decoded it (fewer after a shrink)
    seqparallel::SpillStats spill;  // rank 0's spill (zeros when nothing left its pool)
    int64_t pool_used_blocks = 0;   // rank 0's pool after the run (0 unless something leaked)
  };

  // What the route asks of the run loop, on the route's thread.
  class RunLoop {
   public:
    // Advances run `sid` by the token sampled from `logits`: "" = go on, else the finish reason.
    virtual std::string next_token(uint64_t sid, std::span<const float> logits) = 0;
    // The client cancelled run `sid` meanwhile.
    virtual bool cancelled(uint64_t sid) = 0;
    // Prefill progress of run `sid` (after each prefill step; done = total once it has ended,
    // however) and the blocks in use in rank 0's pool.
    virtual void prefill_progress(uint64_t sid, int64_t done, int64_t total, int64_t pool_used_blocks) = 0;
    // Run `sid` left the route (its state is the loop's again).
    virtual void route_done(uint64_t sid, Outcome outcome) = 0;

   protected:
    ~RunLoop() = default;
  };

  struct Limits {
    // What goes to the group and at what degree (long_context_policy.h); its workers, spills and
    // partition are the group's (set by the constructor).
    LongContextPolicy policy;
    int spill_chunk_tokens = 8192;     // prefill step per worker of a run that spills
  };
  // `rank0`: the group's rank 0 (a sibling of the executor's model), owned here from now on.
  SequenceParallelRoute(std::unique_ptr<engine::Model> rank0, std::unique_ptr<seqparallel::SpGroup> group,
                        const Limits& limits, RunLoop& loop);
  // Stops the route's thread: a run still on it stops at its next step (cancelled) and is reported.
  ~SequenceParallelRoute();
  SequenceParallelRoute(const SequenceParallelRoute&) = delete;
  SequenceParallelRoute& operator=(const SequenceParallelRoute&) = delete;

  // Whether a run of `prompt_tokens` + up to `max_new_tokens` goes to the group: the group is
  // healthy and the prompt long (2+ workers), or its KV exceeds the pools and the group spills.
  bool takes(int64_t prompt_tokens, int64_t max_new_tokens) const;
  // The group moves KV out of full pools (a run's KV may exceed them).
  bool spills() const { return policy().spills; }
  int workers() const { return policy().workers; }
  // The workers a run of this size goes to (LongContextPolicy::degree), 1 .. workers().
  int degree(int64_t prompt_tokens, int64_t max_new_tokens) const { return policy().degree(prompt_tokens, max_new_tokens); }
  // KV blocks each worker holds for a run of this size: its admission share, at the prefill's degree
  // or, when the run decodes on fewer workers, at theirs (a receiver holds more).
  int64_t kv_blocks_per_worker(int64_t prompt_tokens, int64_t decode_tokens) const {
    return blocks_for(policy().plan(prompt_tokens, decode_tokens), prompt_tokens, decode_tokens);
  }
  const LongContextPolicy& policy() const { return limits_.policy; }

  // Queues run `sid` (prompt and sampling state in `state`, which the route uses until
  // RunLoop::route_done(sid)); it runs once the runs before it have ended.
  void submit(uint64_t sid, RunState& state);

 private:
  // kv_blocks_per_worker() of a run whose plan is known.
  int64_t blocks_for(const LongContextPolicy::Plan& p, int64_t prompt_tokens, int64_t decode_tokens) const {
    int64_t b = group_->driver().kv_blocks_per_worker(prompt_tokens, decode_tokens, p.prefill);
    if (p.decode < p.prefill) b = std::max(b, policy().blocks_per_worker(prompt_tokens, decode_tokens, p.decode));
    return b;
  }
  // Runs `state` on the group to its end (route thread).
  Outcome run(uint64_t sid, RunState& state);
  void work();  // the route's thread

  std::unique_ptr<engine::Model> rank0_;  // before group_: the group's driver uses it
  std::unique_ptr<seqparallel::SpGroup> group_;
  const Limits limits_;
  RunLoop& loop_;
  // Set (route thread) when a collective failed and the group is aborted; read by any thread
  // through takes(), so group_ itself never changes while serving.
  std::atomic<bool> broken_{false};
  std::mutex mu_;  // queue_, stop_
  std::condition_variable cv_;
  std::deque<std::pair<uint64_t, RunState*>> queue_;
  std::atomic<bool> stop_{false};
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace ragd::pipelines
