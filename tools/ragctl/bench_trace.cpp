#include "bench_trace.h"

#include <algorithm>
#include <random>

namespace ragd::tools {

Result<std::vector<sim::SimRequest>> trace_requests(const BenchResult& bench, const std::string& source,
                                                    uint64_t fallback_seed) {
  std::vector<sim::SimRequest> out;
  double t0 = 0;
  for (const BenchRun& run : bench.runs) {
    const bool recorded = !run.samples.empty() && std::all_of(run.samples.begin(), run.samples.end(),
                                                              [](const BenchSample& s) { return s.sent_s >= 0; });
    const double rate = run.rate > 0 ? run.rate : run.req_per_s;
    if (!recorded && rate <= 0) return Status::InvalidArgument(source + ": run '" + run.label + "' has no rate to replay");
    std::mt19937_64 rng(run.seed != 0 ? run.seed : fallback_seed);
    std::exponential_distribution<double> gap(recorded ? 1.0 : rate);
    double t = t0, last = t0;
    for (const BenchSample& s : run.samples) {
      if (recorded) t = t0 + s.sent_s;
      else t += gap(rng);  // drawn for every request sent, as the bench does
      last = std::max(last, t);
      if (!s.ok || !s.has_usage || s.prompt_tokens < 1 || s.tokens < 1) continue;
      sim::SimRequest r;
      r.arrival_s = t;
      r.prompt_tokens = s.prompt_tokens;
      r.answer_tokens = s.tokens;
      r.retrieval = true;
      out.push_back(r);
    }
    t0 = last;
  }
  if (out.empty()) return Status::InvalidArgument(source + ": no finished request with usage to replay");
  // Closed-loop records are in completion order of their workers: arrival order, ids 1..n.
  std::stable_sort(out.begin(), out.end(),
                   [](const sim::SimRequest& a, const sim::SimRequest& b) { return a.arrival_s < b.arrival_s; });
  for (size_t i = 0; i < out.size(); ++i) out[i].id = i + 1;
  return out;
}

}  // namespace ragd::tools
