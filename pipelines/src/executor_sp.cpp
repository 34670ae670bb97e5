// The executor's sequence-parallel path: a prompt of at least RuntimeOptions::sp_threshold_tokens
// runs on the whole group (seqparallel/sp_group.h) from ring prefill to its last sharded decode
// step, on the scheduler thread. The group's workers are one long request's; the batch of short
// requests resumes when it ends. No KV reuse on this path (its prompt is not looked up or
// published): a prompt this long is one document read once.
#include <algorithm>
#include <string>
#include <thread>

#include "executor_impl.h"
#include "ragd/common/log.h"
#include "ragd/kernels/threads.h"

namespace ragd::pipelines {

bool ExecutorImpl::sp_route(const Run& r) const {
  return sp_ != nullptr && !sp_broken_.load() && !r.iter && !r.spec_prefill && static_cast<int64_t>(r.prompt.size()) >= opts_.sp_threshold_tokens;
}

void ExecutorImpl::run_sequence_parallel(Run& r) {
  const uint64_t sid = r.sid;
  seqparallel::SpDriver& sp = sp_->driver();
  r.usage.sp_workers = sp.workers();
  // This thread is one of the group's workers now: its share of the cores.
  const int threads_before = kernels::num_threads();
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  kernels::set_num_threads(std::max(1, static_cast<int>(hw) / sp.workers()));
  // Room in this worker's pool (cached KV that nobody pins goes to make space) before the group
  // starts: a collective that fails for lack of memory would abort the group. The same share as
  // accept() admitted the run with; with less room here than the helpers have, rank 0 stores fewer
  // of the decode tokens.
  const int64_t blocks = sp.kv_blocks_per_worker(r.state->prompt_len(), r.state->max_new_tokens());
  if (!kv_host_->ensure_free(static_cast<int>(blocks))) {
    kernels::set_num_threads(threads_before);
    return fail(sid, Status::ResourceExhausted("sequence-parallel run: rank 0's KV pool cannot free " +
                                               std::to_string(blocks) + " blocks for its shard (running requests hold them)"));
  }
  const auto t0 = Clock::now();
  std::vector<float> logits;
  Status st = sp.prefill(r.state->tokens(), &logits);
  r.timings.prefill_ms += ms_between(t0, Clock::now());
  std::string reason;
  while (st.ok()) {
    reason = on_sampled(r, logits);
    if (!reason.empty()) break;
    {
      std::lock_guard<std::mutex> lk(mu_);
      if (std::find(cancels_.begin(), cancels_.end(), r.rr.id) != cancels_.end()) reason = "cancelled";
    }
    if (!reason.empty()) break;
    st = sp.decode(r.state->tokens().back(), &logits);
  }
  if (st.ok()) st = sp.release();
  kernels::set_num_threads(threads_before);
  if (!st.ok()) {
    // A failed collective leaves the group aborted: later long prompts are refused, not hung.
    log::pipelines()->error("[{}] sequence-parallel run failed; long prompts run on one worker from now on: {}", r.rr.id,
                            st.to_string());
    sp_broken_.store(true);
    return fail(sid, st);
  }
  r.kv.reuse.mode = ReuseMode::kNone;  // nothing was looked up: every prompt token was computed
  r.kv.recomputed = r.state->prompt_len();
  finish(sid, reason);
}

}  // namespace ragd::pipelines
