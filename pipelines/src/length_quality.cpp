#include "ragd/pipelines/length_quality.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace ragd::pipelines {

double kendall_tau(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n = std::min(a.size(), b.size());
  double concordant = 0, discordant = 0, ties_a = 0, ties_b = 0;
  for (size_t i = 0; i < n; ++i)
    for (size_t j = i + 1; j < n; ++j) {
      const double da = a[i] - a[j], db = b[i] - b[j];
      if (da == 0 && db == 0) continue;  // tied in both: in neither count
      if (da == 0) ties_a += 1;
      else if (db == 0) ties_b += 1;
      else if ((da > 0) == (db > 0)) concordant += 1;
      else discordant += 1;
    }
  const double den = std::sqrt((concordant + discordant + ties_a) * (concordant + discordant + ties_b));
  return den > 0 ? (concordant - discordant) / den : 0.0;
}

double range_accuracy(const std::vector<double>& predicted, const std::vector<double>& actual, const std::vector<int>& edges) {
  auto bucket = [&](double v) {
    for (size_t k = 0; k < edges.size(); ++k)
      if (v <= edges[k]) return k;
    return edges.size();
  };
  const size_t n = std::min(predicted.size(), actual.size());
  if (n == 0) return 0;
  size_t hit = 0;
  for (size_t i = 0; i < n; ++i) hit += bucket(std::round(predicted[i])) == bucket(actual[i]);
  return static_cast<double>(hit) / n;
}

double mean_abs_error(const std::vector<double>& predicted, const std::vector<double>& actual) {
  const size_t n = std::min(predicted.size(), actual.size());
  if (n == 0) return 0;
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::abs(predicted[i] - actual[i]);
  return s / n;
}

}  // namespace ragd::pipelines
