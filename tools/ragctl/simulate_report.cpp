#include "simulate_report.h"

#include <algorithm>
#include <cstdio>

namespace ragd::tools {

BenchRun sim_bench_run(const sim::SimResult& r, const std::string& label, const std::string& mode, double rate) {
  BenchRun run;
  run.label = label;
  run.mode = mode;
  run.rate = rate;
  double first = r.records.empty() ? 0 : r.records.front().arrival_s;
  run.wall_s = std::max(1e-9, r.duration_s - first);
  run.samples.reserve(r.records.size());
  for (const sim::SimRecord& x : r.records) {
    BenchSample s;
    s.ok = x.ok;
    if (!x.ok) s.error = x.refused ? "refused: queue full (429)" : "unfinished when the simulation ended";
    s.ttft_ms = x.ttft_ms;
    s.e2e_ms = x.e2e_ms;
    s.tokens = x.tokens;
    s.itl_ms = x.itl_ms;
    s.has_usage = x.ok;
    s.prompt_tokens = x.prompt_tokens;
    s.reused_hbm = static_cast<int>(x.reused[kvstore::Tier::kHbm]);
    s.reused_dram = static_cast<int>(x.reused[kvstore::Tier::kDram]);
    s.reused_ssd = static_cast<int>(x.reused[kvstore::Tier::kSsd]);
    s.reused_remote = static_cast<int>(x.reused[kvstore::Tier::kRemote]);
    s.reuse = "knowledge_tree";
    s.has_timings = x.ok;
    s.timings.queue_ms = x.queue_ms;
    s.timings.retrieval_ms = x.retrieval_ms;
    s.timings.kv_load_ms = x.kv_load_ms;
    s.timings.prefill_ms = x.prefill_ms;
    s.timings.ttft_ms = x.ttft_ms;
    run.samples.push_back(std::move(s));
  }
  summarize_bench_run(run);
  return run;
}

TierHits sim_tier_hits(const sim::SimResult& r) {
  TierHits h;
  double prompt = 0;
  for (const sim::SimRecord& x : r.records) {
    if (!x.ok) continue;
    prompt += x.prompt_tokens;
    h.hbm += x.reused[kvstore::Tier::kHbm], h.dram += x.reused[kvstore::Tier::kDram];
    h.ssd += x.reused[kvstore::Tier::kSsd], h.remote += x.reused[kvstore::Tier::kRemote];
  }
  if (prompt > 0) h.hbm /= prompt, h.dram /= prompt, h.ssd /= prompt, h.remote /= prompt;
  return h;
}

namespace {

std::string esc(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '<') o += "&lt;";
    else if (c == '>') o += "&gt;";
    else if (c == '&') o += "&amp;";
    else o += c;
  }
  return o;
}

std::string gib(double b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f", b / (1ull << 30));
  return s;
}

// Memory per tier over virtual time, one polyline per tier (GiB, fleet totals).
std::string memory_plot(const sim::SimResult& r) {
  const auto& pts = r.series;
  if (pts.size() < 2) return "<p>n/a (too short)</p>";
  struct Line {
    const char* name;
    const char* color;
    double (*get)(const sim::SimSeriesPoint&);
  };
  const Line lines[] = {
      {"pool in use", "#1f77b4", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.pool_used_bytes); }},
      {"HBM cache", "#2ca02c", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.hbm_cache_bytes); }},
      {"DRAM", "#ff7f0e", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.dram_bytes); }},
      {"SSD", "#9467bd", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.ssd_bytes); }},
      {"remote", "#d62728", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.remote_bytes); }},
      {"swap", "#7f7f7f", [](const sim::SimSeriesPoint& p) { return static_cast<double>(p.swap_bytes); }}};
  double ymax = 1, tmax = std::max(1e-9, pts.back().t_s);
  for (const auto& p : pts)
    for (const auto& l : lines) ymax = std::max(ymax, l.get(p));
  const double W = 640, H = 220, L = 50, B = 20;
  std::string svg = "<svg width='760' height='250' xmlns='http://www.w3.org/2000/svg' font-size='11'>";
  svg += "<line x1='50' y1='" + std::to_string(H) + "' x2='690' y2='" + std::to_string(H) + "' stroke='#999'/>";
  svg += "<text x='2' y='12'>" + gib(ymax) + " GiB</text><text x='2' y='" + std::to_string(H) + "'>0</text>";
  svg += "<text x='600' y='" + std::to_string(H + 15) + "'>" + std::to_string(static_cast<int>(tmax)) + " s</text>";
  int k = 0;
  for (const auto& l : lines) {
    bool any = false;
    std::string pl;
    for (const auto& p : pts) {
      const double v = l.get(p);
      any |= v > 0;
      char b[64];
      std::snprintf(b, sizeof b, "%.1f,%.1f ", L + W * p.t_s / tmax, H - (H - B) * v / ymax);
      pl += b;
    }
    if (!any) continue;
    svg += "<polyline fill='none' stroke='" + std::string(l.color) + "' points='" + pl + "'/>";
    svg += "<text x='700' y='" + std::to_string(20 + 14 * k++) + "' fill='" + l.color + "'>" + l.name + "</text>";
  }
  return svg + "</svg>";
}

// A sweep's points side by side: hit rate (green, left scale 0-100 %) and TTFT p99 (blue, right
// scale 0-max ms) at each point, labelled with the swept value.
std::string sweep_plot(const std::vector<std::string>& labels, const std::vector<const sim::SimResult*>& results) {
  const size_t n = results.size();
  std::vector<double> hit(n), p99(n);
  double p99_max = 1;
  for (size_t i = 0; i < n; ++i) {
    hit[i] = sim_tier_hits(*results[i]).total();
    std::vector<double> t;
    for (const auto& x : results[i]->records)
      if (x.ok) t.push_back(x.ttft_ms);
    std::sort(t.begin(), t.end());
    p99[i] = bench_percentile(t, 99);
    p99_max = std::max(p99_max, p99[i]);
  }
  const double W = 600, H = 200, L = 60, B = 20;
  auto x = [&](size_t i) { return L + (n > 1 ? W * i / (n - 1) : W / 2); };
  std::string svg = "<svg width='760' height='260' xmlns='http://www.w3.org/2000/svg' font-size='11'>";
  svg += "<text x='2' y='12' fill='#2ca02c'>hit 100 %</text><text x='670' y='12' fill='#1f77b4'>p99 " +
         format_ms(p99_max) + " ms</text>";
  std::string ph, pp;
  char b[96];
  for (size_t i = 0; i < n; ++i) {
    std::snprintf(b, sizeof b, "%.1f,%.1f ", x(i), H - (H - B) * hit[i]);
    ph += b;
    std::snprintf(b, sizeof b, "%.1f,%.1f ", x(i), H - (H - B) * p99[i] / p99_max);
    pp += b;
    const std::string v = labels[i].substr(labels[i].find('=') + 1);
    svg += "<text x='" + std::to_string(static_cast<int>(x(i)) - 10) + "' y='" + std::to_string(static_cast<int>(H + 15 + 12 * (i % 2))) +
           "'>" + esc(v.substr(0, v.find(' '))) + "</text>";
  }
  svg += "<polyline fill='none' stroke='#2ca02c' points='" + ph + "'/><polyline fill='none' stroke='#1f77b4' points='" + pp + "'/>";
  return svg + "</svg>";
}

}  // namespace

std::string render_sim_section(const std::vector<std::string>& labels, const std::vector<const sim::SimResult*>& results) {
  std::string o = "<section><h2>Simulation</h2><p>Virtual time: the real scheduler and knowledge tree over simulated KV, "
                  "costed from measured rates (docs/design/simulator.md). A prediction, not a measurement.</p>";
  o += "<table><tr><th>point</th><th>requests</th><th>refused</th><th>unfinished</th><th>steps</th><th>hit HBM</th>"
       "<th>hit DRAM</th><th>hit SSD</th><th>hit remote</th><th>preemptions</th><th>peak pool GiB</th><th>peak DRAM GiB</th>"
       "<th>peak remote GiB</th></tr>";
  for (size_t i = 0; i < results.size(); ++i) {
    const sim::SimResult& r = *results[i];
    const TierHits h = sim_tier_hits(r);
    long refused = 0, preempt = 0;
    for (const auto& x : r.records) refused += x.refused;
    for (const auto& s : r.scheduler) preempt += s.swaps_out + s.drops;
    double pool = 0, dram = 0, remote = 0;
    for (const auto& p : r.series) {
      pool = std::max(pool, static_cast<double>(p.pool_used_bytes));
      dram = std::max(dram, static_cast<double>(p.dram_bytes));
      remote = std::max(remote, static_cast<double>(p.remote_bytes));
    }
    o += "<tr><td>" + esc(labels[i]) + "</td><td>" + std::to_string(r.records.size()) + "</td><td>" + std::to_string(refused) +
         "</td><td>" + std::to_string(r.unfinished) + "</td><td>" + std::to_string(r.steps) + "</td><td>" +
         format_percent(h.hbm) + "</td><td>" + format_percent(h.dram) + "</td><td>" + format_percent(h.ssd) + "</td><td>" +
         format_percent(h.remote) + "</td><td>" + std::to_string(preempt) + "</td><td>" + gib(pool) + "</td><td>" + gib(dram) +
         "</td><td>" + gib(remote) + "</td></tr>";
  }
  o += "</table>";
  if (results.size() > 1) o += "<h3>Hit rate and TTFT p99 across the sweep</h3>" + sweep_plot(labels, results);
  for (size_t i = 0; i < results.size(); ++i)
    o += "<h3>Memory per tier over time (fleet): " + esc(labels[i]) + "</h3>" + memory_plot(*results[i]);
  return o + "</section>";
}

std::string render_replications_section(const std::vector<RepSummary>& points) {
  std::string o = "<section><h2>Replications</h2><p>Each point simulated again with other seeds of the per-request "
                  "noise (the client's side drawn per request, each engine step's deviation, the wake-up draws "
                  "shifted): each metric's median over the replications, their 10th and 90th percentiles, smallest "
                  "and largest. The runs above are the first replication's.</p>";
  for (const RepSummary& p : points) {
    char head[96];
    std::snprintf(head, sizeof head, " (%d replications, seeds %llu..%llu)", p.n, static_cast<unsigned long long>(p.seed),
                  static_cast<unsigned long long>(p.seed + static_cast<uint64_t>(std::max(0, p.n - 1))));
    o += "<h3>" + esc(p.label) + head + "</h3><table><tr><th>metric</th><th>median</th><th>p10</th><th>p90</th>"
         "<th>min</th><th>max</th></tr>";
    for (const auto& [name, s] : p.metrics) {
      char row[256];
      std::snprintf(row, sizeof row, "<td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td><td>%.3f</td></tr>", s.median,
                    s.p10, s.p90, s.min, s.max);
      o += "<tr><td>" + esc(name) + "</td>" + row;
    }
    o += "</table>";
  }
  return o + "</section>";
}

std::string render_comparison_section(const std::vector<CompareRow>& rows, const std::string& predicted_as) {
  const size_t n = rows.empty() ? 0 : rows.front().real.size();
  std::string o = "<section><h2>Measured against the prediction</h2><p>" + std::to_string(n) +
                  " measured run" + (n == 1 ? "" : "s") + " of the same requests beside the prediction (" +
                  esc(predicted_as) + "). Spread: half the runs' range (% of their mean; points for the hit rate). "
                  "Targets as in the simulator's validation.</p><table><tr><th>metric</th><th>real runs</th>"
                  "<th>mean</th><th>spread</th><th>predicted</th><th>error</th><th>target</th></tr>";
  for (const CompareRow& r : rows) {
    const bool points = r.points;
    std::string real;
    char buf[160];
    for (double v : r.real) {
      std::snprintf(buf, sizeof buf, "%s%.4g", real.empty() ? "" : ", ", v);
      real += buf;
    }
    const char* unit = points ? " pt" : " %";
    std::string target = "-";
    if (r.target > 0) {
      std::snprintf(buf, sizeof buf, "%s %g%s", r.within ? "within" : "missed", r.target, unit);
      target = buf;
    }
    std::snprintf(buf, sizeof buf, "<td>%.4g</td><td>%.1f%s</td><td>%.4g</td><td>%+.1f%s</td>", r.real_mean, r.spread,
                  unit, r.predicted, r.error, unit);
    o += "<tr><td>" + esc(r.metric) + "</td><td>" + real + "</td>" + buf + "<td>" + target + "</td></tr>";
  }
  return o + "</table></section>";
}

std::string insert_section(std::string page, const std::string& section) {
  const size_t at = page.rfind("</main>");
  if (at == std::string::npos) return page + section;
  page.insert(at, section);
  return page;
}

}  // namespace ragd::tools
