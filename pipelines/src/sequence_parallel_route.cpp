#include "sequence_parallel_route.h"

#include <algorithm>
#include <chrono>
#include <thread>
#include <vector>

#include "ragd/kernels/threads.h"

namespace ragd::pipelines {

SequenceParallelRoute::Outcome SequenceParallelRoute::run(uint64_t sid, RunState& state, RunLoop& loop) {
  using Clock = std::chrono::steady_clock;
  Outcome out;
  seqparallel::SpDriver& sp = group_->driver();
  // This thread is one of the group's workers now: its share of the cores.
  const int threads_before = kernels::num_threads();
  const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  kernels::set_num_threads(std::max(1, static_cast<int>(hw) / sp.workers()));
  // Room in this worker's pool (cached KV that nobody pins goes to make space) before the group
  // starts: a collective that fails for lack of memory would abort the group. The same share the
  // run was admitted with; with less room here than the helpers have, rank 0 stores fewer of the
  // decode tokens.
  const int64_t blocks = sp.kv_blocks_per_worker(state.prompt_len(), state.max_new_tokens());
  if (!loop.ensure_free(blocks)) {
    kernels::set_num_threads(threads_before);
    out.status = Status::ResourceExhausted("sequence-parallel run: rank 0's KV pool cannot free " +
                                           std::to_string(blocks) + " blocks for its shard (running requests hold them)");
    return out;
  }
  const auto t0 = Clock::now();
  std::vector<float> logits;
  Status st = sp.prefill(state.tokens(), &logits);
  out.prefill_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  while (st.ok()) {
    out.reason = loop.next_token(sid, logits);
    if (out.reason.empty() && loop.cancelled(sid)) out.reason = "cancelled";
    if (!out.reason.empty()) break;
    st = sp.decode(state.tokens().back(), &logits);
  }
  if (st.ok()) st = sp.release();
  kernels::set_num_threads(threads_before);
  if (!st.ok()) {
    broken_.store(true);  // the group is aborted
    out.status = st;
  }
  return out;
}

}  // namespace ragd::pipelines
