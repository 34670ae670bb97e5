// The real `ragd` binary on a free loopback port, with a tiny random model
// (`ragctl make-model --preset tiny`) and temp data directories, for end-to-end tests. Tests skip
// (with a message) when bin/ragd or bin/ragctl is not built.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <csignal>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ragd/daemon/client.h"
#include "test_util.h"

namespace ragd::testing {

namespace fs = std::filesystem;
using daemon::HttpClient;
using daemon::WsClient;

inline const std::string kBin = RAGD_BIN_DIR;

inline int run_cmd(const std::vector<std::string>& args) {
  pid_t pid = fork();
  if (pid == 0) {
    int devnull = open("/dev/null", O_WRONLY);
    dup2(devnull, 1);
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

class Daemon {
 public:
  // Starts ragd, reads "ragd listening on http://ADDR" from its stdout. `stderr_path` (when set)
  // receives its log.
  bool start(const std::vector<std::string>& args, std::string* err, const std::string& stderr_path = "") {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_ = fork();
    if (pid_ == 0) {
      dup2(fds[1], 1);
      if (!stderr_path.empty()) {
        int e = open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
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
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{out_, POLLIN, 0};
      if (poll(&p, 1, 200) <= 0) continue;
      char tmp[512];
      ssize_t n = read(out_, tmp, sizeof tmp);
      if (n <= 0) break;
      buf.append(tmp, static_cast<size_t>(n));
      auto pos = buf.find("ragd listening on http://");
      auto eol = buf.find('\n', pos);
      if (pos != std::string::npos && eol != std::string::npos) {
        std::string addr = buf.substr(pos + 25, eol - pos - 25);
        port_ = static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1)));
        return true;
      }
    }
    *err = "ragd did not print its address; stdout: " + buf;
    return false;
  }
  // Sends a signal without waiting.
  void signal(int sig) {
    if (pid_ > 0) kill(pid_, sig);
  }
  // SIGTERM and wait; returns the exit status (-1 if killed by a signal).
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
  // SIGKILL and wait (a crash).
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (out_ >= 0) close(out_);
    out_ = -1;
  }
  // Waits up to timeout_ms for the process to exit by itself: its exit status, -1 when killed by
  // a signal, -2 when still running.
  int wait_exit(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    while (pid_ > 0) {
      int st = 0;
      pid_t r = waitpid(pid_, &st, WNOHANG);
      if (r == pid_) {
        pid_ = -1;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
      }
      if (std::chrono::steady_clock::now() > deadline) return -2;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return -1;
  }
  ~Daemon() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ >= 0) close(out_);
  }
  uint16_t port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  uint16_t port_ = 0;
};

class E2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kBin + "/ragd") || !fs::exists(kBin + "/ragctl")) return;
    dir_ = fs::temp_directory_path() / ("ragd_e2e_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    model_ok_ = run_cmd({kBin + "/ragctl", "make-model", "--preset", "tiny", "--out", (dir_ / "model").string()}) == 0;
  }
  static void TearDownTestSuite() {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  void SetUp() override {
    if (!fs::exists(kBin + "/ragd") || !fs::exists(kBin + "/ragctl"))
      GTEST_SKIP() << "bin/ragd or bin/ragctl not built; the real-daemon test needs both";
    ASSERT_TRUE(model_ok_) << "ragctl make-model --preset tiny failed";
  }
  std::vector<std::string> daemon_args(const std::string& data, const std::vector<std::string>& extra) const {
    std::vector<std::string> args = {kBin + "/ragd", "--model", (dir_ / "model").string(), "--data",
                                     (dir_ / data).string(), "--listen", "127.0.0.1:0", "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    return args;
  }
  void start_daemon(const std::string& data, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {kBin + "/ragd", "--model", (dir_ / "model").string(), "--data",
                                     (dir_ / data).string(), "--listen", "127.0.0.1:0", "--threads", "2"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::string err;
    ASSERT_TRUE(d_.start(args, &err)) << err;
    ASSERT_TRUE(wait_for([&] { return get("/readyz").status == 200; }, 60000)) << "never ready";
  }
  daemon::ClientResponse call(const std::string& method, const std::string& target, const std::string& body = "",
                              const daemon::Headers& h = {}) {
    HttpClient c("127.0.0.1", d_.port(), 60000);
    auto r = c.request(method, target, body, h);
    return r.ok() ? *r : daemon::ClientResponse{};
  }
  daemon::ClientResponse get(const std::string& target) { return call("GET", target); }

  static inline fs::path dir_;
  static inline bool model_ok_ = false;
  Daemon d_;
};

}  // namespace ragd::testing
