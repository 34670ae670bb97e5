// ragctl bench's HTML report from synthetic result files: hit / miss TTFT percentiles against a naive
// reference, the stacked TTFT-breakdown bars, both results' labels, old files without per-request
// records, the --json round trip, and clear errors for malformed files.
#include "bench_report.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

namespace ragd::tools {
namespace {

struct Req {
  bool ok = true;
  double ttft = 0, e2e = 0;
  int hbm = 0, dram = 0, ssd = 0;
  double queue = 0, retrieval = 0, kv_load = 0, prefill = 0;
};

struct SynthRun {
  std::string label;
  std::vector<Req> reqs;
};

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.6f", v);
  return b;
}

// A `ragctl bench --json` document written by hand (not by the code under test).
std::string make_doc(const std::vector<SynthRun>& runs) {
  std::string j = "{\"url\":\"http://127.0.0.1:8080\",\"slo_ttft_ms\":500,\"capacity\":{},\"runs\":[";
  for (size_t r = 0; r < runs.size(); ++r) {
    j += std::string(r ? "," : "") + "{\"label\":\"" + runs[r].label +
         "\",\"rate\":0,\"requests\":" + std::to_string(runs[r].reqs.size()) +
         ",\"failed\":0,\"wall_s\":2,\"req_per_s\":6.5,\"tokens_per_s\":104," +
         "\"ttft_ms\":{\"p50\":40,\"p90\":70,\"p99\":88},\"samples\":[";
    for (size_t i = 0; i < runs[r].reqs.size(); ++i) {
      const Req& q = runs[r].reqs[i];
      j += std::string(i ? "," : "") + "{\"ok\":" + (q.ok ? "true" : "false");
      if (!q.ok) {
        j += ",\"e2e_ms\":3,\"tokens\":0,\"error\":\"HTTP 503\"}";
        continue;
      }
      const double ttft_daemon = q.queue + q.retrieval + q.kv_load + q.prefill + 1.5;
      j += ",\"ttft_ms\":" + num(q.ttft) + ",\"e2e_ms\":" + num(q.e2e) + ",\"tokens\":16" +
           ",\"usage\":{\"prompt_tokens\":300,\"reused_tokens\":{\"hbm\":" + std::to_string(q.hbm) +
           ",\"dram\":" + std::to_string(q.dram) + ",\"ssd\":" + std::to_string(q.ssd) + "}}" +
           ",\"timings\":{\"queue_ms\":" + num(q.queue) + ",\"retrieval_ms\":" + num(q.retrieval) +
           ",\"kv_load_ms\":" + num(q.kv_load) + ",\"prefill_ms\":" + num(q.prefill) +
           ",\"ttft_ms\":" + num(ttft_daemon) + ",\"lookup_ms\":0.1,\"admit_ms\":0.2,\"publish_ms\":0.3," +
           "\"search_wait_ms\":" + num(q.retrieval) + "}}";
    }
    j += "]}";
  }
  return j + "]}";
}

// `hits` requests reusing KV, `misses` not, plus one failed request; TTFTs in [20, 90) ms so that
// the report prints them with one decimal.
SynthRun make_run(const std::string& label, int hits, int misses, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> ttft(20, 90), phase(0.5, 9);
  std::uniform_int_distribution<int> toks(1, 120);
  SynthRun run{label, {}};
  for (int i = 0; i < hits + misses; ++i) {
    Req q;
    q.ttft = ttft(rng);
    q.e2e = q.ttft + 200;
    if (i < hits) q.hbm = toks(rng), q.dram = i % 2 ? toks(rng) : 0, q.ssd = i % 3 ? 0 : toks(rng);
    q.queue = phase(rng), q.retrieval = phase(rng), q.kv_load = phase(rng), q.prefill = phase(rng);
    run.reqs.push_back(q);
  }
  Req failed;
  failed.ok = false;
  run.reqs.insert(run.reqs.begin() + 2, failed);
  return run;
}

// Naive reference: sort, then interpolate linearly between the closest ranks.
double naive_pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  const double pos = p / 100 * (v.size() - 1);
  const size_t i = static_cast<size_t>(std::floor(pos));
  if (i + 1 >= v.size()) return v.back();
  return v[i] * (1 - (pos - i)) + v[i + 1] * (pos - i);
}

std::string one_decimal(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.1f", v);
  return b;
}

std::string cell(const std::string& text) { return "<td class=n>" + text + "</td>"; }

// The hit / miss table row the report must contain for these requests: hits (count, share, TTFT
// p50 / p90 / p99, mean reused tokens), then misses (count, TTFT p50 / p90 / p99).
std::string expected_row(const SynthRun& run) {
  std::vector<double> hit_ttft, miss_ttft;
  double reused = 0;
  for (const auto& q : run.reqs) {
    if (!q.ok) continue;
    const int r = q.hbm + q.dram + q.ssd;
    (r > 0 ? hit_ttft : miss_ttft).push_back(q.ttft);
    reused += r;
  }
  reused /= hit_ttft.size();
  const double share = 100.0 * hit_ttft.size() / (hit_ttft.size() + miss_ttft.size());
  char reused_text[32];
  std::snprintf(reused_text, sizeof reused_text, reused < 100 ? "%.1f" : "%.0f", reused);
  return "<tr><td>" + run.label + "</td>" + cell(std::to_string(hit_ttft.size())) + cell(one_decimal(share) + " %") +
         cell(one_decimal(naive_pct(hit_ttft, 50))) + cell(one_decimal(naive_pct(hit_ttft, 90))) +
         cell(one_decimal(naive_pct(hit_ttft, 99))) + cell(reused_text) + cell(std::to_string(miss_ttft.size())) +
         cell(one_decimal(naive_pct(miss_ttft, 50))) + cell(one_decimal(naive_pct(miss_ttft, 90))) +
         cell(one_decimal(naive_pct(miss_ttft, 99))) + "</tr>";
}

size_t count(const std::string& hay, const std::string& needle) {
  size_t n = 0;
  for (size_t p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

TEST(BenchReport, HitMissPercentilesBreakdownBarsAndLabels) {
  const SynthRun before = make_run("default/prefix", 7, 6, 11);
  const SynthRun after_prefix = make_run("default/prefix", 9, 4, 12);
  const SynthRun after_tree = make_run("default/knowledge_tree", 11, 2, 13);
  auto a = parse_bench_result(make_doc({before}), "before.json");
  auto b = parse_bench_result(make_doc({after_prefix, after_tree}), "after.json");
  ASSERT_TRUE(a.ok()) << a.status().to_string();
  ASSERT_TRUE(b.ok()) << b.status().to_string();
  a->label = "before";
  b->label = "after";
  const std::string html = render_bench_report({*a, *b});

  // Hit / miss table: each result's runs follow a row naming the result.
  const size_t table = html.find("id=hitmiss");
  const size_t before_at = html.find("<tr class=rg><td colspan=11>before</td></tr>", table);
  const size_t after_at = html.find("<tr class=rg><td colspan=11>after</td></tr>", table);
  ASSERT_NE(table, std::string::npos);
  ASSERT_NE(before_at, std::string::npos);
  ASSERT_NE(after_at, std::string::npos);
  const size_t end = html.find("</table>", after_at);
  const size_t row_before = html.find(expected_row(before), before_at);
  EXPECT_LT(row_before, after_at) << expected_row(before);
  for (const SynthRun* run : {&after_prefix, &after_tree}) {
    const size_t at = html.find(expected_row(*run), after_at);
    EXPECT_LT(at, end) << expected_row(*run);
  }

  // One stacked bar per run, one segment per phase.
  for (const char* phase : {"queue", "retrieval", "kv_load", "prefill", "other"})
    EXPECT_EQ(count(html, std::string("class='seg seg-") + phase + "'"), 3u) << phase;
  // The queue segment is the mean over the run's successful requests.
  double queue_mean = 0;
  int n = 0;
  for (const auto& q : before.reqs)
    if (q.ok) queue_mean += q.queue, ++n;
  queue_mean /= n;
  char title[128];
  std::snprintf(title, sizeof title, "before \u00b7 default/prefix: queue %.2f ms", queue_mean);
  EXPECT_NE(html.find(title), std::string::npos) << title;

  EXPECT_NE(html.find("<b>before</b> vs <b>after</b>"), std::string::npos);
  EXPECT_NE(html.find("id=compare"), std::string::npos);
  // Self-contained: no scripts, no external resources.
  for (const char* external : {"<script", "<link", " src=", "href=", "@import", "url("})
    EXPECT_EQ(html.find(external), std::string::npos) << external;
}

TEST(BenchReport, OldFilesWithoutRecordsRenderNa) {
  const std::string old = R"({"url":"http://h:1","slo_ttft_ms":1000,"capacity":{"default":4.000000},"runs":[
    {"label":"default @2.000 req/s","rate":2,"requests":50,"failed":0,"wall_s":25,"req_per_s":2,"tokens_per_s":32,
     "normalized_latency_ms_per_token":9.1,"ttft_ms":{"p50":40.5,"p90":80,"p99":120},"itl_ms":{"p50":5,"p90":6,"p99":9},
     "tpot_ms":{"p50":5,"p90":6,"p99":8},"e2e_ms":{"p50":130,"p90":180,"p99":210}},
    {"label":"default @4.000 req/s","rate":4,"requests":50,"failed":0,"wall_s":12.5,"req_per_s":4,"tokens_per_s":64,
     "normalized_latency_ms_per_token":9.9,"ttft_ms":{"p50":60,"p90":300,"p99":900},"itl_ms":{"p50":5,"p90":6,"p99":9},
     "tpot_ms":{"p50":5,"p90":6,"p99":8},"e2e_ms":{"p50":150,"p90":400,"p99":1000}}]})";
  auto r = parse_bench_result(old, "old.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->runs[1].mode, "default");
  EXPECT_FALSE(r->runs[0].has_samples);
  const std::string html = render_bench_report({*r});
  std::string na_row = "<tr><td>default @2.000 req/s</td>";
  for (int i = 0; i < 10; ++i) na_row += "<td class=na>n/a</td>";
  EXPECT_NE(html.find(na_row + "</tr>"), std::string::npos);
  EXPECT_NE(html.find("<td class=n>40.5</td>"), std::string::npos);  // summary TTFT p50 still shown
  EXPECT_NE(html.find("id=sweep"), std::string::npos);               // two rates of one mode
  EXPECT_EQ(html.find("seg-queue"), std::string::npos);
}

TEST(BenchReport, JsonRoundTrip) {
  BenchResult res;
  res.url = "http://127.0.0.1:9";
  res.slo_ttft_ms = 250;
  res.capacity = {{"default/prefix", 3}};
  BenchRun run;
  run.label = "default/prefix @3.000 req/s";
  run.mode = "default/prefix";
  run.rate = 3;
  run.wall_s = 2;
  for (int i = 0; i < 7; ++i) {
    BenchSample s;
    s.ok = i != 3;
    s.ttft_ms = 10 + i, s.e2e_ms = 50 + 3 * i, s.tokens = 5, s.itl_ms = {1, 2, 3, 4};
    s.has_usage = s.ok, s.prompt_tokens = 129, s.reused_dram = 33 * (i % 2), s.reuse = "prefix";
    s.has_timings = s.ok, s.timings.queue_ms = 0.25 * i, s.timings.search_wait_ms = 1.5;
    if (!s.ok) s.error = "HTTP 429";
    run.samples.push_back(s);
  }
  summarize_bench_run(run);
  EXPECT_EQ(run.failed, 1);
  EXPECT_DOUBLE_EQ(run.req_per_s, 3.0);
  EXPECT_DOUBLE_EQ(run.ttft_ms.p50, naive_pct({10, 11, 12, 14, 15, 16}, 50));
  res.runs.push_back(run);
  auto back = parse_bench_result(bench_result_json(res), "mem");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const BenchRun& r = back->runs.at(0);
  EXPECT_EQ(r.mode, run.mode);
  EXPECT_EQ(r.failed, 1);
  ASSERT_EQ(r.samples.size(), 7u);
  EXPECT_EQ(r.samples[3].error, "HTTP 429");
  EXPECT_FALSE(r.samples[3].has_usage);
  EXPECT_EQ(r.samples[1].reused_dram, 33);
  EXPECT_EQ(r.samples[1].prompt_tokens, 129);
  EXPECT_DOUBLE_EQ(r.samples[2].timings.queue_ms, 0.5);
  EXPECT_DOUBLE_EQ(r.samples[2].timings.search_wait_ms, 1.5);
  EXPECT_DOUBLE_EQ(r.ttft_ms.p99, run.ttft_ms.p99);
  ASSERT_EQ(back->capacity.size(), 1u);
  EXPECT_DOUBLE_EQ(back->capacity[0].second, 3);
}

TEST(BenchReport, MalformedFilesNameTheFileAndTheProblem) {
  auto bad = parse_bench_result("{\"runs\": [{\"label\": \"x\"", "bad.json");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message().rfind("bad.json: not valid JSON", 0), 0u) << bad.status().message();

  auto typed = parse_bench_result(R"({"runs":[{"label":"x","samples":[{"ok":true},{"ok":true,"ttft_ms":"12"}]}]})",
                                  "typed.json");
  ASSERT_FALSE(typed.ok());
  EXPECT_EQ(typed.status().message(), "typed.json: runs[0].samples[1].ttft_ms: expected a number");

  auto other = parse_bench_result(R"({"model":"x"})", "other.json");
  ASSERT_FALSE(other.ok());
  EXPECT_NE(other.status().message().find("other.json: runs: missing"), std::string::npos);

  auto missing = load_bench_result("/nonexistent/run.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message().rfind("/nonexistent/run.json: cannot open", 0), 0u);
}

TEST(BenchReport, Formatting) {
  EXPECT_EQ(format_ms(1234.4), "1234");
  EXPECT_EQ(format_ms(123.44), "123");
  EXPECT_EQ(format_ms(12.345), "12.3");
  EXPECT_EQ(format_ms(1.2345), "1.23");
  EXPECT_EQ(format_percent(0.5384615), "53.8 %");
  EXPECT_EQ(format_rate(2.0), "2.00");
}

}  // namespace
}  // namespace ragd::tools
