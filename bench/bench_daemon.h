// Shared by the end-to-end tenant benchmarks (tenant_flood_bench.cpp, rerank_probe_bench.cpp): the
// real `ragd` started on a free loopback port over a data directory that `ragctl ingest` filled,
// stopped by its PID; small blocking HTTP helpers with a bearer key; percentiles; the git commit
// a result was measured on.
// Thread-safety: BenchDaemon is driven by one thread; the free functions are reentrant.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <simdjson.h>

#include "ragd/daemon/client.h"

namespace ragd::bench {

namespace fs = std::filesystem;

// The folder of this executable (build/bin): ragd and ragctl are built next to it.
inline std::string exe_dir() {
  std::error_code ec;
  const fs::path p = fs::read_symlink("/proc/self/exe", ec);
  return ec ? std::string(".") : p.parent_path().string();
}

// Runs a program to completion; stdout and stderr go to `log_path` (appended) or /dev/null.
// Its exit status, -1 when killed by a signal.
inline int run_program(const std::vector<std::string>& args, const std::string& log_path = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = log_path.empty() ? open("/dev/null", O_WRONLY) : open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      dup2(out, 1);
      dup2(out, 2);
    }
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
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

// One ragd process. start() waits for "ragd listening on http://ADDR" on its stdout, then for
// /readyz 200. stop() sends SIGTERM to its PID and waits.
class BenchDaemon {
 public:
  BenchDaemon() = default;
  BenchDaemon(const BenchDaemon&) = delete;
  BenchDaemon& operator=(const BenchDaemon&) = delete;
  ~BenchDaemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }

  bool start(const std::vector<std::string>& args, const std::string& log_path, std::string* err) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      const int e = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (e >= 0) dup2(e, 2);
      close(fds[0]);
      std::vector<char*> argv;
      for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
      argv.push_back(nullptr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    close(fds[1]);
    out_ = fds[0];
    std::string buf;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
    while (port_ == 0 && std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char tmp[512];
      const ssize_t n = read(out_, tmp, sizeof tmp);
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
      const auto pos = buf.find("ragd listening on http://");
      const auto eol = pos == std::string::npos ? pos : buf.find('\n', pos);
      if (eol != std::string::npos) {
        const std::string addr = buf.substr(pos + 25, eol - pos - 25);
        port_ = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
      }
    }
    if (port_ == 0) {
      *err = "ragd did not print its address (log: " + log_path + "); stdout: " + buf;
      return false;
    }
    while (std::chrono::steady_clock::now() < deadline) {
      daemon::HttpClient c("127.0.0.1", port_, 2000);
      auto r = c.request("GET", "/readyz");
      if (r.ok() && r->status == 200) return true;
      if (waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        *err = "ragd exited before it was ready (log: " + log_path + ")";
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *err = "ragd never became ready (log: " + log_path + ")";
    return false;
  }

  // SIGTERM and wait; the exit status (-1 when killed by a signal or not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    if (out_ >= 0) close(out_);
    out_ = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  uint16_t port_ = 0;
};

inline daemon::Headers bearer(const std::string& key) {
  return {{"Authorization", "Bearer " + key}, {"Content-Type", "application/json"}};
}

// JSON string literal (quotes included) for ASCII / UTF-8 text.
inline std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (char c : s) {
    switch (c) {
      case '"': o += "\\\""; break;
      case '\\': o += "\\\\"; break;
      case '\n': o += "\\n"; break;
      case '\t': o += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char b[8];
          std::snprintf(b, sizeof b, "\\u%04x", c);
          o += b;
        } else {
          o += c;
        }
    }
  }
  return o + "\"";
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
