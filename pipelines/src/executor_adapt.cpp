// The run loop's side of adaptive pipelines ([adapt], adapt_policy.h): the load the policy sees and
// the choice of a run's configuration, made on the retrieval thread after the first search (one-shot
// pipelines) or at submit (iterative pipelines, before any search).
#include "executor_impl.h"

namespace ragd::pipelines {

LoadSignals ExecutorImpl::load_now() const {
  LoadSignals l;
  {
    // The scheduler's snapshot (publish_stats, after each step): the running batch and the pool.
    std::lock_guard<std::mutex> lk(stats_mu_);
    l.running = stats_.running;
    l.free_blocks = static_cast<int64_t>(stats_.pool_free_blocks);
    l.block_size = static_cast<int>(stats_.pool_block_size);
  }
  {
    // Every other run submitted and not yet done: in retrieval or prompt building, loading KV,
    // waiting or running. Exact at any time, where the snapshot above lags until the next step.
    std::lock_guard<std::mutex> lk(mu_);
    l.ahead = std::max(0, static_cast<int>(live_names_.size()) - 1);
  }
  l.max_batch_tokens = batch_tokens_;
  return l;
}

void ExecutorImpl::adapt_run(Run& r, const std::vector<ContextDoc>* hits) {
  const PipelineSpec& spec = *r.res.spec;
  const AdaptSpec& a = *spec.adapt;
  const std::vector<int32_t> question = tok_->encode(r.rr.query, false, false);
  QuerySignals q;
  if (hits) {
    std::vector<float> scores;
    std::vector<std::vector<int32_t>> passages;
    for (const auto& d : *hits) {
      scores.push_back(d.source.score);
      passages.push_back(d.tokens);
    }
    q = query_signals(scores, passages, question);
  } else {
    q.question_tokens = static_cast<int>(question.size());
  }
  const LoadSignals load = load_now();
  const AdaptChoice c = choose_adapt(a, *r.res.adapt, q, load);
  apply_adapt_choice(r.res, a.candidates[c.index]);
  r.usage.adapt = adapt_report(a, spec.name, *r.res.adapt, c, q, load);
}

}  // namespace ragd::pipelines
