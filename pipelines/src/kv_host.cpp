#include "kv_host.h"

#include "ragd/common/log.h"

namespace ragd::pipelines {

void PoolKvHost::detach(uint64_t id) {
  release(id);
  runs_.erase(id);
}

bool PoolKvHost::ensure_free(int blocks) { return planner_.reclaim(blocks); }

int PoolKvHost::blocks_needed(uint64_t id, int n) const { return at(id).table.blocks_needed(pool_, n); }

int PoolKvHost::admit(uint64_t id, int keep_free) {
  RunKv& r = at(id);
  const auto t0 = std::chrono::steady_clock::now();
  const int len = static_cast<int>(r.state->tokens().size());
  const int prompt_len = r.state->prompt_len();
  const std::span<const int32_t> prompt(r.state->tokens().data(), static_cast<size_t>(prompt_len));
  Installed in = planner_.install(r.reuse, prompt, r.table, [&](int n) { return ensure_free(keep_free + n); });
  int present = in.tokens;
  if (present >= len) {  // the last token is always fed, to get its logits
    int over = present - (len - 1);
    r.table.truncate(pool_, len - 1);
    present = len - 1;
    in.from.trim(over);
  }
  if (!r.admitted) {
    r.admitted = true;
    r.t_admit = std::chrono::steady_clock::now();
    r.reused = in;
    r.install_ms = std::chrono::duration<double, std::milli>(r.t_admit - t0).count();
  }
  r.recomputed += std::min(len, prompt_len) - std::min(present, prompt_len) + in.computed;
  return present;
}

bool PoolKvHost::swap_in(uint64_t id, int keep_free) {
  RunKv& r = at(id);
  if (!r.swapped) return false;
  const int bs = pool_.layout().block_size;
  const int need = (r.swapped->num_tokens + bs - 1) / bs;
  if (!ensure_free(keep_free + need)) return false;
  if (!r.table.append(pool_, r.swapped->num_tokens, r.swapped->k.data(), r.swapped->v.data())) return false;
  swap_bytes_ -= kvstore::host_kv_bytes(pool_.layout(), r.swapped->num_tokens);
  r.swapped.reset();
  return true;
}

bool PoolKvHost::preempt(uint64_t id, bool swap) {
  RunKv& r = at(id);
  const int n = r.table.num_tokens();
  const size_t bytes = kvstore::host_kv_bytes(pool_.layout(), n);
  bool ok = swap && n > 0 && swap_bytes_ + bytes <= swap_limit_;
  if (ok) {
    Result<kvstore::HostKv> kv = kvstore::gather_kv(pool_, r.table, 0, n);
    ok = kv.ok();
    if (ok) {
      r.swapped = std::move(kv).value();
      swap_bytes_ += bytes;
    }
  }
  r.table.release(pool_);
  log::pipelines()->debug("run {} preempted ({} tokens, {})", id, n, ok ? "swapped" : "dropped");
  return ok;
}

void PoolKvHost::release(uint64_t id) {
  auto it = runs_.find(id);
  if (it == runs_.end()) return;
  RunKv& r = *it->second;
  r.table.release(pool_);
  if (r.swapped) swap_bytes_ -= kvstore::host_kv_bytes(pool_.layout(), r.swapped->num_tokens);
  r.swapped.reset();
}

int PoolKvHost::extra_rows(uint64_t id) const {
  const auto it = runs_.find(id);
  if (it == runs_.end() || !it->second->reuse.pending) return 0;
  return it->second->reuse.pending->budget_rows(pool_.layout().num_layers);
}

void PoolKvHost::truncate(uint64_t id, int n) {
  RunKv& r = at(id);
  if (r.table.num_tokens() > n) r.table.truncate(pool_, n);
}

}  // namespace ragd::pipelines
