// Fitting an adaptive pipeline's profile (`ragctl eval --fit-adapt`): for each candidate, the
// logistic model of a right answer over the query signals (pipelines::QuerySignals::features) and
// the time-to-first-token model (idle time + time per run ahead), from one run of every fit
// question with that candidate forced; and the report of which signal predicts what.
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "ragd/pipelines/adapt_policy.h"

namespace ragd::tools {

// One answered fit question under one candidate.
struct FitSample {
  std::array<double, pipelines::kNumAdaptSignals> signals{};
  bool right = false;   // exact match
  double ttft_ms = 0;
  int ahead = 0;        // runs ahead when the choice was made (usage.adapt.load.ahead)
};

struct SignalReport {
  double weight = 0;  // standardized logistic weight (per standard deviation of the signal)
  double auc = 0.5;   // how well the signal alone ranks right answers above wrong ones (0.5 = not at all)
};

struct CandidateFit {
  pipelines::AdaptModel model;
  std::array<SignalReport, pipelines::kNumAdaptSignals> signals{};
  double log_loss = 0;       // mean, in-sample
  double base_log_loss = 0;  // of the constant model (the mean accuracy): what the signals gain
};

// Logistic regression with an L2 penalty on standardized signals (damped Newton steps), then mapped
// back to raw signal units; a signal that does not vary gets weight 0. TTFT: least squares of
// ttft on `ahead` when `ahead` varies; otherwise the mean TTFT as the idle time and the same as the
// time per run ahead (a run ahead costs about one service time).
CandidateFit fit_candidate(const std::vector<FitSample>& samples);

// Area under the ROC curve of `score` for `right` (ties count one half); 0.5 when one class is empty.
double auc(const std::vector<double>& score, const std::vector<bool>& right);

}  // namespace ragd::tools
