// `ragctl simulate`'s results as the report `ragctl bench` renders (bench_report.h): one BenchRun
// per simulated point, each request a BenchSample with the daemon-side timings and reuse per tier,
// so `ragctl bench-report real.json sim.json` compares a simulation with a measured run. The
// simulator's own views (memory per tier over time, hit rate per tier, fleet counters) are an extra
// section of the HTML page.
// Thread-safety: functions only.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "bench_report.h"
#include "measured_compare.h"
#include "ragd/sim/simulator.h"

namespace ragd::tools {

// One simulated point as a bench run. `label` names it; `rate` is the offered rate.
BenchRun sim_bench_run(const sim::SimResult& r, const std::string& label, const std::string& mode, double rate);

// Prompt-token share served from each tier (hbm, dram, ssd, remote) over the finished requests.
struct TierHits {
  double hbm = 0, dram = 0, ssd = 0, remote = 0;
  double total() const { return hbm + dram + ssd + remote; }
};
TierHits sim_tier_hits(const sim::SimResult& r);

// The extra HTML section for the points of a run (labels parallel to results).
std::string render_sim_section(const std::vector<std::string>& labels, const std::vector<const sim::SimResult*>& results);

// A metric summarised over replications (`ragctl simulate --replications`).
struct RepSummary {
  std::string label;
  int n = 0;
  uint64_t seed = 0;
  std::vector<std::pair<std::string, sim::Spread>> metrics;
};
// The replications' section: per point, each metric's median and p10-p90 over the replications.
std::string render_replications_section(const std::vector<RepSummary>& points);

// The measured runs beside the prediction (`ragctl simulate --real`): per metric the real runs,
// their mean and spread, the prediction, its error and the target.
std::string render_comparison_section(const std::vector<CompareRow>& rows, const std::string& predicted_as);

// Inserts `section` before the closing tags of a page render_bench_report() wrote.
std::string insert_section(std::string page, const std::string& section);

}  // namespace ragd::tools
