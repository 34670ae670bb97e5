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
    for (const auto& [sid, w] : adapt_work_) l.work_ahead_tokens += w;
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
  q.history = adapt_history_.signals(r.rr.tenant, spec.name);
  const LoadSignals load = load_now();
  const AdaptChoice c = choose_adapt(a, *r.res.adapt, q, load);
  apply_adapt_choice(r.res, a.candidates[c.index]);
  r.usage.adapt = adapt_report(a, spec.name, *r.res.adapt, c, q, load);
  {
    // Its work is ahead of every run chosen after it, until its first token.
    std::lock_guard<std::mutex> lk(mu_);
    adapt_work_[r.sid] = c.chosen().work_tokens;
  }
}

void ExecutorImpl::adapt_reranked(const Run& r, bool kept_first) {
  adapt_history_.record_rerank(r.rr.tenant, r.usage.adapt->pipeline, kept_first);
}

void ExecutorImpl::adapt_first_token(const Run& r, Clock::time_point now) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    adapt_work_.erase(r.sid);
  }
  const AdaptReport& a = *r.usage.adapt;
  double predicted = 0;
  for (const auto& [name, e] : a.estimates)
    if (name == a.choice) predicted = e.ttft_q_ms;
  adapt_history_.record_ttft(r.rr.tenant, a.pipeline, ms_between(r.t_submit, now), predicted, a.ttft_quantile,
                             a.slo_ttft_ms);
}

}  // namespace ragd::pipelines
