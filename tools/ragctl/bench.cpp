// ragctl bench: load generator for a running ragd daemon (HTTP + SSE streaming).
//
//   ragctl bench --url http://127.0.0.1:8080 [--pipeline default] [--reuse none,prefix,knowledge_tree]
//                [--workload FILE.jsonl | --requests N --topics T --zipf S [--ingest-synthetic]]
//                [--rate R | --concurrency C | --sweep R1,R2,... --slo-ttft-ms MS]
//                [--max-tokens N] [--json OUT.json] [--html OUT.html]
//   ragctl bench-report RUN1.json [RUN2.json ...] --out report.html [--labels a,b]
//
// Every request is `POST /v1/pipelines/{name}/runs` with "stream": true; TTFT is the time to the
// first `token` event, ITL/TBT the gaps between token events, TPOT (e2e - TTFT) / (tokens - 1),
// normalized latency e2e / tokens. Open loop sends at Poisson arrivals of rate R; closed loop keeps
// C requests in flight. A sweep runs the open loop at each rate and reports the capacity: the
// highest rate whose p99 TTFT meets the SLO.
// Workloads: a JSONL file ({"query": "...", "pipeline"?: "...", "max_tokens"?: N, "tenant"?: "..."}
// per line), or synthetic RAG queries: T topics of 4 documents each (ingested with
// --ingest-synthetic), the topic of each query drawn with Zipf(S) popularity.
// The JSON keeps, per request, the client's TTFT / e2e / tokens and the `usage` (reused tokens per
// tier) and `timings` of the daemon's final `done` event; the HTML report (bench_report.h) and
// `ragctl bench-report`, which renders saved JSON files side by side, are built from it.
#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench_report.h"
#include "command.h"
#include "synthetic_words.h"

#if __has_include("ragd/daemon/client.h")
#include <simdjson.h>

#include "ragd/daemon/client.h"
#define RAGD_BENCH_HAVE_CLIENT 1
#endif

namespace ragd::tools {
namespace {

using Clock = std::chrono::steady_clock;

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

using Sample = BenchSample;

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

// Writes `text` to `path`; on failure prints why (as `cmd`) and returns false.
bool write_file(const char* cmd, const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::binary);
  if (f) f << text;
  if (f) f.close();
  if (!f) {
    std::fprintf(stderr, "ragctl %s: %s: cannot write: %s\n", cmd, path.c_str(), std::strerror(errno));
    return false;
  }
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

// Reads `usage` and `timings` of the final `done` event into the sample; a field the daemon did
// not send stays 0, a missing object leaves has_usage / has_timings false.
void parse_done(const std::string& data, Sample* s) {
  simdjson::dom::parser parser;
  simdjson::dom::element ev, u, t;
  if (parser.parse(data).get(ev)) return;
  auto num = [](simdjson::dom::element e, const char* ptr) {
    double v = 0;
    return e.at_pointer(ptr).get_double().get(v) ? 0.0 : v;
  };
  if (!ev["usage"].get(u) && u.is_object()) {
    s->has_usage = true;
    s->prompt_tokens = static_cast<int>(num(u, "/prompt_tokens"));
    s->reused_hbm = static_cast<int>(num(u, "/reused_tokens/hbm"));
    s->reused_dram = static_cast<int>(num(u, "/reused_tokens/dram"));
    s->reused_ssd = static_cast<int>(num(u, "/reused_tokens/ssd"));
    s->reused_remote = static_cast<int>(num(u, "/reused_tokens/remote"));
    std::string_view reuse;
    if (!u["reuse"].get_string().get(reuse)) s->reuse = std::string(reuse);
  }
  if (!ev["timings"].get(t) && t.is_object()) {
    s->has_timings = true;
    BenchTimings& x = s->timings;
    x.queue_ms = num(t, "/queue_ms"), x.retrieval_ms = num(t, "/retrieval_ms"), x.kv_load_ms = num(t, "/kv_load_ms");
    x.prefill_ms = num(t, "/prefill_ms"), x.ttft_ms = num(t, "/ttft_ms"), x.lookup_ms = num(t, "/lookup_ms");
    x.admit_ms = num(t, "/admit_ms"), x.publish_ms = num(t, "/publish_ms"), x.search_wait_ms = num(t, "/search_wait_ms");
  }
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
      if (s.tokens == 0) s.ttft_ms = ms;
      else s.itl_ms.push_back(std::chrono::duration<double, std::milli>(now - last).count());
      last = now;
      ++s.tokens;
    } else if (is("done")) {
      s.ok = true;
      done = true;
      parse_done(data, &s);
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
  s.e2e_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (!r.ok()) {
    if (!done) s.error = r.status().to_string();
  } else if (r->status / 100 != 2) {
    s.ok = false;
    s.error = "HTTP " + std::to_string(r->status);
  }
  if (!s.ok && s.error.empty()) s.error = "stream ended without a done event";
  return s;
}

BenchRun summarize(const std::string& label, const std::string& mode, double rate, uint64_t seed,
                   std::vector<Sample> ss, double wall) {
  BenchRun r;
  r.label = label;
  r.mode = mode;
  r.rate = rate;
  if (rate > 0) r.seed = seed;
  r.wall_s = wall;
  r.samples = std::move(ss);
  summarize_bench_run(r);
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
      th.emplace_back([&, i, t] {
        out[i] = run_one(u, a, reqs[i], reuse);
        out[i].sent_s = t;  // the schedule's instant (a replay sends it then)
      });
    }
  } else {
    std::atomic<size_t> next{0};
    for (int c = 0; c < std::max(1, concurrency); ++c)
      th.emplace_back([&] {
        for (size_t i; (i = next++) < reqs.size();) {
          const double sent = std::chrono::duration<double>(Clock::now() - t0).count();
          out[i] = run_one(u, a, reqs[i], reuse);
          out[i].sent_s = sent;
        }
      });
  }
  for (auto& t : th) t.join();
  *wall = std::chrono::duration<double>(Clock::now() - t0).count();
  return out;
}

void print_summary(const BenchRun& r) {
  std::printf("%-22s n=%d failed=%d  req/s %.2f  tok/s %.1f\n", r.label.c_str(), r.requests, r.failed, r.req_per_s,
              r.tokens_per_s);
  auto line = [](const char* name, const BenchPercentiles& p) {
    std::printf("  %-4s ms  p50 %8.1f  p90 %8.1f  p99 %8.1f\n", name, p.p50, p.p90, p.p99);
  };
  line("TTFT", r.ttft_ms);
  line("ITL", r.itl_ms);
  line("TPOT", r.tpot_ms);
  std::printf("  e2e  ms  p50 %8.1f  p90 %8.1f  p99 %8.1f   normalized %.1f ms/token\n", r.e2e_ms.p50, r.e2e_ms.p90,
              r.e2e_ms.p99, r.norm_latency_ms_per_token);
  int with_usage = 0, hits = 0;
  for (const auto& s : r.samples)
    if (s.ok && s.has_usage) ++with_usage, hits += s.reused() > 0;
  if (with_usage) std::printf("  KV hits %d of %d requests\n", hits, with_usage);
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
  BenchResult result;
  result.url = a.url;
  result.slo_ttft_ms = a.slo_ttft_ms;
  result.label = "this run";
  if (!a.json_out.empty()) {
    result.source = a.json_out;
    result.label = a.json_out.substr(a.json_out.find_last_of('/') + 1);
    if (result.label.size() > 5 && result.label.ends_with(".json")) result.label.resize(result.label.size() - 5);
  }
  std::vector<BenchRun>& runs = result.runs;
  for (const auto& m : modes) {
    const std::string name = m.empty() ? a.pipeline : a.pipeline + "/" + m;
    if (rates.empty()) {
      double wall = 0;
      auto ss = drive(*u, a, reqs, m, a.rate, a.rate > 0 ? 0 : std::max(1, a.concurrency), &wall);
      runs.push_back(summarize(name, name, a.rate, a.seed, std::move(ss), wall));
      print_summary(runs.back());
      for (const auto& s : runs.back().samples)
        if (!s.ok) {
          std::fprintf(stderr, "  first failure: %s\n", s.error.c_str());
          break;
        }
      continue;
    }
    double capacity = 0;
    for (double r : rates) {
      double wall = 0;
      auto ss = drive(*u, a, reqs, m, r, 0, &wall);
      runs.push_back(
          summarize(name + " @" + std::to_string(r).substr(0, 5) + " req/s", name, r, a.seed, std::move(ss), wall));
      print_summary(runs.back());
      if (runs.back().failed == 0 && runs.back().ttft_ms.p99 <= a.slo_ttft_ms) capacity = std::max(capacity, r);
    }
    std::printf("capacity (%s, p99 TTFT <= %.0f ms): %.2f req/s\n", name.c_str(), a.slo_ttft_ms, capacity);
    result.capacity.push_back({name, capacity});
  }
  int rc = 0;
  if (!a.json_out.empty() && !write_file("bench", a.json_out, bench_result_json(result))) rc = 2;
  if (!a.html_out.empty() && !write_file("bench", a.html_out, render_bench_report({result}))) rc = 2;
  if (rc) return rc;
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

struct ReportArgs {
  std::vector<std::string> files;
  std::string out, labels;
};

int run_report(const ReportArgs& a) {
  std::vector<std::string> labels;
  {
    std::stringstream ss(a.labels);
    std::string l;
    while (std::getline(ss, l, ',')) labels.push_back(l);
  }
  if (!labels.empty() && labels.size() != a.files.size()) {
    std::fprintf(stderr, "ragctl bench-report: --labels has %zu labels for %zu files\n", labels.size(), a.files.size());
    return 2;
  }
  std::vector<BenchResult> results;
  for (size_t i = 0; i < a.files.size(); ++i) {
    auto r = load_bench_result(a.files[i]);
    if (!r.ok()) {
      std::fprintf(stderr, "ragctl bench-report: %s\n", r.status().message().c_str());
      return 2;
    }
    if (!labels.empty()) r->label = labels[i];
    // Two files of the same name from different directories: keep the labels apart.
    const std::string base = r->label;
    for (int n = 2; std::any_of(results.begin(), results.end(), [&](const auto& x) { return x.label == r->label; }); ++n)
      r->label = base + " (" + std::to_string(n) + ")";
    results.push_back(std::move(*r));
  }
  if (!write_file("bench-report", a.out, render_bench_report(results))) return 2;
  std::printf("wrote %s (%zu result%s)\n", a.out.c_str(), results.size(), results.size() == 1 ? "" : "s");
  return 0;
}

Registration report_reg("bench-report", "HTML report comparing saved `ragctl bench --json` results", [](CLI::App& sub) {
  auto a = std::make_shared<ReportArgs>();
  sub.add_option("results", a->files, "result files written by `ragctl bench --json`; the first is the baseline")
      ->required();
  sub.add_option("--out", a->out, "HTML file to write")->required();
  sub.add_option("--labels", a->labels, "comma list of names for the results (default: the file names)");
  return [a]() -> int { return run_report(*a); };
});

}  // namespace
}  // namespace ragd::tools
