// Continuous-batching scheduler: pure policy logic over an abstract KV host.
//
// Every step schedule() builds one batch under a token budget:
//   1. running decodes (1 token each), by priority;
//   2. prefill chunks of running requests that are still prefilling (chunked prefill);
//   3. swapped-out requests resume when their KV fits again (no preemption for them);
//   4. waiting requests are admitted in policy order while budget, slots and blocks last.
// A waiting request that has waited more than `starvation_window` steps (srtf:
// `srtf_starvation_window`) goes first whatever the policy, and while it cannot be admitted nothing
// newer is.
//
// Policies (the order of waiting requests and the choice of preemption victims):
//   fcfs - arrival order; with cache_aware, RAGCache-style: higher cached/computed ratio first.
//   sjf  - least predicted remaining work first: remaining prefill in steps + predicted output
//          tokens (OutputLengthPredictor: per-pipeline mean + online regression on prompt length).
//   srtf - shortest remaining time first, preemptive: least predicted remaining work first, where
//          the remaining output is revised every step from the tokens generated so far; with a
//          trained head (SchedulerOptions::length_model, length_model.h) E[L - g | L > g] over its
//          length-range distribution, else today's sjf estimate less the generated tokens. When
//          every slot is taken, a waiting request whose remaining work is srtf_preempt_ratio times
//          shorter than a running one's takes that one's slot (swap or recompute, as below); a
//          preempted request comes back when it is again among the shortest. Anti-starvation: a
//          request that has spent more than srtf_starvation_window steps waiting or swapped out in all
//          (counted from its arrival) goes before every request that has not, in arrival order,
//          is never preempted for srtf and preempts no one: it takes the next slot that frees, and
//          while it waits for one no request takes a slot by srtf preemption. So no request waits
//          more than about srtf_starvation_window steps plus the work of the aged requests ahead of it.
//   mlfq - multi-level feedback queue on attained service: a request drops a level each time it
//          has been served base_quantum * 2^level tokens; lower level first, then arrival.
//   fair - per-tenant virtual token counters (VTC): the tenant that has been served the fewest
//          weighted tokens goes first; a tenant that becomes active is lifted to the minimum
//          counter of the active tenants so idle time does not bank credit.
//
// Tenant share (every policy): while two or more tenants have requests, a tenant may hold at most
// its limit of the running slots: tenant_share_percent of max_running, rounded up (default 75 %),
// and under `fair` an equal share, max(1, max_running / active tenants). Alone, a tenant may use
// every slot. When a request of a tenant below its limit waits and no slot is free, the
// lowest-priority running request of the tenant furthest above its limit is preempted (swap or
// recompute, as below) to make room; swapped requests of a tenant at its limit stay out while
// another tenant waits. So a flood from one tenant delays another tenant's request by about one
// step, not by the flood's length.
// A starved request (see above) does not hold back requests of other tenants while its own
// tenant is at its limit.
//
// When the KV host runs out of blocks, the lowest-priority running request is preempted: its KV
// is swapped out to host memory (resumed later exactly) or dropped (prompt + generated tokens are
// prefilled again), by option; the host may refuse a swap (host buffer full) and drop instead.
//
// Every fed token position is explicit: an item feeds tokens [start, start + n) of the request's
// sequence (prompt followed by generated tokens) and samples a token iff start + n equals the
// sequence length.
//
// Thread-safety: not thread-safe; owned by the scheduler thread.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"
#include "ragd/pipelines/length_model.h"
#include "ragd/pipelines/length_predictor.h"

namespace ragd::pipelines {

enum class SchedPolicy : uint8_t { kFcfs, kSjf, kMlfq, kFair, kSrtf };
inline constexpr auto kSchedPolicyNames = make_enum_names<SchedPolicy>(
    "scheduler", {{SchedPolicy::kFcfs, "fcfs"},
                  {SchedPolicy::kSjf, "sjf"},
                  {SchedPolicy::kMlfq, "mlfq"},
                  {SchedPolicy::kFair, "fair"},
                  {SchedPolicy::kSrtf, "srtf"}});
constexpr const auto& ragd_enum_names(SchedPolicy) { return kSchedPolicyNames; }
static_assert(enum_names_valid(kSchedPolicyNames));
inline std::string_view sched_policy_name(SchedPolicy p) { return enum_name(p); }
inline Result<SchedPolicy> parse_sched_policy(std::string_view s) { return parse_enum<SchedPolicy>(s); }

enum class PreemptMode : uint8_t { kSwap, kRecompute };
inline constexpr auto kPreemptModeNames =
    make_enum_names<PreemptMode>("preemption", {{PreemptMode::kSwap, "swap"}, {PreemptMode::kRecompute, "recompute"}});
constexpr const auto& ragd_enum_names(PreemptMode) { return kPreemptModeNames; }
static_assert(enum_names_valid(kPreemptModeNames));
inline std::string_view preempt_mode_name(PreemptMode m) { return enum_name(m); }
inline Result<PreemptMode> parse_preempt_mode(std::string_view s) { return parse_enum<PreemptMode>(s); }

struct SchedulerOptions {
  SchedPolicy policy = SchedPolicy::kFcfs;
  int max_batch_tokens = 512;     // tokens fed per step (decodes + prefill chunks); default 512
  int max_running = 16;           // requests holding KV and being served; default 16
  int starvation_window = 256;    // steps a waiting request may be passed over; default 256
  // srtf's anti-starvation bound: steps a request may spend waiting or swapped out (in all, from
  // its arrival) before it ages and goes first. Longer than starvation_window: under srtf a long
  // generation is passed over by design, and a bound shorter than the long generations themselves
  // turns srtf back into fcfs under load (bench_srtf: mean e2e at 95 % load, 2 slots, fcfs / srtf
  // 1.22x at 256 steps, 1.9x at 1024, 2.1x at 8192, simulated). Default 2048.
  int srtf_starvation_window = 2048;
  // The bound in force for this policy: srtf_starvation_window under srtf, else starvation_window.
  int waiting_window() const { return policy == SchedPolicy::kSrtf ? srtf_starvation_window : starvation_window; }
  bool cache_aware = true;        // RAGCache reordering by cached/compute ratio (fcfs, sjf ties)
  PreemptMode preemption = PreemptMode::kSwap;
  int mlfq_base_quantum = 32;     // tokens of service at level 0; doubles per level; default 32
  int mlfq_levels = 4;
  double fair_prefill_weight = 1.0;  // VTC weight of a prefill token; default 1
  double fair_decode_weight = 2.0;   // VTC weight of a generated token; default 2
  // Running slots one tenant may hold while another tenant has requests, in percent of
  // max_running, rounded up (policies other than fair; fair uses an equal share). 1..100; 100 = no
  // limit; default 75.
  int tenant_share_percent = 75;
  // srtf: the trained length head (length_model.h); null (default) = today's sjf estimate.
  std::shared_ptr<const LengthModel> length_model;
  // srtf: a waiting request preempts a running one whose predicted remaining work is more than
  // this many times its own (hysteresis against swapping back and forth); >= 1, default 2.
  double srtf_preempt_ratio = 2.0;
  // BENCHMARKS ONLY: srtf orders by SeqInfo::oracle_output_tokens (the true length) instead of a
  // prediction, the bound a predictor is measured against. Never set by configuration.
  bool oracle_lengths = false;

  // Ranges and enum values, InvalidArgument naming the daemon's config key
  // ("runtime.max_running: must be > 0, got 0"). Pure: in ragd_pipelines_options.
  Status validate() const;
};

// What the scheduler is told about a request (known once retrieval and prompt building are done).
struct SeqInfo {
  uint64_t id = 0;
  std::string tenant = "default";
  std::string pipeline;
  int prompt_tokens = 0;
  int cached_tokens_hint = 0;  // tokens expected to be reused (for ordering; admit() tells the truth)
  int max_new_tokens = 256;
  std::string text;              // the user's question (length features; srtf with a trained head)
  int oracle_output_tokens = 0;  // BENCHMARKS ONLY: the true output length (oracle_lengths); 0 = unknown
};

// The KV side, implemented by the executor over the engine's KvPool (and by fakes in tests).
class KvHost {
 public:
  virtual ~KvHost() = default;
  // Makes at least `blocks` free blocks available (evicting unpinned cache entries if needed).
  // False when it cannot.
  virtual bool ensure_free(int blocks) = 0;
  // Blocks that appending n tokens to the request's KV would allocate (0 when they fit).
  virtual int blocks_needed(uint64_t id, int n) const = 0;
  // Installs KV for a request that starts (or restarts after a dropped preemption): the reused
  // cached prefix, loading only while `keep_free` blocks stay free for already planned items.
  // Returns the number of tokens whose KV is now present, in [0, sequence length - 1].
  virtual int admit(uint64_t id, int keep_free) = 0;
  // Copies a swapped-out request's KV back, keeping `keep_free` blocks free. False (nothing
  // changed) when blocks are short.
  virtual bool swap_in(uint64_t id, int keep_free) = 0;
  // Preempts a running request: swap=true asks to move its KV to host memory (returns true when
  // done), otherwise (or when the swap is refused, returning false) its KV is released.
  virtual bool preempt(uint64_t id, bool swap) = 0;
  // Releases every block of the request (finish, cancel).
  virtual void release(uint64_t id) = 0;
  // Drops the request's KV from token n onwards (rollback, rewrite); n <= its KV tokens.
  virtual void truncate(uint64_t id, int n) = 0;
  // Rows the request's next prefill step computes besides its tokens (an approximate reuse
  // repair riding in it), in prompt tokens of the step budget. Default none.
  virtual int extra_rows(uint64_t id) const { return 0; }
};

struct BatchItem {
  uint64_t id = 0;
  int start = 0;        // first fed token index in the sequence
  int n = 0;            // tokens fed
  bool sample = false;  // the step produces the next token for this request
  bool prefill = true;  // false for a single-token decode
  // Speculative decoding: the decode token is followed by this many draft tokens (the caller's,
  // set_draft) in the same item (n = 1 + draft); every row is verified, and settle_draft() keeps
  // the accepted ones.
  int draft = 0;
};

struct StepPlan {
  std::vector<BatchItem> items;
  std::vector<uint64_t> preempted;  // preempted during this plan (swap or drop)
  int tokens = 0;                   // Σ items[i].n <= max_batch_tokens
};

struct SchedulerStats {
  long steps = 0, admitted = 0, finished = 0, cancelled = 0;
  long swaps_out = 0, swaps_in = 0, drops = 0;  // preemptions by kind
  long share_preemptions = 0;  // of those, preemptions of a tenant above its share for another's request
  long srtf_preemptions = 0;   // of those, preemptions of a longer running request for a shorter waiting one
  int waiting = 0, running = 0, swapped = 0;
  long tokens_prefill = 0, tokens_decode = 0;
};

class Scheduler {
 public:
  explicit Scheduler(SchedulerOptions opts);

  const SchedulerOptions& options() const { return opts_; }
  // Queues a request. InvalidArgument for a duplicate id or non-positive sizes.
  Status add(const SeqInfo& info);
  // Plans one step; may call host.admit / swap_in / preempt / ensure_free while planning.
  StepPlan schedule(KvHost& host);
  // Applies a finished step: every item's tokens are now in its KV; sampled items got a token.
  void commit(const StepPlan& plan);
  // Speculative decoding: the next decode step of `id` may carry `n` draft tokens after its decode
  // token, when the step's token budget and the KV pool allow them without preempting anyone (else
  // it decodes one token). Cleared by every schedule(). Unknown ids are ignored.
  void set_draft(uint64_t id, int n);
  // After a step that carried a draft: the first `accepted` draft tokens were taken (plus the
  // token sampled after them); the KV of the rejected ones goes (host.truncate) and the request
  // now has accepted + 1 new tokens (commit() counted one).
  void settle_draft(uint64_t id, int draft, int accepted, KvHost& host);
  // The request finished (stop / length); releases its KV. Unknown ids are ignored.
  void finish(uint64_t id, KvHost& host);
  // Removes a request in any state; releases its KV. False when unknown.
  bool cancel(uint64_t id, KvHost& host);
  // Cuts a waiting or running request's sequence back to `len` tokens (prompt_tokens <= len <=
  // current length) and its KV to at most len - 1 tokens (host.truncate), so the next step feeds
  // the last kept token again and samples the token after it: generation continues from there
  // (rollback). FailedPrecondition for a swapped-out request, NotFound for an unknown id.
  Status truncate(uint64_t id, int len, KvHost& host);
  // The caller replaced the request's tokens from `from` on (from >= prompt_tokens) and the
  // sequence is now `new_len` tokens (new_len > from): KV is cut to at most `from` tokens and the
  // replaced tokens are fed again before the next sample. Same errors as truncate().
  Status rewrite(uint64_t id, int from, int new_len, KvHost& host);

  // Iterative RAG replaced the request's prompt (now prompt_tokens long) and kept `generated`
  // tokens after it; its KV stays valid for the first keep_kv tokens only. KV is cut to at most
  // min(keep_kv, length - 1) tokens and the rest is fed again before the next sample. A swapped-out
  // request loses its swapped KV and waits to be admitted again (recomputed). NotFound for an
  // unknown id, InvalidArgument for non-positive sizes.
  Status restart(uint64_t id, int prompt_tokens, int generated, int keep_kv, KvHost& host);
  // A held request is not scheduled (not fed, swapped in or admitted) until released; it keeps its
  // KV and may still be preempted. For a run waiting for a search. Unknown ids are ignored.
  void hold(uint64_t id, bool held);
  // True when some request may be scheduled (one that is not held).
  bool runnable() const;

  bool empty() const { return seqs_.empty(); }
  size_t size() const { return seqs_.size(); }
  bool contains(uint64_t id) const { return seqs_.count(id) != 0; }
  // Sequence length (prompt + generated) and KV tokens of a request; -1 when unknown.
  int seq_len(uint64_t id) const;
  int kv_tokens(uint64_t id) const;
  int generated(uint64_t id) const;
  // Predicted remaining output tokens of a request now (the estimate srtf orders by; sjf's for
  // other policies); -1 when unknown.
  double predicted_remaining(uint64_t id) const;
  long step() const { return step_; }
  SchedulerStats stats() const;
  const OutputLengthPredictor& predictor() const { return predictor_; }
  const std::map<std::string, double>& tenant_counters() const { return vtc_; }

 private:
  enum class State : uint8_t { kWaiting, kRunning, kSwapped };
  struct Seq {
    SeqInfo info;
    State state = State::kWaiting;
    int computed = 0;      // tokens whose KV is present
    int generated = 0;     // tokens sampled so far
    long arrival = 0;      // arrival order (monotonic)
    long arrival_step = 0; // step at which it (re)entered the waiting queue
    long served = 0;       // tokens fed (MLFQ attained service)
    double predicted_out = 0;
    bool held = false;     // waiting for something outside the scheduler (a search)
    int draft = 0;         // draft tokens its next decode may carry (set_draft)
    long waited = 0;       // steps spent waiting or swapped out since arrival (srtf starvation)
    std::vector<double> length_probs;  // srtf with a trained head: bucket probabilities at admission
    int len() const { return info.prompt_tokens + generated; }
  };

  double priority_key(const Seq& s) const;  // lower = served first
  double remaining_estimate(const Seq& s) const;  // output tokens still to come
  bool srtf_aged(const Seq& s) const;       // srtf: past its wait bound
  bool starved(const Seq& s) const;
  bool higher_priority(const Seq& a, const Seq& b) const;
  std::vector<Seq*> ordered(State st);
  // Preempts the lowest-priority running request that has lower priority than `keep` (or any if
  // keep is null, but never `keep` itself). False when none qualifies.
  bool preempt_one(KvHost& host, const Seq* keep, StepPlan* plan, std::vector<uint64_t>* planned);
  // Swaps `s` out (or drops it for recompute, by options or when the host cannot swap).
  void preempt(Seq& s, KvHost& host, StepPlan* plan);
  void lift_tenant(const std::string& tenant);
  // Tenant share: the running slots `tenant` may hold now (max_running while it is alone), and
  // the running requests per tenant / tenants with requests.
  struct TenantLoad {
    std::unordered_map<std::string, int> running;
    std::unordered_map<std::string, int> waiting;  // waiting, not held
    int tenants = 0;
  };
  TenantLoad tenant_load() const;
  int tenant_limit(const TenantLoad& load) const;

  SchedulerOptions opts_;
  std::unordered_map<uint64_t, Seq> seqs_;
  std::map<std::string, double> vtc_;  // tenant -> virtual token counter
  OutputLengthPredictor predictor_;
  long step_ = 0;
  long next_arrival_ = 0;
  SchedulerStats stats_;
};

}  // namespace ragd::pipelines
