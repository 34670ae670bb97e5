// The executor's side of the sequence-parallel route (sequence_parallel_route.h): which runs take
// it, handing a run over and taking it back, and the RunLoop calls the route makes from its thread.
// A run on the route stays in runs_ (its name, its cancellation) but never enters the scheduler;
// the route's thread owns its state until route_done, and the scheduler thread ends it.
#include <algorithm>
#include <string>

#include "executor_impl.h"
#include "ragd/common/log.h"

namespace ragd::pipelines {

bool ExecutorImpl::sp_route(const Run& r) const {
  return sp_ != nullptr && !r.iter && !r.spec_prefill &&
         sp_->takes(static_cast<int64_t>(r.prompt.size()), r.res.sampling.max_tokens);
}

void ExecutorImpl::start_sequence_parallel(Run& r) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    sp_runs_[r.sid] = &r;
  }
  sp_->submit(r.sid, *r.state);
}

ExecutorImpl::Run* ExecutorImpl::sp_run(uint64_t sid) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = sp_runs_.find(sid);
  return it == sp_runs_.end() ? nullptr : it->second;
}

void ExecutorImpl::route_done(uint64_t sid, SequenceParallelRoute::Outcome outcome) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    sp_done_.emplace_back(sid, std::move(outcome));
  }
  cv_.notify_all();
}

void ExecutorImpl::end_sequence_parallel(uint64_t sid, SequenceParallelRoute::Outcome o) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    sp_runs_.erase(sid);
    sp_cancelled_.erase(sid);
  }
  Run& r = *runs_.at(sid);
  r.timings.prefill_ms += o.prefill_ms;
  r.usage.sp_workers = o.degree;
  r.usage.sp_decode_workers = o.decode_degree;
  r.usage.kv_spilled_tokens = o.spill.dram_tokens + o.spill.ssd_tokens;
  {
    std::lock_guard<std::mutex> lk(stats_mu_);
    ExecutorStats::LongContext& lc = stats_.long_context;
    ++lc.runs;
    lc.workers = o.degree;
    lc.decode_workers = o.decode_degree;
    lc.spilled_tokens += static_cast<uint64_t>(r.usage.kv_spilled_tokens);
    lc.spilled_ssd_tokens += static_cast<uint64_t>(o.spill.ssd_tokens);
    lc.spill_ssd_bytes_read += static_cast<uint64_t>(o.spill.bytes_read);
    lc.pool_used_blocks = o.pool_used_blocks;
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
  Run* r = sp_run(sid);  // on the route until route_done: never null here
  return on_sampled(*r, logits);
}

bool ExecutorImpl::cancelled(uint64_t sid) {
  std::lock_guard<std::mutex> lk(mu_);
  if (sp_cancelled_.count(sid)) return true;
  auto it = sp_runs_.find(sid);
  // A cancel the scheduler thread has not picked up yet.
  return it != sp_runs_.end() && std::find(cancels_.begin(), cancels_.end(), it->second->rr.id) != cancels_.end();
}

void ExecutorImpl::prefill_progress(uint64_t, int64_t done, int64_t total, int64_t pool_used_blocks) {
  std::lock_guard<std::mutex> lk(stats_mu_);
  stats_.long_context.prefill_done = done < total ? done : 0;
  stats_.long_context.prefill_total = done < total ? total : 0;
  stats_.long_context.pool_used_blocks = pool_used_blocks;
}

}  // namespace ragd::pipelines
