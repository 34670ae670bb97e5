// ragctl bench: load generator for a running ragd daemon (HTTP + SSE streaming).
//
//   ragctl bench --url http://127.0.0.1:8080 [--pipeline default] [--reuse none,prefix,knowledge_tree]
//                [--workload FILE.jsonl | --requests N --topics T --zipf S [--ingest-synthetic]]
//                [--rate R | --concurrency C | --sweep R1,R2,... --slo-ttft-ms MS]
//                [--max-tokens N] [--json OUT.json] [--html OUT.html]
//
// Every request is `POST /v1/pipelines/{name}/runs` with "stream": true; TTFT is the time to the
// first `token` event, ITL/TBT the gaps between token events, TPOT (e2e - TTFT) / (tokens - 1),
// normalized latency e2e / tokens. Open loop sends at Poisson arrivals of rate R; closed loop keeps
// C requests in flight. A sweep runs the open loop at each rate and reports the capacity: the
// highest rate whose p99 TTFT meets the SLO.
// Workloads: a JSONL file ({"query": "...", "pipeline"?: "...", "max_tokens"?: N, "tenant"?: "..."}
// per line), or synthetic RAG queries: T topics of 4 documents each (ingested with
// --ingest-synthetic), the topic of each query drawn with Zipf(S) popularity.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/pipelines/synthetic_words.h"

#if __has_include("ragd/daemon/client.h")
#include "ragd/daemon/client.h"
#define RAGD_BENCH_HAVE_CLIENT 1
#endif

namespace ragd::tools {
namespace {

using Clock = std::chrono::steady_clock;
using pipelines::kSyntheticAskWords;
using pipelines::kSyntheticFillerWords;
using pipelines::synthetic_topic_word;

struct Args {
  std::string url = "http://127.0.0.1:8080";
  std::string pipeline = "default";
  std::string reuse;  // comma list; "" = pipeline default
  std::string workload;
  int requests = 100, topics = 32, max_tokens = 16, concurrency = 0;
  double zipf = 0.9, rate = 0, slo_ttft_ms = 1000;
  std::string sweep;
  bool ingest_synthetic = false;
  std::string json_out, html_out, api_key;
  uint64_t seed = 1;
  int timeout_s = 300;
};

struct Req {
  std::string pipeline, query, tenant;
  int max_tokens = 16;
};

struct Sample {
  bool ok = false;
  double ttft = -1, e2e = 0;
  std::vector<double> itl;
  int tokens = 0;
  std::string error;
};

struct RunSummary {
  std::string label;
  double rate = 0;  // 0 = closed loop
  int n = 0, failed = 0;
  double wall_s = 0, rps = 0, tps = 0;
  double ttft[3] = {}, itl[3] = {}, tpot[3] = {}, e2e[3] = {}, norm_lat_mean = 0;  // p50/p90/p99
  std::vector<double> ttft_sorted, e2e_sorted;
};

double pct(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double idx = p / 100.0 * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(idx), hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o += '\\', o += c;
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o + "\"";
}

// Minimal field extraction from a flat JSON object line (workload files).
bool json_field(const std::string& line, const std::string& key, std::string* out) {
  const std::string k = "\"" + key + "\"";
  size_t p = line.find(k);
  if (p == std::string::npos) return false;
  p = line.find(':', p + k.size());
  if (p == std::string::npos) return false;
  ++p;
  while (p < line.size() && std::isspace(static_cast<unsigned char>(line[p]))) ++p;
  if (p < line.size() && line[p] == '"') {
    std::string v;
    for (++p; p < line.size() && line[p] != '"'; ++p) {
      if (line[p] == '\\' && p + 1 < line.size()) {
        ++p;
        v += line[p] == 'n' ? '\n' : line[p];
      } else v += line[p];
    }
    *out = v;
    return true;
  }
  size_t e = p;
  while (e < line.size() && line[e] != ',' && line[e] != '}') ++e;
  *out = line.substr(p, e - p);
  return true;
}


#if RAGD_BENCH_HAVE_CLIENT

Status ingest_synthetic(const daemon::Url& u, const Args& a) {
  daemon::HttpClient c(u.host, u.port, a.timeout_s * 1000);
  std::mt19937 rng(a.seed);
  daemon::Headers h = {{"Content-Type", "application/json"}};
  if (!a.api_key.empty()) h.push_back({"Authorization", "Bearer " + a.api_key});
  for (int t = 0; t < a.topics; ++t) {
    std::string body = "{\"documents\":[";
    for (int j = 0; j < 4; ++j) {
      std::string text = "Report on " + synthetic_topic_word(t) + ", part " + std::to_string(j) + ".";
      for (int w = 0; w < 60; ++w) text += std::string(" ") + ((w % 3 == 0) ? synthetic_topic_word(t) : kSyntheticFillerWords[rng() % std::size(kSyntheticFillerWords)]);
      body += std::string(j ? "," : "") + "{\"id\":" + json_str("t" + std::to_string(t) + "-d" + std::to_string(j)) +
              ",\"text\":" + json_str(text + ".") + "}";
    }
    body += "]}";
    auto r = c.request("POST", "/v1/documents", body, h);
    if (!r.ok()) return r.status();
    if (r->status / 100 != 2) return Status::Unavailable("POST /v1/documents: HTTP " + std::to_string(r->status) + ": " + r->body);
  }
  return Status::OK();
}

Sample run_one(const daemon::Url& u, const Args& a, const Req& q, const std::string& reuse) {
  Sample s;
  daemon::HttpClient c(u.host, u.port, a.timeout_s * 1000);
  std::string body = "{\"query\":" + json_str(q.query) + ",\"max_tokens\":" + std::to_string(q.max_tokens) +
                     ",\"stream\":true";
  if (!reuse.empty()) body += ",\"reuse\":" + json_str(reuse);
  if (!q.tenant.empty()) body += ",\"tenant\":" + json_str(q.tenant);
  body += "}";
  daemon::Headers h = {{"Content-Type", "application/json"}, {"Accept", "text/event-stream"}};
  if (!a.api_key.empty()) h.push_back({"Authorization", "Bearer " + a.api_key});
  const auto t0 = Clock::now();
  auto last = t0;
  bool done = false;
  daemon::SseParser parser([&](const std::string& event, const std::string& data) {
    const auto now = Clock::now();
    auto is = [&](const char* name) {
      return event == name || data.find(std::string("\"event\":\"") + name + "\"") != std::string::npos;
    };
    if (is("token")) {
      const double ms = std::chrono::duration<double, std::milli>(now - t0).count();
      if (s.tokens == 0) s.ttft = ms;
      else s.itl.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
      ++s.tokens;
    } else if (is("done")) {
      s.ok = true;
      done = true;
    } else if (is("error")) {
      s.error = data;
      done = true;
    }
  });
  auto r = c.request_stream("POST", "/v1/pipelines/" + (q.pipeline.empty() ? a.pipeline : q.pipeline) + "/runs", body, h,
                            [&](std::string_view bytes) {
                              parser.feed(bytes);
                              return !done;
                            });
  s.e2e = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!r.ok()) {
    if (!done) s.error = r.status().to_string();
  } else if (r->status / 100 != 2) {
    s.ok = false;
    s.error = "HTTP " + std::to_string(r->status);
  }
  if (!s.ok && s.error.empty()) s.error = "stream ended without a done event";
  return s;
}

RunSummary summarize(const std::string& label, double rate, const std::vector<Sample>& ss, double wall) {
  RunSummary r;
  r.label = label;
  r.rate = rate;
  r.n = static_cast<int>(ss.size());
  r.wall_s = wall;
  std::vector<double> itl, tpot, norm;
  long toks = 0;
  for (const auto& s : ss) {
    if (!s.ok) {
      ++r.failed;
      continue;
    }
    r.ttft_sorted.push_back(s.ttft);
    r.e2e_sorted.push_back(s.e2e);
    itl.insert(itl.end(), s.itl.begin(), s.itl.end());
    if (s.tokens > 1) tpot.push_back((s.e2e - s.ttft) / (s.tokens - 1));
    if (s.tokens > 0) norm.push_back(s.e2e / s.tokens);
    toks += s.tokens;
  }
  std::sort(r.ttft_sorted.begin(), r.ttft_sorted.end());
  std::sort(r.e2e_sorted.begin(), r.e2e_sorted.end());
  std::sort(itl.begin(), itl.end());
  std::sort(tpot.begin(), tpot.end());
  const double ps[3] = {50, 90, 99};
  for (int i = 0; i < 3; ++i) {
    r.ttft[i] = pct(r.ttft_sorted, ps[i]);
    r.itl[i] = pct(itl, ps[i]);
    r.tpot[i] = pct(tpot, ps[i]);
    r.e2e[i] = pct(r.e2e_sorted, ps[i]);
  }
  for (double x : norm) r.norm_lat_mean += x / norm.size();
  r.rps = (r.n - r.failed) / wall;
  r.tps = toks / wall;
  return r;
}

std::vector<Sample> drive(const daemon::Url& u, const Args& a, const std::vector<Req>& reqs, const std::string& reuse,
                          double rate, int concurrency, double* wall) {
  std::vector<Sample> out(reqs.size());
  const auto t0 = Clock::now();
  std::vector<std::thread> th;
  if (rate > 0) {  // open loop, Poisson arrivals
    std::mt19937_64 rng(a.seed);
    std::exponential_distribution<double> gap(rate);
    double t = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      t += gap(rng);
      std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(t)));
      th.emplace_back([&, i] { out[i] = run_one(u, a, reqs[i], reuse); });
    }
  } else {
    std::atomic<size_t> next{0};
    for (int c = 0; c < std::max(1, concurrency); ++c)
      th.emplace_back([&] {
        for (size_t i; (i = next++) < reqs.size();) out[i] = run_one(u, a, reqs[i], reuse);
      });
  }
  for (auto& t : th) t.join();
  *wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

std::string summary_json(const RunSummary& r) {
  std::ostringstream o;
  auto trio = [&](const char* k, const double* v) {
    o << ",\"" << k << "\":{\"p50\":" << v[0] << ",\"p90\":" << v[1] << ",\"p99\":" << v[2] << "}";
  };
  o << "{\"label\":" << json_str(r.label) << ",\"rate\":" << r.rate << ",\"requests\":" << r.n
    << ",\"failed\":" << r.failed << ",\"wall_s\":" << r.wall_s << ",\"req_per_s\":" << r.rps
    << ",\"tokens_per_s\":" << r.tps << ",\"normalized_latency_ms_per_token\":" << r.norm_lat_mean;
  trio("ttft_ms", r.ttft);
  trio("itl_ms", r.itl);
  trio("tpot_ms", r.tpot);
  trio("e2e_ms", r.e2e);
  o << "}";
  return o.str();
}

// Inline SVG line chart: series of (x, y) points.
std::string svg_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                      const std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>>& series) {
  const double W = 560, H = 300, L = 60, R = 150, T = 30, B = 40;
  double xmax = 1e-9, ymax = 1e-9;
  for (const auto& [n, pts] : series)
    for (auto [x, y] : pts) xmax = std::max(xmax, x), ymax = std::max(ymax, y);
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << H << "'>"
    << "<text x='" << L << "' y='18' font-size='14'>" << title << "</text>"
    << "<line x1='" << L << "' y1='" << H - B << "' x2='" << W - R << "' y2='" << H - B << "' stroke='black'/>"
    << "<line x1='" << L << "' y1='" << T << "' x2='" << L << "' y2='" << H - B << "' stroke='black'/>"
    << "<text x='" << (W - R + L) / 2 << "' y='" << H - 8 << "' font-size='12' text-anchor='middle'>" << xlabel << "</text>"
    << "<text x='12' y='" << (H - B + T) / 2 << "' font-size='12' transform='rotate(-90 12," << (H - B + T) / 2
    << ")' text-anchor='middle'>" << ylabel << "</text>";
  for (int i = 0; i <= 4; ++i) {
    const double yv = ymax * i / 4, y = H - B - (H - B - T) * i / 4.0;
    const double xv = xmax * i / 4, x = L + (W - R - L) * i / 4.0;
    o << "<text x='" << L - 4 << "' y='" << y + 4 << "' font-size='10' text-anchor='end'>" << std::round(yv * 100) / 100
      << "</text><text x='" << x << "' y='" << H - B + 14 << "' font-size='10' text-anchor='middle'>"
      << std::round(xv * 100) / 100 << "</text>";
  }
  for (size_t s = 0; s < series.size(); ++s) {
    const auto& [name, pts] = series[s];
    o << "<polyline fill='none' stroke='" << colors[s % 6] << "' stroke-width='1.5' points='";
    for (auto [x, y] : pts) o << L + (W - R - L) * x / xmax << "," << H - B - (H - B - T) * y / ymax << " ";
    o << "'/><text x='" << W - R + 8 << "' y='" << T + 16 * s + 10 << "' font-size='11' fill='" << colors[s % 6] << "'>"
      << name << "</text>";
  }
  o << "</svg>";
  return o.str();
}

std::vector<std::pair<double, double>> cdf(const std::vector<double>& sorted) {
  std::vector<std::pair<double, double>> v;
  for (size_t i = 0; i < sorted.size(); ++i) v.push_back({sorted[i], double(i + 1) / sorted.size()});
  return v;
}

void print_summary(const RunSummary& r) {
  std::printf("%-22s n=%d failed=%d  req/s %.2f  tok/s %.1f\n", r.label.c_str(), r.n, r.failed, r.rps, r.tps);
  std::printf("  TTFT ms  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", r.ttft[0], r.ttft[1], r.ttft[2]);
  std::printf("  ITL  ms  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", r.itl[0], r.itl[1], r.itl[2]);
  std::printf("  TPOT ms  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", r.tpot[0], r.tpot[1], r.tpot[2]);
  std::printf("  e2e  ms  p50 %8.1f  p90 %8.1f  p99 %8.1f   normalized %.1f ms/token\n", r.e2e[0], r.e2e[1], r.e2e[2],
              r.norm_lat_mean);
}

Status load_workload(const Args& a, std::vector<Req>* out) {
  if (!a.workload.empty()) {
    std::ifstream f(a.workload);
    if (!f) return Status::NotFound(a.workload + ": cannot open workload file");
    std::string line;
    int no = 0;
    while (std::getline(f, line)) {
      ++no;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      Req q;
      if (!json_field(line, "query", &q.query) || q.query.empty())
        return Status::InvalidArgument(a.workload + ":" + std::to_string(no) + ": field 'query' missing or empty");
      json_field(line, "pipeline", &q.pipeline);
      json_field(line, "tenant", &q.tenant);
      std::string mt;
      q.max_tokens = a.max_tokens;
      if (json_field(line, "max_tokens", &mt)) {
        try {
          q.max_tokens = std::stoi(mt);
        } catch (...) {
          return Status::InvalidArgument(a.workload + ":" + std::to_string(no) + ": field 'max_tokens' must be an integer");
        }
      }
      out->push_back(q);
    }
    if (out->empty()) return Status::InvalidArgument(a.workload + ": no requests");
    return Status::OK();
  }
  std::mt19937 rng(a.seed);
  std::vector<double> w(a.topics);
  for (int t = 0; t < a.topics; ++t) w[t] = 1.0 / std::pow(t + 1, a.zipf);
  std::discrete_distribution<int> pick(w.begin(), w.end());
  for (int i = 0; i < a.requests; ++i) {
    Req q;
    q.query = std::string(kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)]) + " " + synthetic_topic_word(pick(rng)) + " " + kSyntheticAskWords[rng() % std::size(kSyntheticAskWords)] + "?";
    q.max_tokens = a.max_tokens;
    out->push_back(q);
  }
  return Status::OK();
}

int run(const Args& a) {
  auto u = daemon::parse_url(a.url);
  if (!u.ok()) {
    std::fprintf(stderr, "ragctl bench: %s\n", u.status().to_string().c_str());
    return 2;
  }
  std::vector<Req> reqs;
  if (Status st = load_workload(a, &reqs); !st.ok()) {
    std::fprintf(stderr, "ragctl bench: %s\n", st.to_string().c_str());
    return 2;
  }
  if (a.ingest_synthetic) {
    if (Status st = ingest_synthetic(*u, a); !st.ok()) {
      std::fprintf(stderr, "ragctl bench: ingest: %s\n", st.to_string().c_str());
      return 1;
    }
  }
  std::vector<std::string> modes;
  {
    std::stringstream ss(a.reuse);
    std::string m;
    while (std::getline(ss, m, ',')) modes.push_back(m);
    if (modes.empty()) modes.push_back("");
  }
  std::vector<double> rates;
  {
    std::stringstream ss(a.sweep);
    std::string r;
    while (std::getline(ss, r, ',')) rates.push_back(std::stod(r));
  }
  std::vector<RunSummary> runs;
  std::string capacity_json;
  std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> ttft_vs_rate;
  for (const auto& m : modes) {
    const std::string name = m.empty() ? a.pipeline : a.pipeline + "/" + m;
    if (rates.empty()) {
      double wall = 0;
      auto ss = drive(*u, a, reqs, m, a.rate, a.rate > 0 ? 0 : std::max(1, a.concurrency), &wall);
      runs.push_back(summarize(name, a.rate, ss, wall));
      print_summary(runs.back());
      for (const auto& s : ss)
        if (!s.ok) {
          std::fprintf(stderr, "  first failure: %s\n", s.error.c_str());
          break;
        }
      continue;
    }
    double capacity = 0;
    std::vector<std::pair<double, double>> p50, p99;
    for (double r : rates) {
      double wall = 0;
      auto ss = drive(*u, a, reqs, m, r, 0, &wall);
      runs.push_back(summarize(name + " @" + std::to_string(r).substr(0, 5) + " req/s", r, ss, wall));
      print_summary(runs.back());
      p50.push_back({r, runs.back().ttft[0]});
      p99.push_back({r, runs.back().ttft[2]});
      if (runs.back().failed == 0 && runs.back().ttft[2] <= a.slo_ttft_ms) capacity = std::max(capacity, r);
    }
    std::printf("capacity (%s, p99 TTFT <= %.0f ms): %.2f req/s\n", name.c_str(), a.slo_ttft_ms, capacity);
    capacity_json += std::string(capacity_json.empty() ? "" : ",") + json_str(name) + ":" + std::to_string(capacity);
    ttft_vs_rate.push_back({name + " p50", p50});
    ttft_vs_rate.push_back({name + " p99", p99});
  }
  if (!a.json_out.empty()) {
    std::ofstream f(a.json_out);
    f << "{\"url\":" << json_str(a.url) << ",\"slo_ttft_ms\":" << a.slo_ttft_ms << ",\"capacity\":{" << capacity_json
      << "},\"runs\":[";
    for (size_t i = 0; i < runs.size(); ++i) f << (i ? "," : "") << summary_json(runs[i]);
    f << "]}\n";
  }
  if (!a.html_out.empty()) {
    std::ofstream f(a.html_out);
    f << "<!doctype html><html><head><meta charset='utf-8'><title>ragctl bench</title><style>body{font-family:sans-serif}"
         "td,th{padding:2px 8px;text-align:right}</style></head><body><h1>ragctl bench</h1><p>"
      << a.url << ", " << reqs.size() << " requests per run</p><table><tr><th>run</th><th>req/s</th><th>tok/s</th>"
      << "<th>TTFT p50</th><th>TTFT p99</th><th>ITL p99</th><th>TPOT p50</th><th>e2e p50</th><th>e2e p99</th><th>failed</th></tr>";
    for (const auto& r : runs)
      f << "<tr><td>" << r.label << "</td><td>" << r.rps << "</td><td>" << r.tps << "</td><td>" << r.ttft[0] << "</td><td>"
        << r.ttft[2] << "</td><td>" << r.itl[2] << "</td><td>" << r.tpot[0] << "</td><td>" << r.e2e[0] << "</td><td>"
        << r.e2e[2] << "</td><td>" << r.failed << "</td></tr>";
    f << "</table>";
    std::vector<std::pair<std::string, std::vector<std::pair<double, double>>>> c1, c2;
    for (const auto& r : runs) {
      c1.push_back({r.label, cdf(r.ttft_sorted)});
      c2.push_back({r.label, cdf(r.e2e_sorted)});
    }
    f << "<h2>Latency CDF</h2>" << svg_chart("TTFT CDF", "TTFT (ms)", "fraction", c1)
      << svg_chart("end-to-end latency CDF", "e2e (ms)", "fraction", c2);
    if (!ttft_vs_rate.empty()) f << "<h2>TTFT vs rate</h2>" << svg_chart("TTFT vs offered rate", "req/s", "TTFT (ms)", ttft_vs_rate);
    f << "</body></html>\n";
  }
  int failed = 0;
  for (const auto& r : runs) failed += r.failed;
  return failed == 0 ? 0 : 1;
}

#else
int run(const Args&) {
  std::fprintf(stderr, "ragctl bench: this build has no daemon client library\n");
  return 1;
}
#endif

Registration reg("bench", "load generator: TTFT/ITL/TPOT/e2e percentiles against a running daemon (SSE)",
                 [](CLI::App& sub) {
                   auto a = std::make_shared<Args>();
                   sub.add_option("--url", a->url, "daemon URL (default http://127.0.0.1:8080)");
                   sub.add_option("--pipeline", a->pipeline, "pipeline name (default 'default')");
                   sub.add_option("--reuse", a->reuse, "comma list of reuse modes to compare (none,prefix,knowledge_tree)");
                   sub.add_option("--workload", a->workload, "JSONL workload file ({\"query\": ...} per line)");
                   sub.add_option("--requests", a->requests, "synthetic requests per run (default 100)");
                   sub.add_option("--topics", a->topics, "synthetic topics (4 documents each; default 32)");
                   sub.add_option("--zipf", a->zipf, "Zipf exponent of topic popularity (default 0.9)");
                   sub.add_flag("--ingest-synthetic", a->ingest_synthetic, "ingest the synthetic corpus first");
                   sub.add_option("--max-tokens", a->max_tokens, "tokens to generate per request (default 16)");
                   sub.add_option("--rate", a->rate, "open loop: Poisson arrivals per second");
                   sub.add_option("--concurrency", a->concurrency, "closed loop: requests in flight (default 1)");
                   sub.add_option("--sweep", a->sweep, "comma list of rates; reports capacity under --slo-ttft-ms");
                   sub.add_option("--slo-ttft-ms", a->slo_ttft_ms, "p99 TTFT SLO for capacity (default 1000)");
                   sub.add_option("--json", a->json_out, "write the results as JSON");
                   sub.add_option("--html", a->html_out, "write an HTML report with SVG plots");
                   sub.add_option("--api-key", a->api_key, "bearer token");
                   sub.add_option("--seed", a->seed, "workload and arrival seed (default 1)");
                   sub.add_option("--timeout", a->timeout_s, "per-request timeout in seconds (default 300)");
                   return [a]() -> int { return run(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
