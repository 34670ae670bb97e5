#include "measured_compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "ragd/common/json_writer.h"

namespace ragd::tools {

namespace {

struct MetricDef {
  const char* name;  // one of kRunMetricNames
  double target;     // 0 = none
  bool points;       // error and spread in points (hit rate), else % of the real mean
};
// The simulator validation's targets (docs/design/simulator.md, "Validation").
constexpr MetricDef kMetrics[] = {
    {"ttft_p50_ms", 10, false}, {"ttft_p99_ms", 20, false}, {"req_per_s", 10, false},
    {"tpot_p50_ms", 0, false},  {"hit_pct", 2, true},
};

}  // namespace

std::vector<CompareRow> compare_with_real(const RunMetrics& predicted, const std::vector<RunMetrics>& real) {
  std::vector<CompareRow> rows;
  if (real.empty()) return rows;
  for (const MetricDef& d : kMetrics) {
    CompareRow r;
    r.metric = d.name;
    double lo = 0, hi = 0, sum = 0;
    for (size_t i = 0; i < real.size(); ++i) {
      const double v = metric(real[i], d.name);
      r.real.push_back(v);
      lo = i == 0 ? v : std::min(lo, v);
      hi = i == 0 ? v : std::max(hi, v);
      sum += v;
    }
    r.real_mean = sum / static_cast<double>(real.size());
    r.predicted = metric(predicted, d.name);
    r.points = d.points;
    if (d.points) {
      r.spread = (hi - lo) / 2;
      r.error = r.predicted - r.real_mean;
    } else {
      r.spread = r.real_mean != 0 ? 100 * (hi - lo) / 2 / r.real_mean : 0;
      r.error = r.real_mean != 0 ? 100 * (r.predicted / r.real_mean - 1) : 0;
    }
    r.target = d.target;
    r.within = d.target == 0 || std::abs(r.error) <= d.target;
    rows.push_back(std::move(r));
  }
  return rows;
}

Result<std::vector<RunMetrics>> load_real_runs(const std::vector<std::string>& paths) {
  std::vector<RunMetrics> out;
  for (const std::string& p : paths) {
    auto br = load_bench_result(p);
    if (!br.ok()) return Status::InvalidArgument("--real " + p + ": " + br.status().message());
    if (br->runs.size() != 1)
      return Status::InvalidArgument("--real " + p + ": holds " + std::to_string(br->runs.size()) +
                                     " runs; give one `ragctl bench --json` file per measured run");
    if (!br->runs[0].has_samples)
      return Status::InvalidArgument("--real " + p + ": no per-request records (written by an older ragctl bench)");
    out.push_back(run_metrics(br->runs[0]));
  }
  if (out.empty()) return Status::InvalidArgument("--real: no file given");
  return out;
}

std::string format_comparison(const std::vector<CompareRow>& rows, const std::string& predicted_as) {
  std::string s;
  char buf[512];
  const size_t n = rows.empty() ? 0 : rows.front().real.size();
  std::snprintf(buf, sizeof buf, "measured (%zu run%s) against the prediction (%s):\n", n, n == 1 ? "" : "s",
                predicted_as.c_str());
  s += buf;
  std::snprintf(buf, sizeof buf, "  %-12s %26s %10s %10s %12s %s\n", "metric", "real runs (mean)", "spread",
                "predicted", "error", "target");
  s += buf;
  for (const CompareRow& r : rows) {
    const bool points = r.points;
    std::string real;
    for (double v : r.real) {
      std::snprintf(buf, sizeof buf, "%s%.3g", real.empty() ? "" : ", ", v);
      real += buf;
    }
    std::snprintf(buf, sizeof buf, " (%.4g)", r.real_mean);
    real += buf;
    std::string target = "-";
    if (r.target > 0) {
      std::snprintf(buf, sizeof buf, "%s%g%s", r.within ? "within " : "MISSED ", r.target, points ? " pt" : " %");
      target = buf;
      if (!r.within && std::abs(r.error) <= r.spread) target += " (inside the real runs' spread)";
    }
    std::snprintf(buf, sizeof buf, "  %-12s %26s %9.1f%s %10.4g %+10.1f%s %s\n", r.metric.c_str(), real.c_str(), r.spread,
                  points ? "p" : "%", r.predicted, r.error, points ? " pt" : " %", target.c_str());
    s += buf;
  }
  return s;
}

std::string comparison_json(const std::vector<CompareRow>& rows) {
  JsonWriter w;
  w.begin_array();
  for (const CompareRow& r : rows) {
    w.begin_object().key("metric").value(r.metric).key("real").begin_array();
    for (double v : r.real) w.value(v);
    w.end_array().key("real_mean").value(r.real_mean).key("spread").value(r.spread);
    w.key("predicted").value(r.predicted).key("error").value(r.error).key("target").value(r.target);
    w.key("within").value(r.within).end_object();
  }
  w.end_array();
  return w.take();
}

}  // namespace ragd::tools
