// ExecutorImpl's KvHost: the scheduler's view of KV memory. Admission installs reusable KV through
// the reuse planner; pool pressure evicts cached KV by the kvstore's policy; preemption swaps a
// run's KV to host memory (kvstore::gather_kv) or drops it for recompute.
#include "executor_impl.h"

#include "ragd/common/log.h"

namespace ragd::pipelines {

namespace {
double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}
size_t host_bytes(const kvstore::HostKv& kv) { return (kv.k.size() + kv.v.size()) * sizeof(float); }
}  // namespace

bool ExecutorImpl::ensure_free(int blocks) { return planner_->reclaim(blocks); }

int ExecutorImpl::blocks_needed(uint64_t id, int n) const {
  return runs_.at(id)->table.blocks_needed(model_->kv_pool(), n);
}

int ExecutorImpl::admit(uint64_t id, int keep_free) {
  Run& r = *runs_.at(id);
  auto& pool = model_->kv_pool();
  const auto t0 = Clock::now();
  const int len = static_cast<int>(r.state->tokens().size());
  const int prompt_len = r.state->prompt_len();
  Installed in = planner_->install(r.reuse, r.table, [&](int n) { return ensure_free(keep_free + n); });
  int present = in.tokens;
  if (present >= len) {  // the last token is always fed, to get its logits
    int over = present - (len - 1);
    r.table.truncate(pool, len - 1);
    present = len - 1;
    for (int* t : {&in.ssd, &in.dram, &in.hbm}) {
      const int d = std::min(*t, over);
      *t -= d;
      over -= d;
    }
  }
  if (!r.admitted_once) {
    r.admitted_once = true;
    r.t_admit = Clock::now();
    r.usage.reused_hbm = in.hbm;
    r.usage.reused_dram = in.dram;
    r.usage.reused_ssd = in.ssd;
    r.timings.kv_load_ms += ms_between(t0, Clock::now());
  }
  r.usage.recomputed_tokens += std::min(len, prompt_len) - std::min(present, prompt_len);
  return present;
}

bool ExecutorImpl::swap_in(uint64_t id, int keep_free) {
  Run& r = *runs_.at(id);
  if (!r.swapped) return false;
  auto& pool = model_->kv_pool();
  const int bs = pool.layout().block_size;
  const int need = (r.swapped->num_tokens + bs - 1) / bs;
  if (!ensure_free(keep_free + need)) return false;
  if (!r.table.append(pool, r.swapped->num_tokens, r.swapped->k.data(), r.swapped->v.data())) return false;
  swap_bytes_ -= host_bytes(*r.swapped);
  r.swapped.reset();
  return true;
}

bool ExecutorImpl::preempt(uint64_t id, bool swap) {
  Run& r = *runs_.at(id);
  auto& pool = model_->kv_pool();
  const int n = r.table.num_tokens();
  const size_t bytes = 2 * static_cast<size_t>(n) * pool.layout().token_floats() * pool.layout().num_layers * sizeof(float);
  bool ok = swap && n > 0 && swap_bytes_ + bytes <= opts_.swap_bytes;
  if (ok) {
    Result<kvstore::HostKv> kv = kvstore::gather_kv(pool, r.table, 0, n);
    ok = kv.ok();
    if (ok) {
      r.swapped = std::move(kv).value();
      swap_bytes_ += host_bytes(*r.swapped);
    }
  }
  r.table.release(pool);
  log::pipelines()->debug("[{}] preempted ({} tokens, {})", r.rr.id, n, ok ? "swapped" : "dropped");
  return ok;
}

void ExecutorImpl::release(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  Run& r = *it->second;
  r.table.release(model_->kv_pool());
  if (r.swapped) swap_bytes_ -= host_bytes(*r.swapped);
  r.swapped.reset();
}

void ExecutorImpl::truncate(uint64_t id, int n) {
  Run& r = *runs_.at(id);
  if (r.table.num_tokens() > n) r.table.truncate(model_->kv_pool(), n);
}

}  // namespace ragd::pipelines
