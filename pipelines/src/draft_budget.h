// Private to pipelines: how many draft tokens of each decoding run ride in the next decode step.
//
// A draft token's verification row costs engine time whether or not it is accepted; it pays when
// the tokens it is expected to add are worth more than the time its row adds. On this machine and
// model that trade is measured, not assumed:
//   - StepCostModel fits the engine's step time as t = fixed + per_row · logit rows +
//     per_prefill_row · prefill rows by least squares over the recent steps (a decode row and a
//     draft row cost the same: each is one query through every layer, the output head and the
//     sampler; a prefill row skips the last two), trimming steps slowed by something else. With
//     one decode a step is mostly fixed cost (the weights are read once per step) and drafts are
//     nearly free; with many, the per-row cost dominates and a draft row costs about what a decode
//     row does.
//   - A run's draft token j (1-based) is accepted with probability alpha^j: drafts are verified
//     in order and the first rejection ends the run's accepted prefix, so alpha is the run's
//     per-token acceptance (geometric: accepted tokens over accepted tokens plus rejections),
//     shrunk towards the server's recent acceptance while the run has few drafts of its own.
//     Copying comes in bursts (a quoted clause is accepted whole, then the answer leaves the
//     passage), so alpha is kept in two states (DraftHistory): after a verification that took its
//     whole draft (a copy in progress) and after one that did not.
//   - choose_draft_lengths takes draft tokens in decreasing alpha^j / (per_row + draft_s) while the
//     step's expected tokens per second grow: token j of run i is taken while
//     alpha_i^j · t > T · (per_row + draft_s_i), where T is the step's expected tokens, t its
//     modelled time with the tokens already taken (drafting time included) and draft_s_i what
//     making the token costs (a draft model's step; 0 for n-gram drafts). At
//     batch 1 that keeps long drafts of a run whose drafts are accepted; at a large batch no
//     token is worth its row unless nearly every draft is accepted (the crossover the scheduler
//     turns speculation down at).
//   - A draft model's drafts cost more than their steps: before a run's next draft the draft model
//     must be fed what its KV of the run lacks — the whole prompt at the run's first draft (hundreds
//     to thousands of tokens of passages), the tokens verified since, or the tokens of a stretch the
//     run drafted otherwise. draft_model_pays() is the rule that prices it, per run and step:
//         max over k of  R / (1 + E_k) · (E_k · t / D − k · (per_row + draft_s))  >  feed_s
//     R: the run's expected remaining output tokens (the scheduler's length prediction); D: the
//     step's decode rows; t: the modelled time of that step; E_k = alpha + … + alpha^k: the tokens
//     a k-token draft is expected to add. The run has about R / (1 + E_k) steps left; each adds
//     E_k tokens that the batch would otherwise pay t / D apiece for, at the price of k rows and k
//     drafted tokens; feed_s is the draft model's measured time to feed what it lacks (0 while it
//     lacks at most ModelDrafter::kPrefillFeed tokens: that catch-up is in draft_s). So a long
//     prompt's prefill is paid only for an answer expected long enough and accepted often enough
//     to repay it; a run whose drafts keep being rejected stops drafting with the model (alpha
//     falls until no k saves anything), and the further it falls behind, the more a return would
//     cost. The model also
//     has a rival that costs nothing to make: the n-gram lookup. Where the lookup has a draft the
//     run takes whichever draft is expected to save more; so after a prefill the model drafts
//     only in the steps the lookup leaves to it (on a quoting answer: its first tokens, before
//     the copy starts, and few after), and a prefill buys only those steps' savings. The rule the
//     executor applies is therefore, with m the share of a run's tokens after a prefill that were
//     made in steps the model drafted (measured over the server's recent runs that paid one,
//     ModelShare; m = 1 without a lookup), both sums over R · m tokens:
//         saving(model draft, R · m) − feed_s  >  saving(the lookup's draft now, R · m)
//     (the right side 0 when the lookup has no draft now; the lookup's draft has the run's n-gram
//     acceptance, draft_s 0 and nothing to feed). With nothing to feed this is the plain
//     comparison of the two drafts. The sum is a renewal estimate: the run's last step, whose
//     draft may overrun its end, is left out. Before the step-cost fit the rule follows the
//     unfitted budget: the model drafts while at most kUnfittedMaxDecodes runs decode and the
//     lookup has no draft. A run the rule turns the model down for is not probed with it (a probe
//     would pay the feed); instead the server's estimates of the model's acceptance and of m fade
//     back towards their priors with each run that did not use the model (the executor), so a
//     turned-down model is tried again by a later run.
// Thread-safety: value types owned by the executor's scheduler thread.
#pragma once

#include <algorithm>
#include <cstddef>
#include <span>
#include <vector>

namespace ragd::pipelines {

class StepCostModel {
 public:
  static constexpr int kWindow = 128;  // recent steps the fit uses
  static constexpr int kMinSteps = 8;  // a fit needs this many, with at least two logit-row counts

  // One engine step: `prefill_rows` rows that only fill KV (prefill chunks but their last row) and
  // `logit_rows` rows whose logits are drawn from (decodes, draft rows, a prompt's last row), in
  // `seconds`. The two cost differently: a logit row also pays the output head and the sampler.
  void observe(int prefill_rows, int logit_rows, double seconds);
  // A fit exists (the window once held steps of different logit-row counts). While every recent
  // step has the same count the last fit keeps its shape and scales to their measured times.
  bool fitted() const { return fitted_; }
  double fixed_s() const { return fixed_; }
  double per_row_s() const { return per_row_; }          // per logit row: what a draft row costs
  double per_prefill_row_s() const { return per_prefill_row_; }
  // Modelled seconds of a step of `rows` logit rows and no prefill (0 before a fit).
  double seconds(double rows) const { return fixed_ + per_row_ * rows; }

 private:
  void refit();
  struct Obs {
    int prefill, logits;
    double seconds;
  };
  std::vector<Obs> window_;  // ring of the last kWindow steps
  size_t next_ = 0;
  bool fitted_ = false;
  double fixed_ = 0, per_row_ = 0, per_prefill_row_ = 0;
};

// Per-token acceptance: accepted draft tokens, and the verifications that ended in a rejection
// (each rejection is the failed trial of the geometric model). `decay` < 1 weighs earlier
// verifications down (the server's counts follow its recent runs).
struct DraftAcceptance {
  double accepted = 0, rejections = 0;
  void observe(int drafted, int accepted_now, double decay = 1.0) {
    accepted = decay * accepted + accepted_now;
    rejections = decay * rejections + (accepted_now < drafted ? 1 : 0);
  }
  // Weighs every verification seen so far down by `decay` (their estimate moves back towards the
  // prior as evidence ages).
  void fade(double decay) { accepted *= decay, rejections *= decay; }
  // alpha shrunk towards `prior` with the weight of `prior_trials` trials.
  double alpha(double prior, double prior_trials = 4.0) const {
    return (accepted + prior * prior_trials) / (accepted + rejections + prior_trials);
  }
};

// A drafting run's acceptance in its two states, and the state it is in. The server keeps the
// same counts, decayed, over every run (the prior of a run with few drafts of its own).
struct DraftHistory {
  DraftAcceptance state[2];  // [0] after a rejection (or no draft yet), [1] after a whole draft taken
  bool copying = false;      // the last verification took its whole draft
  int turned_down = 0;       // steps in a row whose proposal the budget left out entirely
  // A run whose proposals the budget keeps leaving out learns nothing new about them, and an
  // estimate made of a few unlucky drafts would stay low for ever: after this many such steps in a
  // row its next proposal's first token is verified anyway (a probe: one row, rarer the larger
  // the batch, where a row is dearer and drafts seldom pay).
  static int probe_interval(int decodes) { return decodes < 4 ? 8 : 2 * decodes; }
  // The length to verify of a proposal of `available` tokens the budget kept `take` of.
  int settle_take(int available, int take, int decodes) {
    if (available <= 0 || take > 0) return turned_down = 0, take;
    if (++turned_down < probe_interval(decodes)) return 0;
    turned_down = 0;
    return 1;
  }
  // The per-token acceptance of the run's next draft, shrunk towards the server's of that state.
  double alpha(const DraftHistory& server) const {
    return state[copying].alpha(server.state[copying].alpha(0.5, 2.0));  // (a + 1) / (a + r + 2)
  }
  void observe(int drafted, int accepted) {
    if (drafted <= 0) return;
    state[copying].observe(drafted, accepted);
    copying = accepted == drafted;
  }
  void fade(double decay) { state[0].fade(decay), state[1].fade(decay); }
};

struct DraftCandidate {
  int available = 0;   // draft tokens the run's drafter proposes (its adaptive length)
  double alpha = 0.5;  // the run's per-token acceptance
  // Seconds that drafting one more of its tokens costs before the step (a draft model's measured
  // time per drafted token, model_drafter.h); 0 for drafts that cost nothing to make (n-grams).
  double draft_s = 0;
};

// Before the first fit, drafts ride whole while at most this many runs decode (where a draft row is
// cheap on any machine), and not at all beyond.
inline constexpr int kUnfittedMaxDecodes = 4;

// How many of each candidate's draft tokens to verify in a step that decodes `decodes` runs (each
// decode row yields one token), under `cost` (not fitted: kUnfittedMaxDecodes). Returns one
// length per candidate, each in [0, available], a prefix of the run's draft.
std::vector<int> choose_draft_lengths(const StepCostModel& cost, int decodes, std::span<const DraftCandidate> candidates);

// m of the rule above: of the tokens runs made after their draft model was first fed (a prefill),
// the share made in steps that drafted with the model, over the server's recent runs that paid
// one (decayed per run). It also fades with each run that paid none, back towards the prior, so
// that a low share the gate then never tests again is tested again later (one prefill).
struct ModelShare {
  double made = 0, span = 0;  // tokens made in model-drafted steps / all tokens, after the prefills
  void observe(double made_now, double span_now, double decay) {
    made = decay * made + made_now;
    span = decay * span + span_now;
  }
  void fade(double decay) { made *= decay, span *= decay; }
  // The share, shrunk towards `prior` with the weight of `prior_tokens` tokens.
  double share(double prior, double prior_tokens) const {
    return std::clamp((made + prior * prior_tokens) / (span + prior_tokens), 0.0, 1.0);
  }
};

// The draft model's gate (the rule above). draft_saving: the sum, the expected seconds drafting
// `c` (draft_s: its time to make per token) saves over `remaining` tokens in steps of `decodes`
// decode rows under a fitted `cost`, at the best draft length k <= c.available (0 when no length
// saves anything). draft_model_pays: whether the draft model's candidate `model` saves more over
// `remaining` · `share` tokens, less `feed_s` (its time to feed what it lacks of the run first),
// than the rival `lookup` (the n-gram lookup's draft now; available 0: none); not fitted: see
// above.
double draft_saving(const StepCostModel& cost, int decodes, const DraftCandidate& c, double remaining);
bool draft_model_pays(const StepCostModel& cost, int decodes, const DraftCandidate& model, double remaining, double feed_s,
                      const DraftCandidate& lookup = {}, double share = 1.0);

}  // namespace ragd::pipelines
