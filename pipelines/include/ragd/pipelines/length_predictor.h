// Output-length prediction for shortest-job-first scheduling.
//
// Per pipeline: a running mean of observed output lengths plus an online least-squares line
// `out = a + b * prompt_tokens` kept as sufficient statistics (n, Σx, Σy, Σx², Σxy) with
// exponential forgetting, so it tracks drifting workloads. Until a pipeline has min_samples
// observations the global mean is used, and before anything is observed the request's
// max_tokens (a safe upper bound).
//
// Accuracy is measured on the fly: every observe() first predicts the same request and records
// the absolute error (MAE) and whether the prediction was within a factor of two.
//
// Thread-safety: not thread-safe; owned by the scheduler thread.
#pragma once

#include <string>
#include <unordered_map>

namespace ragd::pipelines {

struct LengthPredictorOptions {
  int min_samples = 4;        // observations before a pipeline's own line is used
  double decay = 0.995;       // forgetting factor per observation (1 = plain least squares)
};

struct LengthPredictorStats {
  long samples = 0;
  double mae = 0;             // mean absolute error in tokens of the predictions made before observing
  double within_2x = 0;       // fraction of predictions within [actual/2, actual*2]
  double mean_actual = 0;     // mean observed output length
};

class OutputLengthPredictor {
 public:
  explicit OutputLengthPredictor(LengthPredictorOptions opts = {}) : opts_(opts) {}

  // Predicted output tokens, clamped to [1, max_tokens].
  double predict(const std::string& pipeline, int prompt_tokens, int max_tokens) const;
  // Records a finished request's real output length.
  void observe(const std::string& pipeline, int prompt_tokens, int max_tokens, int output_tokens);
  LengthPredictorStats stats() const;

 private:
  struct Fit {
    double n = 0, sx = 0, sy = 0, sxx = 0, sxy = 0;
    void add(double x, double y, double decay);
    bool line(double* a, double* b) const;  // false when x has no spread
  };
  LengthPredictorOptions opts_;
  std::unordered_map<std::string, Fit> per_pipeline_;
  Fit global_;
  long samples_ = 0;
  double abs_err_sum_ = 0, within_2x_ = 0, actual_sum_ = 0;
};

}  // namespace ragd::pipelines
