#include "adapt_fit.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

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

// Solves A x = b for a small dense A (Gaussian elimination with partial pivoting); a column
// without a pivot gets 0.
std::vector<double> solve_dense(std::vector<std::vector<double>> a, std::vector<double> b) {
  const size_t n = b.size();
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
  std::vector<double> x(n, 0.0);
  for (size_t i = 0; i < n; ++i) x[i] = std::abs(a[i][i]) < 1e-12 ? 0 : b[i] / a[i][i];
  return x;
}

// Solves A x = b (A symmetric positive definite, small): solve_dense on the fixed-size system.
std::array<double, kN + 1> solve(const std::array<std::array<double, kN + 1>, kN + 1>& a, const std::array<double, kN + 1>& b) {
  std::vector<std::vector<double>> rows;
  rows.reserve(a.size());
  for (const auto& r : a) rows.emplace_back(r.begin(), r.end());
  const std::vector<double> x = solve_dense(std::move(rows), std::vector<double>(b.begin(), b.end()));
  std::array<double, kN + 1> out{};
  std::copy(x.begin(), x.end(), out.begin());
  return out;
}

constexpr int kQuantileIters = 500;  // MM steps per smoothing level

}  // namespace

double predict_ttft_quantile(const std::array<double, 3>& m, const FitSample& s) {
  return m[0] + m[1] * s.ahead + m[2] * s.work_ahead / 1000.0;
}

double pinball_loss(const std::vector<double>& y, const std::vector<double>& pred, double quantile) {
  double l = 0;
  for (size_t i = 0; i < y.size(); ++i) {
    const double r = y[i] - pred[i];
    l += r >= 0 ? quantile * r : (quantile - 1) * r;
  }
  return y.empty() ? 0 : l / static_cast<double>(y.size());
}

QuantileFit fit_ttft_quantile(const std::vector<std::vector<FitSample>>& samples, double quantile) {
  QuantileFit out;
  out.quantile = quantile;
  const size_t nc = samples.size();
  out.models.assign(nc, {0, 0, 0});
  out.coverage.assign(nc, 0);
  // Rows: (candidate, ahead, work ahead / 1000, ttft).
  struct Row {
    size_t c;
    double x[2], y;
  };
  std::vector<Row> rows;
  for (size_t c = 0; c < nc; ++c)
    for (const auto& s : samples[c]) rows.push_back({c, {static_cast<double>(s.ahead), s.work_ahead / 1000.0}, s.ttft_ms});
  if (rows.empty()) return out;
  std::array<bool, 2> use = {true, true};
  // A slope whose column does not vary cannot be fitted.
  for (size_t j = 0; j < 2; ++j) {
    double lo = rows[0].x[j], hi = rows[0].x[j];
    for (const auto& r : rows) lo = std::min(lo, r.x[j]), hi = std::max(hi, r.x[j]);
    use[j] = hi - lo > 1e-9;
  }
  std::vector<double> beta;
  for (int attempt = 0; attempt < 3; ++attempt) {
    std::vector<size_t> slope_col(2, SIZE_MAX);
    size_t p = nc;
    for (size_t j = 0; j < 2; ++j)
      if (use[j]) slope_col[j] = p++;
    auto features = [&](const Row& r) {
      std::vector<double> f(p, 0.0);
      f[r.c] = 1;
      for (size_t j = 0; j < 2; ++j)
        if (use[j]) f[slope_col[j]] = r.x[j];
      return f;
    };
    auto step = [&](const std::vector<double>* b, double eps) {  // null: ordinary least squares (the start)
      std::vector<std::vector<double>> a(p, std::vector<double>(p, 0.0));
      std::vector<double> rhs(p, 0.0);
      for (const auto& r : rows) {
        const auto f = features(r);
        double w = 1, lin = 0;
        if (b) {
          double pred = 0;
          for (size_t k = 0; k < p; ++k) pred += (*b)[k] * f[k];
          w = 1.0 / (eps + std::abs(r.y - pred));
          lin = 2 * quantile - 1;
        }
        for (size_t i = 0; i < p; ++i) {
          rhs[i] += (w * r.y + lin) * f[i];
          for (size_t k = 0; k < p; ++k) a[i][k] += w * f[i] * f[k];
        }
      }
      for (size_t i = 0; i < p; ++i) a[i][i] += 1e-9;  // an unused candidate's empty row
      return solve_dense(std::move(a), std::move(rhs));
    };
    beta = step(nullptr, 0);
    // The smoothing shrinks as the fit converges: a coarse one moves fast, a fine one lands on the
    // pinball loss's own minimum.
    for (double eps : {1.0, 1e-2, 1e-4, 1e-6})
      for (int it = 0; it < kQuantileIters; ++it) {
        std::vector<double> next = step(&beta, eps);
        double change = 0, size = 1;
        for (size_t k = 0; k < p; ++k)
          change = std::max(change, std::abs(next[k] - beta[k])), size = std::max(size, std::abs(next[k]));
        beta = std::move(next);
        if (change < 1e-9 * size) break;
      }
    // The minimum of the pinball loss lies where p residuals are 0 (a vertex of its linear
    // program): snap to the one through the p points nearest the smoothed fit, when that is better.
    {
      auto loss_of = [&](const std::vector<double>& b) {
        double l = 0;
        for (const auto& r : rows) {
          const auto f = features(r);
          double pred = 0;
          for (size_t k = 0; k < p; ++k) pred += b[k] * f[k];
          const double res = r.y - pred;
          l += res >= 0 ? quantile * res : (quantile - 1) * res;
        }
        return l;
      };
      std::vector<std::pair<double, size_t>> near;
      for (size_t i = 0; i < rows.size(); ++i) {
        const auto f = features(rows[i]);
        double pred = 0;
        for (size_t k = 0; k < p; ++k) pred += beta[k] * f[k];
        near.emplace_back(std::abs(rows[i].y - pred), i);
      }
      std::sort(near.begin(), near.end());
      // Greedily the nearest rows that are linearly independent (kept in reduced form in `basis`).
      std::vector<std::vector<double>> basis, a;
      std::vector<double> rhs;
      for (const auto& [d, i] : near) {
        if (a.size() == p) break;
        std::vector<double> v = features(rows[i]);
        for (const auto& bv : basis) {
          size_t lead = 0;
          while (lead < p && std::abs(bv[lead]) < 1e-12) ++lead;
          const double f = v[lead] / bv[lead];
          for (size_t k = 0; k < p; ++k) v[k] -= f * bv[k];
        }
        double mx = 0;
        for (double x : v) mx = std::max(mx, std::abs(x));
        if (mx < 1e-9) continue;
        basis.push_back(v);
        a.push_back(features(rows[i]));
        rhs.push_back(rows[i].y);
      }
      if (a.size() == p) {
        std::vector<double> vertex = solve_dense(a, rhs);
        if (loss_of(vertex) <= loss_of(beta)) beta = std::move(vertex);
      }
    }
    bool refit = false;
    for (size_t j = 0; j < 2; ++j)
      if (use[j] && beta[slope_col[j]] < 0) use[j] = false, refit = true;
    for (size_t c = 0; c < nc; ++c) {
      out.models[c] = {beta[c], 0, 0};
      for (size_t j = 0; j < 2; ++j)
        if (use[j] && slope_col[j] != SIZE_MAX && !refit) out.models[c][j + 1] = beta[slope_col[j]];
    }
    if (!refit) break;
  }
  std::vector<double> y, pred;
  for (size_t c = 0; c < nc; ++c) {
    int under = 0;
    for (const auto& s : samples[c]) {
      const double q = predict_ttft_quantile(out.models[c], s);
      under += s.ttft_ms <= q + 1e-9;
      y.push_back(s.ttft_ms);
      pred.push_back(q);
    }
    out.coverage[c] = samples[c].empty() ? 0 : static_cast<double>(under) / static_cast<double>(samples[c].size());
  }
  out.loss = pinball_loss(y, pred, quantile);
  return out;
}

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
