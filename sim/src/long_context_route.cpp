#include "long_context_route.h"

#include <algorithm>

#include "ragd/seqparallel/perf_model.h"

namespace ragd::sim {

int max_new_tokens(const SimRequest& r) {
  return r.max_tokens > 0 ? std::max(r.max_tokens, r.answer_tokens) : r.answer_tokens;
}

SimLongContextRoute::SimLongContextRoute(int replica, const SimOptions& opts, const CostModel& cost,
                                         const std::vector<SimRequest>& reqs, std::vector<SimRecord>& recs,
                                         std::vector<LiveRequest>& live)
    : replica_(replica), opts_(opts), cost_(cost), reqs_(reqs), recs_(recs), live_(live), policy_(*opts.long_context) {
  policy_.pool_blocks = opts.kv.pool_blocks;
  policy_.block_size = opts.kv.block_size;
}

bool SimLongContextRoute::takes(const SimRequest& r) const {
  return policy_.takes(r.prompt_tokens, max_new_tokens(r));
}

void SimLongContextRoute::submit(size_t i, double now, EventQueue& q) {
  live_[i].added_s = now;
  queue_.push_back(i);
  if (!busy_) start(now, q);
}

void SimLongContextRoute::start(double now, EventQueue& q) {
  if (queue_.empty()) {
    busy_ = false;
    return;
  }
  busy_ = true;
  const size_t i = queue_.front();
  queue_.pop_front();
  const SimRequest& r = reqs_[i];
  const pipelines::LongContextPolicy& pol = policy_;
  const pipelines::LongContextPolicy::Plan plan = pol.plan(r.prompt_tokens, max_new_tokens(r));
  auto predicted = [&](int d) {
    return seqparallel::predict(pol.model, cost_.engine, r.prompt_tokens, d, pol.kv_bytes_per_token_layer);
  };
  const seqparallel::Prediction pre = predicted(plan.prefill), dec = predicted(plan.decode);
  SimRecord& rec = recs_[i];
  LiveRequest& l = live_[i];
  rec.sp_degree = plan.prefill;
  rec.sp_decode_degree = plan.decode;
  rec.queue_ms = (now - l.added_s) * 1e3;
  rec.prefill_ms = pre.prefill_s * 1e3;
  l.admit_s = now;
  // The prefill's logits give the first token; then the KV moves to the decode's workers (when
  // fewer: the plan had rates), and every further token is one sharded decode step there.
  const double first = now + pre.prefill_s;
  const double move = plan.decode < plan.prefill ? pol.move_s(r.prompt_tokens, plan.prefill, plan.decode) : 0.0;
  rec.ttft_ms = (first - r.arrival_s + cost_.network_leg_s(r.id, opts_.noise_seed)) * 1e3;
  const int steps = std::max(0, r.answer_tokens - 1);
  if (opts_.keep_itl) {
    rec.itl_ms.assign(static_cast<size_t>(steps), dec.decode_s * 1e3);
    if (steps > 0) rec.itl_ms[0] += move * 1e3;
  }
  l.generated = r.answer_tokens;
  l.last_token_s = first + (steps > 0 ? move : 0.0) + steps * dec.decode_s;
  q.push(l.last_token_s, EventKind::kRouteDone, replica_, i);
}

void SimLongContextRoute::on_done(size_t i, double now, EventQueue& q) {
  const SimRequest& r = reqs_[i];
  SimRecord& rec = recs_[i];
  rec.tokens = r.answer_tokens;
  rec.prompt_tokens = r.prompt_tokens;
  rec.e2e_ms = (now - r.arrival_s + cost_.network_leg_s(r.id, opts_.noise_seed)) * 1e3;
  rec.ok = true;
  start(now, q);
}

}  // namespace ragd::sim
