// What `ragctl calibrate` takes from its real runs and how it checks its own fit, as pure functions
// over `ragctl bench` results (bench_report.h), so that they are tested without a daemon: the load it
// offers next (from the service rate it measured), whether that load stayed light, the prompt head's
// length, the metrics it compares with the simulator's replays, and the rates file's last members.
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "bench_report.h"
#include "ragd/common/status.h"

namespace ragd::tools {

// The light open-loop load, as a share of the one-client service rate: about that share of Poisson
// arrivals find the replica busy (M/G/1: P(busy) = utilisation), so most of the requests whose
// wake-up the fit takes from this run find it idle. 0.15 gave 1.7 req/s on the 2-core VM of the
// CPU validation (one client: 11.2 req/s), where the 2 req/s it used were light; a fixed 2 req/s
// queued on a VM half as fast (issue 55).
constexpr double kLightUtilisation = 0.15;
// More than this share of the light run's arrivals finding another request in flight is a warning:
// the run was not light on this machine.
constexpr double kMaxBusyArrivals = 0.30;

// Requests per second one client gets through: 1 / the mean end-to-end time of the finished
// requests of `runs` (one-client, closed-loop), each run's first (cold) request left out. 0 when
// there is none.
double one_client_service_rate(const std::vector<const BenchRun*>& runs);

// The share of a run's finished requests sent while another of its requests was in flight, as its
// client saw them (sent_s to sent_s + e2e_ms); -1 when the run has no send instants (older files).
double busy_arrival_share(const BenchRun& run);

// The prompt head's tokens in a knowledge-tree run: the least positive reused count (a request that
// shares nothing but the head with earlier ones reuses exactly the head); 0 when nothing was reused.
int prefix_tokens(const BenchRun& run);

// The machine's run-to-run speed (rates serving.run_speed_sd): groups of runs of the same requests
// (each group one closed-loop kind, run repeatedly), each run's time its finished requests' mean
// end-to-end time; the pooled standard deviation of the runs' log times about their group's mean
// log (sum of squared deviations / sum of (runs - 1)). 0 when no group has two runs.
double run_speed_sd(const std::vector<std::vector<const BenchRun*>>& groups);

// The metrics the self-check compares, as `ragctl simulate --replications` names them in its JSON;
// hit_pct: prompt tokens reused / prompt tokens, %.
struct RunMetrics {
  double ttft_p50_ms = 0, ttft_p99_ms = 0, ttft_mean_ms = 0, req_per_s = 0, tpot_p50_ms = 0, hit_pct = 0;
};
inline constexpr const char* kRunMetricNames[] = {"ttft_p50_ms", "ttft_p99_ms", "ttft_mean_ms",
                                                  "req_per_s",   "tpot_p50_ms", "hit_pct"};
double metric(const RunMetrics& m, std::string_view name);  // by one of kRunMetricNames; 0 otherwise
void set_metric(RunMetrics* m, std::string_view name, double v);

// One run's metrics (its finished requests; the percentiles its summary holds).
RunMetrics run_metrics(const BenchRun& run);
// The mean of each metric over several runs of the same requests.
RunMetrics mean_metrics(const std::vector<RunMetrics>& runs);

// A simulated metric against the measured one. error: relative (simulated / measured - 1) for
// times and rates, the difference in points for hit_pct; counted metrics have a target (the
// validation's: TTFT p50, mean TTFT and req/s within 10 %, hit rate within 2 points; docs/benchmarks.md),
// the others (TTFT p99 of a 30-40 request run, which is its largest requests; TPOT) are shown only.
struct MetricCheck {
  std::string metric;
  double measured = 0, simulated = 0, error = 0;
  bool counted = false;  // has a target
  bool within = true;    // meets it (true when not counted)
};
std::vector<MetricCheck> compare_metrics(const RunMetrics& measured, const RunMetrics& simulated);

// `object_text` (a JSON object) with `members` (`"key": value, ...`, already serialised) added as
// its last members; InvalidArgument when it is not an object.
[[nodiscard]] Result<std::string> append_json_members(std::string_view object_text, std::string_view members);

}  // namespace ragd::tools
