#include "replica.h"

#include <algorithm>

#include "long_context_route.h"

namespace ragd::sim {

namespace {
uint64_t sched_id(size_t i) { return static_cast<uint64_t>(i) + 1; }
size_t req_index(uint64_t id) { return static_cast<size_t>(id - 1); }
}  // namespace

Replica::Replica(int index, const SimOptions& opts, const CostModel& cost, SharedRemote* remote,
                 const std::vector<SimRequest>& reqs, std::vector<SimRecord>& recs, std::vector<LiveRequest>& live)
    : index_(index),
      opts_(opts),
      cost_(cost),
      reqs_(reqs),
      recs_(recs),
      live_(live),
      sched_(opts.scheduler),
      host_(opts.kv, cost, remote),
      retrieval_free_at_(static_cast<size_t>(std::max(1, opts.retrieval_threads)), 0.0),
      run_speed_(cost.run_speed_factor(index, opts.noise_seed)) {
  host_.set_scheduler(&sched_);
  if (opts.long_context.has_value())
    route_ = std::make_unique<SimLongContextRoute>(index, opts, cost, reqs, recs, live);
}

Replica::~Replica() = default;

bool Replica::to_route(size_t i, double now, EventQueue& q) {
  if (route_ == nullptr || !route_->takes(reqs_[i])) return false;
  --queued_;  // waits in the route's queue, not the scheduler's
  route_->submit(i, now, q);
  return true;
}

void Replica::on_route_done(size_t i, double now, EventQueue& q) {
  route_->on_done(i, now, q);
  --outstanding_;
  --tenant_outstanding_[reqs_[i].tenant];
  finished_.push_back(i);
}

bool Replica::accept(size_t i, double now, EventQueue& q) {
  SimRecord& rec = recs_[i];
  rec.replica = index_;
  const SimRequest& req = reqs_[i];
  if (tenant_outstanding_.size() <= static_cast<size_t>(req.tenant)) tenant_outstanding_.resize(req.tenant + 1, 0);
  int& mine = tenant_outstanding_[req.tenant];
  if (queued_ >= opts_.max_queue || (opts_.max_concurrent_per_tenant > 0 && mine >= opts_.max_concurrent_per_tenant)) {
    rec.refused = true;
    return false;
  }
  ++mine;
  ++outstanding_;
  ++queued_;
  // An arrival at a stepping engine: its HTTP, retrieval and prompt building take a core from the
  // engine's threads; the next step is that much longer (an idle engine loses nothing).
  if (stepping_) contention_s_ += cost_.arrival_contention_s();
  const SimRequest& r = reqs_[i];
  // request_s: the request's way to the scheduler beside the engine (it occupies neither the
  // engine nor a retrieval thread), after its retrieval.
  const double beside = cost_.serving.request_s;
  if (!r.retrieval) {  // a plain prompt: no retrieval, nothing to look up
    if (beside > 0) {
      q.push(now + beside, EventKind::kRetrievalDone, index_, i);
      return true;
    }
    if (to_route(i, now, q)) return true;
    host_.advance(now);
    host_.lookup(r, now);
    add(i, 0, now, q);
    return true;
  }
  auto it = std::min_element(retrieval_free_at_.begin(), retrieval_free_at_.end());
  const double start = std::max(now, *it);
  *it = start + cost_.serving.retrieval_s;
  rec.retrieval_ms = (*it - now) * 1e3;
  q.push(*it + beside, EventKind::kRetrievalDone, index_, i);
  return true;
}

void Replica::on_retrieval_done(size_t i, double now, EventQueue& q) {
  if (to_route(i, now, q)) return;
  host_.advance(now);  // copies finished by now are in their tier
  const LookupOutcome lo = host_.lookup(reqs_[i], now);
  recs_[i].kv_load_ms = (lo.ready_s - now) * 1e3;
  if (lo.ready_s > now) {
    live_[i].hint_tokens = lo.hint_tokens;
    q.push(lo.ready_s, EventKind::kLoadDone, index_, i);
    return;
  }
  add(i, lo.hint_tokens, now, q);
}

void Replica::on_load_done(size_t i, double now, EventQueue& q) {
  add(i, live_[i].hint_tokens, now, q);
}

void Replica::add(size_t i, int hint_tokens, double now, EventQueue& q) {
  const SimRequest& r = reqs_[i];
  pipelines::SeqInfo si;
  si.id = sched_id(i);
  si.tenant = r.tenant == 0 ? "default" : "t" + std::to_string(r.tenant);
  si.prompt_tokens = r.prompt_tokens;
  si.max_new_tokens = max_new_tokens(r);
  si.text = r.text;
  si.pipeline = r.pipeline;
  si.oracle_output_tokens = r.answer_tokens;  // read only with SchedulerOptions::oracle_lengths
  si.cached_tokens_hint = std::min(hint_tokens, r.prompt_tokens);
  Status st = sched_.add(si);
  RAGD_CHECK(st.ok()) << st.to_string();
  live_[i].added_s = now;
  if (!stepping_) start_step(now, q);
}

double Replica::step_seconds(const pipelines::StepPlan& plan) {
  // The engine's own work (dense layers, attention, KV reads, sampled rows), slowed by what else
  // runs on the replica's cores (engine_slowdown), then the serving terms beside it.
  double e = cost_.dense_s(plan.tokens);
  double s = cost_.serving.step_overhead_s;
  for (const pipelines::BatchItem& it : plan.items) {
    if (it.prefill) {
      e += cost_.prefill_attention_s(it.start, it.n) + cost_.serving.prefill_context_s * it.start;
      s += cost_.serving.prefill_token_s * it.n;
    } else {
      e += cost_.decode_attention_s(it.start + 1);
    }
    if (live_[req_index(it.id)].admit_s < 0) s += cost_.serving.admit_s;  // admitted by this step
    if (it.sample) e += cost_.serving.sample_s;
  }
  const double noise = cost_.step_noise_factor(index_, static_cast<uint64_t>(steps_), opts_.noise_seed);
  s += e * (1.0 + cost_.serving.engine_slowdown) * noise;
  return s * run_speed_ + host_.take_transfer_s();
}

void Replica::start_step(double now, EventQueue& q) {
  host_.advance(now);
  plan_ = sched_.schedule(host_);
  if (plan_.items.empty()) {
    if (stepping_) idle_since_ = now;
    stepping_ = false;
    contention_s_ = 0;  // the work ran on the cores the idle engine left
    host_.take_transfer_s();
    host_.engine_idle(now);
    return;
  }
  const bool woke = !stepping_ && now - idle_since_ >= cost_.serving.wake_after_s;
  double wake = 0;
  if (woke) {  // drawn for the first request this step admits (a resumed one's own id otherwise)
    uint64_t key = plan_.items.front().id;
    for (const pipelines::BatchItem& it : plan_.items)
      if (live_[req_index(it.id)].admit_s < 0) {
        key = it.id;
        break;
      }
    wake = cost_.wake_draw(reqs_[req_index(key)].id, opts_.noise_seed);
  }
  stepping_ = true;
  ++steps_;
  host_.engine_busy(now);
  // The copy that was running when the engine woke up shares the cores with this step. A drawn
  // wake-up below zero (the measured time under the modelled steps) shortens the step, never
  // below nothing. Requests that arrived during the previous step lengthen this one
  // (arrival_cpu_s each).
  const double dt = std::max(0.0, step_seconds(plan_) + host_.take_background_s() + wake) + contention_s_;
  contention_s_ = 0;
  busy_s_ += dt;
  for (const pipelines::BatchItem& it : plan_.items) {
    host_.reserve(it.id, it.start + it.n);
    LiveRequest& l = live_[req_index(it.id)];
    if (l.admit_s < 0) {
      l.admit_s = now;
      recs_[req_index(it.id)].queue_ms = (now - l.added_s) * 1e3;
      --queued_;
    }
  }
  q.push(now + dt, EventKind::kStepDone, index_, 0);
}

void Replica::on_step_done(double now, EventQueue& q) {
  sched_.commit(plan_);
  for (const pipelines::BatchItem& it : plan_.items) {
    if (!sched_.contains(it.id)) continue;
    const size_t i = req_index(it.id);
    const SimRequest& r = reqs_[i];
    SimRecord& rec = recs_[i];
    LiveRequest& l = live_[i];
    if (it.sample) {
      if (l.generated == 0) {
        rec.ttft_ms = (now - r.arrival_s + cost_.network_leg_s(r.id, opts_.noise_seed)) * 1e3;
        rec.prefill_ms = (now - l.admit_s) * 1e3;
      } else if (opts_.keep_itl) {
        rec.itl_ms.push_back((now - l.last_token_s) * 1e3);
      }
      l.last_token_s = now;
      ++l.generated;
    }
    if (!host_.published(it.id) && sched_.kv_tokens(it.id) >= r.prompt_tokens) host_.publish(it.id);
    if (l.generated >= r.answer_tokens) {
      rec.reused = host_.reused(it.id);
      rec.tokens = l.generated;
      rec.prompt_tokens = r.prompt_tokens;
      rec.e2e_ms = (now - r.arrival_s + cost_.network_leg_s(r.id, opts_.noise_seed)) * 1e3;
      rec.ok = true;
      sched_.finish(it.id, host_);
      host_.forget(it.id);
      --outstanding_;
      --tenant_outstanding_[r.tenant];
      finished_.push_back(i);
    }
  }
  start_step(now, q);
}

}  // namespace ragd::sim
