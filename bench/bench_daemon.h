// Shared by the end-to-end tenant benchmarks (tenant_flood_bench.cpp, rerank_probe_bench.cpp): the
// real `ragd` (tests/ragd_process.h: started on a free loopback port over a data directory
// that `ragctl ingest` filled, stopped by its PID); small blocking HTTP helpers with a bearer key;
// percentiles; the git commit a result was measured on.
// Thread-safety: the free functions are reentrant.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <simdjson.h>

#include "ragd/common/json_writer.h"  // json_quote: request bodies and result files
#include "ragd/daemon/client.h"
#include "../tests/ragd_process.h"

namespace ragd::bench {

namespace fs = std::filesystem;
using testing::RagdProcess;
using testing::run_program;

// How long a benchmark's ragd may take to print its address and answer /readyz (start_ready).
inline constexpr int kDaemonStartMs = 120000;

// The folder of this executable (build/bin): ragd and ragctl are built next to it.
inline std::string exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

// `git rev-parse --short HEAD` plus "-dirty" when tracked files differ from it (the bench is run
// from the repository root); "unknown" outside a checkout.
inline std::string git_commit() {
  auto sh = [](const char* cmd) {
    std::string out;
    if (FILE* f = popen(cmd, "r")) {
      char buf[256];
      while (fgets(buf, sizeof buf, f)) out += buf;
      pclose(f);
    }
    while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
    return out;
  };
  std::string c = sh("git rev-parse --short HEAD 2>/dev/null");
  if (c.empty()) return "unknown";
  if (!sh("git status --porcelain --untracked-files=no 2>/dev/null").empty()) c += "-dirty";
  return c;
}

inline daemon::Headers bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}};
}

// A numeric field by JSON pointer ("/timings/ttft_ms"); nullopt when absent or not a number.
inline std::optional<double> json_number(const std::string& json, const char* pointer) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  if (p.parse(json).get(e) != simdjson::SUCCESS) return std::nullopt;
  simdjson::dom::element v;
  if (e.at_pointer(pointer).get(v) != simdjson::SUCCESS) return std::nullopt;
  double d = 0;
  if (v.get(d) == simdjson::SUCCESS) return d;
  int64_t i = 0;
  if (v.get(i) == simdjson::SUCCESS) return static_cast<double>(i);
  uint64_t u = 0;
  if (v.get(u) == simdjson::SUCCESS) return static_cast<double>(u);
  return std::nullopt;
}

inline std::optional<std::string> json_string(const std::string& json, const char* pointer) {
  simdjson::dom::parser p;
  simdjson::dom::element e;
  std::string_view s;
  if (p.parse(json).get(e) != simdjson::SUCCESS || e.at_pointer(pointer).get(s) != simdjson::SUCCESS) return std::nullopt;
  return std::string(s);
}

// max_position_embeddings of a Hugging Face model directory; 0 when unreadable.
inline int model_context(const std::string& model_dir) {
  std::ifstream in(model_dir + "/config.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto v = json_number(text, "/max_position_embeddings");
  return v ? static_cast<int>(*v) : 0;
}

// p-th percentile (0..100), linear interpolation; NaN for no samples.
inline double pct(std::vector<double> v, double p) {
  if (v.empty()) return std::nan("");
  std::sort(v.begin(), v.end());
  const double idx = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(idx)), hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (idx - static_cast<double>(lo));
}

// JSON number, or null for NaN / infinity.
inline std::string jnum(double v) {
  if (!std::isfinite(v)) return "null";
  char b[64];
  std::snprintf(b, sizeof b, "%.3f", v);
  return b;
}

}  // namespace ragd::bench
