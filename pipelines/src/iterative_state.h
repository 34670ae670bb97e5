// IterState: what an iterative run (iterative.h) carries besides its RunState: the current
// context, the search that runs ahead (none / piperag) or the unverified speculations (speculative
// / both) with their checkpoints, the per-run speculation cache and stride model, and the counters
// reported in Usage. The logic that drives it is IterativeRag's (iterative_rag.h), which owns it.
// Thread-safety: not thread-safe; used on the scheduler thread (and by the retrieval thread that
// prepares the run, before the run is handed over).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/iterative.h"

#include "overlap_models.h"
#include "run_state.h"
#include "speculation_cache.h"

namespace ragd::pipelines {

// The result of one real search: hits in score order (as many as were fetched), with their stored
// embeddings when the run speculates.
struct SearchOutcome {
  Status status;
  std::vector<ContextDoc> hits;
  std::vector<std::vector<float>> vectors;  // speculative runs: one per hit
  std::vector<int64_t> lists;               // ... and its IVF list (-1: not an IVF index)
  double ms = 0;                            // wall time of the search
  int nprobe = 0;
};

// A batch of searches finished on the retrieval pool, on its way to the scheduler thread.
struct SearchDone {
  uint64_t sid = 0;
  uint64_t ticket = 0;
  uint64_t epoch = 0;  // the run's rollback epoch when it was issued (stale after a rollback)
  std::vector<SearchOutcome> results;  // one per query, in order
};

struct IterState {
  using Clock = std::chrono::steady_clock;
  IterativeParams params;
  int k = 4;            // passages in the context
  int nprobe = 8;       // the pipeline's nprobe (searches that must equal the sequential run's)
  std::string question;
  std::vector<ContextDoc> context;  // the current passages, in prompt order (by chunk id)
  int next_boundary = 0;            // generated-token count of the next retrieval
  uint64_t epoch = 0;               // bumped by every rollback
  uint64_t next_ticket = 1;

  // none / piperag: the search whose result is the context from `boundary` on.
  struct Ahead {
    uint64_t ticket = 0;
    int boundary = 0;
    std::optional<SearchOutcome> result;
  };
  std::optional<Ahead> ahead;
  int waiting_boundary = -1;        // none / piperag: the boundary the run stands at, waiting

  // speculative / both: boundaries decoded under a speculated context, oldest first.
  struct Pending {
    int boundary = 0;
    std::string query;
    std::vector<uint64_t> spec_ids;  // speculated passages (sorted chunk ids)
    std::vector<uint64_t> prev_ids;  // the context before this boundary (sorted chunk ids)
    std::optional<RunState::Checkpoint> cp;  // the run at the boundary, before the speculated context
    uint64_t ticket = 0;             // 0 = its real search is not issued yet
    bool forced_miss = false;        // tests: verify as wrong whatever the search says
    bool applied = true;             // false: the run waits here for the search (speculation not worth it)
    std::optional<SearchOutcome> result;
  };
  std::deque<Pending> pending;
  bool verifying = false;           // speculative: a batch verification is in flight
  Clock::time_point verify_since;
  SpeculationCache cache;
  SpecStride stride;
  Clock::time_point last_boundary;  // speculation step timing

  // Decode speed of this run (piperag's budget): EWMA of the time between its tokens.
  double ms_per_token = 0;
  Clock::time_point last_token;

  // Holding: the run stands still (Scheduler::hold) since wait_since.
  bool held = false;
  Clock::time_point wait_since;

  // Usage.
  int searches = 0, context_changes = 0, hits = 0, misses = 0, rollbacks = 0, rolled_back = 0;
  double wait_ms = 0;

};

}  // namespace ragd::pipelines
