// Scheduler invariants over a simulated KV pool and a deterministic fake model whose next token is
// a hash of the KV it holds, so wrong positions, lost KV or bad preemption change the tokens.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "ragd/pipelines/scheduler.h"

namespace ragd::pipelines {
namespace {

int32_t fake_next(const std::vector<int32_t>& kv) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < kv.size(); ++i) h = (h ^ (static_cast<uint64_t>(kv[i]) + i * 7919)) * 1099511628211ull;
  return static_cast<int32_t>(h % 1000);
}

struct FakeHost : KvHost {
  int bs = 4, total = 64, used = 0;
  int swap_cap_tokens = 1 << 30, swapped_tokens = 0;
  std::map<uint64_t, std::vector<int32_t>> kv, swapped;
  std::map<uint64_t, int> cached;                 // reusable prefix tokens per request
  std::map<uint64_t, std::vector<int32_t>> toks;  // prompt + generated
  int blocks_of(size_t t) const { return static_cast<int>((t + bs - 1) / bs); }

  bool ensure_free(int b) override { return total - used >= b; }
  int blocks_needed(uint64_t id, int n) const override {
    auto it = kv.find(id);
    const size_t t = it == kv.end() ? 0 : it->second.size();
    return blocks_of(t + n) - blocks_of(t);
  }
  int admit(uint64_t id, int keep_free) override {
    int c = std::min<int>(cached[id], static_cast<int>(toks[id].size()) - 1);
    if (total - used - keep_free < blocks_of(c)) c = 0;
    kv[id].assign(toks[id].begin(), toks[id].begin() + c);
    used += blocks_of(c);
    return c;
  }
  bool swap_in(uint64_t id, int keep_free) override {
    auto it = swapped.find(id);
    if (it == swapped.end()) return false;
    if (total - used - keep_free < blocks_of(it->second.size())) return false;
    used += blocks_of(it->second.size());
    swapped_tokens -= static_cast<int>(it->second.size());
    kv[id] = std::move(it->second);
    swapped.erase(it);
    return true;
  }
  void truncate(uint64_t id, int n) override {
    auto& v = kv[id];
    used -= blocks_of(v.size()) - blocks_of(n);
    v.resize(n);
  }
  bool preempt(uint64_t id, bool swap) override {
    auto& v = kv[id];
    used -= blocks_of(v.size());
    const bool ok = swap && swapped_tokens + static_cast<int>(v.size()) <= swap_cap_tokens;
    if (ok) {
      swapped_tokens += static_cast<int>(v.size());
      swapped[id] = std::move(v);
    }
    kv.erase(id);
    return ok;
  }
  void release(uint64_t id) override {
    auto it = kv.find(id);
    if (it != kv.end()) used -= blocks_of(it->second.size());
    kv.erase(id);
    auto s = swapped.find(id);
    if (s != swapped.end()) swapped_tokens -= static_cast<int>(s->second.size());
    swapped.erase(id);
  }
};

struct Req {
  SeqInfo info;
  int out_len = 0;       // tokens to generate before finishing
  long add_at_step = 0;  // added before this step's schedule()
  std::vector<int32_t> prompt;
};

std::vector<int32_t> reference(const std::vector<int32_t>& prompt, int n) {
  std::vector<int32_t> seq = prompt, out;
  for (int i = 0; i < n; ++i) {
    out.push_back(fake_next(seq));
    seq.push_back(out.back());
  }
  return out;
}

// A request of `tenant` with a prompt of `prompt_len` copies of `fill` and `out_len` tokens to
// generate, added before step `add_at`.
Req make_req(uint64_t id, const std::string& tenant, int prompt_len, int32_t fill, int out_len, long add_at = 0) {
  Req q;
  q.info.id = id;
  q.info.tenant = tenant;
  q.info.prompt_tokens = prompt_len;
  q.prompt.assign(static_cast<size_t>(prompt_len), fill);
  q.info.max_new_tokens = q.out_len = out_len;
  q.add_at_step = add_at;
  return q;
}

struct SimResult {
  std::map<uint64_t, std::vector<int32_t>> out;
  std::map<uint64_t, long> first_admit_step, finish_step;
  long steps = 0;
  int max_running = 0;  // most requests holding KV in the pool after a plan
  SchedulerStats stats;
};

// Runs requests to completion, checking per-step invariants.
SimResult simulate(Scheduler& sched, FakeHost& host, std::vector<Req> reqs, long max_steps = 100000) {
  SimResult r;
  std::map<uint64_t, Req> live;
  std::map<uint64_t, long> enq_step, arrival;  // waiting since (for starvation), arrival order
  std::set<uint64_t> waiting;
  long order = 0;
  size_t next = 0;
  std::sort(reqs.begin(), reqs.end(), [](const Req& a, const Req& b) { return a.add_at_step < b.add_at_step; });
  const auto& o = sched.options();
  for (long step = 1; step <= max_steps; ++step) {
    while (next < reqs.size() && reqs[next].add_at_step < step) {
      Req q = reqs[next++];
      host.toks[q.info.id] = q.prompt;
      host.cached[q.info.id] = q.info.cached_tokens_hint;
      EXPECT_TRUE(sched.add(q.info).ok());
      enq_step[q.info.id] = sched.step();
      arrival[q.info.id] = order++;
      waiting.insert(q.info.id);
      live[q.info.id] = q;
    }
    if (next == reqs.size() && sched.empty()) break;
    StepPlan plan = sched.schedule(host);
    r.steps = step;
    // Budget and uniqueness.
    EXPECT_LE(plan.tokens, o.max_batch_tokens);
    int sum = 0;
    std::set<uint64_t> ids;
    for (const auto& it : plan.items) {
      sum += it.n;
      EXPECT_TRUE(ids.insert(it.id).second) << "request twice in one step";
      EXPECT_GT(it.n, 0);
    }
    EXPECT_EQ(sum, plan.tokens);
    EXPECT_LE(sched.stats().running, o.max_running);
    for (uint64_t id : plan.preempted)
      if (sched.kv_tokens(id) == 0 && !host.swapped.count(id)) {
        waiting.insert(id);
        enq_step[id] = sched.step();
      }
    // Admissions in this step, and the starvation rule: nothing passes a starved request, except a
    // request of another tenant while the starved one's tenant held its share of the slots when
    // the step began (running after the plan + preempted by it).
    std::vector<uint64_t> admitted;
    for (const auto& it : plan.items)
      if (waiting.count(it.id)) admitted.push_back(it.id);
    for (uint64_t id : admitted) waiting.erase(id);
    std::map<std::string, int> held_slots;
    std::set<std::string> tenants;
    for (const auto& [id, v] : host.kv) ++held_slots[live[id].info.tenant];
    for (uint64_t id : plan.preempted) ++held_slots[live[id].info.tenant];
    for (const auto& [id, q] : live)
      if (sched.contains(id)) tenants.insert(q.info.tenant);
    const int n_tenants = static_cast<int>(tenants.size());
    const int limit = n_tenants < 2 ? o.max_running
                      : o.policy == SchedPolicy::kFair
                          ? std::max(1, o.max_running / n_tenants)
                          : std::max(1, (o.tenant_share_percent * o.max_running + 99) / 100);
    for (uint64_t x : admitted) {
      r.first_admit_step.emplace(x, step);
      const bool x_starved = sched.step() - enq_step[x] > o.waiting_window();
      for (uint64_t y : waiting) {
        const bool y_starved = sched.step() - enq_step[y] > o.waiting_window();
        const std::string& ty = live[y].info.tenant;
        const bool share_pass = live[x].info.tenant != ty && held_slots[ty] >= limit;
        if (y_starved && (!x_starved || arrival[x] > arrival[y]) && !share_pass)
          ADD_FAILURE() << "request " << x << " admitted at step " << step << " past starved request " << y;
      }
    }
    r.max_running = std::max(r.max_running, static_cast<int>(host.kv.size()));
    // Execute on the fake model.
    std::vector<uint64_t> done;
    for (const auto& it : plan.items) {
      auto& kv = host.kv[it.id];
      auto& seq = host.toks[it.id];
      EXPECT_EQ(static_cast<int>(kv.size()), it.start) << "request " << it.id;
      EXPECT_LE(it.start + it.n, static_cast<int>(seq.size()));
      host.used += host.blocks_needed(it.id, it.n);
      kv.insert(kv.end(), seq.begin() + it.start, seq.begin() + it.start + it.n);
      if (it.sample) {
        const int32_t t = fake_next(kv);
        seq.push_back(t);
        r.out[it.id].push_back(t);
        if (static_cast<int>(r.out[it.id].size()) == live[it.id].out_len) done.push_back(it.id);
      }
    }
    EXPECT_LE(host.used, host.total) << "pool over-committed at step " << step;
    sched.commit(plan);
    for (uint64_t id : done) {
      EXPECT_EQ(sched.generated(id), live[id].out_len);
      sched.finish(id, host);
      r.finish_step[id] = step;
    }
  }
  EXPECT_TRUE(sched.empty()) << "requests left after " << max_steps << " steps";
  r.stats = sched.stats();
  return r;
}

std::vector<Req> random_workload(int n, uint64_t seed, int max_prompt, int max_out, int spread_steps) {
  std::mt19937_64 rng(seed);
  std::vector<Req> v;
  for (int i = 0; i < n; ++i) {
    Req q;
    q.info.id = 100 + i;
    q.info.tenant = (i % 3 == 0) ? "a" : "b";
    q.info.pipeline = (i % 2) ? "p1" : "p2";
    const int plen = 1 + static_cast<int>(rng() % max_prompt);
    for (int t = 0; t < plen; ++t) q.prompt.push_back(static_cast<int32_t>(rng() % 1000));
    q.info.prompt_tokens = plen;
    q.info.cached_tokens_hint = static_cast<int>(rng() % (plen + 1));
    q.out_len = 1 + static_cast<int>(rng() % max_out);
    q.info.max_new_tokens = q.out_len + static_cast<int>(rng() % 5);
    q.add_at_step = static_cast<long>(rng() % (spread_steps + 1));
    v.push_back(q);
  }
  return v;
}

void expect_reference_outputs(const std::vector<Req>& reqs, const SimResult& r) {
  for (const auto& q : reqs) {
    auto it = r.out.find(q.info.id);
    ASSERT_NE(it, r.out.end()) << "request " << q.info.id << " produced nothing";
    EXPECT_EQ(it->second, reference(q.prompt, q.out_len)) << "request " << q.info.id;
  }
}

class PolicyTest : public ::testing::TestWithParam<std::tuple<SchedPolicy, PreemptMode>> {};

TEST_P(PolicyTest, InvariantsAndExactOutputsUnderMemoryPressure) {
  for (uint64_t seed : {1u, 2u, 3u}) {
    SchedulerOptions o;
    o.policy = std::get<0>(GetParam());
    o.preemption = std::get<1>(GetParam());
    o.max_batch_tokens = 33;
    o.max_running = 7;
    o.starvation_window = 40;
    o.srtf_starvation_window = 40;
    Scheduler sched(o);
    FakeHost host;
    host.bs = 4;
    host.total = 37;  // far fewer blocks than the workload wants: preemption happens
    host.swap_cap_tokens = 60;
    auto reqs = random_workload(40, seed, 61, 29, 50);
    SimResult r = simulate(sched, host, reqs);
    expect_reference_outputs(reqs, r);
    EXPECT_EQ(host.used, 0) << "blocks leaked";
    EXPECT_TRUE(host.kv.empty());
    EXPECT_EQ(host.swapped_tokens, 0);
    EXPECT_GT(r.stats.swaps_out + r.stats.drops, 0) << "workload did not exercise preemption";
    if (o.preemption == PreemptMode::kRecompute) {
      EXPECT_EQ(r.stats.swaps_out, 0);
    } else {
      EXPECT_EQ(r.stats.swaps_in, r.stats.swaps_out);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, PolicyTest,
                         ::testing::Combine(::testing::Values(SchedPolicy::kFcfs, SchedPolicy::kSjf,
                                                              SchedPolicy::kMlfq, SchedPolicy::kFair, SchedPolicy::kSrtf),
                                            ::testing::Values(PreemptMode::kSwap, PreemptMode::kRecompute)));

TEST(Scheduler, UnpressuredRunMatchesReferenceAndUsesBudget) {
  SchedulerOptions o;
  o.max_batch_tokens = 16;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  auto reqs = random_workload(9, 7, 129, 7, 0);
  SimResult r = simulate(sched, host, reqs);
  expect_reference_outputs(reqs, r);
  EXPECT_EQ(r.stats.swaps_out + r.stats.drops, 0);
}

TEST(Scheduler, SjfWindowStopsStarvationOfLongJob) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kSjf;
  o.max_running = 1;
  o.max_batch_tokens = 64;
  o.starvation_window = 30;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  std::vector<Req> reqs;
  Req longq;
  longq.info.id = 1;
  longq.info.prompt_tokens = 7;
  longq.prompt.assign(7, 5);
  longq.info.max_new_tokens = longq.out_len = 20;
  reqs.push_back(longq);
  // A continuous stream of short jobs that sjf would always prefer.
  for (int i = 0; i < 60; ++i) {
    Req s;
    s.info.id = 10 + i;
    s.info.prompt_tokens = 3;
    s.prompt.assign(3, 9);
    s.info.max_new_tokens = s.out_len = 2;
    s.add_at_step = i;
    reqs.push_back(s);
  }
  SimResult r = simulate(sched, host, reqs);
  expect_reference_outputs(reqs, r);
  // Admitted once starved (window + 1 steps), within the time one running short job needs.
  EXPECT_LE(r.first_admit_step[1], 1 + o.starvation_window + 1 + 3);
  EXPECT_GT(r.first_admit_step[1], 3) << "sjf should have preferred the short jobs at first";
}

TEST(Scheduler, FcfsWithoutWindowPressureKeepsArrivalOrder) {
  SchedulerOptions o;
  o.cache_aware = false;
  o.max_running = 1;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  auto reqs = random_workload(8, 3, 20, 4, 0);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].add_at_step = 0;
  SimResult r = simulate(sched, host, reqs);
  for (size_t i = 1; i < reqs.size(); ++i)
    EXPECT_LT(r.first_admit_step[reqs[i - 1].info.id], r.first_admit_step[reqs[i].info.id]);
}

TEST(Scheduler, CacheAwareFcfsPrefersHighCachedRatio) {
  SchedulerOptions o;
  o.max_running = 1;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  Req cold, warm;
  cold.info.id = 1;
  cold.info.prompt_tokens = 40;
  cold.prompt.assign(40, 3);
  cold.info.max_new_tokens = cold.out_len = 2;
  warm = cold;
  warm.info.id = 2;
  warm.info.cached_tokens_hint = 36;
  SimResult r = simulate(sched, host, {cold, warm});
  EXPECT_LT(r.first_admit_step[2], r.first_admit_step[1]);
  expect_reference_outputs({cold, warm}, r);
}

TEST(Scheduler, SjfPrefersPredictedShortPipeline) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kSjf;
  o.max_running = 1;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  // Train: pipeline "long" generates 40 tokens, "short" 3 (same prompt sizes, same max_tokens).
  std::vector<Req> train;
  for (int i = 0; i < 10; ++i) {
    Req q;
    q.info.id = 100 + i;
    q.info.pipeline = i % 2 ? "long" : "short";
    q.info.prompt_tokens = 5 + i;
    q.prompt.assign(q.info.prompt_tokens, 1);
    q.info.max_new_tokens = 64;
    q.out_len = i % 2 ? 40 : 3;
    train.push_back(q);
  }
  simulate(sched, host, train);
  EXPECT_EQ(sched.predictor().stats().samples, 10);
  Req l = train[1], s = train[0];
  l.info.id = 1;  // arrives first
  s.info.id = 2;
  SimResult r = simulate(sched, host, {l, s});
  EXPECT_LT(r.first_admit_step[2], r.first_admit_step[1]);
}

TEST(Scheduler, FairShareServesNewTenantPromptly) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kFair;
  o.max_running = 2;
  o.max_batch_tokens = 32;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  std::vector<Req> reqs;
  for (int i = 0; i < 20; ++i) reqs.push_back(make_req(100 + i, "heavy", 20, i, 10));
  Req light = reqs[0];
  light.info.id = 1;
  light.info.tenant = "light";
  light.add_at_step = 15;
  reqs.push_back(light);
  SimResult r = simulate(sched, host, reqs);
  expect_reference_outputs(reqs, r);
  // fcfs would serve it after all 20 heavy requests; VTC admits it at the next free slot.
  int heavy_admitted_after = 0;
  for (int i = 0; i < 20; ++i) heavy_admitted_after += r.first_admit_step[100 + i] > r.first_admit_step[1];
  EXPECT_GE(heavy_admitted_after, 12);
  EXPECT_LE(r.first_admit_step[1], 15 + 12);
}

// A flood of long requests from one tenant fills every slot while it is alone; another tenant's
// short request then takes the slot of one of them at once (preempted, resumed exactly later),
// in every policy; the flood tenant gets its slots back when the short one is done.
TEST(Scheduler, TenantShareAdmitsAnotherTenantDuringAFlood) {
  for (SchedPolicy policy : {SchedPolicy::kFcfs, SchedPolicy::kSjf, SchedPolicy::kMlfq, SchedPolicy::kFair}) {
    for (PreemptMode mode : {PreemptMode::kSwap, PreemptMode::kRecompute}) {
      SCOPED_TRACE(std::string(sched_policy_name(policy)) + (mode == PreemptMode::kSwap ? " swap" : " recompute"));
      SchedulerOptions o;
      o.policy = policy;
      o.preemption = mode;
      o.max_running = 16;
      o.max_batch_tokens = 64;
      Scheduler sched(o);
      FakeHost host;
      host.total = 4000;
      std::vector<Req> reqs;
      for (int i = 0; i < 24; ++i) reqs.push_back(make_req(100 + i, "flood", 13, i + 1, 150));
      for (int j = 0; j < 3; ++j) reqs.push_back(make_req(1 + j, "small", 7, 900 + j, 4, 40 + 30 * j));
      SimResult r = simulate(sched, host, reqs);
      expect_reference_outputs(reqs, r);
      EXPECT_EQ(r.max_running, 16) << "the flood alone did not use every slot";
      for (int j = 0; j < 3; ++j)
        EXPECT_LE(r.first_admit_step[1 + j], 40 + 30 * j + 1) << "small request " << j << " waited for the flood";
      EXPECT_GE(r.stats.swaps_out + r.stats.drops, 3);
      // MLFQ's own demotion already makes the room (a new request is on the best level).
      if (policy != SchedPolicy::kMlfq) EXPECT_GE(r.stats.share_preemptions, 3);
      if (mode == PreemptMode::kSwap) EXPECT_EQ(r.stats.swaps_in, r.stats.swaps_out);
    }
  }
}

// Under fair, two floods share the slots equally, and a third tenant still gets in at once.
TEST(Scheduler, FairShareSplitsSlotsBetweenFloods) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kFair;
  o.max_running = 8;
  o.max_batch_tokens = 64;
  Scheduler sched(o);
  FakeHost host;
  host.total = 4000;
  std::vector<Req> reqs;
  // b's flood comes when a holds every slot.
  for (int i = 0; i < 24; ++i) reqs.push_back(make_req(100 + i, i % 2 ? "b" : "a", 9, i + 1, 60 + (i % 5) * 7, i % 2 ? 20 : 0));
  reqs.push_back(make_req(1, "c", 5, 77, 3, 50));
  SimResult r = simulate(sched, host, reqs);
  expect_reference_outputs(reqs, r);
  int b_admitted_early = 0;
  for (int i = 1; i < 24; i += 2) b_admitted_early += r.first_admit_step[100 + i] <= 22;
  EXPECT_GE(b_admitted_early, 4) << "b did not get its half of the slots when it came";
  EXPECT_LE(r.first_admit_step[1], 51);
}

TEST(Scheduler, MlfqDemotesLongServedRequests) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kMlfq;
  o.max_running = 1;
  o.mlfq_base_quantum = 4;
  o.preemption = PreemptMode::kSwap;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  Req a;
  a.info.id = 1;
  a.info.prompt_tokens = 4;
  a.prompt.assign(4, 2);
  a.info.max_new_tokens = a.out_len = 30;
  Req b = a;
  b.info.id = 2;
  b.info.max_new_tokens = b.out_len = 2;
  b.add_at_step = 10;
  SimResult r = simulate(sched, host, {a, b});
  expect_reference_outputs({a, b}, r);
  // a has been served past level 0 when b arrives: b takes its slot and finishes first.
  EXPECT_LE(r.first_admit_step[2], 11);
  EXPECT_LT(r.finish_step[2], r.finish_step[1]);
  EXPECT_GE(r.stats.swaps_out, 1);
}

TEST(Scheduler, CancelFreesBlocksInEveryState) {
  SchedulerOptions o;
  o.max_batch_tokens = 8;
  o.max_running = 2;
  Scheduler sched(o);
  FakeHost host;
  host.total = 12;
  host.bs = 4;
  for (uint64_t id : {1, 2, 3, 4}) {
    host.toks[id] = std::vector<int32_t>(17, static_cast<int32_t>(id));
    SeqInfo s;
    s.id = id;
    s.prompt_tokens = 17;
    s.max_new_tokens = 50;
    ASSERT_TRUE(sched.add(s).ok());
  }
  for (int step = 0; step < 6; ++step) {
    StepPlan p = sched.schedule(host);
    for (const auto& it : p.items) {
      host.used += host.blocks_needed(it.id, it.n);
      auto& kv = host.kv[it.id];
      auto& seq = host.toks[it.id];
      kv.insert(kv.end(), seq.begin() + it.start, seq.begin() + it.start + it.n);
      if (it.sample) seq.push_back(fake_next(kv));
    }
    sched.commit(p);
  }
  EXPECT_GT(host.used, 0);
  EXPECT_TRUE(sched.cancel(2, host));
  EXPECT_TRUE(sched.cancel(4, host));  // still waiting
  EXPECT_FALSE(sched.cancel(4, host));
  EXPECT_TRUE(sched.cancel(1, host));
  EXPECT_TRUE(sched.cancel(3, host));
  EXPECT_EQ(host.used, 0);
  EXPECT_TRUE(host.kv.empty());
  EXPECT_TRUE(sched.empty());
  EXPECT_EQ(sched.stats().cancelled, 4);
}

TEST(Scheduler, RejectsBadRequests) {
  Scheduler sched({});
  SeqInfo s;
  s.id = 1;
  s.prompt_tokens = 0;
  Status st = sched.add(s);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("prompt_tokens"), std::string::npos);
  s.prompt_tokens = 5;
  s.max_new_tokens = 0;
  st = sched.add(s);
  EXPECT_NE(st.message().find("max_new_tokens"), std::string::npos);
  s.max_new_tokens = 5;
  s.cached_tokens_hint = 6;
  st = sched.add(s);
  EXPECT_NE(st.message().find("cached_tokens_hint"), std::string::npos);
  s.cached_tokens_hint = 0;
  ASSERT_TRUE(sched.add(s).ok());
  st = sched.add(s);
  EXPECT_NE(st.message().find("duplicate"), std::string::npos);
}

TEST(Scheduler, ParsesPolicyNames) {
  EXPECT_EQ(*parse_sched_policy("sjf"), SchedPolicy::kSjf);
  EXPECT_EQ(*parse_sched_policy("fair"), SchedPolicy::kFair);
  auto bad = parse_sched_policy("lifo");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "scheduler must be one of fcfs | sjf | mlfq | fair | srtf; got 'lifo'");
  auto badp = parse_preempt_mode("evict");
  ASSERT_FALSE(badp.ok());
  EXPECT_EQ(badp.status().message(), "preemption must be one of swap | recompute; got 'evict'");
  for (SchedPolicy p : enum_values<SchedPolicy>()) EXPECT_EQ(*parse_sched_policy(sched_policy_name(p)), p);
  for (PreemptMode m : enum_values<PreemptMode>()) EXPECT_EQ(*parse_preempt_mode(preempt_mode_name(m)), m);
}

TEST(LengthPredictor, LearnsLinearRelationAndReportsAccuracy) {
  OutputLengthPredictor p;
  EXPECT_DOUBLE_EQ(p.predict("x", 10, 77), 77.0);  // nothing observed: max_tokens
  std::mt19937 rng(5);
  for (int i = 0; i < 200; ++i) {
    const int x = 7 + static_cast<int>(rng() % 129);
    p.observe("x", x, 500, 10 + x / 2);
  }
  for (int x : {7, 33, 129}) EXPECT_NEAR(p.predict("x", x, 500), 10 + x / 2, 1.5) << x;
  EXPECT_DOUBLE_EQ(p.predict("x", 129, 20), 20.0);  // clamped to max_tokens
  auto s = p.stats();
  EXPECT_EQ(s.samples, 200);
  EXPECT_GT(s.within_2x, 0.9);
  EXPECT_LT(s.mae, 10);
  // Another pipeline falls back to the global mean until it has its own samples.
  const double g = p.predict("y", 50, 1000);
  EXPECT_GT(g, 10);
  EXPECT_LT(g, 80);
}

// Rollback: truncate a running sequence to n tokens, continue, and get exactly the tokens the
// uninterrupted run produced (the fake model's next token depends on every KV token, so stale KV
// past the cut would change it); rewrite keeps the prompt and replaces generated tokens.
TEST(Scheduler, TruncateAndRewriteContinueFromTheKeptTokens) {
  SchedulerOptions o;
  o.max_batch_tokens = 8;
  Scheduler sched(o);
  FakeHost host;
  const std::vector<int32_t> prompt = {5, 9, 2, 7, 7, 1, 3, 8, 4, 6, 2};  // 11 tokens: two prefill chunks
  host.toks[1] = prompt;
  SeqInfo si;
  si.id = 1;
  si.prompt_tokens = static_cast<int>(prompt.size());
  si.max_new_tokens = 20;
  ASSERT_TRUE(sched.add(si).ok());
  auto generate_until = [&](int generated) {
    for (int guard = 0; sched.generated(1) < generated && guard < 1000; ++guard) {
      StepPlan plan = sched.schedule(host);
      for (const auto& it : plan.items) {
        auto& kv = host.kv[it.id];
        auto& seq = host.toks[it.id];
        ASSERT_EQ(static_cast<int>(kv.size()), it.start);
        host.used += host.blocks_needed(it.id, it.n);
        kv.insert(kv.end(), seq.begin() + it.start, seq.begin() + it.start + it.n);
        if (it.sample) seq.push_back(fake_next(kv));
      }
      sched.commit(plan);
    }
  };
  generate_until(9);
  const std::vector<int32_t> full = host.toks[1];
  ASSERT_EQ(full.size(), prompt.size() + 9);
  // Back to 3 generated tokens: sequence cut, KV cut to one token less.
  const int keep = static_cast<int>(prompt.size()) + 3;
  ASSERT_TRUE(sched.truncate(1, keep, host).ok());
  host.toks[1].resize(keep);
  EXPECT_EQ(sched.generated(1), 3);
  EXPECT_EQ(sched.kv_tokens(1), keep - 1);
  EXPECT_EQ(static_cast<int>(host.kv[1].size()), keep - 1);
  generate_until(9);
  EXPECT_EQ(host.toks[1], full);
  // Rewrite generated tokens 2.. with other ids: KV from there is recomputed from the new tokens.
  const int from = static_cast<int>(prompt.size()) + 2;
  std::vector<int32_t> alt(host.toks[1].begin(), host.toks[1].begin() + from);
  alt.push_back(77);
  alt.push_back(78);
  ASSERT_TRUE(sched.rewrite(1, from, static_cast<int>(alt.size()), host).ok());
  host.toks[1] = alt;
  EXPECT_EQ(sched.kv_tokens(1), from);
  generate_until(6);
  std::vector<int32_t> expect = alt;
  std::vector<int32_t> kv(alt.begin(), alt.end());
  for (int i = 0; i < 2; ++i) {
    expect.push_back(fake_next(kv));
    kv.push_back(expect.back());
  }
  EXPECT_EQ(host.toks[1], expect);
  // Bad ranges and unknown ids.
  EXPECT_EQ(sched.truncate(1, 3, host).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sched.truncate(99, 3, host).code(), StatusCode::kNotFound);
  sched.finish(1, host);
}

}  // namespace
}  // namespace ragd::pipelines

namespace ragd::pipelines {
namespace {

// srtf told the true lengths (the benchmark's oracle), one running slot: a short request that
// arrives while a long one runs takes its slot, finishes first, and the long one resumes exactly.
TEST(Srtf, PreemptsALongerRunningRequestForAShorterOne) {
  for (PreemptMode mode : {PreemptMode::kSwap, PreemptMode::kRecompute}) {
    SchedulerOptions o;
    o.policy = SchedPolicy::kSrtf;
    o.oracle_lengths = true;
    o.preemption = mode;
    o.max_running = 1;
    o.max_batch_tokens = 64;
    Scheduler sched(o);
    FakeHost host;
    host.total = 1000;
    Req longq = make_req(1, "default", 9, 3, 40);
    longq.info.max_new_tokens = 200;  // the scheduler is not told 40 through max_tokens
    longq.info.oracle_output_tokens = 40;
    Req shortq = make_req(2, "default", 5, 4, 3, /*add_at=*/6);
    shortq.info.max_new_tokens = 200;
    shortq.info.oracle_output_tokens = 3;
    SimResult r = simulate(sched, host, {longq, shortq});
    expect_reference_outputs({longq, shortq}, r);
    EXPECT_EQ(r.stats.srtf_preemptions, 1);
    EXPECT_LT(r.finish_step[2], r.finish_step[1]);
    EXPECT_LE(r.finish_step[2], 7 + 3 + 1) << "the short request waited for the long one";
  }
}

// The hysteresis: a waiting request that is not srtf_preempt_ratio times shorter waits.
TEST(Srtf, DoesNotPreemptForASlightlyShorterRequest) {
  SchedulerOptions o;
  o.policy = SchedPolicy::kSrtf;
  o.oracle_lengths = true;
  o.max_running = 1;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  Req a = make_req(1, "default", 4, 3, 30);
  a.info.oracle_output_tokens = 30;
  Req b = make_req(2, "default", 4, 5, 20, /*add_at=*/3);
  b.info.oracle_output_tokens = 20;
  SimResult r = simulate(sched, host, {a, b});
  EXPECT_EQ(r.stats.srtf_preemptions, 0);
  EXPECT_LT(r.finish_step[1], r.finish_step[2]);
}

// Without a trained head srtf falls back to sjf's estimate less the generated tokens; with one, the
// question decides. Requests arrive together, one slot: the order of completion is the order of
// the predicted lengths.
TEST(Srtf, OrdersByTheTrainedHeadsPrediction) {
  std::vector<LengthSample> train;
  for (int i = 0; i < 120; ++i) {
    LengthSample s;
    s.features = {"qa", i % 2 ? "list every item" : "when was it", 6, 64};
    s.output_tokens = i % 2 ? 30 : 3;
    train.push_back(s);
  }
  auto m = LengthModel::train(train, LengthTrainOptions{.dim = 64});
  ASSERT_TRUE(m.ok());
  SchedulerOptions o;
  o.policy = SchedPolicy::kSrtf;
  o.length_model = *m;
  o.max_running = 1;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  std::vector<Req> reqs;
  for (uint64_t id = 1; id <= 6; ++id) {
    Req q = make_req(id, "default", 6, static_cast<int32_t>(id), id <= 3 ? 30 : 3);
    q.info.pipeline = "qa";
    q.info.max_new_tokens = 64;
    q.info.text = id <= 3 ? "list every item" : "when was it";
    reqs.push_back(q);
  }
  SimResult r = simulate(sched, host, reqs);
  expect_reference_outputs(reqs, r);
  for (uint64_t shortq = 4; shortq <= 6; ++shortq)
    for (uint64_t longq = 1; longq <= 3; ++longq)
      EXPECT_LT(r.finish_step[shortq], r.finish_step[longq]) << shortq << " vs " << longq;
}

TEST(Srtf, PredictedRemainingIsRevisedWhileDecoding) {
  std::vector<LengthSample> train;
  for (int i = 0; i < 200; ++i) {
    LengthSample s;
    s.features = {"qa", "tell me", 4, 400};
    s.output_tokens = i % 2 ? 4 : 100;
    train.push_back(s);
  }
  auto m = LengthModel::train(train, LengthTrainOptions{.dim = 64});
  ASSERT_TRUE(m.ok());
  SchedulerOptions o;
  o.policy = SchedPolicy::kSrtf;
  o.length_model = *m;
  Scheduler sched(o);
  FakeHost host;
  host.total = 1000;
  Req q = make_req(1, "default", 4, 7, 20);
  q.info.pipeline = "qa";
  q.info.text = "tell me";
  q.info.max_new_tokens = 400;
  host.toks[1] = q.prompt;
  ASSERT_TRUE(sched.add(q.info).ok());
  const double at_admission = sched.predicted_remaining(1);
  for (int step = 0; step < 12; ++step) {
    StepPlan plan = sched.schedule(host);
    for (const auto& it : plan.items) {
      host.used += host.blocks_needed(it.id, it.n);
      auto& kv = host.kv[it.id];
      kv.insert(kv.end(), host.toks[it.id].begin() + it.start, host.toks[it.id].begin() + it.start + it.n);
      if (it.sample) host.toks[it.id].push_back(fake_next(kv));
    }
    sched.commit(plan);
  }
  ASSERT_EQ(sched.generated(1), 12);
  const double after = sched.predicted_remaining(1);
  EXPECT_NEAR(at_admission, 52, 8);  // half 4, half 100
  EXPECT_GT(after, 80) << "past the short range, the run is expected to be long";
  EXPECT_EQ(sched.predicted_remaining(99), -1);
}

// The anti-starvation bound: a long request under a stream of short ones that srtf would always
// prefer still finishes once it has waited srtf_starvation_window steps; with a window longer than the
// stream it finishes last. Both with swap and with recompute preemption.
TEST(Srtf, StarvationWindowBoundsTheWaitOfALongRequest) {
  for (PreemptMode mode : {PreemptMode::kSwap, PreemptMode::kRecompute}) {
    auto run = [&](int window) {
      SchedulerOptions o;
      o.policy = SchedPolicy::kSrtf;
      o.oracle_lengths = true;
      o.preemption = mode;
      o.max_running = 1;
      o.max_batch_tokens = 64;
      o.srtf_starvation_window = window;
      Scheduler sched(o);
      FakeHost host;
      host.total = 1000;
      std::vector<Req> reqs;
      Req longq = make_req(1, "default", 7, 5, 20);
      longq.info.max_new_tokens = 100;
      longq.info.oracle_output_tokens = 20;
      reqs.push_back(longq);
      for (int i = 0; i < 120; ++i) {
        Req s = make_req(10 + i, "default", 3, 9, 2, /*add_at=*/1 + 2 * i);
        s.info.max_new_tokens = 100;
        s.info.oracle_output_tokens = 2;
        reqs.push_back(s);
      }
      SimResult r = simulate(sched, host, reqs);
      expect_reference_outputs(reqs, r);
      EXPECT_GT(r.stats.srtf_preemptions, 0);
      return r;
    };
    const SimResult bounded = run(30);
    // Waited at most the window (+1: it must exceed it), then ran to the end without preemption
    // (20 decode steps + its prefill, again when recomputed), behind at most one short request.
    EXPECT_LE(bounded.finish_step.at(1), 30 + 1 + 20 + 2 + 3 + 3);
    const SimResult unbounded = run(100000);
    EXPECT_GT(unbounded.finish_step.at(1), 200) << "without the bound the short stream goes first";
  }
}

}  // namespace
}  // namespace ragd::pipelines
