#include "ragd/pipelines/length_predictor.h"

#include <algorithm>
#include <cmath>

namespace ragd::pipelines {

void OutputLengthPredictor::Fit::add(double x, double y, double decay) {
  n = n * decay + 1;
  sx = sx * decay + x;
  sy = sy * decay + y;
  sxx = sxx * decay + x * x;
  sxy = sxy * decay + x * y;
}

bool OutputLengthPredictor::Fit::line(double* a, double* b) const {
  if (n <= 0) return false;
  const double mx = sx / n, my = sy / n;
  const double var = sxx / n - mx * mx;
  if (!(var > 1e-6 * std::max(1.0, mx * mx))) {
    *a = my;
    *b = 0;
    return true;
  }
  *b = (sxy / n - mx * my) / var;
  *a = my - *b * mx;
  return true;
}

double OutputLengthPredictor::predict(const std::string& pipeline, int prompt_tokens, int max_tokens) const {
  const double hi = std::max(1, max_tokens);
  double a = 0, b = 0;
  auto it = per_pipeline_.find(pipeline);
  double p;
  if (it != per_pipeline_.end() && it->second.n >= opts_.min_samples && it->second.line(&a, &b)) {
    p = a + b * prompt_tokens;
  } else if (global_.n > 0) {
    p = global_.sy / global_.n;
  } else {
    p = hi;
  }
  return std::clamp(p, 1.0, hi);
}

void OutputLengthPredictor::observe(const std::string& pipeline, int prompt_tokens, int max_tokens,
                                    int output_tokens) {
  const double pred = predict(pipeline, prompt_tokens, max_tokens);
  const double actual = std::max(1, output_tokens);
  ++samples_;
  abs_err_sum_ += std::abs(pred - actual);
  if (pred >= actual / 2 && pred <= actual * 2) within_2x_ += 1;
  actual_sum_ += actual;
  per_pipeline_[pipeline].add(prompt_tokens, actual, opts_.decay);
  global_.add(prompt_tokens, actual, opts_.decay);
}

LengthPredictorStats OutputLengthPredictor::stats() const {
  LengthPredictorStats s;
  s.samples = samples_;
  if (samples_ > 0) {
    s.mae = abs_err_sum_ / samples_;
    s.within_2x = within_2x_ / samples_;
    s.mean_actual = actual_sum_ / samples_;
  }
  return s;
}

}  // namespace ragd::pipelines
