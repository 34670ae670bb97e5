// Private to pipelines: how many draft tokens of each decoding run ride in the next decode step.
//
// A draft token's verification row costs engine time whether or not it is accepted; it pays when
// the tokens it is expected to add are worth more than the time its row adds. On this machine and
// model that trade is measured, not assumed:
//   - StepCostModel fits the engine's step time as t(rows) = fixed + per_row · rows by least
//     squares over the median time of each row count among the recent decode-only steps (a decode row and a draft row cost the same: each
//     is one query over the sequence's KV through every layer). With one decode a step is mostly
//     fixed cost (the weights are read once per step) and drafts are nearly free; with many, the
//     per-row cost dominates and a draft row costs about what a decode row does.
//   - A run's draft token j (1-based) is accepted with probability alpha^j: drafts are verified
//     in order and the first rejection ends the run's accepted prefix, so alpha is the run's
//     per-token acceptance (geometric: accepted tokens over accepted tokens plus rejections),
//     shrunk towards the server's recent acceptance while the run has few drafts of its own.
//   - choose_draft_lengths takes draft tokens in decreasing alpha^j while the step's expected
//     tokens per second grow: token j of run i is taken while alpha_i^j · t > T · per_row, where
//     T is the step's expected tokens and t its modelled time with the tokens already taken. At
//     batch 1 that keeps long drafts of a run whose drafts are accepted; at a large batch no
//     token is worth its row unless nearly every draft is accepted (the crossover the scheduler
//     turns speculation down at).
// Thread-safety: value types owned by the executor's scheduler thread.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace ragd::pipelines {

class StepCostModel {
 public:
  static constexpr int kWindow = 128;  // recent decode-only steps the fit uses
  static constexpr int kMinSteps = 8;  // a fit needs this many with at least two row counts

  // One decode-only engine step: `rows` logits-bearing rows (decodes plus draft rows) in `seconds`.
  void observe(int rows, double seconds);
  // A fit exists (the window once held steps of different row counts); the last one stays while
  // every recent step had the same row count.
  bool fitted() const { return fitted_; }
  double fixed_s() const { return fixed_; }
  double per_row_s() const { return per_row_; }
  // Modelled seconds of a step of `rows` rows (0 before a fit).
  double seconds(double rows) const { return fixed_ + per_row_ * rows; }

 private:
  void refit();
  struct Obs {
    int rows;
    double seconds;
  };
  std::vector<Obs> window_;  // ring of the last kWindow steps
  size_t next_ = 0;
  bool fitted_ = false;
  double fixed_ = 0, per_row_ = 0;
};

// Per-token acceptance of one drafting run: accepted draft tokens, and the verifications that
// ended in a rejection (each rejection is the failed trial of the geometric model).
struct DraftAcceptance {
  long accepted = 0, rejections = 0;
  void observe(int drafted, int accepted_now) {
    accepted += accepted_now;
    rejections += accepted_now < drafted ? 1 : 0;
  }
  // alpha shrunk towards `prior` with the weight of `prior_trials` trials.
  double alpha(double prior, double prior_trials = 4.0) const {
    return (static_cast<double>(accepted) + prior * prior_trials) /
           (static_cast<double>(accepted + rejections) + prior_trials);
  }
};

struct DraftCandidate {
  int available = 0;   // draft tokens the run's drafter proposes (its adaptive length)
  double alpha = 0.5;  // the run's per-token acceptance
};

// How many of each candidate's draft tokens to verify in a step that decodes `decodes` runs (each
// decode row yields one token), under `cost` (not fitted: every proposed token rides). Returns one
// length per candidate, each in [0, available], a prefix of the run's draft.
std::vector<int> choose_draft_lengths(const StepCostModel& cost, int decodes, std::span<const DraftCandidate> candidates);

}  // namespace ragd::pipelines
