// `ragctl bench` results: JSON in and out, and the HTML report (bench_report.h).
#include "bench_report.h"

#include <simdjson.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <initializer_list>
#include <sstream>

#include "ragd/common/json_writer.h"
#include "ragd/common/utf8.h"

namespace ragd::tools {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// ---------------------------------------------------------------------------------------------
// JSON in

// Reads typed fields of one object; an absent or null field leaves the output unchanged, a field
// of the wrong type is an error naming the file and the field's path.
class FieldReader {
 public:
  FieldReader(const std::string& source, object obj, std::string path)
      : source_(source), obj_(obj), path_(std::move(path)) {}

  Status error(const std::string& key, const std::string& what) const {
    return Status::InvalidArgument(source_ + ": " + field_path(key) + ": " + what);
  }
  std::string field_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

  bool find(const char* key, element* e) const {
    if (obj_.at_key(key).get(*e)) return false;
    return e->type() != element_type::NULL_VALUE;
  }
  Status num(const char* key, double* out) const {
    element e;
    if (!find(key, &e)) return Status::OK();
    double v = 0;
    if (e.get_double().get(v)) return error(key, "expected a number");
    *out = v;
    return Status::OK();
  }
  Status integer(const char* key, int* out) const {
    double v = *out;
    RAGD_RETURN_IF_ERROR(num(key, &v));
    if (std::fabs(v) > 2e9 || v != std::floor(v)) return error(key, "expected an integer");
    *out = static_cast<int>(v);
    return Status::OK();
  }
  Status str(const char* key, std::string* out) const {
    element e;
    if (!find(key, &e)) return Status::OK();
    std::string_view v;
    if (e.get_string().get(v)) return error(key, "expected a string");
    *out = std::string(v);
    return Status::OK();
  }
  Status boolean(const char* key, bool* out) const {
    element e;
    if (!find(key, &e)) return Status::OK();
    if (e.get_bool().get(*out)) return error(key, "expected true or false");
    return Status::OK();
  }
  // Absent: *found = false. Present and not an object: error.
  Status sub(const char* key, object* out, bool* found) const {
    element e;
    *found = find(key, &e);
    if (*found && e.get_object().get(*out)) return error(key, "expected an object");
    return Status::OK();
  }
  Status percentiles(const char* key, BenchPercentiles* out) const {
    object o;
    bool found = false;
    RAGD_RETURN_IF_ERROR(sub(key, &o, &found));
    if (!found) return Status::OK();
    FieldReader r(source_, o, field_path(key));
    RAGD_RETURN_IF_ERROR(r.num("p50", &out->p50));
    RAGD_RETURN_IF_ERROR(r.num("p90", &out->p90));
    return r.num("p99", &out->p99);
  }

 private:
  const std::string& source_;
  object obj_;
  std::string path_;
};

Status parse_sample(const std::string& source, element e, const std::string& path, BenchSample* s) {
  object o;
  if (e.get_object().get(o)) return Status::InvalidArgument(source + ": " + path + ": expected an object");
  FieldReader r(source, o, path);
  RAGD_RETURN_IF_ERROR(r.boolean("ok", &s->ok));
  RAGD_RETURN_IF_ERROR(r.num("ttft_ms", &s->ttft_ms));
  RAGD_RETURN_IF_ERROR(r.num("e2e_ms", &s->e2e_ms));
  RAGD_RETURN_IF_ERROR(r.integer("tokens", &s->tokens));
  RAGD_RETURN_IF_ERROR(r.str("error", &s->error));
  RAGD_RETURN_IF_ERROR(r.num("sent_s", &s->sent_s));
  object u;
  RAGD_RETURN_IF_ERROR(r.sub("usage", &u, &s->has_usage));
  if (s->has_usage) {
    FieldReader ur(source, u, r.field_path("usage"));
    RAGD_RETURN_IF_ERROR(ur.integer("prompt_tokens", &s->prompt_tokens));
    RAGD_RETURN_IF_ERROR(ur.str("reuse", &s->reuse));
    object rt;
    bool has_rt = false;
    RAGD_RETURN_IF_ERROR(ur.sub("reused_tokens", &rt, &has_rt));
    if (has_rt) {
      FieldReader tr(source, rt, ur.field_path("reused_tokens"));
      RAGD_RETURN_IF_ERROR(tr.integer("hbm", &s->reused_hbm));
      RAGD_RETURN_IF_ERROR(tr.integer("dram", &s->reused_dram));
      RAGD_RETURN_IF_ERROR(tr.integer("ssd", &s->reused_ssd));
      RAGD_RETURN_IF_ERROR(tr.integer("remote", &s->reused_remote));
    }
  }
  object t;
  RAGD_RETURN_IF_ERROR(r.sub("timings", &t, &s->has_timings));
  if (s->has_timings) {
    FieldReader tr(source, t, r.field_path("timings"));
    BenchTimings& x = s->timings;
    const std::pair<const char*, double*> fields[] = {
        {"queue_ms", &x.queue_ms},     {"retrieval_ms", &x.retrieval_ms}, {"kv_load_ms", &x.kv_load_ms},
        {"prefill_ms", &x.prefill_ms}, {"ttft_ms", &x.ttft_ms},           {"lookup_ms", &x.lookup_ms},
        {"admit_ms", &x.admit_ms},     {"publish_ms", &x.publish_ms},     {"search_wait_ms", &x.search_wait_ms}};
    for (auto [key, out] : fields) RAGD_RETURN_IF_ERROR(tr.num(key, out));
  }
  return Status::OK();
}

Status parse_run(const std::string& source, element e, const std::string& path, BenchRun* run) {
  object o;
  if (e.get_object().get(o)) return Status::InvalidArgument(source + ": " + path + ": expected an object");
  FieldReader r(source, o, path);
  element label;
  if (!r.find("label", &label)) return r.error("label", "missing");
  RAGD_RETURN_IF_ERROR(r.str("label", &run->label));
  RAGD_RETURN_IF_ERROR(r.str("mode", &run->mode));
  if (run->mode.empty()) run->mode = run->label.substr(0, run->label.find(" @"));  // files without "mode"
  RAGD_RETURN_IF_ERROR(r.num("rate", &run->rate));
  double seed = 0;
  RAGD_RETURN_IF_ERROR(r.num("seed", &seed));
  if (seed < 0 || seed > 9007199254740992.0 || seed != static_cast<double>(static_cast<uint64_t>(seed)))
    return r.error("seed", "expected a non-negative integer");
  run->seed = static_cast<uint64_t>(seed);
  RAGD_RETURN_IF_ERROR(r.integer("requests", &run->requests));
  RAGD_RETURN_IF_ERROR(r.integer("failed", &run->failed));
  RAGD_RETURN_IF_ERROR(r.num("wall_s", &run->wall_s));
  RAGD_RETURN_IF_ERROR(r.num("req_per_s", &run->req_per_s));
  RAGD_RETURN_IF_ERROR(r.num("tokens_per_s", &run->tokens_per_s));
  RAGD_RETURN_IF_ERROR(r.num("normalized_latency_ms_per_token", &run->norm_latency_ms_per_token));
  RAGD_RETURN_IF_ERROR(r.percentiles("ttft_ms", &run->ttft_ms));
  RAGD_RETURN_IF_ERROR(r.percentiles("itl_ms", &run->itl_ms));
  RAGD_RETURN_IF_ERROR(r.percentiles("tpot_ms", &run->tpot_ms));
  RAGD_RETURN_IF_ERROR(r.percentiles("e2e_ms", &run->e2e_ms));
  element samples;
  if (r.find("samples", &samples)) {
    simdjson::dom::array arr;
    if (samples.get_array().get(arr)) return r.error("samples", "expected an array");
    run->has_samples = true;
    size_t i = 0;
    for (element s : arr) {
      run->samples.emplace_back();
      RAGD_RETURN_IF_ERROR(
          parse_sample(source, s, r.field_path("samples") + "[" + std::to_string(i++) + "]", &run->samples.back()));
    }
  }
  return Status::OK();
}

// ---------------------------------------------------------------------------------------------
// Formatting

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

std::string esc(std::string_view s) {
  std::string o;
  o.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&quot;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// Mean tokens: one decimal under 100, whole tokens above.
std::string format_tokens(double t) { return fmt(t < 100 ? "%.1f" : "%.0f", t); }

// SVG coordinates: one decimal is below a pixel.
std::string px(double v) { return fmt("%.1f", v); }

constexpr const char* kNa = "<td class=na>n/a</td>";

std::string num_cell(const std::string& text) { return "<td class=n>" + text + "</td>"; }

const char* const kPalette[] = {"#4e79a7", "#e15759", "#59a14f", "#f28e2b", "#b07aa1",
                                "#76b7b2", "#edc948", "#9c755f", "#ff9da7", "#bab0ac"};
std::string color(size_t i) { return kPalette[i % std::size(kPalette)]; }

// Axis ticks: a step of 1, 2, 2.5 or 5 times a power of ten giving about `n` intervals up to max.
double nice_step(double max, int n) {
  if (!(max > 0)) return 1;
  const double raw = max / n, e = std::pow(10.0, std::floor(std::log10(raw))), f = raw / e;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * e;
}
std::string tick_label(double v) { return fmt("%.4g", v); }

// Characters of a UTF-8 label, for the room its SVG text needs.
size_t label_width(std::string_view s) {
  return utf8_length(s);
}

// ---------------------------------------------------------------------------------------------
// Per-run statistics derived from the samples

struct RunStats {
  int ok = 0;
  // Hit / miss split: ok requests whose `done` event carried usage.
  int with_usage = 0, hits = 0;
  std::vector<double> hit_ttft, miss_ttft;  // sorted, client TTFT (ms)
  double hit_reused_mean = 0;
  double prompt_mean = 0, reused_mean = 0, tier_mean[4] = {};  // hbm, dram, ssd, remote
  int tier_hits[4] = {};
  long prompt_total = 0, reused_total = 0;
  // Breakdown: ok requests whose `done` event carried timings.
  int with_timings = 0;
  BenchTimings mean;
  double client_ttft_mean = 0;
  std::vector<double> ttft_sorted, e2e_sorted;
};

RunStats run_stats(const BenchRun& run) {
  RunStats st;
  for (const auto& s : run.samples) {
    if (!s.ok) continue;
    ++st.ok;
    if (s.ttft_ms >= 0) st.ttft_sorted.push_back(s.ttft_ms);
    st.e2e_sorted.push_back(s.e2e_ms);
    if (s.has_usage) {
      ++st.with_usage;
      const int reused = s.reused();
      if (reused > 0) {
        ++st.hits;
        st.hit_reused_mean += reused;
        if (s.ttft_ms >= 0) st.hit_ttft.push_back(s.ttft_ms);
      } else if (s.ttft_ms >= 0) {
        st.miss_ttft.push_back(s.ttft_ms);
      }
      st.prompt_total += s.prompt_tokens;
      st.reused_total += reused;
      const int tiers[4] = {s.reused_hbm, s.reused_dram, s.reused_ssd, s.reused_remote};
      for (int i = 0; i < 4; ++i) {
        st.tier_mean[i] += tiers[i];
        st.tier_hits[i] += tiers[i] > 0;
      }
    }
    if (s.has_timings) {
      ++st.with_timings;
      const BenchTimings& t = s.timings;
      BenchTimings& m = st.mean;
      m.queue_ms += t.queue_ms, m.retrieval_ms += t.retrieval_ms, m.kv_load_ms += t.kv_load_ms;
      m.prefill_ms += t.prefill_ms, m.ttft_ms += t.ttft_ms, m.lookup_ms += t.lookup_ms, m.admit_ms += t.admit_ms;
      m.publish_ms += t.publish_ms, m.search_wait_ms += t.search_wait_ms;
      st.client_ttft_mean += std::max(0.0, s.ttft_ms);
    }
  }
  std::sort(st.hit_ttft.begin(), st.hit_ttft.end());
  std::sort(st.miss_ttft.begin(), st.miss_ttft.end());
  std::sort(st.ttft_sorted.begin(), st.ttft_sorted.end());
  std::sort(st.e2e_sorted.begin(), st.e2e_sorted.end());
  if (st.hits) st.hit_reused_mean /= st.hits;
  if (st.with_usage) {
    st.prompt_mean = double(st.prompt_total) / st.with_usage;
    st.reused_mean = double(st.reused_total) / st.with_usage;
    for (double& m : st.tier_mean) m /= st.with_usage;
  }
  if (const int n = st.with_timings) {
    BenchTimings& m = st.mean;
    for (double* v : {&m.queue_ms, &m.retrieval_ms, &m.kv_load_ms, &m.prefill_ms, &m.ttft_ms, &m.lookup_ms, &m.admit_ms,
                      &m.publish_ms, &m.search_wait_ms})
      *v /= n;
    st.client_ttft_mean /= n;
  }
  return st;
}

// A run as the report names it: "label" alone for one result, "result · label" for several.
struct RunRef {
  size_t result = 0;
  const BenchResult* res = nullptr;
  const BenchRun* run = nullptr;
  RunStats stats;
};

// ---------------------------------------------------------------------------------------------
// SVG charts

struct Series {
  std::string name, color;
  bool dashed = false;
  std::vector<std::pair<double, double>> pts;
};
struct HLine {
  double y = 0;
  std::string label;
};

// Line chart from (0, 0); the legend sits under the plot, one entry a line.
std::string line_chart(const std::string& title, const std::string& xlabel, const std::string& ylabel,
                       const std::vector<Series>& series, const std::vector<HLine>& hlines, bool diagonal) {
  const double W = 560, L = 64, R = 20, T = 30, PH = 240, B = 44;
  double xmax = 0, ymax = 0;
  for (const auto& s : series)
    for (auto [x, y] : s.pts) xmax = std::max(xmax, x), ymax = std::max(ymax, y);
  for (const auto& h : hlines) ymax = std::max(ymax, h.y);
  if (diagonal) ymax = std::max(ymax, xmax);
  const double xs = nice_step(xmax, 5), ys = nice_step(ymax, 5);
  xmax = std::max(xs, std::ceil(xmax / xs - 1e-9) * xs);
  ymax = std::max(ys, std::ceil(ymax / ys - 1e-9) * ys);
  const double H = T + PH + B + 18.0 * series.size() + 8;
  auto X = [&](double x) { return L + (W - L - R) * x / xmax; };
  auto Y = [&](double y) { return T + PH - PH * y / ymax; };
  std::ostringstream o;
  o << "<svg class=chart xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << px(H) << "' viewBox='0 0 "
    << W << " " << px(H) << "' role='img'><title>" << esc(title) << "</title>";
  o << "<text class=ct x='" << L << "' y='18'>" << esc(title) << "</text>";
  for (double v = 0; v <= ymax + ys / 2; v += ys)
    o << "<line class=grid x1='" << L << "' x2='" << W - R << "' y1='" << px(Y(v)) << "' y2='" << px(Y(v)) << "'/>"
      << "<text class=tk x='" << L - 6 << "' y='" << px(Y(v) + 4) << "' text-anchor='end'>" << tick_label(v)
      << "</text>";
  for (double v = 0; v <= xmax + xs / 2; v += xs)
    o << "<text class=tk x='" << px(X(v)) << "' y='" << px(T + PH + 16) << "' text-anchor='middle'>" << tick_label(v)
      << "</text>";
  o << "<line class=axis x1='" << L << "' x2='" << W - R << "' y1='" << T + PH << "' y2='" << T + PH << "'/>"
    << "<text class=al x='" << px((L + W - R) / 2) << "' y='" << px(T + PH + 34) << "' text-anchor='middle'>"
    << esc(xlabel) << "</text><text class=al x='14' y='" << px(T + PH / 2)
    << "' text-anchor='middle' transform='rotate(-90 14 " << px(T + PH / 2) << ")'>" << esc(ylabel) << "</text>";
  if (diagonal)
    o << "<line class=ref x1='" << px(X(0)) << "' y1='" << px(Y(0)) << "' x2='" << px(X(std::min(xmax, ymax)))
      << "' y2='" << px(Y(std::min(xmax, ymax))) << "'><title>offered = served</title></line>";
  for (const auto& h : hlines)
    o << "<line class=slo x1='" << L << "' x2='" << W - R << "' y1='" << px(Y(h.y)) << "' y2='" << px(Y(h.y))
      << "'/><text class=tk x='" << W - R - 4 << "' y='" << px(Y(h.y) - 4) << "' text-anchor='end'>" << esc(h.label)
      << "</text>";
  for (size_t i = 0; i < series.size(); ++i) {
    const auto& s = series[i];
    o << "<polyline fill='none' stroke='" << s.color << "' stroke-width='2'"
      << (s.dashed ? " stroke-dasharray='5 4'" : "") << " points='";
    for (auto [x, y] : s.pts) o << px(X(x)) << "," << px(Y(y)) << " ";
    o << "'/>";
    if (s.pts.size() <= 40)
      for (auto [x, y] : s.pts)
        o << "<circle cx='" << px(X(x)) << "' cy='" << px(Y(y)) << "' r='3' fill='" << s.color << "'><title>"
          << esc(s.name) << ": " << tick_label(x) << ", " << tick_label(y) << "</title></circle>";
    const double ly = T + PH + B + 18.0 * i + 12;
    o << "<line x1='" << L << "' x2='" << L + 26 << "' y1='" << px(ly - 4) << "' y2='" << px(ly - 4) << "' stroke='"
      << s.color << "' stroke-width='2'" << (s.dashed ? " stroke-dasharray='5 4'" : "") << "/><text class=lg x='"
      << L + 32 << "' y='" << px(ly) << "'>" << esc(s.name) << "</text>";
  }
  o << "</svg>";
  return o.str();
}

struct Phase {
  const char* key;   // CSS class suffix: seg-<key>
  const char* name;  // legend
  const char* color;
};
constexpr Phase kPhases[] = {{"queue", "queue", "#9aa5b1"},
                             {"retrieval", "retrieval", "#4e79a7"},
                             {"kv_load", "KV load", "#f28e2b"},
                             {"prefill", "prefill", "#59a14f"},
                             {"other", "other (to first token)", "#d9d4cc"}};

struct StackRow {
  std::string label;
  double seg[std::size(kPhases)] = {};
  double mark = -1;  // client TTFT mean, ms
};

// Stacked horizontal bars, one row per run: mean ms per phase, a tick at the client's TTFT.
std::string stacked_bars(const std::vector<StackRow>& rows) {
  size_t longest = 0;
  for (const auto& r : rows) longest = std::max(longest, label_width(r.label));
  const double W = 1100, L = std::clamp(16 + 7.0 * longest, 120.0, 520.0), R = 70, T = 40, RH = 26, BH = 16;
  double xmax = 0;
  for (const auto& r : rows) {
    double sum = 0;
    for (double v : r.seg) sum += v;
    xmax = std::max({xmax, sum, r.mark});
  }
  const double step = nice_step(xmax, 8);
  xmax = std::max(step, std::ceil(xmax / step - 1e-9) * step);
  const double H = T + RH * rows.size() + 34;
  auto X = [&](double v) { return L + (W - L - R) * v / xmax; };
  std::ostringstream o;
  o << "<svg class='chart stacked' xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << px(H)
    << "' viewBox='0 0 " << W << " " << px(H) << "' role='img'><title>mean time to first token by phase</title>";
  double lx = L;
  for (const auto& p : kPhases) {
    o << "<rect x='" << px(lx) << "' y='8' width='12' height='12' fill='" << p.color << "'/><text class=lg x='"
      << px(lx + 16) << "' y='18'>" << p.name << "</text>";
    lx += 30 + 7.0 * std::strlen(p.name);
  }
  o << "<line class=mark x1='" << px(lx) << "' x2='" << px(lx) << "' y1='6' y2='22'/><text class=lg x='" << px(lx + 6)
    << "' y='18'>client TTFT</text>";
  const double bottom = T + RH * rows.size();
  for (double v = 0; v <= xmax + step / 2; v += step)
    o << "<line class=grid x1='" << px(X(v)) << "' x2='" << px(X(v)) << "' y1='" << T - 4 << "' y2='" << px(bottom)
      << "'/><text class=tk x='" << px(X(v)) << "' y='" << px(bottom + 14) << "' text-anchor='middle'>" << tick_label(v)
      << "</text>";
  o << "<text class=al x='" << px((L + W - R) / 2) << "' y='" << px(bottom + 30)
    << "' text-anchor='middle'>mean time (ms)</text>";
  for (size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const double y = T + RH * i + (RH - BH) / 2;
    o << "<text class=rl x='" << L - 8 << "' y='" << px(y + BH - 3) << "' text-anchor='end'>" << esc(r.label)
      << "</text>";
    double x = 0;
    for (size_t p = 0; p < std::size(kPhases); ++p) {
      o << "<rect class='seg seg-" << kPhases[p].key << "' x='" << px(X(x)) << "' y='" << px(y) << "' width='"
        << px(X(x + r.seg[p]) - X(x)) << "' height='" << BH << "' fill='" << kPhases[p].color << "'><title>"
        << esc(r.label) << ": " << kPhases[p].name << " " << format_ms(r.seg[p]) << " ms</title></rect>";
      x += r.seg[p];
    }
    o << "<text class=tk x='" << px(X(std::max(x, r.mark)) + 6) << "' y='" << px(y + BH - 4) << "'>" << format_ms(x)
      << " ms</text>";
    if (r.mark >= 0)
      o << "<line class=mark x1='" << px(X(r.mark)) << "' x2='" << px(X(r.mark)) << "' y1='" << px(y - 3) << "' y2='"
        << px(y + BH + 3) << "'><title>client TTFT " << format_ms(r.mark) << " ms</title></line>";
  }
  o << "</svg>";
  return o.str();
}

// Comparison: per run, one bar per result, p99 light with p50 dark inside.
std::string compare_bars(const std::vector<std::string>& runs, const std::vector<std::string>& results,
                         const std::vector<std::vector<const BenchRun*>>& cells) {
  size_t longest = 0;
  for (const auto& r : runs) longest = std::max(longest, label_width(r));
  const double W = 1100, L = std::clamp(16 + 7.0 * longest, 120.0, 520.0), R = 90, T = 36, BH = 14, GAP = 12;
  double xmax = 0;
  for (const auto& row : cells)
    for (const BenchRun* r : row)
      if (r) xmax = std::max(xmax, r->ttft_ms.p99);
  const double step = nice_step(xmax, 8);
  xmax = std::max(step, std::ceil(xmax / step - 1e-9) * step);
  const double group = BH * results.size() + GAP, bottom = T + group * runs.size();
  const double H = bottom + 34;
  auto X = [&](double v) { return L + (W - L - R) * v / xmax; };
  std::ostringstream o;
  o << "<svg class=chart xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='" << px(H) << "' viewBox='0 0 "
    << W << " " << px(H) << "' role='img'><title>TTFT p50 and p99 by result</title>";
  double lx = L;
  for (size_t k = 0; k < results.size(); ++k) {
    o << "<rect x='" << px(lx) << "' y='8' width='12' height='12' fill='" << color(k) << "'/><text class=lg x='"
      << px(lx + 16) << "' y='18'>" << esc(results[k]) << "</text>";
    lx += 40 + 7.0 * results[k].size();
  }
  o << "<text class=lg x='" << px(lx) << "' y='18'>dark: p50, light: p99</text>";
  for (double v = 0; v <= xmax + step / 2; v += step)
    o << "<line class=grid x1='" << px(X(v)) << "' x2='" << px(X(v)) << "' y1='" << T - 4 << "' y2='" << px(bottom)
      << "'/><text class=tk x='" << px(X(v)) << "' y='" << px(bottom + 14) << "' text-anchor='middle'>" << tick_label(v)
      << "</text>";
  o << "<text class=al x='" << px((L + W - R) / 2) << "' y='" << px(bottom + 30)
    << "' text-anchor='middle'>TTFT (ms)</text>";
  for (size_t i = 0; i < runs.size(); ++i) {
    const double y0 = T + group * i;
    o << "<text class=rl x='" << L - 8 << "' y='" << px(y0 + BH * results.size() / 2 + 4) << "' text-anchor='end'>"
      << esc(runs[i]) << "</text>";
    for (size_t k = 0; k < results.size(); ++k) {
      const BenchRun* r = cells[i][k];
      const double y = y0 + BH * k;
      if (!r) {
        o << "<text class=tk x='" << L + 4 << "' y='" << px(y + BH - 3) << "'>n/a</text>";
        continue;
      }
      o << "<rect x='" << L << "' y='" << px(y + 1) << "' width='" << px(X(r->ttft_ms.p99) - L) << "' height='"
        << BH - 2 << "' fill='" << color(k) << "' fill-opacity='0.35'><title>" << esc(results[k]) << ": p99 "
        << format_ms(r->ttft_ms.p99) << " ms</title></rect><rect x='" << L << "' y='" << px(y + 1) << "' width='"
        << px(X(r->ttft_ms.p50) - L) << "' height='" << BH - 2 << "' fill='" << color(k) << "'><title>"
        << esc(results[k]) << ": p50 " << format_ms(r->ttft_ms.p50) << " ms</title></rect><text class=tk x='"
        << px(X(r->ttft_ms.p99) + 4) << "' y='" << px(y + BH - 3) << "'>" << format_ms(r->ttft_ms.p50) << " / "
        << format_ms(r->ttft_ms.p99) << "</text>";
    }
  }
  o << "</svg>";
  return o.str();
}

// ---------------------------------------------------------------------------------------------
// Sections

constexpr const char* kStyle =
    "body{font:14px/1.45 system-ui,-apple-system,'Segoe UI',sans-serif;color:#1d2330;background:#fff;margin:0}"
    "main{max-width:1140px;margin:0 auto;padding:24px 20px 40px}"
    "h1{font-size:24px;margin:0 0 4px}"
    "h2{font-size:18px;margin:32px 0 8px;border-bottom:1px solid #e3e6eb;padding-bottom:4px}"
    "p.note{color:#5b6472;margin:4px 0 10px;max-width:900px}"
    "table{border-collapse:collapse;margin:6px 0 12px;font-size:13px;font-variant-numeric:tabular-nums;"
    "display:block;max-width:100%;overflow-x:auto}"
    "th,td{padding:4px 6px;border-bottom:1px solid #eceef2;text-align:left;white-space:nowrap}"
    "th{font-weight:600;color:#3b4452;background:#f6f7f9;vertical-align:bottom;white-space:normal;min-width:3em}"
    "th.grp{text-align:center}colgroup.cg{border-left:2px solid #d5d9e0}"
    "td.n,th.n{text-align:right}td.na{text-align:right;color:#9aa1ab}"
    "tr.rg td{font-weight:600;padding-top:10px;border-bottom:1px solid #c9ced6}"
    "td.better{color:#1a7f37}td.worse{color:#c62828}"
    "svg.chart{display:block;margin:8px 0}svg text{font:12px system-ui,sans-serif;fill:#1d2330}"
    "svg .ct{font-size:14px;font-weight:600}svg .tk{font-size:11px;fill:#5b6472}svg .lg{font-size:12px}"
    "svg .grid{stroke:#eceef2}svg .axis{stroke:#5b6472}svg .slo{stroke:#1d2330;stroke-dasharray:6 4}"
    "svg .ref{stroke:#9aa1ab;stroke-dasharray:2 3}svg .mark{stroke:#1d2330;stroke-width:2}"
    ".charts{display:flex;flex-wrap:wrap;gap:12px}";

struct Ctx {
  const std::vector<BenchResult>* results;
  std::vector<RunRef> runs;
  bool multi = false;

  std::string run_name(const RunRef& r) const {
    return multi ? r.res->label + " \u00b7 " + r.run->label : r.run->label;
  }
  // The leading cell naming a run; with several results, runs are grouped under result_row().
  std::string lead(const RunRef& r) const { return "<td>" + esc(r.run->label) + "</td>"; }
  std::string lead_head(int rows = 1) const {
    return rows > 1 ? "<th rowspan=" + std::to_string(rows) + ">run</th>" : "<th>run</th>";
  }
  // With several results: a row naming the result, before its first run; `cols` = the table's columns.
  std::string result_row(const RunRef& r, int cols) const {
    if (!multi || r.run != &r.res->runs.front()) return "";
    return "<tr class=rg><td colspan=" + std::to_string(cols) + ">" + esc(r.res->label) + "</td></tr>";
  }
  // Column groups after the leading cells, with a rule before each group.
  std::string colgroups(std::initializer_list<int> spans) const {
    std::string o = "<colgroup span=1></colgroup>";
    for (int n : spans) o += "<colgroup class=cg span=" + std::to_string(n) + "></colgroup>";
    return o;
  }
};

void section_results(const Ctx& c, std::ostringstream& o) {
  o << "<table><tr><th>result</th><th>file</th><th>daemon</th><th class=n>runs</th><th class=n>requests</th>"
       "<th class=n>TTFT SLO (ms)</th><th>per-request records</th></tr>";
  for (const auto& res : *c.results) {
    int requests = 0;
    bool samples = !res.runs.empty();
    for (const auto& r : res.runs) requests += r.requests, samples = samples && r.has_samples;
    o << "<tr><td>" << esc(res.label) << "</td><td>" << esc(res.source.empty() ? "-" : res.source) << "</td><td>"
      << esc(res.url) << "</td>" << num_cell(std::to_string(res.runs.size())) << num_cell(std::to_string(requests))
      << (res.slo_ttft_ms > 0 ? num_cell(format_ms(res.slo_ttft_ms)) : kNa) << "<td>"
      << (samples ? "yes" : "no (tables that need them show n/a)") << "</td></tr>";
  }
  o << "</table>";
}

void section_summary(const Ctx& c, std::ostringstream& o) {
  o << "<h2 id=summary>Summary</h2><table><tr>" << c.lead_head()
    << "<th class=n>offered (req/s)</th><th class=n>requests</th><th class=n>failed</th><th class=n>served (req/s)</th>"
       "<th class=n>tokens/s</th><th class=n>TTFT p50 (ms)</th><th class=n>TTFT p90 (ms)</th>"
       "<th class=n>TTFT p99 (ms)</th><th class=n>ITL p99 (ms)</th><th class=n>TPOT p50 (ms)</th>"
       "<th class=n>e2e p50 (ms)</th><th class=n>e2e p99 (ms)</th></tr>";
  for (const auto& r : c.runs) {
    const BenchRun& x = *r.run;
    o << c.result_row(r, 13) << "<tr>" << c.lead(r) << num_cell(x.rate > 0 ? format_rate(x.rate) : "closed loop")
      << num_cell(std::to_string(x.requests)) << num_cell(std::to_string(x.failed))
      << num_cell(format_rate(x.req_per_s)) << num_cell(format_rate(x.tokens_per_s))
      << num_cell(format_ms(x.ttft_ms.p50)) << num_cell(format_ms(x.ttft_ms.p90)) << num_cell(format_ms(x.ttft_ms.p99))
      << num_cell(format_ms(x.itl_ms.p99)) << num_cell(format_ms(x.tpot_ms.p50)) << num_cell(format_ms(x.e2e_ms.p50))
      << num_cell(format_ms(x.e2e_ms.p99)) << "</tr>";
  }
  o << "</table>";
}

void section_compare(const Ctx& c, std::ostringstream& o) {
  const auto& results = *c.results;
  std::vector<std::string> labels, run_labels;
  for (const auto& res : results) {
    labels.push_back(res.label);
    for (const auto& r : res.runs)
      if (std::find(run_labels.begin(), run_labels.end(), r.label) == run_labels.end()) run_labels.push_back(r.label);
  }
  std::vector<std::vector<const BenchRun*>> cells(run_labels.size(), std::vector<const BenchRun*>(results.size()));
  std::vector<std::vector<const RunStats*>> stats(run_labels.size(), std::vector<const RunStats*>(results.size()));
  for (const auto& ref : c.runs) {
    const size_t i = std::find(run_labels.begin(), run_labels.end(), ref.run->label) - run_labels.begin();
    if (!cells[i][ref.result]) cells[i][ref.result] = ref.run, stats[i][ref.result] = &ref.stats;
  }
  o << "<h2 id=compare>Comparison</h2><p class=note>Runs are matched by label; changes are relative to <b>"
    << esc(labels[0]) << "</b> (green: better, red: worse).</p>";
  o << compare_bars(run_labels, labels, cells);
  struct Metric {
    const char* name;
    bool lower_better, points;  // points: a share, compared in percentage points
    double (*get)(const BenchRun&, const RunStats&, bool*);
  };
  static const Metric kMetrics[] = {
      {"TTFT p50 (ms)", true, false, [](const BenchRun& r, const RunStats&, bool*) { return r.ttft_ms.p50; }},
      {"TTFT p99 (ms)", true, false, [](const BenchRun& r, const RunStats&, bool*) { return r.ttft_ms.p99; }},
      {"e2e p99 (ms)", true, false, [](const BenchRun& r, const RunStats&, bool*) { return r.e2e_ms.p99; }},
      {"tokens/s", false, false, [](const BenchRun& r, const RunStats&, bool*) { return r.tokens_per_s; }},
      {"KV hit rate", false, true, [](const BenchRun&, const RunStats& s, bool* na) {
         *na = s.with_usage == 0;
         return s.with_usage ? double(s.hits) / s.with_usage : 0.0;
       }}};
  // One column group per metric: each result's value, and after each non-baseline its change.
  o << "<table><colgroup span=1></colgroup>";
  for (size_t m = 0; m < std::size(kMetrics); ++m)
    o << "<colgroup class=cg span=" << 2 * labels.size() - 1 << "></colgroup>";
  o << "<tr><th rowspan=2>run</th>";
  for (const Metric& mt : kMetrics) o << "<th class=grp colspan=" << 2 * labels.size() - 1 << ">" << mt.name << "</th>";
  o << "</tr><tr>";
  for (size_t m = 0; m < std::size(kMetrics); ++m)
    for (size_t k = 0; k < labels.size(); ++k)
      o << "<th class=n>" << esc(labels[k]) << "</th>" << (k ? "<th class=n>change</th>" : "");
  o << "</tr>";
  for (size_t i = 0; i < run_labels.size(); ++i) {
    o << "<tr><td>" << esc(run_labels[i]) << "</td>";
    for (const Metric& mt : kMetrics) {
      double base = 0;
      bool base_na = true;
      for (size_t k = 0; k < labels.size(); ++k) {
        bool na = cells[i][k] == nullptr;
        const double v = na ? 0 : mt.get(*cells[i][k], *stats[i][k], &na);
        const std::string text = mt.points ? format_percent(v) : mt.lower_better ? format_ms(v) : format_rate(v);
        o << (na ? kNa : num_cell(text));
        if (k == 0) {
          base = v, base_na = na;
          continue;
        }
        if (na || base_na || (!mt.points && base == 0)) {
          o << kNa;
          continue;
        }
        const double d = mt.points ? (v - base) * 100 : (v - base) / base * 100;
        const bool better = mt.lower_better ? d < 0 : d > 0;
        const char* dcls = std::fabs(d) < 0.5 ? "n" : better ? "n better" : "n worse";
        o << "<td class='" << dcls << "'>" << (d >= 0 ? "+" : "\u2212")
          << fmt(std::fabs(d) >= 9.95 ? "%.0f" : "%.1f", std::fabs(d)) << (mt.points ? " pt" : " %") << "</td>";
      }
    }
    o << "</tr>";
  }
  o << "</table>";
}

// Client TTFT percentiles of one group, or three n/a cells when it is empty.
std::string ttft_cells(const std::vector<double>& ttft) {
  if (ttft.empty()) return std::string(kNa) + kNa + kNa;
  return num_cell(format_ms(bench_percentile(ttft, 50))) + num_cell(format_ms(bench_percentile(ttft, 90))) +
         num_cell(format_ms(bench_percentile(ttft, 99)));
}

void section_hitmiss(const Ctx& c, std::ostringstream& o) {
  o << "<h2 id=hitmiss>TTFT of cache hits and misses</h2><p class=note>A hit is a request that reused at least one "
       "cached prompt token (any tier), as reported in the daemon's <code>done</code> event; TTFT is measured by the "
       "client.</p><table>"
    << c.colgroups({6, 4}) << "<tr>" << c.lead_head(2)
    << "<th class=grp colspan=6>hits (requests with reused tokens)</th><th class=grp colspan=4>misses</th></tr><tr>"
       "<th class=n>requests</th><th class=n>share</th><th class=n>TTFT p50 (ms)</th><th class=n>TTFT p90 (ms)</th>"
       "<th class=n>TTFT p99 (ms)</th><th class=n>reused (tokens/req)</th><th class=n>requests</th>"
       "<th class=n>TTFT p50 (ms)</th><th class=n>TTFT p90 (ms)</th><th class=n>TTFT p99 (ms)</th></tr>";
  for (const auto& r : c.runs) {
    const RunStats& s = r.stats;
    o << c.result_row(r, 11) << "<tr>" << c.lead(r);
    if (s.with_usage == 0) {
      for (int i = 0; i < 10; ++i) o << kNa;
    } else {
      const int misses = s.with_usage - s.hits;
      o << num_cell(std::to_string(s.hits)) << num_cell(format_percent(double(s.hits) / s.with_usage))
        << ttft_cells(s.hit_ttft) << (s.hits ? num_cell(format_tokens(s.hit_reused_mean)) : kNa)
        << num_cell(std::to_string(misses)) << ttft_cells(s.miss_ttft);
    }
    o << "</tr>";
  }
  o << "</table>";
}

// A 120-px bar of the mean prompt: reused per tier, then recomputed.
std::string tier_bar(const RunStats& s) {
  const double W = 120, total = std::max(1.0, std::max(s.prompt_mean, s.reused_mean));
  const char* colors[] = {"#4e79a7", "#f28e2b", "#b07aa1", "#59a14f"};
  const char* names[] = {"HBM", "DRAM", "SSD", "remote"};
  std::ostringstream o;
  o << "<svg xmlns='http://www.w3.org/2000/svg' width='" << W << "' height='12'><rect width='" << W
    << "' height='12' fill='#eceef2'><title>recomputed</title></rect>";
  double x = 0;
  for (int i = 0; i < 4; ++i) {
    const double w = W * s.tier_mean[i] / total;
    o << "<rect class='tier-" << names[i] << "' x='" << px(x) << "' width='" << px(w) << "' height='12' fill='"
      << colors[i] << "'><title>" << names[i] << " " << format_tokens(s.tier_mean[i]) << " tokens/req</title></rect>";
    x += w;
  }
  o << "</svg>";
  return o.str();
}

void section_tiers(const Ctx& c, std::ostringstream& o) {
  o << "<h2 id=tiers>KV reuse by tier</h2><p class=note>Means over the requests whose <code>done</code> event "
       "carried usage (hits + misses above). Hit rate: share of requests that reused at least one token (from that "
       "tier). The bar shows the mean prompt: <span style='color:#4e79a7'>HBM</span>, "
       "<span style='color:#f28e2b'>DRAM</span>, <span style='color:#b07aa1'>SSD</span>, <span style='color:#59a14f'>remote</span> (the shared Redis tier) reuse, grey recomputed.</p>"
       "<table>"
    << c.colgroups({3, 2, 2, 2, 2, 1}) << "<tr>" << c.lead_head(2)
    << "<th class=grp colspan=3>all tiers</th><th class=grp colspan=2>HBM</th><th class=grp colspan=2>DRAM</th>"
       "<th class=grp colspan=2>SSD</th><th class=grp colspan=2>remote</th><th rowspan=2>mean prompt</th></tr><tr>"
       "<th class=n>hit rate</th><th class=n>prompt (tokens/req)</th><th class=n>reused (% of prompt)</th>";
  for (int i = 0; i < 4; ++i) o << "<th class=n>tokens/req</th><th class=n>hit rate</th>";
  o << "</tr>";
  for (const auto& r : c.runs) {
    const RunStats& s = r.stats;
    o << c.result_row(r, 13) << "<tr>" << c.lead(r);
    if (s.with_usage == 0) {
      for (int i = 0; i < 11; ++i) o << kNa;
      o << "<td></td></tr>";
      continue;
    }
    const double n = s.with_usage;
    o << num_cell(format_percent(s.hits / n)) << num_cell(format_tokens(s.prompt_mean))
      << (s.prompt_total > 0 ? num_cell(format_percent(double(s.reused_total) / s.prompt_total)) : kNa);
    for (int i = 0; i < 4; ++i)
      o << num_cell(format_tokens(s.tier_mean[i])) << num_cell(format_percent(s.tier_hits[i] / n));
    o << "<td>" << tier_bar(s) << "</td></tr>";
  }
  o << "</table>";
}

void section_breakdown(const Ctx& c, std::ostringstream& o) {
  o << "<h2 id=breakdown>Where the time to first token goes</h2><p class=note>Means of the daemon's per-run "
       "<code>timings</code>. <i>other</i> is the daemon's TTFT minus the four phases (scheduling, batching with other "
       "runs, the first decode step); the black tick is the TTFT the client measured (adds HTTP and SSE). KV load = "
       "lookup + admit.</p>";
  std::vector<StackRow> rows;
  for (const auto& r : c.runs) {
    const RunStats& s = r.stats;
    if (s.with_timings == 0) continue;
    StackRow row;
    row.label = c.run_name(r);
    const BenchTimings& m = s.mean;
    const double phases[4] = {m.queue_ms, m.retrieval_ms, m.kv_load_ms, m.prefill_ms};
    double sum = 0;
    for (int i = 0; i < 4; ++i) row.seg[i] = std::max(0.0, phases[i]), sum += row.seg[i];
    row.seg[4] = std::max(0.0, m.ttft_ms - sum);
    row.mark = s.client_ttft_mean;
    rows.push_back(row);
  }
  if (rows.empty())
    o << "<p class=note>n/a: no run has per-request timings.</p>";
  else
    o << stacked_bars(rows);
  o << "<table><tr>" << c.lead_head()
    << "<th class=n>requests</th><th class=n>queue (ms)</th><th class=n>retrieval (ms)</th>"
       "<th class=n>KV load (ms)</th><th class=n>lookup (ms)</th><th class=n>admit (ms)</th>"
       "<th class=n>prefill (ms)</th><th class=n>TTFT, daemon (ms)</th><th class=n>TTFT, client (ms)</th>"
       "<th class=n>publish (ms)</th><th class=n>search wait (ms)</th></tr>";
  for (const auto& r : c.runs) {
    const RunStats& s = r.stats;
    o << c.result_row(r, 12) << "<tr>" << c.lead(r);
    if (s.with_timings == 0) {
      for (int i = 0; i < 11; ++i) o << kNa;
    } else {
      const BenchTimings& m = s.mean;
      o << num_cell(std::to_string(s.with_timings));
      for (double v : {m.queue_ms, m.retrieval_ms, m.kv_load_ms, m.lookup_ms, m.admit_ms, m.prefill_ms, m.ttft_ms,
                       s.client_ttft_mean, m.publish_ms, m.search_wait_ms})
        o << num_cell(format_ms(v));
    }
    o << "</tr>";
  }
  o << "</table>";
}

void section_sweep(const Ctx& c, std::ostringstream& o) {
  // A sweep: a mode with open-loop runs at two or more rates.
  std::vector<Series> ttft, served;
  std::vector<HLine> slos;
  std::ostringstream cap;
  size_t color_i = 0;
  for (size_t k = 0; k < c.results->size(); ++k) {
    const BenchResult& res = (*c.results)[k];
    std::vector<std::string> modes;
    for (const auto& r : res.runs)
      if (r.rate > 0 && std::find(modes.begin(), modes.end(), r.mode) == modes.end()) modes.push_back(r.mode);
    bool any = false;
    for (const auto& mode : modes) {
      std::vector<const BenchRun*> pts;
      for (const auto& r : res.runs)
        if (r.mode == mode && r.rate > 0) pts.push_back(&r);
      if (pts.size() < 2) continue;
      any = true;
      std::sort(pts.begin(), pts.end(), [](auto* a, auto* b) { return a->rate < b->rate; });
      const std::string name = c.multi ? res.label + " \u00b7 " + mode : mode;
      const std::string col = color(color_i++);
      Series p50{name + " p50", col, true, {}}, p99{name + " p99", col, false, {}}, sv{name, col, false, {}};
      for (const BenchRun* r : pts) {
        p50.pts.push_back({r->rate, r->ttft_ms.p50});
        p99.pts.push_back({r->rate, r->ttft_ms.p99});
        sv.pts.push_back({r->rate, r->req_per_s});
      }
      ttft.push_back(p99), ttft.push_back(p50), served.push_back(sv);
      double capacity = -1;
      for (const auto& [m, v] : res.capacity)
        if (m == mode) capacity = v;
      cap << "<tr>" << (c.multi ? "<td>" + esc(res.label) + "</td>" : "") << "<td>" << esc(mode) << "</td>"
          << num_cell(format_rate(pts.front()->rate) + " \u2013 " + format_rate(pts.back()->rate))
          << (res.slo_ttft_ms > 0 ? num_cell(format_ms(res.slo_ttft_ms)) : kNa)
          << (capacity < 0                   ? kNa
              : capacity < pts.front()->rate ? num_cell("below " + format_rate(pts.front()->rate))  // none met it
                                             : num_cell(format_rate(capacity)))
          << "</tr>";
    }
    if (any && res.slo_ttft_ms > 0 &&
        std::none_of(slos.begin(), slos.end(), [&](const HLine& h) { return h.y == res.slo_ttft_ms; }))
      slos.push_back({res.slo_ttft_ms, "SLO " + format_ms(res.slo_ttft_ms) + " ms"});
  }
  if (ttft.empty()) return;
  o << "<h2 id=sweep>Load sweep</h2><p class=note>Open loop, Poisson arrivals at each offered rate. Capacity: the "
       "highest offered rate whose p99 TTFT met the SLO with no failed request.</p><div class=charts>"
    << line_chart("TTFT against offered rate", "offered rate (req/s)", "TTFT (ms)", ttft, slos, false)
    << line_chart("Throughput against offered rate", "offered rate (req/s)", "served (req/s)", served, {}, true)
    << "</div><table><tr>" << (c.multi ? "<th>result</th>" : "")
    << "<th>mode</th><th class=n>offered (req/s)</th><th class=n>TTFT p99 SLO (ms)</th>"
       "<th class=n>capacity (req/s)</th></tr>"
    << cap.str() << "</table>";
}

void section_cdf(const Ctx& c, std::ostringstream& o) {
  std::vector<Series> ttft, e2e;
  for (size_t i = 0; i < c.runs.size(); ++i) {
    const RunStats& s = c.runs[i].stats;
    if (s.ttft_sorted.empty()) continue;
    auto cdf = [](const std::vector<double>& v) {
      std::vector<std::pair<double, double>> pts;
      for (size_t j = 0; j < v.size(); ++j) pts.push_back({v[j], double(j + 1) / v.size()});
      return pts;
    };
    ttft.push_back({c.run_name(c.runs[i]), color(i), false, cdf(s.ttft_sorted)});
    e2e.push_back({c.run_name(c.runs[i]), color(i), false, cdf(s.e2e_sorted)});
  }
  if (ttft.empty() || ttft.size() > 8) return;  // beyond eight lines a CDF plot is unreadable
  o << "<h2 id=cdf>Latency distribution</h2><div class=charts>"
    << line_chart("TTFT, cumulative", "TTFT (ms)", "fraction of requests", ttft, {}, false)
    << line_chart("End-to-end latency, cumulative", "e2e (ms)", "fraction of requests", e2e, {}, false) << "</div>";
}

}  // namespace

double bench_percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const double idx = p / 100.0 * (sorted.size() - 1);
  const size_t lo = static_cast<size_t>(idx), hi = std::min(sorted.size() - 1, lo + 1);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (idx - lo);
}

void summarize_bench_run(BenchRun& r) {
  r.requests = static_cast<int>(r.samples.size());
  r.failed = 0;
  std::vector<double> ttft, e2e, itl, tpot, norm;
  long tokens = 0;
  for (const auto& s : r.samples) {
    if (!s.ok) {
      ++r.failed;
      continue;
    }
    if (s.ttft_ms >= 0) ttft.push_back(s.ttft_ms);
    e2e.push_back(s.e2e_ms);
    itl.insert(itl.end(), s.itl_ms.begin(), s.itl_ms.end());
    if (s.tokens > 1) tpot.push_back((s.e2e_ms - s.ttft_ms) / (s.tokens - 1));
    if (s.tokens > 0) norm.push_back(s.e2e_ms / s.tokens);
    tokens += s.tokens;
  }
  auto trio = [](std::vector<double>& v, BenchPercentiles* out) {
    std::sort(v.begin(), v.end());
    *out = {bench_percentile(v, 50), bench_percentile(v, 90), bench_percentile(v, 99)};
  };
  trio(ttft, &r.ttft_ms);
  trio(e2e, &r.e2e_ms);
  trio(itl, &r.itl_ms);
  trio(tpot, &r.tpot_ms);
  r.norm_latency_ms_per_token = 0;
  for (double x : norm) r.norm_latency_ms_per_token += x / norm.size();
  r.req_per_s = r.wall_s > 0 ? (r.requests - r.failed) / r.wall_s : 0;
  r.tokens_per_s = r.wall_s > 0 ? tokens / r.wall_s : 0;
  r.has_samples = true;
}

std::string bench_result_json(const BenchResult& res) {
  JsonWriter w;
  w.begin_object();
  w.key("url").value(res.url).key("slo_ttft_ms").value(res.slo_ttft_ms);
  w.key("capacity").begin_object();
  for (const auto& [mode, v] : res.capacity) w.key(mode).value(v);
  w.end_object();
  w.key("runs").begin_array();
  auto trio = [&](const char* k, const BenchPercentiles& p) {
    w.key(k).begin_object().key("p50").value(p.p50).key("p90").value(p.p90).key("p99").value(p.p99).end_object();
  };
  for (const auto& r : res.runs) {
    w.begin_object();
    w.key("label").value(r.label).key("mode").value(r.mode).key("rate").value(r.rate);
    if (r.seed != 0 && r.seed <= (uint64_t{1} << 53)) w.key("seed").value(r.seed);  // exact as a JSON number
    w.key("requests").value(r.requests).key("failed").value(r.failed).key("wall_s").value(r.wall_s);
    w.key("req_per_s").value(r.req_per_s).key("tokens_per_s").value(r.tokens_per_s);
    w.key("normalized_latency_ms_per_token").value(r.norm_latency_ms_per_token);
    trio("ttft_ms", r.ttft_ms);
    trio("itl_ms", r.itl_ms);
    trio("tpot_ms", r.tpot_ms);
    trio("e2e_ms", r.e2e_ms);
    if (r.has_samples) {
      w.key("samples").begin_array();
      for (const auto& s : r.samples) {
        w.begin_object().key("ok").value(s.ok);
        if (s.ttft_ms >= 0) w.key("ttft_ms").value(s.ttft_ms);
        w.key("e2e_ms").value(s.e2e_ms).key("tokens").value(s.tokens);
        if (s.sent_s >= 0) w.key("sent_s").value(s.sent_s);
        if (!s.error.empty()) w.key("error").value(s.error);
        if (s.has_usage) {
          w.key("usage").begin_object().key("prompt_tokens").value(s.prompt_tokens);
          w.key("reused_tokens").begin_object().key("hbm").value(s.reused_hbm).key("dram").value(s.reused_dram);
          w.key("ssd").value(s.reused_ssd).key("remote").value(s.reused_remote).end_object();
          if (!s.reuse.empty()) w.key("reuse").value(s.reuse);
          w.end_object();
        }
        if (s.has_timings) {
          const BenchTimings& t = s.timings;
          w.key("timings").begin_object().key("queue_ms").value(t.queue_ms).key("retrieval_ms").value(t.retrieval_ms);
          w.key("kv_load_ms").value(t.kv_load_ms).key("prefill_ms").value(t.prefill_ms).key("ttft_ms").value(t.ttft_ms);
          w.key("lookup_ms").value(t.lookup_ms).key("admit_ms").value(t.admit_ms).key("publish_ms").value(t.publish_ms);
          w.key("search_wait_ms").value(t.search_wait_ms).end_object();
        }
        w.end_object();
      }
      w.end_array();
    }
    w.end_object();
  }
  w.end_array();
  w.end_object();
  return w.take() + "\n";
}

Result<BenchResult> parse_bench_result(std::string_view json, const std::string& source) {
  simdjson::dom::parser parser;
  element doc;
  if (auto err = parser.parse(json.data(), json.size()).get(doc))
    return Status::InvalidArgument(source + ": not valid JSON: " + simdjson::error_message(err));
  object top;
  if (doc.get_object().get(top))
    return Status::InvalidArgument(source + ": expected a JSON object (a `ragctl bench --json` file)");
  BenchResult res;
  res.source = source;
  FieldReader r(source, top, "");
  RAGD_RETURN_IF_ERROR(r.str("url", &res.url));
  RAGD_RETURN_IF_ERROR(r.num("slo_ttft_ms", &res.slo_ttft_ms));
  object cap;
  bool has_cap = false;
  RAGD_RETURN_IF_ERROR(r.sub("capacity", &cap, &has_cap));
  if (has_cap)
    for (auto [key, value] : cap) {
      double v = 0;
      if (value.get_double().get(v)) return r.error("capacity." + std::string(key), "expected a number");
      res.capacity.push_back({std::string(key), v});
    }
  element runs;
  if (!r.find("runs", &runs)) return r.error("runs", "missing (not a `ragctl bench --json` file?)");
  simdjson::dom::array arr;
  if (runs.get_array().get(arr)) return r.error("runs", "expected an array");
  size_t i = 0;
  for (element e : arr) {
    res.runs.emplace_back();
    RAGD_RETURN_IF_ERROR(parse_run(source, e, "runs[" + std::to_string(i++) + "]", &res.runs.back()));
  }
  if (res.runs.empty()) return r.error("runs", "empty");
  return res;
}

Result<BenchResult> load_bench_result(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return Status::NotFound(path + ": cannot open: " + std::strerror(errno));
  std::stringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return Status::IOError(path + ": read failed");
  auto res = parse_bench_result(ss.str(), path);
  if (!res.ok()) return res;
  std::string name = path.substr(path.find_last_of('/') + 1);
  if (name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) name.resize(name.size() - 5);
  res->label = name;
  return res;
}

std::string format_ms(double ms) {
  if (!std::isfinite(ms)) return "n/a";
  const double a = std::fabs(ms);
  return fmt(a >= 99.95 ? "%.0f" : a >= 9.995 ? "%.1f" : "%.2f", ms);
}

std::string format_rate(double per_s) {
  if (!std::isfinite(per_s)) return "n/a";
  const double a = std::fabs(per_s);
  return fmt(a >= 99.95 ? "%.0f" : a >= 9.995 ? "%.1f" : "%.2f", per_s);
}

std::string format_percent(double fraction) {
  if (!std::isfinite(fraction)) return "n/a";
  return fmt("%.1f", fraction * 100) + " %";
}

std::string render_bench_report(const std::vector<BenchResult>& results) {
  Ctx c;
  c.results = &results;
  c.multi = results.size() > 1;
  for (size_t k = 0; k < results.size(); ++k)
    for (const auto& r : results[k].runs) c.runs.push_back({k, &results[k], &r, run_stats(r)});
  std::ostringstream o;
  o << "<!doctype html><html lang=en><head><meta charset=utf-8><meta name=viewport content='width=device-width'>"
       "<title>ragctl bench report</title><style>"
    << kStyle << "</style></head><body><main><h1>ragd benchmark report</h1><p class=note>";
  for (size_t k = 0; k < results.size(); ++k) o << (k ? " vs " : "") << "<b>" << esc(results[k].label) << "</b>";
  o << " \u2014 load generated by <code>ragctl bench</code> over HTTP + SSE. TTFT: time to the first token event; "
       "ITL: gap between token events; TPOT: (e2e \u2212 TTFT) / (tokens \u2212 1).</p>";
  section_results(c, o);
  section_summary(c, o);
  if (c.multi) section_compare(c, o);
  section_hitmiss(c, o);
  section_tiers(c, o);
  section_breakdown(c, o);
  section_sweep(c, o);
  section_cdf(c, o);
  o << "</main></body></html>\n";
  return o.str();
}

}  // namespace ragd::tools
