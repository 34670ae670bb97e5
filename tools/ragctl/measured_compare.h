// A prediction beside measured runs of the same requests (`ragctl simulate --real A.json,B.json`):
// per metric the real runs, their mean and run-to-run spread (half their range), the prediction
// and its error against the real mean, and whether it is inside the simulator's validation targets
// (TTFT p50 and throughput 10 %, TTFT p99 20 %, hit rate 2 points; TPOT has none). A prediction that
// misses by less than the real runs' own spread is marked so: the runs disagree with each other by
// as much.
// Thread-safety: functions only.
#pragma once

#include <string>
#include <vector>

#include "bench_report.h"
#include "calibration_runs.h"
#include "ragd/common/status.h"

namespace ragd::tools {

struct CompareRow {
  std::string metric;        // "ttft_p50_ms", ... (kRunMetricNames)
  std::vector<double> real;  // one value per measured run
  double real_mean = 0;
  double spread = 0;         // half the real runs' range: % of their mean, or points for hit_pct
  double predicted = 0;
  double error = 0;          // % of the real mean, or points for hit_pct
  bool points = false;       // spread and error in points (hit rate), else % of the real mean
  double target = 0;         // |error| allowed (same unit); 0 = no target
  bool within = true;        // |error| <= target (always true without a target)
};

// The rows for one point; `real` holds at least one run.
// (The metrics of a run: calibration_runs.h, run_metrics.)
std::vector<CompareRow> compare_with_real(const RunMetrics& predicted, const std::vector<RunMetrics>& real);

// The measured runs of one point, one file each (`ragctl bench --json`, one run per file).
// InvalidArgument naming the file when it cannot be read, holds no run or more than one, or has no
// per-request records (the hit rate needs them).
[[nodiscard]] Result<std::vector<RunMetrics>> load_real_runs(const std::vector<std::string>& paths);

// The rows as a text table (stdout of ragctl simulate) and as a JSON array.
std::string format_comparison(const std::vector<CompareRow>& rows, const std::string& predicted_as);
std::string comparison_json(const std::vector<CompareRow>& rows);

}  // namespace ragd::tools
