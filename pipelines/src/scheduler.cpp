#include "ragd/pipelines/scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <unordered_set>

#include "ragd/common/check.h"

namespace ragd::pipelines {

Scheduler::Scheduler(SchedulerOptions opts) : opts_(opts) {
  opts_.max_batch_tokens = std::max(1, opts_.max_batch_tokens);
  opts_.max_running = std::max(1, opts_.max_running);
  opts_.mlfq_base_quantum = std::max(1, opts_.mlfq_base_quantum);
  opts_.mlfq_levels = std::max(1, opts_.mlfq_levels);
  opts_.srtf_preempt_ratio = std::max(1.0, opts_.srtf_preempt_ratio);
}

Status Scheduler::add(const SeqInfo& info) {
  if (seqs_.count(info.id)) return Status::InvalidArgument("scheduler: duplicate request id " + std::to_string(info.id));
  if (info.prompt_tokens <= 0) return Status::InvalidArgument("scheduler: prompt_tokens must be positive");
  if (info.max_new_tokens <= 0) return Status::InvalidArgument("scheduler: max_new_tokens must be positive");
  if (info.cached_tokens_hint < 0 || info.cached_tokens_hint > info.prompt_tokens)
    return Status::InvalidArgument("scheduler: cached_tokens_hint out of range [0, prompt_tokens]");
  lift_tenant(info.tenant);
  Seq s;
  s.info = info;
  s.arrival = next_arrival_++;
  s.arrival_step = step_;
  s.predicted_out = predictor_.predict(info.pipeline, info.prompt_tokens, info.max_new_tokens);
  if (opts_.policy == SchedPolicy::kSrtf && opts_.length_model)
    s.length_probs = opts_.length_model->probabilities({info.pipeline, info.text, info.prompt_tokens, info.max_new_tokens});
  seqs_.emplace(info.id, std::move(s));
  return Status::OK();
}

void Scheduler::lift_tenant(const std::string& tenant) {
  bool active = false;
  double min_active = std::numeric_limits<double>::infinity();
  for (const auto& [id, s] : seqs_) {
    if (s.info.tenant == tenant) active = true;
    min_active = std::min(min_active, vtc_[s.info.tenant]);
  }
  double& c = vtc_[tenant];
  if (!active && std::isfinite(min_active)) c = std::max(c, min_active);
}

double Scheduler::priority_key(const Seq& s) const {
  switch (opts_.policy) {
    case SchedPolicy::kFcfs: {
      if (s.state == State::kWaiting && opts_.cache_aware) {
        // RAGCache: cached / compute ratio, higher first.
        const int cached = std::min(s.info.cached_tokens_hint, s.len() - 1);
        return -static_cast<double>(cached) / std::max(1, s.len() - cached);
      }
      return static_cast<double>(s.arrival);
    }
    case SchedPolicy::kSrtf: {
      // Aged requests first, in arrival order (below every estimate, which is >= 1).
      if (srtf_aged(s)) return -1e12 + static_cast<double>(s.arrival);
      const int have = std::max(s.computed, opts_.cache_aware ? s.info.cached_tokens_hint : 0);
      const double prefill_steps = std::max(0, s.len() - have) / static_cast<double>(opts_.max_batch_tokens);
      return prefill_steps + remaining_estimate(s);
    }
    case SchedPolicy::kSjf: {
      const int have = std::max(s.computed, opts_.cache_aware ? s.info.cached_tokens_hint : 0);
      const double prefill_steps = std::max(0, s.len() - have) / static_cast<double>(opts_.max_batch_tokens);
      return prefill_steps + std::max(1.0, s.predicted_out - s.generated);
    }
    case SchedPolicy::kMlfq: {
      const double level = std::floor(std::log2(static_cast<double>(s.served) / opts_.mlfq_base_quantum + 1.0));
      return std::min<double>(level, opts_.mlfq_levels - 1);
    }
    case SchedPolicy::kFair: {
      auto it = vtc_.find(s.info.tenant);
      return it == vtc_.end() ? 0.0 : it->second;
    }
  }
  return 0;
}

double Scheduler::remaining_estimate(const Seq& s) const {
  if (opts_.oracle_lengths && s.info.oracle_output_tokens > 0)
    return std::max(1, s.info.oracle_output_tokens - s.generated);
  if (!s.length_probs.empty()) return opts_.length_model->remaining(s.length_probs, s.generated, s.info.max_new_tokens);
  return std::max(1.0, s.predicted_out - s.generated);
}

bool Scheduler::srtf_aged(const Seq& s) const { return s.waited > opts_.srtf_starvation_window; }

double Scheduler::predicted_remaining(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? -1.0 : remaining_estimate(it->second);
}

Scheduler::TenantLoad Scheduler::tenant_load() const {
  TenantLoad load;
  for (const auto& [id, s] : seqs_) {
    int& r = load.running[s.info.tenant];  // every tenant with a request gets an entry
    if (s.state == State::kRunning) ++r;
    if (s.state == State::kWaiting && !s.held) ++load.waiting[s.info.tenant];
  }
  load.tenants = static_cast<int>(load.running.size());
  return load;
}

int Scheduler::tenant_limit(const TenantLoad& load) const {
  if (load.tenants < 2) return opts_.max_running;
  if (opts_.policy == SchedPolicy::kFair) return std::max(1, opts_.max_running / load.tenants);
  return std::clamp((opts_.tenant_share_percent * opts_.max_running + 99) / 100, 1, opts_.max_running);
}

bool Scheduler::starved(const Seq& s) const {
  return s.state == State::kWaiting && step_ - s.arrival_step > opts_.waiting_window();
}

bool Scheduler::higher_priority(const Seq& a, const Seq& b) const {
  const double ka = priority_key(a), kb = priority_key(b);
  if (ka != kb) return ka < kb;
  return a.arrival < b.arrival;
}

std::vector<Scheduler::Seq*> Scheduler::ordered(State st) {
  std::vector<Seq*> v;
  for (auto& [id, s] : seqs_)
    if (s.state == st && !s.held) v.push_back(&s);
  std::sort(v.begin(), v.end(), [&](const Seq* a, const Seq* b) {
    if (st == State::kWaiting) {
      const bool sa = starved(*a), sb = starved(*b);
      if (sa != sb) return sa;
      if (sa) return a->arrival < b->arrival;
    }
    return higher_priority(*a, *b);
  });
  return v;
}

bool Scheduler::preempt_one(KvHost& host, const Seq* keep, StepPlan* plan, std::vector<uint64_t>* planned) {
  Seq* victim = nullptr;
  for (auto& [id, s] : seqs_) {
    if (s.state != State::kRunning || &s == keep) continue;
    if (std::find(planned->begin(), planned->end(), id) != planned->end()) continue;
    if (keep && !higher_priority(*keep, s)) continue;
    if (!victim || higher_priority(*victim, s)) victim = &s;
  }
  if (!victim) return false;
  preempt(*victim, host, plan);
  return true;
}

void Scheduler::preempt(Seq& s, KvHost& host, StepPlan* plan) {
  if (host.preempt(s.info.id, opts_.preemption == PreemptMode::kSwap)) {
    s.state = State::kSwapped;
    ++stats_.swaps_out;
  } else {  // dropped: recomputed from scratch when admitted again
    s.state = State::kWaiting;
    s.computed = 0;
    s.arrival_step = step_;
    ++stats_.drops;
  }
  plan->preempted.push_back(s.info.id);
}

StepPlan Scheduler::schedule(KvHost& host) {
  ++step_;
  ++stats_.steps;
  for (auto& [id, s] : seqs_)
    if (s.state != State::kRunning && !s.held) ++s.waited;
  StepPlan plan;
  int budget = opts_.max_batch_tokens;
  int reserved = 0;  // blocks promised to planned items, not yet allocated by the host
  std::vector<uint64_t> planned;

  auto fits = [&](uint64_t id, int n) {
    const int nb = host.blocks_needed(id, n);
    return nb == 0 || host.ensure_free(reserved + nb);
  };
  // Largest n' <= n whose blocks fit without preemption.
  auto fit_tokens = [&](uint64_t id, int n) {
    if (fits(id, n)) return n;
    int lo = 0, hi = n;  // fits(lo) holds (0 tokens need no block), fits(hi) does not
    while (hi - lo > 1) {
      const int mid = (lo + hi) / 2;
      if (fits(id, mid)) lo = mid; else hi = mid;
    }
    return lo;
  };
  auto add_item = [&](Seq& s, int n, int draft = 0) {
    const int nb = host.blocks_needed(s.info.id, n + draft);
    reserved += nb;
    BatchItem it;
    it.id = s.info.id;
    it.start = s.computed;
    it.n = n + draft;
    it.draft = draft;
    it.sample = s.computed + n == s.len();
    it.prefill = !(s.generated > 0 && s.len() - s.computed == 1);
    n += draft;
    plan.items.push_back(it);
    plan.tokens += n;
    budget -= n;
    planned.push_back(s.info.id);
  };
  auto running_count = [&]() {
    int n = 0;
    for (const auto& [id, s] : seqs_) n += s.state == State::kRunning;
    return n;
  };

  // 1 + 2. Running requests by priority: decodes first, then prefill chunks.
  for (int phase = 0; phase < 2; ++phase) {
    for (Seq* s : ordered(State::kRunning)) {
      if (s->state != State::kRunning) continue;  // preempted earlier in this plan
      if (std::find(planned.begin(), planned.end(), s->info.id) != planned.end()) continue;
      const bool decode = s->generated > 0 && s->len() - s->computed == 1;
      if (decode != (phase == 0)) continue;
      if (budget <= 0) break;
      const int want = std::min(budget, s->len() - s->computed);
      RAGD_CHECK(want > 0) << "running request " << s->info.id << " has nothing to feed";
      bool ok = fits(s->info.id, want);
      while (!ok && preempt_one(host, s, &plan, &planned)) ok = fits(s->info.id, want);
      if (ok) {
        // A draft rides along when the budget and the pool take it as they are (never preempts).
        const int draft = decode && s->draft > 0 && budget >= 1 + s->draft && fits(s->info.id, 1 + s->draft) ? s->draft : 0;
        s->draft = 0;
        add_item(*s, want, draft);
        continue;
      }
      if (!decode) {
        const int n = fit_tokens(s->info.id, want);
        if (n > 0) {
          add_item(*s, n);
          continue;
        }
        // A prefill that cannot move waits for blocks unless nothing at all is planned.
        if (!plan.items.empty() || running_count() > 1) continue;
      }
      // Nothing of lower priority left to preempt: this request gives way.
      preempt(*s, host, &plan);
    }
  }

  // Tenant share: a tenant at its limit while another tenant's request waits.
  auto tenant_held_back = [&](const std::string& tenant) {
    const TenantLoad load = tenant_load();
    if (load.tenants < 2 || load.running.at(tenant) < tenant_limit(load)) return false;
    for (const auto& [t, n] : load.waiting)
      if (t != tenant && n > 0) return true;
    return false;
  };

  // 3. Swapped requests come back first when their KV fits (they never preempt others).
  bool blocked = false;
  const bool srtf = opts_.policy == SchedPolicy::kSrtf;
  std::vector<Seq*> waiting_now;
  if (srtf) waiting_now = ordered(State::kWaiting);
  for (Seq* s : ordered(State::kSwapped)) {
    // srtf: a shorter waiting request goes before a swapped one (it is admitted in 4).
    if (srtf && !waiting_now.empty() && higher_priority(*waiting_now.front(), *s)) break;
    if (budget <= 0 || running_count() >= opts_.max_running) {
      blocked = true;
      break;
    }
    if (std::find(plan.preempted.begin(), plan.preempted.end(), s->info.id) != plan.preempted.end()) {
      blocked = true;  // swapped out in this very plan: not back before the next step
      break;
    }
    if (tenant_held_back(s->info.tenant)) continue;  // its slot goes to the other tenant's request
    if (!host.swap_in(s->info.id, reserved)) {
      blocked = true;
      break;
    }
    s->state = State::kRunning;
    ++stats_.swaps_in;
    const int n = fit_tokens(s->info.id, std::min(budget, s->len() - s->computed));
    if (n > 0) add_item(*s, n);
  }

  // Takes a running request out of this plan (if planned) and preempts it, to free its slot.
  auto evict = [&](Seq& victim) {
    auto it = std::find_if(plan.items.begin(), plan.items.end(), [&](const BatchItem& b) { return b.id == victim.info.id; });
    if (it != plan.items.end()) {
      budget += it->n;
      plan.tokens -= it->n;
      reserved -= host.blocks_needed(it->id, it->n);
      plan.items.erase(it);
      planned.erase(std::find(planned.begin(), planned.end(), victim.info.id));
    }
    preempt(victim, host, &plan);
  };
  // MLFQ: a waiting request of a strictly better level takes the slot of the most-served running
  // one (which is swapped out, or dropped, and resumes when it is best again).
  auto demote_for = [&](const Seq& w) {
    Seq* victim = nullptr;
    for (auto& [id, r] : seqs_)
      if (r.state == State::kRunning && priority_key(r) > priority_key(w) && (!victim || higher_priority(*victim, r)))
        victim = &r;
    if (!victim) return false;
    evict(*victim);
    return true;
  };
  // SRTF: a waiting request takes the slot of the running request with the longest predicted
  // remaining work, when that is more than srtf_preempt_ratio times its own; an aged request is
  // never the victim, and does not preempt either (it takes the next slot that frees: preempting
  // for aged requests would age the preempted ones in turn, a convoy).
  auto srtf_room_for = [&](const Seq& w) {
    if (srtf_aged(w)) return false;
    const double kw = priority_key(w);
    Seq* victim = nullptr;
    for (auto& [id, r] : seqs_) {
      if (r.state != State::kRunning || srtf_aged(r)) continue;
      const double kr = priority_key(r);
      if (kr > opts_.srtf_preempt_ratio * std::max(kw, 1e-9) && (!victim || higher_priority(*victim, r))) victim = &r;
    }
    if (!victim) return false;
    evict(*victim);
    ++stats_.srtf_preemptions;
    return true;
  };
  // Tenant share: a waiting request of a tenant below its limit takes the slot of the
  // lowest-priority running request of the tenant furthest above the limit.
  auto share_room_for = [&](const Seq& w) {
    const TenantLoad load = tenant_load();
    const int limit = tenant_limit(load);
    if (load.tenants < 2 || load.running.at(w.info.tenant) >= limit) return false;
    const std::string* over = nullptr;
    int most = limit;
    for (const auto& [t, n] : load.running)  // above the limit: most starts at it; ties to the smaller name
      if (t != w.info.tenant && (n > most || (over && n == most && t < *over))) {
        most = n;
        over = &t;
      }
    if (!over) return false;
    Seq* victim = nullptr;
    for (auto& [id, r] : seqs_)
      if (r.state == State::kRunning && r.info.tenant == *over && (!victim || higher_priority(*victim, r))) victim = &r;
    if (!victim) return false;
    evict(*victim);
    ++stats_.share_preemptions;
    return true;
  };

  // 4. Waiting requests in policy order (starved ones first; nothing passes a starved one, unless
  // its tenant is at its share and the other request's tenant is not).
  // Tenants found without a share slot while every slot is taken: their later requests are passed
  // over without counting again, until a slot is freed (one count per tenant, not per request).
  std::unordered_set<std::string> no_share_room;
  for (Seq* s : ordered(State::kWaiting)) {
    if (budget <= 0) break;
    if (std::find(plan.preempted.begin(), plan.preempted.end(), s->info.id) != plan.preempted.end()) continue;
    if (running_count() >= opts_.max_running) {
      const bool mlfq_room = opts_.policy == SchedPolicy::kMlfq && !starved(*s) && demote_for(*s);
      const bool srtf_room = !mlfq_room && srtf && srtf_room_for(*s);
      const bool room = mlfq_room || srtf_room || (!no_share_room.count(s->info.tenant) && share_room_for(*s));
      if (room) no_share_room.clear();
      if (!room) {
        // Nothing passes a starved request (an aged one under srtf) for a slot it cannot have.
        if ((starved(*s) || (srtf && srtf_aged(*s))) && !tenant_held_back(s->info.tenant)) break;
        no_share_room.insert(s->info.tenant);
        continue;  // a later request of another tenant may still take a share slot
      }
    } else if (blocked && opts_.policy != SchedPolicy::kMlfq && !srtf) {
      break;  // swapped requests wait for KV and come back first
    }
    const int present = host.admit(s->info.id, reserved);
    RAGD_CHECK(present >= 0 && present < s->len())
        << "host admitted request " << s->info.id << " with " << present << " of " << s->len() << " tokens";
    s->computed = present;
    s->state = State::kRunning;
    // A repair riding in this first prefill step takes its share of the budget (at least one token
    // of the prompt still goes, so a large repair cannot keep its run out forever).
    const int extra = host.extra_rows(s->info.id);
    const int n = fit_tokens(s->info.id, std::min(std::max(1, budget - extra), s->len() - present));
    if (n == 0) {
      host.release(s->info.id);
      s->state = State::kWaiting;
      s->computed = 0;
      if (starved(*s) || (srtf && srtf_aged(*s))) break;
      continue;
    }
    ++stats_.admitted;
    add_item(*s, n);
    budget -= std::min(extra, std::max(0, budget));
  }
  RAGD_CHECK(plan.tokens <= opts_.max_batch_tokens);
  for (auto& [id, s] : seqs_) s.draft = 0;  // a draft is for the plan it was set before
  return plan;
}

void Scheduler::commit(const StepPlan& plan) {
  for (const BatchItem& it : plan.items) {
    auto f = seqs_.find(it.id);
    if (f == seqs_.end()) continue;  // cancelled while the step ran
    Seq& s = f->second;
    RAGD_CHECK(s.computed == it.start) << "request " << it.id << " committed out of order";
    s.computed += it.n;
    s.served += it.n;
    if (it.prefill) stats_.tokens_prefill += it.n; else stats_.tokens_decode += it.n;
    vtc_[s.info.tenant] += it.prefill ? opts_.fair_prefill_weight * it.n : opts_.fair_decode_weight * it.n;
    if (it.sample) ++s.generated;
  }
}

void Scheduler::set_draft(uint64_t id, int n) {
  auto it = seqs_.find(id);
  if (it != seqs_.end()) it->second.draft = std::max(0, n);
}

void Scheduler::settle_draft(uint64_t id, int draft, int accepted, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  Seq& s = it->second;
  RAGD_CHECK(accepted >= 0 && accepted <= draft) << "request " << id << ": " << accepted << " of " << draft << " drafts accepted";
  s.generated += accepted;
  s.computed -= draft - accepted;
  s.served -= draft - accepted;
  if (draft > accepted) host.truncate(id, s.computed);
  stats_.tokens_decode -= draft - accepted;
}

void Scheduler::finish(uint64_t id, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return;
  const Seq& s = it->second;
  predictor_.observe(s.info.pipeline, s.info.prompt_tokens, s.info.max_new_tokens, s.generated);
  host.release(id);
  seqs_.erase(it);
  ++stats_.finished;
}

bool Scheduler::cancel(uint64_t id, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return false;
  host.release(id);
  seqs_.erase(it);
  ++stats_.cancelled;
  return true;
}

Status Scheduler::restart(uint64_t id, int prompt_tokens, int generated, int keep_kv, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return Status::NotFound("scheduler: unknown request " + std::to_string(id));
  if (prompt_tokens <= 0 || generated < 0 || keep_kv < 0)
    return Status::InvalidArgument("scheduler: restart needs a positive prompt and non-negative counts");
  Seq& s = it->second;
  s.info.prompt_tokens = prompt_tokens;
  s.generated = generated;
  if (s.state == State::kSwapped) {
    host.release(id);
    s.state = State::kWaiting;
    s.computed = 0;
    s.arrival_step = step_;
    return Status::OK();
  }
  const int kv = std::min({s.computed, keep_kv, s.len() - 1});
  if (kv < s.computed) host.truncate(id, kv);
  s.computed = kv;
  return Status::OK();
}

void Scheduler::hold(uint64_t id, bool held) {
  auto it = seqs_.find(id);
  if (it != seqs_.end()) it->second.held = held;
}

bool Scheduler::runnable() const {
  for (const auto& [id, s] : seqs_)
    if (!s.held) return true;
  return false;
}

Status Scheduler::rewrite(uint64_t id, int from, int new_len, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return Status::NotFound("scheduler: unknown request " + std::to_string(id));
  Seq& s = it->second;
  if (s.state == State::kSwapped) return Status::FailedPrecondition("scheduler: request is swapped out");
  if (from < s.info.prompt_tokens || from > s.len() || new_len <= from)
    return Status::InvalidArgument("scheduler: rewrite range [" + std::to_string(from) + ", " + std::to_string(new_len) +
                                   ") is outside the generated part of the sequence");
  const int kv = std::min(s.computed, from);
  if (kv < s.computed) host.truncate(id, kv);
  s.computed = kv;
  s.generated = new_len - s.info.prompt_tokens;
  return Status::OK();
}

Status Scheduler::truncate(uint64_t id, int len, KvHost& host) {
  auto it = seqs_.find(id);
  if (it == seqs_.end()) return Status::NotFound("scheduler: unknown request " + std::to_string(id));
  Seq& s = it->second;
  if (s.state == State::kSwapped) return Status::FailedPrecondition("scheduler: request is swapped out");
  if (len < s.info.prompt_tokens || len > s.len())
    return Status::InvalidArgument("scheduler: truncate to " + std::to_string(len) + " tokens outside [prompt, length]");
  const int kv = std::min(s.computed, len - 1);
  if (kv < s.computed) host.truncate(id, kv);
  s.computed = kv;
  s.generated = len - s.info.prompt_tokens;
  return Status::OK();
}

int Scheduler::seq_len(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? -1 : it->second.len();
}
int Scheduler::kv_tokens(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? -1 : it->second.computed;
}
int Scheduler::generated(uint64_t id) const {
  auto it = seqs_.find(id);
  return it == seqs_.end() ? -1 : it->second.generated;
}

SchedulerStats Scheduler::stats() const {
  SchedulerStats s = stats_;
  s.waiting = s.running = s.swapped = 0;
  for (const auto& [id, q] : seqs_) {
    s.waiting += q.state == State::kWaiting;
    s.running += q.state == State::kRunning;
    s.swapped += q.state == State::kSwapped;
  }
  return s;
}

}  // namespace ragd::pipelines
