#include "ragd/sim/cost_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include <simdjson.h>

#include "mix64.h"

namespace ragd::sim {

Status ModelShape::validate() const {
  auto check = [](const char* name, int v, int hi) -> Status {
    if (v < 1 || v > hi) return Status::InvalidArgument(std::string("model shape: ") + name + " must be in [1, " + std::to_string(hi) + "], got " + std::to_string(v));
    return Status::OK();
  };
  RAGD_RETURN_IF_ERROR(check("layers", layers, 4096));
  RAGD_RETURN_IF_ERROR(check("kv_heads", kv_heads, 4096));
  RAGD_RETURN_IF_ERROR(check("head_dim", head_dim, 65536));
  return check("kv_dtype_bytes", kv_dtype_bytes, 8);
}

double CostModel::dense_s(int tokens) const {
  if (tokens <= 0) return 0;
  const auto& c = serving.dense_curve;
  if (!c.empty()) {
    if (tokens <= c.front().first) return c.front().second;
    if (tokens >= c.back().first) return c.back().second + (tokens - c.back().first) / engine.dense_tokens_per_s;
    auto hi = std::lower_bound(c.begin(), c.end(), tokens, [](const std::pair<int, double>& p, int t) { return p.first < t; });
    auto lo = hi - 1;
    return lo->second + (hi->second - lo->second) * (tokens - lo->first) / (hi->first - lo->first);
  }
  if (serving.dense_additive) return engine.decode_dense_s + (tokens - 1) / engine.dense_tokens_per_s;
  return std::max(engine.decode_dense_s, tokens / engine.dense_tokens_per_s);
}

double CostModel::prefill_attention_s(int start, int n) const {
  if (n <= 0) return 0;
  const double pairs = static_cast<double>(n) * start + 0.5 * static_cast<double>(n) * (n + 1);
  return pairs / engine.attn_pairs_per_s;
}

double CostModel::decode_attention_s(int context) const {
  return context * shape.kv_bytes_per_token() / engine.kv_read_bytes_per_s;
}

double CostModel::prefill_s(double cached, double fresh) const {
  if (fresh <= 0) return 0;
  const double pairs = fresh * cached + 0.5 * fresh * (fresh + 1);
  return dense_s(static_cast<int>(std::ceil(fresh))) + pairs / engine.attn_pairs_per_s;
}

namespace {

double unit(uint64_t z) { return static_cast<double>(z >> 11) * 0x1.0p-53; }

}  // namespace

double CostModel::quantile_at(const std::vector<double>& q, double u) {
  if (q.size() == 1) return q[0];
  const double x = u * static_cast<double>(q.size() - 1);
  const size_t i = std::min(static_cast<size_t>(x), q.size() - 2);
  return q[i] + (q[i + 1] - q[i]) * (x - static_cast<double>(i));
}

double CostModel::wake_draw(uint64_t key, uint64_t noise_seed) const {
  const std::vector<double>& q = serving.wake_quantiles;
  if (q.empty()) return serving.wake_s;
  // u = frac(key x the golden ratio) in 64-bit fixed point (a Weyl sequence): the ids of any run of
  // consecutive requests, or of every m-th one, spread evenly over [0, 1), so a few dozen requests
  // already see the distribution's mean (independent draws of a tail like the measured one, a
  // tenth over 11 ms, move the mean of 30 requests by about 1.5 ms). A noise seed adds a fraction
  // drawn from it (mod 1): another value for each request, the same even spread.
  uint64_t z = key * 0x9e3779b97f4a7c15ULL;
  if (noise_seed != 0) z += mix64(noise_seed ^ 0x5741'4b45'5345'4544ULL);
  return quantile_at(q, unit(z));
}

double CostModel::network_leg_s(uint64_t key, uint64_t noise_seed) const {
  const std::vector<double>& q = serving.network_quantiles;
  if (noise_seed == 0 || q.empty()) return serving.network_s;
  // Independent draws per (seed, request): the client's delays have no order to keep even.
  return 0.5 * quantile_at(q, unit(mix64(mix64(noise_seed) ^ mix64(key ^ 0x4E45'5457'4F52'4B00ULL))));
}

double CostModel::step_noise_factor(int replica, uint64_t step, uint64_t noise_seed) const {
  const std::vector<double>& q = serving.step_noise_quantiles;
  if (noise_seed == 0 || q.empty()) return 1.0;
  const uint64_t key = mix64(static_cast<uint64_t>(replica) ^ 0x5354'4550'0000'0000ULL) ^ step;
  return 1.0 + quantile_at(q, unit(mix64(mix64(noise_seed ^ 0x454E'4749'4E45'0000ULL) ^ mix64(key))));
}

double CostModel::run_speed_factor(int replica, uint64_t noise_seed) const {
  if (noise_seed == 0 || serving.run_speed_sd == 0) return 1.0;
  // Box-Muller on two hashed uniforms (u1 in (0, 1]: no log of zero).
  const uint64_t key = mix64(mix64(noise_seed ^ 0x5255'4E53'5045'4544ULL) ^ mix64(static_cast<uint64_t>(replica)));
  const double u1 = 1.0 - unit(key), u2 = unit(mix64(key ^ 0x424F'584D'554C'4C45ULL));
  const double z = std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
  return std::exp(serving.run_speed_sd * z);
}

double CostModel::wake_mean() const {
  const std::vector<double>& q = serving.wake_quantiles;
  if (q.empty()) return serving.wake_s;
  double s = 0;
  for (size_t i = 0; i + 1 < q.size(); ++i) s += 0.5 * (q[i] + q[i + 1]);
  return s / static_cast<double>(q.size() - 1);
}

double CostModel::arrival_contention_s() const {
  if (serving.host_cores > 0 && serving.host_cores > engine.threads) return 0.0;
  return serving.arrival_cpu_s;
}

namespace {

// serving.wake_quantiles, network_quantiles (seconds), step_noise_quantiles (fractions): at least
// two finite numbers in [lo, hi], not decreasing.
std::string format_double(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}

Status parse_quantiles(simdjson::dom::element value, std::vector<double>* out, const char* name, double lo, double hi) {
  const Status bad = Status::InvalidArgument(std::string("rates: serving.") + name + " must be an array of at least two " +
                                             "numbers in [" + format_double(lo) + ", " + format_double(hi) +
                                             "], not decreasing");
  simdjson::dom::array points;
  if (value.get(points) != simdjson::SUCCESS || points.size() < 2) return bad;
  out->clear();
  for (simdjson::dom::element p : points) {
    double v = 0;
    if (p.get(v) != simdjson::SUCCESS || !std::isfinite(v) || v < lo || v > hi) return bad;
    if (!out->empty() && v < out->back()) return bad;
    out->push_back(v);
  }
  return Status::OK();
}

// serving.dense_curve: [[tokens, seconds], ...], tokens strictly ascending integers >= 1, seconds
// positive and not decreasing.
Status parse_dense_curve(simdjson::dom::element value, std::vector<std::pair<int, double>>* out) {
  const Status bad = Status::InvalidArgument(
      "rates: serving.dense_curve must be a non-empty array of [tokens, seconds] pairs, tokens ascending integers >= 1, "
      "seconds positive and not decreasing");
  simdjson::dom::array points;
  if (value.get(points) != simdjson::SUCCESS || points.size() == 0) return bad;
  out->clear();
  for (simdjson::dom::element p : points) {
    simdjson::dom::array pair;
    if (p.get(pair) != simdjson::SUCCESS || pair.size() != 2) return bad;
    double t = 0, s = 0;
    if (pair.at(0).get(t) != simdjson::SUCCESS || pair.at(1).get(s) != simdjson::SUCCESS) return bad;
    if (!(t >= 1 && t <= 1e9 && t == std::floor(t)) || !std::isfinite(s) || s <= 0) return bad;
    if (!out->empty() && (t <= out->back().first || s < out->back().second)) return bad;
    out->emplace_back(static_cast<int>(t), s);
  }
  return Status::OK();
}

// The engine rates' JSON text with the "serving" object taken out, and the serving rates parsed.
Status parse_serving(simdjson::dom::object obj, ServingRates* out) {
  struct Field {
    const char* name;
    double* value;
    bool may_be_zero;
  };
  Field fields[] = {{"step_overhead_s", &out->step_overhead_s, true},   {"sample_s", &out->sample_s, true},
                    {"prefill_token_s", &out->prefill_token_s, true},   {"admit_s", &out->admit_s, true},
                    {"prefill_context_s", &out->prefill_context_s, true},
                    {"request_s", &out->request_s, true},
                    {"engine_slowdown", &out->engine_slowdown, true},
                    {"run_speed_sd", &out->run_speed_sd, true},
                    {"retrieval_s", &out->retrieval_s, true},           {"network_s", &out->network_s, true},
                    {"dram_bytes_per_s", &out->dram_bytes_per_s, false}, {"ssd_bytes_per_s", &out->ssd_bytes_per_s, false},
                    {"ssd_latency_s", &out->ssd_latency_s, true},       {"remote_bytes_per_s", &out->remote_bytes_per_s, false},
                    {"remote_latency_s", &out->remote_latency_s, true},
                    {"publish_s_per_byte", &out->publish_s_per_byte, true},
                    {"wake_s", &out->wake_s, true},                     {"wake_after_s", &out->wake_after_s, true},
                    {"arrival_cpu_s", &out->arrival_cpu_s, true},       {"host_cores", &out->host_cores, true}};
  bool measured = false;
  for (auto [key, value] : obj) {
    if (key == "dense_model") {
      std::string_view v;
      if (value.get(v) != simdjson::SUCCESS || (v != "roofline" && v != "additive" && v != "measured"))
        return Status::InvalidArgument("rates: serving.dense_model must be \"roofline\", \"additive\" or \"measured\"");
      out->dense_additive = v == "additive";
      measured = v == "measured";
      continue;
    }
    if (key == "dense_curve") {
      RAGD_RETURN_IF_ERROR(parse_dense_curve(value, &out->dense_curve));
      continue;
    }
    if (key == "wake_quantiles") {
      RAGD_RETURN_IF_ERROR(parse_quantiles(value, &out->wake_quantiles, "wake_quantiles", -3600, 3600));
      continue;
    }
    if (key == "network_quantiles") {
      RAGD_RETURN_IF_ERROR(parse_quantiles(value, &out->network_quantiles, "network_quantiles", 0, 3600));
      continue;
    }
    if (key == "step_noise_quantiles") {
      RAGD_RETURN_IF_ERROR(parse_quantiles(value, &out->step_noise_quantiles, "step_noise_quantiles", -0.99, 10));
      continue;
    }
    Field* f = nullptr;
    for (Field& c : fields)
      if (key == c.name) f = &c;
    if (!f) return Status::InvalidArgument("rates: serving: unknown field '" + std::string(key) + "'");
    double v = 0;
    if (value.get(v) != simdjson::SUCCESS || !std::isfinite(v) || v < 0 || (!f->may_be_zero && v == 0))
      return Status::InvalidArgument(std::string("rates: serving.") + f->name + " must be a " +
                                     (f->may_be_zero ? "non-negative" : "positive") + " number");
    *f->value = v;
  }
  if (measured && out->dense_curve.empty())
    return Status::InvalidArgument("rates: serving.dense_model \"measured\" needs serving.dense_curve");
  if (out->host_cores != std::floor(out->host_cores))
    return Status::InvalidArgument("rates: serving.host_cores must be a whole number of cores");
  if (out->run_speed_sd > 1)
    return Status::InvalidArgument("rates: serving.run_speed_sd must be in [0, 1] (a log-normal factor's sigma)");
  if (!out->wake_quantiles.empty() && out->wake_s > 0)
    return Status::InvalidArgument("rates: serving.wake_s and serving.wake_quantiles exclude each other");
  if (!measured && !out->dense_curve.empty())
    return Status::InvalidArgument("rates: serving.dense_curve is used only with serving.dense_model \"measured\"");
  return Status::OK();
}

}  // namespace

Result<CostModel> parse_cost_model(std::string_view json, const ModelShape& shape) {
  RAGD_RETURN_IF_ERROR(shape.validate());
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(json.data(), json.size()).get(doc); e != simdjson::SUCCESS)
    return Status::InvalidArgument(std::string("rates: not JSON: ") + simdjson::error_message(e));
  simdjson::dom::object obj;
  if (doc.get(obj) != simdjson::SUCCESS) return Status::InvalidArgument("rates: expected a JSON object");
  CostModel m;
  m.shape = shape;
  // `ragctl plan --json` output: the rates are the "rates" member.
  simdjson::dom::object nested;
  simdjson::dom::object rates_obj = obj;
  const bool wrapped = obj["rates"].get(nested) == simdjson::SUCCESS;
  if (wrapped) rates_obj = nested;
  // Re-serialise every engine field for parse_kernel_rates (its checks and messages), keeping
  // "serving" for ourselves.
  std::string engine = "{";
  bool first = true;
  for (auto [key, value] : rates_obj) {
    if (key == "serving") {
      simdjson::dom::object s;
      if (value.get(s) != simdjson::SUCCESS) return Status::InvalidArgument("rates: 'serving' must be an object");
      RAGD_RETURN_IF_ERROR(parse_serving(s, &m.serving));
      continue;
    }
    // bench/sim/calibrate.py's clamped terms and `ragctl calibrate`'s record of what it ran and how
    // well it fitted: for people, not the model.
    if (key == "fit_warnings" || key == "calibration") continue;
    if (!first) engine += ",";
    first = false;
    engine += "\"" + std::string(key) + "\":" + simdjson::minify(value);
  }
  engine += "}";
  if (wrapped) {  // plan's wrapper may carry "serving" beside "rates"
    simdjson::dom::object s;
    if (obj["serving"].get(s) == simdjson::SUCCESS) RAGD_RETURN_IF_ERROR(parse_serving(s, &m.serving));
  }
  auto r = seqparallel::parse_kernel_rates(engine);
  if (!r.ok()) return Status::InvalidArgument("rates: " + r.status().message());
  m.engine = std::move(r).value();
  return m;
}

}  // namespace ragd::sim
