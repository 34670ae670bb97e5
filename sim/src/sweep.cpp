#include "ragd/sim/sweep.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace ragd::sim {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// A number with an optional binary byte suffix; false when malformed.
bool parse_scaled(std::string_view v, double* out) {
  v = trim(v);
  double mult = 1;
  static constexpr std::pair<std::string_view, double> kSuffix[] = {
      {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
      {"K", 1024.0},   {"M", 1048576.0},   {"G", 1073741824.0},   {"T", 1099511627776.0}};
  for (const auto& [suf, m] : kSuffix) {
    if (v.size() > suf.size() && v.ends_with(suf)) {
      v.remove_suffix(suf.size());
      mult = m;
      break;
    }
  }
  double x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || !std::isfinite(x)) return false;
  *out = x * mult;
  return true;
}

std::string format_value(double x) {
  char b[64];
  if (x == std::floor(x) && std::fabs(x) < 1e18) std::snprintf(b, sizeof b, "%.0f", x);
  else std::snprintf(b, sizeof b, "%.6g", x);
  return b;
}

Result<int> parse_int(std::string_view key, std::string_view v, int lo, int hi) {
  v = trim(v);
  int x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
    return Status::InvalidArgument(std::string(key) + ": expected an integer in [" + std::to_string(lo) + ", " +
                                   std::to_string(hi) + "], got '" + std::string(v) + "'");
  return x;
}

constexpr std::string_view kSimKeys[] = {"replicas",         "router",          "scheduler",       "eviction",
                                         "max_running",      "max_batch_tokens", "kv_pool_bytes",  "hbm_cache_bytes",
                                         "dram_cache_bytes", "ssd_cache_bytes", "remote_bytes",    "retrieval_threads",
                                         "max_queue",        "preemption",      "max_concurrent_per_tenant",
                                         "sp_workers",       "sp_threshold_tokens"};

}  // namespace

Result<uint64_t> parse_bytes(std::string_view key, std::string_view value) {
  double x = 0;
  if (!parse_scaled(value, &x) || x < 0 || x > 1.8e19)
    return Status::InvalidArgument(std::string(key) + ": expected a byte size (e.g. 1073741824, 512MiB, 4GiB), got '" +
                                   std::string(value) + "'");
  return static_cast<uint64_t>(x);
}

Result<Sweep> parse_sweep(std::string_view text) {
  const std::string where = "sweep '" + std::string(text) + "': ";
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0) return Status::InvalidArgument(where + "expected key=a..b, key=a..b:step or key=v1,v2,...");
  Sweep s;
  s.key = std::string(trim(text.substr(0, eq)));
  std::string_view v = trim(text.substr(eq + 1));
  if (v.empty()) return Status::InvalidArgument(where + "no values for " + s.key);
  constexpr size_t kMaxPoints = 64;
  if (size_t dots = v.find(".."); dots != std::string_view::npos) {
    std::string_view a_txt = v.substr(0, dots), rest = v.substr(dots + 2), step_txt;
    if (size_t colon = rest.find(':'); colon != std::string_view::npos) {
      step_txt = rest.substr(colon + 1);
      rest = rest.substr(0, colon);
    }
    double a = 0, b = 0, step = 0;
    if (!parse_scaled(a_txt, &a)) return Status::InvalidArgument(where + s.key + ": '" + std::string(a_txt) + "' is not a number");
    if (!parse_scaled(rest, &b)) return Status::InvalidArgument(where + s.key + ": '" + std::string(rest) + "' is not a number");
    if (b < a) return Status::InvalidArgument(where + s.key + ": the range ends below its start");
    if (!step_txt.empty()) {
      if (!parse_scaled(step_txt, &step) || step <= 0) return Status::InvalidArgument(where + s.key + ": the step must be a positive number");
      if ((b - a) / step + 1 > kMaxPoints) return Status::InvalidArgument(where + s.key + ": more than 64 points");
      for (double x = a; x <= b + step * 1e-9; x += step) s.values.push_back(format_value(x));
    } else {
      if (a <= 0) return Status::InvalidArgument(where + s.key + ": a doubling range needs a positive start (or give a step: a..b:s)");
      for (double x = a; x < b * (1 + 1e-12); x *= 2) {
        s.values.push_back(format_value(x));
        if (s.values.size() > kMaxPoints) return Status::InvalidArgument(where + s.key + ": more than 64 points");
      }
      if (s.values.back() != format_value(b)) s.values.push_back(format_value(b));
    }
  } else {
    size_t pos = 0;
    while (pos <= v.size()) {
      size_t comma = v.find(',', pos);
      if (comma == std::string_view::npos) comma = v.size();
      std::string_view item = trim(v.substr(pos, comma - pos));
      if (item.empty()) return Status::InvalidArgument(where + s.key + ": empty value in the list");
      s.values.emplace_back(item);
      pos = comma + 1;
    }
    if (s.values.size() > kMaxPoints) return Status::InvalidArgument(where + s.key + ": more than 64 points");
  }
  if (!is_sim_key(s.key) && !is_workload_key(s.key))
    return Status::InvalidArgument(where + "unknown key '" + s.key + "'");
  return s;
}

bool is_sim_key(std::string_view key) { return std::find(std::begin(kSimKeys), std::end(kSimKeys), key) != std::end(kSimKeys); }

Status apply_sim_key(SimOptions& o, const ModelShape& shape, std::string_view key, std::string_view value) {
  value = trim(value);
  auto set_int = [&](int* f, int lo, int hi) -> Status {
    auto r = parse_int(key, value, lo, hi);
    if (!r.ok()) return r.status();
    *f = *r;
    return Status::OK();
  };
  auto set_bytes = [&](uint64_t* f) -> Status {
    auto r = parse_bytes(key, value);
    if (!r.ok()) return r.status();
    *f = *r;
    return Status::OK();
  };
  if (key == "replicas") return set_int(&o.replicas, 1, 4096);
  if (key == "router") {
    auto r = parse_router_kind(value);
    if (!r.ok()) return Status::InvalidArgument(std::string(key) + ": " + r.status().message());
    o.router = *r;
    return Status::OK();
  }
  if (key == "scheduler") {
    auto r = pipelines::parse_sched_policy(value);
    if (!r.ok()) return Status::InvalidArgument(std::string(key) + ": " + r.status().message());
    o.scheduler.policy = *r;
    return Status::OK();
  }
  if (key == "preemption") {
    auto r = pipelines::parse_preempt_mode(value);
    if (!r.ok()) return Status::InvalidArgument(std::string(key) + ": " + r.status().message());
    o.scheduler.preemption = *r;
    return Status::OK();
  }
  if (key == "eviction") {
    auto r = kvstore::parse_eviction_policy(value);
    if (!r.ok()) return Status::InvalidArgument(std::string(key) + ": " + r.status().message());
    o.kv.eviction = *r;
    return Status::OK();
  }
  if (key == "max_running") return set_int(&o.scheduler.max_running, 1, 1 << 20);
  if (key == "max_batch_tokens") return set_int(&o.scheduler.max_batch_tokens, 1, 1 << 24);
  if (key == "retrieval_threads") return set_int(&o.retrieval_threads, 1, 1 << 16);
  if (key == "max_queue") return set_int(&o.max_queue, 1, 1 << 30);
  if (key == "max_concurrent_per_tenant") return set_int(&o.max_concurrent_per_tenant, 0, 1 << 30);
  if (key == "kv_pool_bytes") {
    uint64_t b = 0;
    RAGD_RETURN_IF_ERROR(set_bytes(&b));
    const double block = shape.kv_bytes_per_token() * o.kv.block_size;
    const double blocks = std::floor(static_cast<double>(b) / block);
    if (blocks < 1 || blocks > 1e9) return Status::InvalidArgument(std::string(key) + ": " + std::string(value) + " holds no KV block (or too many)");
    o.kv.pool_blocks = static_cast<int>(blocks);
    return Status::OK();
  }
  if (key == "sp_workers" || key == "sp_threshold_tokens") {
    if (!o.long_context.has_value())
      return Status::InvalidArgument(std::string(key) + ": no long-context route to set (the simulation was given no model)");
    if (key == "sp_workers") return set_int(&o.long_context->workers, 1, 4096);
    int t = 0;
    RAGD_RETURN_IF_ERROR(set_int(&t, 1, 1 << 30));
    o.long_context->threshold_tokens = t;
    return Status::OK();
  }
  if (key == "hbm_cache_bytes") return set_bytes(&o.kv.hbm_bytes);
  if (key == "dram_cache_bytes") return set_bytes(&o.kv.dram_bytes);
  if (key == "ssd_cache_bytes") return set_bytes(&o.kv.ssd_bytes);
  if (key == "remote_bytes") return set_bytes(&o.remote_bytes);
  return Status::InvalidArgument("unknown key '" + std::string(key) + "'");
}

Status apply_key(SimOptions& opts, WorkloadSpec& spec, const ModelShape& shape, std::string_view key, std::string_view value) {
  if (is_sim_key(key)) return apply_sim_key(opts, shape, key, value);
  if (is_workload_key(key)) return apply_workload_key(spec, key, value);
  std::string known;
  for (auto k : kSimKeys) known += (known.empty() ? "" : ", ") + std::string(k);
  return Status::InvalidArgument("unknown key '" + std::string(key) + "' (fleet keys: " + known + "; or a workload key)");
}

}  // namespace ragd::sim
