// The real `ragd` binary as a child process, for the end-to-end tests (tests/daemon/real_daemon.h)
// and the end-to-end benchmarks (bench/bench_daemon.h): started on the loopback port it prints,
// waited for until /readyz answers, signalled and stopped by its PID; plus a program run to
// completion (ragctl make-model / ingest). Header-only, test and bench support.
// Thread-safety: a RagdProcess is driven by one thread; run_program is reentrant.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ragd/daemon/client.h"

namespace ragd::testing {

// Runs a program (argv[0] is its path) to completion. With `log_path` its stdout and stderr are
// appended to that file; without, stdout goes to /dev/null and stderr stays the caller's.
// Its exit status, -1 when killed by a signal.
inline int run_program(const std::vector<std::string>& args, const std::string& log_path = "") {
  const pid_t pid = fork();
  if (pid == 0) {
    const int out = log_path.empty() ? open("/dev/null", O_WRONLY) : open(log_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (out >= 0) {
      dup2(out, 1);
      if (!log_path.empty()) dup2(out, 2);
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

// One ragd process. The destructor kills (SIGKILL) one still running.
class RagdProcess {
 public:
  RagdProcess() = default;
  RagdProcess(const RagdProcess&) = delete;
  RagdProcess& operator=(const RagdProcess&) = delete;
  ~RagdProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }

  // Starts args[0] with `args` and reads "ragd listening on http://ADDR" from its stdout, for up
  // to `timeout_ms`. `stderr_path` (when set) receives its log, truncated first; otherwise its
  // stderr is the caller's. False, with *err, when no address came (an exit, the timeout).
  bool start(const std::vector<std::string>& args, std::string* err, const std::string& stderr_path = "",
             int timeout_ms = 60000) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    log_path_ = stderr_path;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      if (!stderr_path.empty()) {
        const int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (e >= 0) dup2(e, 2);
      }
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
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
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
        return true;
      }
    }
    *err = "ragd did not print its address" + log_note() + "; stdout: " + buf;
    return false;
  }

  // After start(): polls GET /readyz until it answers 200, for up to `timeout_ms`. False, with
  // *err, when the process exits first or the time runs out.
  bool wait_ready(int timeout_ms, std::string* err) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (std::chrono::steady_clock::now() < deadline) {
      daemon::HttpClient c("127.0.0.1", port_, 2000);
      auto r = c.request("GET", "/readyz");
      if (r.ok() && r->status == 200) return true;
      if (pid_ > 0 && waitpid(pid_, nullptr, WNOHANG) == pid_) {
        pid_ = -1;
        *err = "ragd exited before it was ready" + log_note();
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    *err = "ragd never became ready" + log_note();
    return false;
  }

  // start() and wait_ready() within one deadline of `timeout_ms`.
  bool start_ready(const std::vector<std::string>& args, std::string* err, const std::string& stderr_path,
                   int timeout_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!start(args, err, stderr_path, timeout_ms)) return false;
    const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0);
    return wait_ready(timeout_ms - static_cast<int>(spent.count()), err);
  }

  // Sends a signal without waiting.
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }

  // SIGTERM and wait; the exit status (-1 when killed by a signal or not running).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int st = 0;
    waitpid(pid_, &st, 0);
    pid_ = -1;
    close_output();
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  }

  // SIGKILL and wait (a crash).
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    close_output();
  }

  // Waits up to timeout_ms for the process to exit by itself: its exit status, -1 when killed by
  // a signal, -2 when still running.
  int wait_exit(int timeout_ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0) {
      int st = 0;
      const pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) return -2;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }

  uint16_t port() const { return port_; }
  pid_t pid() const { return pid_; }

 private:
  std::string log_note() const { return log_path_.empty() ? "" : " (log: " + log_path_ + ")"; }
  void close_output() {
    if (out_ >= 0) close(out_);
    out_ = -1;
  }

  pid_t pid_ = -1;
  int out_ = -1;
  uint16_t port_ = 0;
  std::string log_path_;
};

}  // namespace ragd::testing
