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
  double work_ahead = 0;  // their prefill and reranking tokens (usage.adapt.load.work_ahead_tokens)
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

// The TTFT quantile model of every candidate (pipelines::AdaptModel::ttft_q), fitted jointly on
// samples[c] (candidate c's answers at every load level): a TTFT of candidate c is predicted as
//   intercept[c] + per_run * ahead + per_ktoken * work_ahead / 1000,
// one intercept per candidate (its own prefill and reranking) and slopes shared by all (the wait
// behind the runs ahead: the candidates' different work per run is what tells the two slopes
// apart). Linear quantile regression: the pinball loss of `quantile` minimized by the MM algorithm
// of Hunter and Lange (2000), iteratively reweighted least squares. A slope that comes out negative
// is dropped (0) and the rest refitted: a queue never shortens a wait.
struct QuantileFit {
  double quantile = 0;
  std::vector<std::array<double, 3>> models;  // per candidate: [intercept ms, per run ahead, per 1000 tokens ahead]
  std::vector<double> coverage;               // per candidate: in-sample fraction of TTFTs <= the prediction
  double loss = 0;                            // mean pinball loss (ms)
};
QuantileFit fit_ttft_quantile(const std::vector<std::vector<FitSample>>& samples, double quantile);
// The prediction of a fitted model for one sample.
double predict_ttft_quantile(const std::array<double, 3>& m, const FitSample& s);
// Mean pinball loss of `quantile` for the residuals y - prediction.
double pinball_loss(const std::vector<double>& y, const std::vector<double>& pred, double quantile);

// Area under the ROC curve of `score` for `right` (ties count one half); 0.5 when one class is empty.
double auc(const std::vector<double>& score, const std::vector<bool>& right);

}  // namespace ragd::tools
