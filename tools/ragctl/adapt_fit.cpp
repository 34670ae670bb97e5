#include "adapt_fit.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ragd::tools {

namespace {

constexpr size_t kN = pipelines::kNumAdaptSignals;
constexpr double kL2 = 1.0;      // L2 penalty on standardized weights (a N(0, 1) prior)
constexpr double kBiasL2 = 1e-2; // on the bias: keeps it finite when the answers are all right
constexpr int kNewtonSteps = 50;

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

double mean_log_loss(const std::vector<double>& p, const std::vector<FitSample>& s) {
  double l = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    const double q = std::clamp(p[i], 1e-9, 1 - 1e-9);
    l -= s[i].right ? std::log(q) : std::log(1 - q);
  }
  return s.empty() ? 0 : l / static_cast<double>(s.size());
}

// Solves A x = b (A symmetric positive definite, small) by Gaussian elimination with pivoting.
std::array<double, kN + 1> solve(std::array<std::array<double, kN + 1>, kN + 1> a, std::array<double, kN + 1> b) {
  constexpr size_t n = kN + 1;
  for (size_t c = 0; c < n; ++c) {
    size_t piv = c;
    for (size_t r = c + 1; r < n; ++r)
      if (std::abs(a[r][c]) > std::abs(a[piv][c])) piv = r;
    std::swap(a[c], a[piv]);
    std::swap(b[c], b[piv]);
    if (std::abs(a[c][c]) < 1e-12) continue;
    for (size_t r = 0; r < n; ++r) {
      if (r == c) continue;
      const double f = a[r][c] / a[c][c];
      for (size_t k = c; k < n; ++k) a[r][k] -= f * a[c][k];
      b[r] -= f * b[c];
    }
  }
  std::array<double, n> x{};
  for (size_t i = 0; i < n; ++i) x[i] = std::abs(a[i][i]) < 1e-12 ? 0 : b[i] / a[i][i];
  return x;
}

}  // namespace

double auc(const std::vector<double>& score, const std::vector<bool>& right) {
  std::vector<size_t> idx(score.size());
  std::iota(idx.begin(), idx.end(), size_t{0});
  std::sort(idx.begin(), idx.end(), [&](size_t a, size_t b) { return score[a] < score[b]; });
  // Mann-Whitney U with mid-ranks for ties.
  double rank_sum = 0;
  size_t pos = 0, npos = 0;
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j < idx.size() && score[idx[j]] == score[idx[i]]) ++j;
    const double mid = (static_cast<double>(i) + static_cast<double>(j - 1)) / 2.0 + 1.0;
    for (size_t k = i; k < j; ++k)
      if (right[idx[k]]) {
        rank_sum += mid;
        ++pos;
      }
    i = j;
  }
  npos = score.size() - pos;
  if (pos == 0 || npos == 0) return 0.5;
  const double u = rank_sum - static_cast<double>(pos) * static_cast<double>(pos + 1) / 2.0;
  return u / (static_cast<double>(pos) * static_cast<double>(npos));
}

CandidateFit fit_candidate(const std::vector<FitSample>& s) {
  CandidateFit out;
  pipelines::AdaptModel& m = out.model;
  const size_t n = s.size();
  m.fit_samples = static_cast<int>(n);
  if (n == 0) return out;
  double right = 0;
  for (const auto& x : s) right += x.right;
  m.fit_accuracy = right / static_cast<double>(n);
  // Standardize the signals.
  std::array<double, kN> mu{}, sd{};
  for (size_t j = 0; j < kN; ++j) {
    for (const auto& x : s) mu[j] += x.signals[j];
    mu[j] /= static_cast<double>(n);
    for (const auto& x : s) sd[j] += (x.signals[j] - mu[j]) * (x.signals[j] - mu[j]);
    sd[j] = std::sqrt(sd[j] / static_cast<double>(n));
  }
  auto z = [&](const FitSample& x, size_t j) { return sd[j] > 1e-12 ? (x.signals[j] - mu[j]) / sd[j] : 0.0; };
  std::array<double, kN + 1> w{};  // bias, standardized weights
  const double acc = std::clamp(m.fit_accuracy, 1e-3, 1 - 1e-3);
  w[0] = std::log(acc / (1 - acc));
  auto features = [&](const FitSample& x) {
    std::array<double, kN + 1> f{};
    f[0] = 1;
    for (size_t j = 0; j < kN; ++j) f[j + 1] = z(x, j);
    return f;
  };
  // The penalized negative log-likelihood (the bias barely penalized: separable data stay finite).
  auto objective = [&](const std::array<double, kN + 1>& v) {
    double l = 0;
    for (const auto& x : s) {
      const auto f = features(x);
      double zz = 0;
      for (size_t j = 0; j <= kN; ++j) zz += v[j] * f[j];
      // log(1 + e^z) - y z, computed stably
      l += (zz > 0 ? zz + std::log1p(std::exp(-zz)) : std::log1p(std::exp(zz))) - (x.right ? zz : 0.0);
    }
    double pen = kBiasL2 * v[0] * v[0];
    for (size_t j = 1; j <= kN; ++j) pen += kL2 * v[j] * v[j];
    return l + 0.5 * pen;
  };
  double cur = objective(w);
  for (int step = 0; step < kNewtonSteps; ++step) {
    std::array<double, kN + 1> grad{};
    std::array<std::array<double, kN + 1>, kN + 1> hess{};
    for (const auto& x : s) {
      const auto f = features(x);
      double zz = 0;
      for (size_t j = 0; j <= kN; ++j) zz += w[j] * f[j];
      const double p = sigmoid(zz);
      const double r = p - (x.right ? 1.0 : 0.0);
      for (size_t a = 0; a <= kN; ++a) {
        grad[a] += r * f[a];
        for (size_t b = 0; b <= kN; ++b) hess[a][b] += p * (1 - p) * f[a] * f[b];
      }
    }
    grad[0] += kBiasL2 * w[0];
    hess[0][0] += kBiasL2;
    for (size_t j = 1; j <= kN; ++j) {
      grad[j] += kL2 * w[j];
      hess[j][j] += kL2;
    }
    const auto d = solve(hess, grad);
    // Backtracking: halve the Newton step until the objective does not rise.
    double t = 1;
    std::array<double, kN + 1> next{};
    double val = cur;
    for (int k = 0; k < 30; ++k, t /= 2) {
      for (size_t j = 0; j <= kN; ++j) next[j] = w[j] - t * d[j];
      val = objective(next);
      if (val <= cur) break;
    }
    if (!(val <= cur)) break;
    const double gain = cur - val;
    w = next;
    cur = val;
    if (gain < 1e-10) break;
  }
  // Back to raw units.
  m.quality[0] = w[0];
  for (size_t j = 0; j < kN; ++j) {
    const double raw = sd[j] > 1e-12 ? w[j + 1] / sd[j] : 0.0;
    m.quality[j + 1] = raw;
    m.quality[0] -= raw * mu[j];
    out.signals[j].weight = w[j + 1];
    std::vector<double> score;
    std::vector<bool> r;
    for (const auto& x : s) {
      score.push_back(x.signals[j]);
      r.push_back(x.right);
    }
    out.signals[j].auc = auc(score, r);
  }
  std::vector<double> p, base(n, m.fit_accuracy);
  for (const auto& x : s) {
    double zz = m.quality[0];
    for (size_t j = 0; j < kN; ++j) zz += m.quality[j + 1] * x.signals[j];
    p.push_back(sigmoid(zz));
  }
  out.log_loss = mean_log_loss(p, s);
  out.base_log_loss = mean_log_loss(base, s);
  // TTFT = idle + per_run * ahead.
  double ma = 0, mt = 0;
  for (const auto& x : s) {
    ma += x.ahead;
    mt += x.ttft_ms;
  }
  ma /= static_cast<double>(n);
  mt /= static_cast<double>(n);
  double sxx = 0, sxy = 0;
  for (const auto& x : s) {
    sxx += (x.ahead - ma) * (x.ahead - ma);
    sxy += (x.ahead - ma) * (x.ttft_ms - mt);
  }
  if (sxx > 1e-9) {
    m.ttft_per_run_ms = std::max(0.0, sxy / sxx);
    m.ttft_idle_ms = std::max(0.0, mt - m.ttft_per_run_ms * ma);
  } else {
    m.ttft_idle_ms = mt;
    m.ttft_per_run_ms = mt;
  }
  return out;
}

}  // namespace ragd::tools
