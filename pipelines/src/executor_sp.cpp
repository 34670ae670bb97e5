// The executor's side of the sequence-parallel route (sequence_parallel_route.h): which runs take
// it, the run's bookkeeping around it, and the RunLoop calls the route makes.
#include <algorithm>
#include <string>

#include "executor_impl.h"
#include "ragd/common/log.h"

namespace ragd::pipelines {

bool ExecutorImpl::sp_route(const Run& r) const {
  return sp_ != nullptr && !r.iter && !r.spec_prefill &&
         sp_->takes(static_cast<int64_t>(r.prompt.size()), r.res.sampling.max_tokens);
}

void ExecutorImpl::run_sequence_parallel(Run& r) {
  const uint64_t sid = r.sid;
  SequenceParallelRoute::Outcome o = sp_->run(sid, *r.state, *this);
  r.timings.prefill_ms += o.prefill_ms;
  r.usage.sp_workers = o.degree;
  r.usage.kv_spilled_tokens = o.spill.dram_tokens + o.spill.ssd_tokens;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    ExecutorStats::LongContext& lc = stats_.long_context;
    ++lc.runs;
    lc.workers = o.degree;
    lc.spilled_tokens += static_cast<uint64_t>(r.usage.kv_spilled_tokens);
    lc.spilled_ssd_tokens += static_cast<uint64_t>(o.spill.ssd_tokens);
    lc.spill_ssd_bytes_read += static_cast<uint64_t>(o.spill.bytes_read);
  }
  if (r.usage.kv_spilled_tokens > 0) {
    log::pipelines()->info("[{}] KV spilled: {} tokens to host memory, {} to SSD ({} MB read, {:.2f} s waiting for reads)",
                           r.rr.id, o.spill.dram_tokens, o.spill.ssd_tokens, o.spill.bytes_read / 1000000,
                           o.spill.wait_s);
  }
  if (!o.status.ok()) {
    if (o.status.code() != StatusCode::kResourceExhausted)
      log::pipelines()->error("[{}] sequence-parallel run failed; long prompts run on one worker from now on: {}",
                              r.rr.id, o.status.to_string());
    return fail(sid, o.status);
  }
  r.kv.reuse.mode = ReuseMode::kNone;  // nothing was looked up: every prompt token was computed
  r.kv.recomputed = r.state->prompt_len();
  finish(sid, o.reason);
}

std::string ExecutorImpl::next_token(uint64_t sid, std::span<const float> logits) {
  return on_sampled(*runs_.at(sid), logits);
}

bool ExecutorImpl::cancelled(uint64_t sid) {
  const std::string& id = runs_.at(sid)->rr.id;
  std::lock_guard<std::mutex> lk(mu_);
  return std::find(cancels_.begin(), cancels_.end(), id) != cancels_.end();
}

bool ExecutorImpl::ensure_free(int64_t blocks) { return kv_host_->ensure_free(static_cast<int>(blocks)); }

void ExecutorImpl::prefill_progress(uint64_t, int64_t done, int64_t total) {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.long_context.prefill_done = done < total ? done : 0;
  stats_.long_context.prefill_total = done < total ? total : 0;
}

}  // namespace ragd::pipelines
