// Results of `ragctl bench` (the `--json` file) and their HTML report.
//
// A BenchResult is one invocation of `ragctl bench`: one BenchRun per reuse mode (and per offered
// rate when a sweep was run), each with its summary percentiles and, since the per-request records
// were added, one BenchSample per request (client TTFT / e2e / tokens plus the daemon's `usage` and
// `timings` from the final SSE `done` event). Files written before the per-request records existed
// still parse; the parts of the report that need the records then show "n/a".
//
// render_bench_report() turns one or more results into a single self-contained HTML page (inline
// CSS and SVG, no scripts, fonts or network): summary table, side-by-side comparison of the results,
// TTFT of cache hits vs misses, reused tokens per tier, TTFT breakdown as stacked bars, and TTFT and
// throughput against the offered rate when a sweep was run.
// Thread-safety: functions only, no shared state.
#pragma once

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::tools {

// The daemon's per-run `timings` (ms), as in the `done` event.
struct BenchTimings {
  double queue_ms = 0, retrieval_ms = 0, kv_load_ms = 0, prefill_ms = 0, ttft_ms = 0;
  double lookup_ms = 0, admit_ms = 0, publish_ms = 0, search_wait_ms = 0;
};

// One request as the client saw it.
struct BenchSample {
  bool ok = false;
  double ttft_ms = -1;         // first `token` event; -1 = no token
  double e2e_ms = 0;           // request sent -> stream finished
  int tokens = 0;              // `token` events received
  std::vector<double> itl_ms;  // gaps between token events; summarised, not written per request
  // From the `done` event; has_usage / has_timings are false when it carried none (or for records
  // of older files), and such requests count as n/a in the hit / tier / breakdown tables.
  bool has_usage = false;
  int prompt_tokens = 0;
  int reused_hbm = 0, reused_dram = 0, reused_ssd = 0, reused_remote = 0;
  std::string reuse;  // usage.reuse: the reuse mode the daemon applied ("" = not reported)
  bool has_timings = false;
  BenchTimings timings;
  std::string error;  // failed requests: what went wrong
  // When the client sent it, seconds after its run began (-1: not recorded, files written before
  // `sent_s` existed): what a replay (`ragctl simulate --workload trace:`) sends it at.
  double sent_s = -1;

  int reused() const { return reused_hbm + reused_dram + reused_ssd + reused_remote; }
};

struct BenchPercentiles {
  double p50 = 0, p90 = 0, p99 = 0;
};

// One load phase: one reuse mode at one offered rate (0 = closed loop).
struct BenchRun {
  std::string label;  // "default/prefix @2.000 req/s"
  std::string mode;   // "default/prefix": runs of one sweep share it
  double rate = 0;    // offered Poisson rate, req/s; 0 = closed loop
  uint64_t seed = 0;  // open loop: the arrivals' seed (ragctl bench --seed); 0 = not recorded
  int requests = 0, failed = 0;
  double wall_s = 0, req_per_s = 0, tokens_per_s = 0, norm_latency_ms_per_token = 0;
  BenchPercentiles ttft_ms, itl_ms, tpot_ms, e2e_ms;
  bool has_samples = false;  // false for files written before per-request records
  std::vector<BenchSample> samples;
};

struct BenchResult {
  std::string label;   // shown in the report: --labels, else the file name
  std::string source;  // file name, or "" for an in-memory result
  std::string url;
  double slo_ttft_ms = 0;
  std::vector<std::pair<std::string, double>> capacity;  // mode -> highest rate meeting the SLO
  std::vector<BenchRun> runs;
};

// Linear interpolation between closest ranks (numpy's default) on a sorted vector; 0 when empty.
double bench_percentile(const std::vector<double>& sorted, double p);

// Fills the summary fields of `run` (failed, percentiles, throughput) from its samples and wall_s.
void summarize_bench_run(BenchRun& run);

// The `--json` document.
std::string bench_result_json(const BenchResult& result);

// Parses a `--json` document. Errors are InvalidArgument naming `source` and the offending field
// ("before.json: runs[2].samples[5].ttft_ms: expected a number").
[[nodiscard]] Result<BenchResult> parse_bench_result(std::string_view json, const std::string& source);
// Reads and parses a file; NotFound / IOError / InvalidArgument name the file.
[[nodiscard]] Result<BenchResult> load_bench_result(const std::string& path);

// The HTML page for one or more results (several: the first is the baseline of the comparison).
std::string render_bench_report(const std::vector<BenchResult>& results);

// Number formatting used by the report: milliseconds with three significant digits at most
// ("1234", "123", "12.3", "1.23", "0.12"), rates and shares.
std::string format_ms(double ms);
std::string format_rate(double per_s);
std::string format_percent(double fraction);

}  // namespace ragd::tools
