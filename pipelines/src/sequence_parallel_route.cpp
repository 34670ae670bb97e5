#include "sequence_parallel_route.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <vector>

#include "ragd/kernels/threads.h"

namespace ragd::pipelines {

namespace {

SequenceParallelRoute::Limits with_group(SequenceParallelRoute::Limits l, seqparallel::SpGroup& group) {
  l.policy.workers = group.workers();
  l.policy.spills = group.driver().spills();
  l.policy.partition = group.driver().kind();
  return l;
}

}  // namespace

SequenceParallelRoute::SequenceParallelRoute(std::unique_ptr<engine::Model> rank0,
                                             std::unique_ptr<seqparallel::SpGroup> group, const Limits& limits,
                                             RunLoop& loop)
    : rank0_(std::move(rank0)),
      group_(std::move(group)),
      limits_(with_group(limits, *group_)),
      loop_(loop),
      thread_([this] { work(); }) {}

SequenceParallelRoute::~SequenceParallelRoute() {
  {
    std::lock_guard<std::mutex> l(mu_);
    stop_.store(true);
  }
  cv_.notify_all();
  thread_.join();
}

void SequenceParallelRoute::submit(uint64_t sid, RunState& state) {
  {
    std::lock_guard<std::mutex> l(mu_);
    queue_.emplace_back(sid, &state);
  }
  cv_.notify_all();
}

void SequenceParallelRoute::work() {
  // This thread is one of the group's workers: its share of the cores (per thread: the scheduler
  // thread keeps its own count).
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  kernels::set_num_threads(std::max(1, static_cast<int>(hw) / workers()));
  for (;;) {
    std::pair<uint64_t, RunState*> next;
    {
      std::unique_lock<std::mutex> l(mu_);
      cv_.wait(l, [&] { return stop_.load() || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, nothing left
      next = queue_.front();
      queue_.pop_front();
    }
    Outcome o;
    if (stop_.load()) {
      o.reason = "cancelled";  // the route is going away: queued runs end without starting
    } else {
      o = run(next.first, *next.second);
    }
    loop_.route_done(next.first, std::move(o));
  }
}

bool SequenceParallelRoute::takes(int64_t prompt_tokens, int64_t max_new_tokens) const {
  // A group that lost a rank while idle says so before a run is sent to it.
  if (broken_.load() || !group_->driver().health().ok()) return false;
  return policy().takes(prompt_tokens, max_new_tokens);
}

SequenceParallelRoute::Outcome SequenceParallelRoute::run(uint64_t sid, RunState& state) {
  using Clock = std::chrono::steady_clock;
  Outcome out;
  seqparallel::SpDriver& sp = group_->driver();
  // The share the run was admitted with; with less room here than the helpers have, rank 0 stores
  // fewer of the decode tokens.
  const LongContextPolicy& pol = policy();
  const LongContextPolicy::Plan plan = pol.plan(state.prompt_len(), state.max_new_tokens());
  const int d = plan.prefill;
  out.degree = d;
  out.decode_degree = plan.decode;
  int64_t blocks = blocks_for(plan, state.prompt_len(), state.max_new_tokens());
  // Spilling: the run's share exceeds a pool at the prefill's degree, or at the decode's once the
  // KV moved there.
  const bool spill = pol.spills && (pol.exceeds_pool(state.prompt_len(), state.max_new_tokens(), d) ||
                                    pol.exceeds_pool(state.prompt_len(), state.max_new_tokens(), plan.decode));
  // A run that spills needs room for two prefill steps (each at most a quarter of the pool); the
  // rest of its KV leaves the pool anyway.
  int chunk = pol.chunk_tokens;
  if (spill) {
    chunk = pol.chunk_tokens > 0 ? pol.chunk_tokens : limits_.spill_chunk_tokens;
    chunk = static_cast<int>(std::clamp<int64_t>(pol.pool_blocks * pol.block_size / 4, 1, chunk));
    blocks = std::min<int64_t>(blocks, 2 * ((chunk + pol.block_size - 1) / pol.block_size) + 2);
  }
  sp.set_max_chunk_tokens(chunk);
  // Rank 0's pool is the route's own and holds one run at a time: the previous run freed it.
  if (static_cast<int64_t>(rank0_->kv_pool().free_blocks()) < blocks) {
    out.status = Status::ResourceExhausted("sequence-parallel run: rank 0's KV pool has " +
                                           std::to_string(rank0_->kv_pool().free_blocks()) + " free blocks, its shard needs " +
                                           std::to_string(blocks));
    return out;
  }
  auto stopped = [&] { return stop_.load() || loop_.cancelled(sid); };
  auto used_blocks = [&] {
    const engine::KvPool& pool = rank0_->kv_pool();
    return static_cast<int64_t>(pool.num_blocks() - pool.free_blocks());
  };
  const auto t0 = Clock::now();
  std::vector<float> logits;
  // Between prefill steps: progress for /metrics, and a client that went away stops the prefill
  // (every worker frees its shard; the group serves on).
  Status st = sp.prefill(
      state.tokens(), &logits,
      [&](int64_t done, int64_t total) {
        loop_.prefill_progress(sid, done, total, used_blocks());
        return !stopped();
      },
      d);
  out.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  loop_.prefill_progress(sid, state.prompt_len(), state.prompt_len(), used_blocks());  // ended (done, stopped or failed)
  if (st.code() == StatusCode::kCancelled) {
    out.reason = "cancelled";
    out.pool_used_blocks = used_blocks();
    return out;
  }
  // Decode on fewer workers where the model says it pays: their shards move to the first ones.
  if (st.ok() && plan.decode < d) st = sp.shrink(plan.decode);
  while (st.ok()) {
    out.reason = loop_.next_token(sid, logits);
    if (out.reason.empty() && stopped()) out.reason = "cancelled";
    if (!out.reason.empty()) break;
    st = sp.decode(state.tokens().back(), &logits);
  }
  if (sp.current() != nullptr) out.spill = sp.current()->spill_stats();
  // Every rank's shard goes, rank 0's even after a failure (the others' then fail or are gone).
  Status released = sp.release();
  if (st.ok()) st = released;
  out.pool_used_blocks = used_blocks();
  if (!st.ok()) {
    broken_.store(true);  // the group is aborted
    out.status = st;
  }
  return out;
}

}  // namespace ragd::pipelines
