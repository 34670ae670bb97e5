#include "calibration_runs.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include <simdjson.h>

namespace ragd::tools {

double one_client_service_rate(const std::vector<const BenchRun*>& runs) {
  double sum = 0;
  long n = 0;
  for (const BenchRun* r : runs)
    for (size_t i = 1; i < r->samples.size(); ++i)
      if (r->samples[i].ok) sum += r->samples[i].e2e_ms, ++n;
  return n > 0 && sum > 0 ? 1e3 * static_cast<double>(n) / sum : 0.0;
}

double busy_arrival_share(const BenchRun& run) {
  std::vector<std::pair<double, double>> spans;  // [sent, end), seconds
  for (const BenchSample& s : run.samples) {
    if (s.sent_s < 0) return -1;
    if (s.ok) spans.emplace_back(s.sent_s, s.sent_s + s.e2e_ms / 1e3);
  }
  if (spans.empty()) return -1;
  std::sort(spans.begin(), spans.end());
  long busy = 0;
  double open_until = -1;  // the latest end among the requests sent before this one
  for (const auto& [sent, end] : spans) {
    if (sent < open_until) ++busy;
    open_until = std::max(open_until, end);
  }
  return static_cast<double>(busy) / static_cast<double>(spans.size());
}

int prefix_tokens(const BenchRun& run) {
  int least = 0;
  for (const BenchSample& s : run.samples)
    if (s.ok && s.has_usage && s.reused() > 0 && (least == 0 || s.reused() < least)) least = s.reused();
  return least;
}

double metric(const RunMetrics& m, std::string_view name) {
  if (name == "ttft_p50_ms") return m.ttft_p50_ms;
  if (name == "ttft_p99_ms") return m.ttft_p99_ms;
  if (name == "ttft_mean_ms") return m.ttft_mean_ms;
  if (name == "req_per_s") return m.req_per_s;
  if (name == "tpot_p50_ms") return m.tpot_p50_ms;
  if (name == "hit_pct") return m.hit_pct;
  return 0;
}

void set_metric(RunMetrics* m, std::string_view name, double v) {
  if (name == "ttft_p50_ms") m->ttft_p50_ms = v;
  else if (name == "ttft_p99_ms") m->ttft_p99_ms = v;
  else if (name == "ttft_mean_ms") m->ttft_mean_ms = v;
  else if (name == "req_per_s") m->req_per_s = v;
  else if (name == "tpot_p50_ms") m->tpot_p50_ms = v;
  else if (name == "hit_pct") m->hit_pct = v;
}

double run_speed_sd(const std::vector<std::vector<const BenchRun*>>& groups) {
  double squares = 0;
  long dof = 0;
  for (const auto& g : groups) {
    std::vector<double> logs;
    for (const BenchRun* r : g) {
      double sum = 0;
      long n = 0;
      for (const BenchSample& s : r->samples)
        if (s.ok) sum += s.e2e_ms, ++n;
      if (n > 0 && sum > 0) logs.push_back(std::log(sum / static_cast<double>(n)));
    }
    if (logs.size() < 2) continue;
    double mean = 0;
    for (double x : logs) mean += x / static_cast<double>(logs.size());
    for (double x : logs) squares += (x - mean) * (x - mean);
    dof += static_cast<long>(logs.size()) - 1;
  }
  return dof > 0 ? std::sqrt(squares / static_cast<double>(dof)) : 0.0;
}

RunMetrics run_metrics(const BenchRun& run) {
  RunMetrics m;
  m.ttft_p50_ms = run.ttft_ms.p50;
  m.ttft_p99_ms = run.ttft_ms.p99;
  m.req_per_s = run.req_per_s;
  m.tpot_p50_ms = run.tpot_ms.p50;
  double ttft = 0, prompt = 0, reused = 0;
  long n = 0;
  for (const BenchSample& s : run.samples) {
    if (!s.ok || s.ttft_ms < 0) continue;
    ttft += s.ttft_ms, ++n;
    if (s.has_usage) prompt += s.prompt_tokens, reused += s.reused();
  }
  m.ttft_mean_ms = n > 0 ? ttft / static_cast<double>(n) : 0.0;
  m.hit_pct = prompt > 0 ? 100 * reused / prompt : 0.0;
  return m;
}

RunMetrics mean_metrics(const std::vector<RunMetrics>& runs) {
  RunMetrics m;
  if (runs.empty()) return m;
  for (const char* name : kRunMetricNames) {
    double sum = 0;
    for (const RunMetrics& r : runs) sum += metric(r, name);
    set_metric(&m, name, sum / static_cast<double>(runs.size()));
  }
  return m;
}

std::vector<MetricCheck> compare_metrics(const RunMetrics& measured, const RunMetrics& simulated) {
  std::vector<MetricCheck> out;
  for (const char* name : kRunMetricNames) {
    MetricCheck c;
    c.metric = name;
    c.measured = metric(measured, name);
    c.simulated = metric(simulated, name);
    const std::string_view n = name;
    if (n == "hit_pct") {
      c.error = c.simulated - c.measured;
      c.counted = true;
      c.within = std::fabs(c.error) <= 2.0;
    } else {
      c.error = c.measured > 0 ? c.simulated / c.measured - 1 : 0.0;
      c.counted = n == "ttft_p50_ms" || n == "ttft_mean_ms" || n == "req_per_s";
      c.within = !c.counted || std::fabs(c.error) <= 0.10;
    }
    out.push_back(c);
  }
  return out;
}

Result<std::string> append_json_members(std::string_view object_text, std::string_view members) {
  simdjson::dom::parser parser;
  simdjson::dom::object obj;
  if (parser.parse(object_text.data(), object_text.size()).get(obj) != simdjson::SUCCESS)
    return Status::InvalidArgument("not a JSON object");
  const size_t close = object_text.find_last_of('}');  // the object's own: nothing but space follows
  std::string out(object_text.substr(0, close));
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  if (obj.size() > 0) out += ",";
  out += "\n ";
  out += members;
  out += "\n}\n";
  return out;
}

}  // namespace ragd::tools
