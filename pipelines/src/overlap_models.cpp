#include "overlap_models.h"

#include <algorithm>
#include <cmath>

namespace ragd::pipelines {

namespace {
constexpr size_t kSearchWindow = 64;
constexpr size_t kAccuracyWindow = 5;
constexpr double kAccuracyCap = 0.6;
constexpr double kEwma = 0.3;

double ewma(double old, double x) { return old == 0 ? x : (1 - kEwma) * old + kEwma * x; }
}  // namespace

void SearchTimeModel::observe(int nprobe, double ms) {
  std::lock_guard<std::mutex> lk(mu_);
  obs_.emplace_back(std::max(1, nprobe), std::max(0.0, ms));
  if (obs_.size() > kSearchWindow) obs_.pop_front();
}

double SearchTimeModel::predict_locked(int nprobe) const {
  if (obs_.empty()) return 0;
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const auto& [x, y] : obs_) {
    sx += x;
    sy += y;
    sxx += static_cast<double>(x) * x;
    sxy += x * y;
  }
  const double n = static_cast<double>(obs_.size());
  const double var = sxx - sx * sx / n;
  if (var < 1e-9) {
    // One nprobe seen so far: assume half of the time is fixed and half scales with nprobe.
    const double x = sx / n, y = sy / n;
    return y * (0.5 + 0.5 * nprobe / x);
  }
  const double b = std::max(0.0, (sxy - sx * sy / n) / var);
  const double a = std::max(0.0, (sy - b * sx) / n);
  return a + b * nprobe;
}

double SearchTimeModel::predict(int nprobe) const {
  std::lock_guard<std::mutex> lk(mu_);
  return predict_locked(nprobe);
}

int SearchTimeModel::choose(double budget_ms, int max_nprobe) const {
  max_nprobe = std::max(1, max_nprobe);
  std::lock_guard<std::mutex> lk(mu_);
  if (obs_.empty()) return max_nprobe;
  int best = 1;
  for (int p = 1;; p = std::min(max_nprobe, p * 2)) {
    if (predict_locked(p) <= budget_ms) best = p;
    if (p == max_nprobe) break;
  }
  return best;
}

void SpecStride::observe_step_ms(double ms) { step_ms_ = ewma(step_ms_, std::max(ms, 1e-3)); }
void SpecStride::observe_verify_ms(double ms) { verify_ms_ = ewma(verify_ms_, std::max(ms, 1e-3)); }

void SpecStride::observe(bool hit) {
  window_.push_back(hit);
  if (window_.size() > kAccuracyWindow) window_.pop_front();
}

double SpecStride::accuracy() const {
  if (window_.empty()) return 0.5;
  const double hits = static_cast<double>(std::count(window_.begin(), window_.end(), true));
  return std::min(kAccuracyCap, hits / static_cast<double>(window_.size()));
}

double SpecStride::hit_rate() const {
  if (window_.empty()) return 1.0;
  return static_cast<double>(std::count(window_.begin(), window_.end(), true)) / static_cast<double>(window_.size());
}

int SpecStride::stride(int max_stride) const {
  max_stride = std::max(1, max_stride);
  if (step_ms_ == 0 || verify_ms_ == 0) return std::min(2, max_stride);
  const double g = accuracy();
  int best = 1;
  double best_rate = 0;
  for (int s = 1; s <= max_stride; ++s) {
    const double settled = (1 - std::pow(g, s)) / (1 - g);
    const double rate = settled / (s * step_ms_ + verify_ms_);
    if (rate > best_rate * (1 + 1e-9)) {
      best_rate = rate;
      best = s;
    }
  }
  return best;
}

}  // namespace ragd::pipelines
