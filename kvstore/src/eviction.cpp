#include "ragd/kvstore/eviction.h"

#include <algorithm>

#include <fmt/format.h>

namespace ragd::kvstore {

Result<PrefillCostModel> PrefillCostModel::from_grid(std::vector<int> gc, std::vector<int> gn, std::vector<double> s) {
  if (gc.size() < 2 || gn.size() < 2)
    return Status::InvalidArgument("prefill cost model: need at least 2 grid points for cached and for new tokens");
  for (size_t i = 1; i < gc.size(); ++i)
    if (gc[i] <= gc[i - 1]) return Status::InvalidArgument("prefill cost model: cached grid must be strictly increasing");
  for (size_t i = 1; i < gn.size(); ++i)
    if (gn[i] <= gn[i - 1]) return Status::InvalidArgument("prefill cost model: new-token grid must be strictly increasing");
  if (gc[0] < 0 || gn[0] <= 0) return Status::InvalidArgument("prefill cost model: grid must have cached >= 0 and new > 0");
  if (s.size() != gc.size() * gn.size())
    return Status::InvalidArgument(fmt::format("prefill cost model: {} timings for a {}x{} grid", s.size(), gc.size(), gn.size()));
  for (double v : s)
    if (!(v > 0)) return Status::InvalidArgument(fmt::format("prefill cost model: timing {} is not positive", v));
  PrefillCostModel m;
  m.grid_cached_ = std::move(gc);
  m.grid_new_ = std::move(gn);
  m.seconds_ = std::move(s);
  return m;
}

Result<PrefillCostModel> PrefillCostModel::profile(const std::function<Result<double>(int, int)>& measure,
                                                   std::vector<int> gc, std::vector<int> gn) {
  std::vector<double> s;
  s.reserve(gc.size() * gn.size());
  for (int c : gc)
    for (int n : gn) {
      Result<double> t = measure(c, n);
      if (!t.ok()) return t.status();
      s.push_back(*t);
    }
  return from_grid(std::move(gc), std::move(gn), std::move(s));
}

namespace {
// Index i with g[i] <= x <= g[i+1] (clamped to the ends) and the fraction in that cell
// (may be < 0 or > 1 outside the grid: linear extrapolation).
void locate(const std::vector<int>& g, double x, size_t* i, double* t) {
  size_t k = 0;
  while (k + 2 < g.size() && x > g[k + 1]) ++k;
  *i = k;
  *t = (x - g[k]) / static_cast<double>(g[k + 1] - g[k]);
}
}  // namespace

double PrefillCostModel::seconds(double cached, double fresh) const {
  if (fresh <= 0) return 0.0;
  if (seconds_.empty()) return fresh * (1.0 + (cached + fresh / 2.0) / 4096.0) * 1e-4;
  size_t ic, in;
  double tc, tn;
  locate(grid_cached_, cached, &ic, &tc);
  tc = std::clamp(tc, 0.0, 1.0);  // clamp in cached
  locate(grid_new_, fresh, &in, &tn);
  const size_t w = grid_new_.size();
  auto at = [&](size_t c, size_t n) { return seconds_[c * w + n]; };
  const double a = at(ic, in) + (at(ic, in + 1) - at(ic, in)) * tn;
  const double b = at(ic + 1, in) + (at(ic + 1, in + 1) - at(ic + 1, in)) * tn;
  const double v = a + (b - a) * tc;
  // Extrapolation below the first grid point may reach 0 or below: keep costs positive.
  return std::max(v, 1e-9 * fresh);
}

std::string PrefillCostModel::to_json() const {
  if (seconds_.empty()) return R"({"profiled":false})";
  std::string s = R"({"profiled":true,"cached":[)";
  for (size_t i = 0; i < grid_cached_.size(); ++i) s += fmt::format("{}{}", i ? "," : "", grid_cached_[i]);
  s += R"(],"new":[)";
  for (size_t i = 0; i < grid_new_.size(); ++i) s += fmt::format("{}{}", i ? "," : "", grid_new_[i]);
  s += R"(],"seconds":[)";
  for (size_t i = 0; i < seconds_.size(); ++i) s += fmt::format("{}{:.6g}", i ? "," : "", seconds_[i]);
  return s + "]}";
}

}  // namespace ragd::kvstore
