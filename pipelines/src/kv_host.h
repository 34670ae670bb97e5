// PoolKvHost: the scheduler's KvHost over the engine's KV pool. Admission installs reusable KV
// through the reuse planner (pool blocks shared, DRAM / SSD nodes appended); pool pressure evicts
// cached KV by the kvstore's policy; preemption swaps a run's KV to host memory
// (kvstore::gather_kv, bounded by swap_limit_bytes) or drops it for recompute; rollback truncates.
//
// Each run's KV state is a RunKv owned by the run and attached here for its lifetime.
// Thread-safety: not thread-safe; the scheduler thread only (it owns the pool).
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <unordered_map>

#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/pipelines/scheduler.h"

#include "reuse_planner.h"
#include "run_state.h"

namespace ragd::pipelines {

// One run's KV as the host sees it.
struct RunKv {
  engine::BlockTable table;                // KV in the pool: tokens [0, table.num_tokens())
  std::optional<kvstore::HostKv> swapped;  // KV while swapped out
  ReusePlan reuse;
  const RunState* state = nullptr;         // the sequence (prompt + generated); set before attach
  // Filled by admissions: the first one's reuse and time, every one's recompute.
  bool admitted = false;
  std::chrono::steady_clock::time_point t_admit;
  double install_ms = 0;
  Installed reused;
  int recomputed = 0;  // prompt tokens whose KV had to be computed
};

class PoolKvHost final : public KvHost {
 public:
  PoolKvHost(engine::KvPool& pool, ReusePlanner& planner, size_t swap_limit_bytes)
      : pool_(pool), planner_(planner), swap_limit_(swap_limit_bytes) {}

  void attach(uint64_t id, RunKv* kv) { runs_[id] = kv; }  // not owned
  void detach(uint64_t id);                                // releases its KV first
  size_t swap_bytes() const { return swap_bytes_; }

  bool ensure_free(int blocks) override;
  int blocks_needed(uint64_t id, int n) const override;
  int admit(uint64_t id, int keep_free) override;
  bool swap_in(uint64_t id, int keep_free) override;
  bool preempt(uint64_t id, bool swap) override;
  void release(uint64_t id) override;  // unknown ids are ignored
  void truncate(uint64_t id, int n) override;
  int extra_rows(uint64_t id) const override;

 private:
  RunKv& at(uint64_t id) const { return *runs_.at(id); }

  engine::KvPool& pool_;
  ReusePlanner& planner_;
  const size_t swap_limit_;
  size_t swap_bytes_ = 0;
  std::unordered_map<uint64_t, RunKv*> runs_;
};

}  // namespace ragd::pipelines
