// [adapt] tables and fitted adapt profiles (adapt_spec.h, adapt_policy.h).
#include "adapt_spec.h"

#include <cctype>
#include <cmath>
#include <set>
#include <sstream>

#include "ragd/pipelines/param_range.h"
#include "toml_parse.h"

namespace ragd::pipelines {

namespace {

constexpr std::string_view kKnobs = "name | top_k | rerank | extractive | retrieval_interval | quality | ttft_ms";

std::string number(double x) {
  std::ostringstream os;
  os << x;
  return os.str();
}

// Reads numbers of one TOML table, naming `where` in errors.
struct Fields {
  const toml::table& t;
  std::string where;  // "qa.toml: [adapt] candidates[1]"
  Status err(std::string_view key, const std::string& what) const {
    return Status::InvalidArgument(where + "." + std::string(key) + ": " + what);
  }
  Result<std::optional<double>> real(std::string_view key, double lo, double hi, bool open_lo = false) const {
    const toml::node* n = t.get(key);
    if (!n) return std::optional<double>();
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else return err(key, "must be a number");
    if (!std::isfinite(v) || (open_lo ? v <= lo : v < lo) || v > hi)
      return err(key, "must be in " + std::string(open_lo ? "(" : "[") + number(lo) + ", " + number(hi) + "], got " + number(v));
    return std::optional<double>(v);
  }
  Result<std::optional<int64_t>> integer(std::string_view key, int64_t lo, int64_t hi) const {
    const toml::node* n = t.get(key);
    if (!n) return std::optional<int64_t>();
    if (!n->is_integer()) return err(key, "must be an integer");
    const int64_t v = n->as_integer()->get();
    if (v < lo || v > hi)
      return err(key, "must be in [" + std::to_string(lo) + ", " + std::to_string(hi) + "], got " + std::to_string(v));
    return std::optional<int64_t>(v);
  }
};

std::string default_name(const AdaptCandidate& c) {
  std::string n = "k" + std::to_string(c.top_k);
  if (c.rerank > 0) n += "-rerank" + std::to_string(c.rerank);
  if (c.extractive) n += "-extractive";
  if (c.retrieval_interval > 0) n += "-interval" + std::to_string(c.retrieval_interval);
  return n;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64 || s == "auto") return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

Result<AdaptCandidate> parse_candidate(const toml::node& node, const std::string& where, bool iterative) {
  if (!node.is_table()) return Status::InvalidArgument(where + ": must be a table of knobs (" + std::string(kKnobs) + ")");
  const toml::table& t = *node.as_table();
  static const std::set<std::string_view> kAllowed = {"name", "top_k", "rerank", "extractive", "retrieval_interval",
                                                      "quality", "ttft_ms"};
  for (const auto& [k, v] : t)
    if (!kAllowed.count(k.str()))
      return Status::InvalidArgument(where + "." + std::string(k.str()) + ": unknown knob (" + std::string(kKnobs) + ")");
  Fields f{t, where};
  AdaptCandidate c;
  RAGD_ASSIGN_OR_RETURN(auto top_k, f.integer("top_k", static_cast<int64_t>(kRangeRetrievalTopK.lo),
                                              static_cast<int64_t>(kRangeRetrievalTopK.hi)));
  if (!top_k) return f.err("top_k", "every candidate needs top_k");
  c.top_k = static_cast<int>(*top_k);
  RAGD_ASSIGN_OR_RETURN(auto rerank, f.integer("rerank", 0, static_cast<int64_t>(kRangeRetrievalTopK.hi)));
  c.rerank = static_cast<int>(rerank.value_or(0));
  if (c.rerank > c.top_k)
    return f.err("rerank", "keeps " + std::to_string(c.rerank) + " of top_k " + std::to_string(c.top_k) +
                               " passages: it must not exceed top_k");
  if (c.rerank > 0 && iterative) return f.err("rerank", "reranking is for one-shot pipelines, not iterative ones");
  if (const toml::node* n = t.get("extractive")) {
    if (!n->is_boolean()) return f.err("extractive", "must be true or false");
    c.extractive = n->as_boolean()->get();
  }
  RAGD_ASSIGN_OR_RETURN(auto interval, f.integer("retrieval_interval", static_cast<int64_t>(kRangeRetrievalInterval.lo),
                                                 static_cast<int64_t>(kRangeRetrievalInterval.hi)));
  if (interval && !iterative)
    return f.err("retrieval_interval", "applies to iterative pipelines only (this one has no [iterative] table)");
  c.retrieval_interval = static_cast<int>(interval.value_or(0));
  RAGD_ASSIGN_OR_RETURN(c.prior_quality, f.real("quality", 0, 1));
  RAGD_ASSIGN_OR_RETURN(c.prior_ttft_ms, f.real("ttft_ms", 0, 1e7, true));
  if (const toml::node* n = t.get("name")) {
    if (!n->is_string()) return f.err("name", "must be a string");
    c.name = n->as_string()->get();
    if (!valid_name(c.name))
      return f.err("name", "must be 1-64 characters of [A-Za-z0-9._-] and not 'auto', got '" + c.name + "'");
  } else {
    c.name = default_name(c);
  }
  return c;
}

}  // namespace

Result<AdaptSpec> parse_adapt_table(const toml::table& adapt, std::string_view source, bool iterative) {
  const std::string where = std::string(source) + ": [adapt]";
  auto key_err = [&](std::string_view key, const std::string& what) {
    return Status::InvalidArgument(where + " " + std::string(key) + ": " + what);
  };
  static const std::set<std::string_view> kKeys = {"objective", "slo_ttft_ms", "quality_tolerance", "candidates", "profile"};
  for (const auto& [k, v] : adapt)
    if (!kKeys.count(k.str()))
      return Status::InvalidArgument(where + " unknown key '" + std::string(k.str()) +
                                     "' (objective | slo_ttft_ms | quality_tolerance | candidates | profile)");
  AdaptSpec s;
  if (const toml::node* n = adapt.get("objective")) {
    if (!n->is_string()) return key_err("objective", "must be a string");
    auto o = parse_enum<AdaptObjective>(n->as_string()->get());
    if (!o.ok()) return key_err("objective", o.status().message());
    s.objective = *o;
  }
  if (const toml::node* n = adapt.get("slo_ttft_ms")) {
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else return key_err("slo_ttft_ms", "must be a number");
    if (!(v > 0) || !std::isfinite(v)) return key_err("slo_ttft_ms", "must be > 0 ms, got " + number(v));
    s.slo_ttft_ms = v;
  }
  if (s.objective == AdaptObjective::kLatency && s.slo_ttft_ms <= 0)
    return key_err("slo_ttft_ms", "objective \"latency\" needs a TTFT target (slo_ttft_ms > 0)");
  if (const toml::node* n = adapt.get("quality_tolerance")) {
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else return key_err("quality_tolerance", "must be a number");
    if (!(v >= 0 && v <= 1)) return key_err("quality_tolerance", "must be in [0, 1], got " + number(v));
    s.quality_tolerance = v;
  }
  if (const toml::node* n = adapt.get("profile")) {
    if (!n->is_string() || n->as_string()->get().empty()) return key_err("profile", "must be a file name");
    s.profile_file = n->as_string()->get();
  }
  const toml::node* cands = adapt.get("candidates");
  if (!cands) return key_err("candidates", "missing: list the candidate configurations");
  if (!cands->is_array()) return key_err("candidates", "must be an array of tables");
  const toml::array& arr = *cands->as_array();
  if (arr.empty()) return key_err("candidates", "must not be empty");
  std::set<std::string> names;
  for (size_t i = 0; i < arr.size(); ++i) {
    RAGD_ASSIGN_OR_RETURN(AdaptCandidate c,
                          parse_candidate(*arr.get(i), where + " candidates[" + std::to_string(i) + "]", iterative));
    if (!names.insert(c.name).second)
      return key_err("candidates[" + std::to_string(i) + "].name", "'" + c.name + "' names two candidates");
    s.candidates.push_back(std::move(c));
  }
  return s;
}

Result<AdaptProfile> parse_adapt_profile(std::string_view toml_text, std::string_view source_name) {
  RAGD_ASSIGN_OR_RETURN(toml::table root, parse_toml(toml_text, source_name));
  const std::string src(source_name);
  AdaptProfile p;
  for (const auto& [k, v] : root) {
    if (k.str() == "source") {
      if (!v.is_string()) return Status::InvalidArgument(src + ": source must be a string");
      p.source = v.as_string()->get();
    } else if (k.str() != "candidates" && k.str() != "ttft_quantile") {
      return Status::InvalidArgument(src + ": unknown key '" + std::string(k.str()) +
                                     "' (source | ttft_quantile | candidates)");
    }
  }
  if (const toml::node* n = root.get("ttft_quantile")) {
    double v;
    if (n->is_floating_point()) v = n->as_floating_point()->get();
    else if (n->is_integer()) v = static_cast<double>(n->as_integer()->get());
    else return Status::InvalidArgument(src + ": ttft_quantile: must be a number in (0, 1)");
    if (!(v > 0 && v < 1)) return Status::InvalidArgument(src + ": ttft_quantile: must be in (0, 1), got " + number(v));
    p.ttft_quantile = v;
  }
  const toml::node* cands = root.get("candidates");
  if (!cands) return p;
  if (!cands->is_table()) return Status::InvalidArgument(src + ": [candidates] must be a table of candidate tables");
  static const std::set<std::string_view> kKeys = {"quality", "ttft_idle_ms", "ttft_per_run_ms", "ttft_q_ms",
                                                   "fit_samples", "fit_accuracy"};
  for (const auto& [name, node] : *cands->as_table()) {
    const std::string where = src + ": [candidates." + std::string(name.str()) + "]";
    if (!node.is_table()) return Status::InvalidArgument(where + " must be a table");
    const toml::table& t = *node.as_table();
    for (const auto& [k, v] : t)
      if (!kKeys.count(k.str())) return Status::InvalidArgument(where + " unknown key '" + std::string(k.str()) + "'");
    Fields f{t, where};
    AdaptModel m;
    const toml::node* q = t.get("quality");
    if (!q || !q->is_array() || q->as_array()->size() != kNumAdaptSignals + 1)
      return f.err("quality", "must be an array of " + std::to_string(kNumAdaptSignals + 1) +
                                  " numbers (bias, then one weight per signal)");
    for (size_t i = 0; i <= kNumAdaptSignals; ++i) {
      const toml::node& e = *q->as_array()->get(i);
      if (e.is_floating_point()) m.quality[i] = e.as_floating_point()->get();
      else if (e.is_integer()) m.quality[i] = static_cast<double>(e.as_integer()->get());
      else return f.err("quality", "must hold numbers only");
      if (!std::isfinite(m.quality[i])) return f.err("quality", "must hold finite numbers");
    }
    RAGD_ASSIGN_OR_RETURN(auto idle, f.real("ttft_idle_ms", 0, 1e7));
    RAGD_ASSIGN_OR_RETURN(auto per_run, f.real("ttft_per_run_ms", 0, 1e7));
    RAGD_ASSIGN_OR_RETURN(auto acc, f.real("fit_accuracy", 0, 1));
    RAGD_ASSIGN_OR_RETURN(auto n, f.integer("fit_samples", 0, INT32_MAX));
    if (!idle) return f.err("ttft_idle_ms", "missing");
    m.ttft_idle_ms = *idle;
    m.ttft_per_run_ms = per_run.value_or(0);
    m.fit_accuracy = acc.value_or(0);
    m.fit_samples = static_cast<int>(n.value_or(0));
    // The TTFT quantile model: with the profile's ttft_quantile, and only then.
    if (const toml::node* tq = t.get("ttft_q_ms")) {
      if (p.ttft_quantile <= 0) return f.err("ttft_q_ms", "needs the profile's ttft_quantile (the quantile it predicts)");
      if (!tq->is_array() || tq->as_array()->size() != m.ttft_q.size())
        return f.err("ttft_q_ms", "must be an array of 3 numbers (ms; per run ahead; per 1000 tokens of work ahead)");
      for (size_t i = 0; i < m.ttft_q.size(); ++i) {
        const toml::node& e = *tq->as_array()->get(i);
        if (e.is_floating_point()) m.ttft_q[i] = e.as_floating_point()->get();
        else if (e.is_integer()) m.ttft_q[i] = static_cast<double>(e.as_integer()->get());
        else return f.err("ttft_q_ms", "must hold numbers only");
        if (!std::isfinite(m.ttft_q[i]) || std::abs(m.ttft_q[i]) > 1e7)
          return f.err("ttft_q_ms", "must hold finite numbers of at most 1e7 ms, got " + number(m.ttft_q[i]));
      }
      m.has_ttft_q = true;
    } else if (p.ttft_quantile > 0) {
      return f.err("ttft_q_ms", "missing (the profile has ttft_quantile " + number(p.ttft_quantile) + ")");
    }
    p.models.emplace(std::string(name.str()), m);
  }
  return p;
}

std::string adapt_profile_toml(const AdaptProfile& p) {
  std::ostringstream os;
  os.precision(9);
  os << "# Fitted adapt profile (ragctl eval --fit-adapt). quality: logistic weights over\n# bias";
  for (auto n : kAdaptSignalNames) os << ", " << n;
  os << "\nsource = " << toml::value<std::string>(p.source) << "\n";
  if (p.ttft_quantile > 0)
    os << "# ttft_q_ms: the TTFT quantile below under load = [ms, + per run ahead, + per 1000 tokens of work ahead]\n"
       << "ttft_quantile = " << p.ttft_quantile << "\n";
  for (const auto& [name, m] : p.models) {
    os << "\n[candidates." << toml::value<std::string>(name) << "]\nquality = [";
    for (size_t i = 0; i < m.quality.size(); ++i) os << (i ? ", " : "") << m.quality[i];
    os << "]\nttft_idle_ms = " << m.ttft_idle_ms << "\nttft_per_run_ms = " << m.ttft_per_run_ms;
    if (m.has_ttft_q) os << "\nttft_q_ms = [" << m.ttft_q[0] << ", " << m.ttft_q[1] << ", " << m.ttft_q[2] << "]";
    os << "\nfit_samples = " << m.fit_samples << "\nfit_accuracy = " << m.fit_accuracy << "\n";
  }
  return os.str();
}

}  // namespace ragd::pipelines
