#include "ragd/sim/workload.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <memory>
#include <random>

#include <simdjson.h>

namespace ragd::sim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

Status bad(std::string_view key, const std::string& why) {
  return Status::InvalidArgument("workload: " + std::string(key) + ": " + why);
}

template <typename T>
Result<T> parse_int(std::string_view key, std::string_view v, T lo, T hi) {
  T x{};
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size())
    return bad(key, "expected an integer, got '" + std::string(v) + "'");
  if (x < lo || x > hi)
    return bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::string(v));
  return x;
}

Result<double> parse_double(std::string_view key, std::string_view v, double lo, double hi) {
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x))
    return bad(key, "expected a number, got '" + std::string(v) + "'");
  if (x < lo || x > hi) return bad(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::string(v));
  return x;
}

// Uniform double in [0, 1) from 53 bits (the same on every standard library).
double unit(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

// Zipf(s) over ranks 0..n-1 by inverse CDF (binary search over the cumulative weights).
class ZipfSampler {
 public:
  ZipfSampler(long n, double s) : cdf_(static_cast<size_t>(n)) {
    double acc = 0;
    for (long i = 0; i < n; ++i) cdf_[i] = acc += 1.0 / std::pow(static_cast<double>(i + 1), s);
    for (double& c : cdf_) c /= acc;
  }
  long draw(std::mt19937_64& rng) const {
    const double u = unit(rng);
    auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
    return std::min<long>(static_cast<long>(it - cdf_.begin()), static_cast<long>(cdf_.size()) - 1);
  }

 private:
  std::vector<double> cdf_;
};

int draw_length(const LengthMix& m, std::mt19937_64& rng) {
  if (m.parts.size() == 1) return m.parts[0].first;
  double total = 0;
  for (const auto& [len, w] : m.parts) total += w;
  double u = unit(rng) * total;
  for (const auto& [len, w] : m.parts) {
    if (u < w) return len;
    u -= w;
  }
  return m.parts.back().first;
}

}  // namespace

double LengthMix::mean() const {
  double s = 0, w = 0;
  for (const auto& [len, wt] : parts) s += len * wt, w += wt;
  return w > 0 ? s / w : 0;
}

Result<LengthMix> parse_length_mix(std::string_view text) {
  LengthMix m;
  m.parts.clear();
  text = trim(text);
  if (text.empty()) return Status::InvalidArgument("empty length");
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t end = text.find(',', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view part = trim(text.substr(pos, end - pos));
    const size_t colon = part.find(':');
    auto len = parse_int<int>("length", trim(part.substr(0, colon)), 1, 1 << 24);
    if (!len.ok()) return Status::InvalidArgument("'" + std::string(part) + "': a length must be an integer in [1, 16777216]");
    double w = 1.0;
    if (colon != std::string_view::npos) {
      auto pw = parse_double("weight", trim(part.substr(colon + 1)), 0, 1e12);
      if (!pw.ok() || *pw <= 0) return Status::InvalidArgument("'" + std::string(part) + "': a weight must be a positive number");
      w = *pw;
    }
    m.parts.emplace_back(*len, w);
    pos = end + 1;
  }
  return m;
}

namespace {
constexpr std::string_view kKeys[] = {"rate",       "arrivals",   "requests",       "duration_s",    "docs",
                                      "zipf",       "topic_docs", "docs_per_query", "doc_order",     "doc_tokens",
                                      "prefix_tokens", "query_tokens", "prompt_tokens", "answer_tokens", "tenants",
                                      "seed",       "reuse",      "concurrency", "retrieval_noise"};
}

bool is_workload_key(std::string_view key) { return std::find(std::begin(kKeys), std::end(kKeys), key) != std::end(kKeys); }

Status apply_workload_key(WorkloadSpec& s, std::string_view key, std::string_view value) {
  value = trim(value);
  auto set_int = [&](auto* field, auto lo, auto hi) -> Status {
    using T = std::remove_pointer_t<decltype(field)>;
    auto r = parse_int<T>(key, value, static_cast<T>(lo), static_cast<T>(hi));
    if (!r.ok()) return r.status();
    *field = *r;
    return Status::OK();
  };
  auto set_double = [&](double* field, double lo, double hi) -> Status {
    auto r = parse_double(key, value, lo, hi);
    if (!r.ok()) return r.status();
    *field = *r;
    return Status::OK();
  };
  if (key == "rate") {
    RAGD_RETURN_IF_ERROR(set_double(&s.rate, 0, 1e9));
    if (s.rate <= 0) return bad(key, "must be positive, got " + std::string(value));
    return Status::OK();
  }
  if (key == "arrivals") {
    if (value == "poisson") s.arrivals = Arrivals::kPoisson;
    else if (value == "uniform") s.arrivals = Arrivals::kUniform;
    else if (value == "bench") s.arrivals = Arrivals::kBench;
    else return bad(key, "must be one of poisson, uniform, bench; got '" + std::string(value) + "'");
    return Status::OK();
  }
  if (key == "requests") return set_int(&s.requests, 1L, 100000000L);
  if (key == "duration_s") return set_double(&s.duration_s, 0, 1e7);
  if (key == "docs") return set_int(&s.docs, 0L, 1000000000L);
  if (key == "zipf") return set_double(&s.zipf, 0, 10);
  if (key == "topic_docs") return set_int(&s.topic_docs, 0, 1 << 20);
  if (key == "docs_per_query") return set_int(&s.docs_per_query, 1, 1024);
  if (key == "doc_order") {
    if (value == "fixed") s.shuffle_docs = false;
    else if (value == "shuffled") s.shuffle_docs = true;
    else return bad(key, "must be one of fixed, shuffled; got '" + std::string(value) + "'");
    return Status::OK();
  }
  if (key == "reuse") {
    if (value == "knowledge_tree") s.reuse = true;
    else if (value == "none") s.reuse = false;
    else return bad(key, "must be one of knowledge_tree, none; got '" + std::string(value) + "'");
    return Status::OK();
  }
  if (key == "doc_tokens") return set_int(&s.doc_tokens, 1, 1 << 24);
  if (key == "prefix_tokens") return set_int(&s.prefix_tokens, 0, 1 << 24);
  if (key == "query_tokens") return set_int(&s.query_tokens, 1, 1 << 24);
  if (key == "prompt_tokens" || key == "answer_tokens") {
    auto m = parse_length_mix(value);
    if (!m.ok()) return bad(key, m.status().message());
    (key == "prompt_tokens" ? s.prompt_tokens : s.answer_tokens) = *m;
    return Status::OK();
  }
  if (key == "retrieval_noise") return set_double(&s.retrieval_noise, 0, 1);
  if (key == "concurrency") return set_int(&s.concurrency, 0, 1 << 20);
  if (key == "tenants") return set_int(&s.tenants, 1, 1 << 16);
  if (key == "seed") return set_int(&s.seed, uint64_t{0}, ~uint64_t{0});
  std::string known;
  for (auto k : kKeys) known += (known.empty() ? "" : ", ") + std::string(k);
  return Status::InvalidArgument("workload: unknown key '" + std::string(key) + "' (known: " + known + ")");
}

Status parse_workload_spec(WorkloadSpec& spec, std::string_view text, const std::string& source) {
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string_view::npos) nl = text.size();
    std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    // Items are separated by newlines or by commas that start a new key=value (a mixture value
    // "64:0.8,1024:0.2" keeps its commas).
    std::vector<std::string_view> items;
    size_t start = 0;
    for (size_t i = 0; i <= line.size(); ++i) {
      if (i == line.size() || line[i] == ',') {
        const std::string_view rest = line.substr(i == line.size() ? i : i + 1);
        const size_t eq = rest.find('=');
        const size_t comma = rest.find(',');
        const bool next_is_key = i == line.size() || (eq != std::string_view::npos && (comma == std::string_view::npos || eq < comma));
        if (next_is_key) {
          items.push_back(line.substr(start, i - start));
          start = i + 1;
        }
      }
    }
    for (std::string_view item : items) {
      item = trim(item);
      if (item.empty()) continue;
      const size_t eq = item.find('=');
      const std::string where = source + ":" + std::to_string(line_no) + ": ";
      if (eq == std::string_view::npos)
        return Status::InvalidArgument(where + "expected key=value, got '" + std::string(item) + "'");
      Status st = apply_workload_key(spec, trim(item.substr(0, eq)), item.substr(eq + 1));
      if (!st.ok()) return Status::InvalidArgument(where + st.message());
    }
  }
  return spec.validate();
}

Status WorkloadSpec::validate() const {
  if (rate <= 0) return bad("rate", "must be positive");
  if (topic_docs > 0) {
    if (docs_per_query > topic_docs)
      return bad("docs_per_query", "must be <= topic_docs (" + std::to_string(topic_docs) + "), got " + std::to_string(docs_per_query));
    if (docs > 0 && docs < topic_docs) return bad("docs", "must be >= topic_docs");
  } else if (docs > 0 && docs_per_query > docs) {
    return bad("docs_per_query", "must be <= docs (" + std::to_string(docs) + "), got " + std::to_string(docs_per_query));
  }
  if (docs > 50000000 && topic_docs == 0) return bad("docs", "at most 50000000 documents without topics");
  return Status::OK();
}

long max_requests(const WorkloadSpec& s) {
  if (s.duration_s <= 0 || s.rate <= 0) return s.requests;
  const double mean = s.rate * s.duration_s;
  const double most = s.arrivals == Arrivals::kUniform ? std::floor(mean) : mean + 6 * std::sqrt(mean) + 16;
  return most >= static_cast<double>(s.requests) ? s.requests : static_cast<long>(most);
}

Result<std::vector<SimRequest>> generate_requests(const WorkloadSpec& s) {
  RAGD_RETURN_IF_ERROR(s.validate());
  std::mt19937_64 rng(s.seed);
  // The bench's arrival process: its own engine, seeded alike, through the standard distribution.
  std::mt19937_64 bench_rng(s.seed);
  std::exponential_distribution<double> bench_gap(s.rate);
  std::mt19937_64 noise_rng(s.seed ^ 0x6e6f697365ULL);
  const long topics = s.topic_docs > 0 && s.docs > 0 ? s.docs / s.topic_docs : 0;
  std::unique_ptr<ZipfSampler> zipf;
  if (s.docs > 0) zipf = std::make_unique<ZipfSampler>(topics > 0 ? topics : s.docs, s.zipf);
  std::vector<SimRequest> out;
  double t = 0;
  for (long i = 0; i < s.requests; ++i) {
    if (s.arrivals == Arrivals::kPoisson) t += -std::log(1.0 - unit(rng)) / s.rate;
    else if (s.arrivals == Arrivals::kBench) t += bench_gap(bench_rng);
    else t += 1.0 / s.rate;
    if (s.duration_s > 0 && t > s.duration_s) break;
    SimRequest r;
    r.id = static_cast<uint64_t>(i + 1);
    r.arrival_s = t;
    r.tenant = s.tenants > 1 ? static_cast<int>(rng() % static_cast<uint64_t>(s.tenants)) : 0;
    r.answer_tokens = draw_length(s.answer_tokens, rng);
    if (s.docs > 0) {
      std::vector<uint64_t> docs;
      r.retrieval = true;
      if (topics > 0) {
        const long topic = zipf->draw(rng);
        r.topic = static_cast<int>(topic);
        for (int j = 0; j < s.docs_per_query; ++j) docs.push_back(static_cast<uint64_t>(topic * s.topic_docs + j));
      } else {
        while (static_cast<int>(docs.size()) < s.docs_per_query) {
          const uint64_t d = static_cast<uint64_t>(zipf->draw(rng));
          if (std::find(docs.begin(), docs.end(), d) == docs.end()) docs.push_back(d);
        }
      }
      if (s.shuffle_docs)
        for (size_t j = docs.size(); j > 1; --j) std::swap(docs[j - 1], docs[rng() % j]);
      // Its own engine, so that the noise leaves every other draw (and so the requests) as without it.
      if (s.retrieval_noise > 0 && unit(noise_rng) < s.retrieval_noise) {
        const uint64_t other = noise_rng() % static_cast<uint64_t>(s.docs);
        if (std::find(docs.begin(), docs.end(), other) == docs.end()) docs[noise_rng() % docs.size()] = other;
      }
      if (s.prefix_tokens > 0) r.path.push_back({kPrefixDoc, s.prefix_tokens});
      for (uint64_t d : docs) r.path.push_back({d, s.doc_tokens});
      r.prompt_tokens = s.query_tokens;
      for (const auto& p : r.path) r.prompt_tokens += p.tokens;
      if (!s.reuse) r.path.clear();
    } else {
      r.prompt_tokens = draw_length(s.prompt_tokens, rng);
    }
    out.push_back(std::move(r));
  }
  return out;
}

Result<std::vector<RetrievedList>> parse_retrieved_lists(std::string_view jsonl, const std::string& source) {
  std::vector<RetrievedList> out;
  simdjson::dom::parser parser;
  size_t pos = 0;
  int line_no = 0;
  while (pos < jsonl.size()) {
    size_t nl = jsonl.find('\n', pos);
    if (nl == std::string_view::npos) nl = jsonl.size();
    const std::string line(trim(jsonl.substr(pos, nl - pos)));
    pos = nl + 1;
    ++line_no;
    if (line.empty()) continue;
    auto bad_line = [&](const std::string& why) {
      return Status::InvalidArgument(source + ":" + std::to_string(line_no) + ": " + why);
    };
    simdjson::dom::element doc;
    if (parser.parse(line).get(doc) != simdjson::SUCCESS) return bad_line("not JSON");
    simdjson::dom::array docs;
    if (doc["docs"].get(docs) != simdjson::SUCCESS) return bad_line("expected {\"docs\": [[id, tokens], ...]}");
    RetrievedList list;
    for (simdjson::dom::element e : docs) {
      simdjson::dom::array pair;
      int64_t id = 0, tokens = 0;
      if (e.get(pair) != simdjson::SUCCESS || pair.size() != 2 || pair.at(0).get(id) != simdjson::SUCCESS ||
          pair.at(1).get(tokens) != simdjson::SUCCESS || id < 0 || tokens < 1 || tokens > (1 << 24))
        return bad_line("each document must be [id >= 0, tokens in [1, 16777216]]");
      list.push_back({static_cast<uint64_t>(id), static_cast<int>(tokens)});
    }
    if (list.empty()) return bad_line("no documents");
    out.push_back(std::move(list));
  }
  if (out.empty()) return Status::InvalidArgument(source + ": no retrieved lists");
  return out;
}

Status apply_retrieved(std::vector<SimRequest>& reqs, const std::vector<RetrievedList>& lists, int prefix_tokens,
                       int query_tokens, bool keep_prompt, bool reuse) {
  size_t k = 0;
  for (SimRequest& r : reqs) {
    if (!r.retrieval) continue;
    if (k >= lists.size())
      return Status::InvalidArgument("retrieved lists: " + std::to_string(lists.size()) + " lists for more RAG requests");
    std::vector<PathSegment> path;
    if (prefix_tokens > 0) path.push_back({kPrefixDoc, prefix_tokens});
    path.insert(path.end(), lists[k].begin(), lists[k].end());
    ++k;
    int tokens = 0;
    for (const PathSegment& p : path) tokens += p.tokens;
    if (keep_prompt) {
      if (tokens > r.prompt_tokens)
        return Status::InvalidArgument("retrieved lists: request " + std::to_string(r.id) + " has " +
                                       std::to_string(r.prompt_tokens) + " prompt tokens, fewer than its path's " +
                                       std::to_string(tokens));
    } else {
      r.prompt_tokens = tokens + query_tokens;
    }
    r.path = reuse ? std::move(path) : std::vector<PathSegment>{};
  }
  return Status::OK();
}

}  // namespace ragd::sim
