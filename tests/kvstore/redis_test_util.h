// Test helpers that run real Redis servers: one server or a 3-node cluster on free loopback ports,
// each in its own directory, stopped by PID. Shared by the Redis client, remote KV tier and fleet
// tests. Test-only: aborts the test (ADD_FAILURE + pid -1) rather than returning Status.
//
// Usage:
//   if (!redis_available()) GTEST_SKIP() << kRedisMissing;
//   TempDir dir;
//   RedisProcess r = start_redis(dir.path / "r1");
//   ... redis://127.0.0.1:<r.port> ...
//   stop_redis(r.pid);            // or keep a RedisGuard / RedisClusterGuard to stop on scope exit
//
// Thread-safety: call from the test's main thread (fork + exec).
#pragma once

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

namespace ragd::kvstore::testing {

inline constexpr const char* kRedisServer = "/usr/bin/redis-server";
inline constexpr const char* kRedisCli = "/usr/bin/redis-cli";
inline constexpr const char* kRedisMissing =
    "/usr/bin/redis-server (or redis-cli) not installed: apt-get install redis-server to run the Redis tests";

inline bool redis_available() { return ::access(kRedisServer, X_OK) == 0 && ::access(kRedisCli, X_OK) == 0; }

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on destruction.
struct RedisTempDir {
  std::filesystem::path path;
  RedisTempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base && *base ? base : "/tmp") + "/ragd-redis-XXXXXX";
    if (::mkdtemp(tmpl.data()) == nullptr) ADD_FAILURE() << "mkdtemp " << tmpl << " failed";
    path = tmpl;
  }
  ~RedisTempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  RedisTempDir(const RedisTempDir&) = delete;
  RedisTempDir& operator=(const RedisTempDir&) = delete;
};

inline bool port_bindable(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// A loopback port that is free now, with port + 10000 (the cluster bus port) free too.
inline int free_port() {
  for (int attempt = 0; attempt < 200; ++attempt) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = 0;
    int port = -1;
    if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
      socklen_t len = sizeof a;
      if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) port = ntohs(a.sin_port);
    }
    ::close(fd);
    if (port > 0 && port + 10000 <= 65535 && port_bindable(port + 10000)) return port;
  }
  ADD_FAILURE() << "no free loopback port pair found";
  return -1;
}

inline bool port_accepts(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// fork + exec `argv`, stdout/stderr appended to `log` (or captured when `capture` is given).
// Returns the child's pid, -1 on failure.
inline pid_t spawn(const std::vector<std::string>& argv, const std::filesystem::path& log, int* capture_fd = nullptr) {
  int pipefd[2] = {-1, -1};
  if (capture_fd && ::pipe(pipefd) != 0) return -1;
  const pid_t pid = ::fork();
  if (pid < 0) return -1;
  if (pid == 0) {
    int out = -1;
    if (capture_fd) {
      out = pipefd[1];
      ::close(pipefd[0]);
    } else {
      out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    }
    if (out >= 0) {
      ::dup2(out, 1);
      ::dup2(out, 2);
    }
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  if (capture_fd) {
    ::close(pipefd[1]);
    *capture_fd = pipefd[0];
  }
  return pid;
}

// Runs redis-cli with `args` against 127.0.0.1:`port`, returns its stdout+stderr (raw mode: one
// reply element per line). `ok` (optional) is set to whether it exited 0.
inline std::string redis_cli(int port, const std::vector<std::string>& args, bool* ok = nullptr) {
  std::vector<std::string> argv = {kRedisCli, "-h", "127.0.0.1", "-p", std::to_string(port)};
  argv.insert(argv.end(), args.begin(), args.end());
  int fd = -1;
  const pid_t pid = spawn(argv, {}, &fd);
  std::string out;
  if (pid < 0) {
    if (ok) *ok = false;
    return out;
  }
  char buf[4096];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) out.append(buf, static_cast<size_t>(n));
  ::close(fd);
  int st = 0;
  ::waitpid(pid, &st, 0);
  if (ok) *ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
  while (!out.empty() && (out.back() == '\n' || out.back() == '\r')) out.pop_back();
  return out;
}

struct RedisProcess {
  pid_t pid = -1;
  int port = -1;
  std::filesystem::path dir;
};

// Stops a server started here: `sig` (SIGKILL by default, which also ends a SIGSTOPped server),
// then waitpid. Idempotent for pid <= 0.
inline void stop_redis(pid_t pid, int sig = SIGKILL) {
  if (pid <= 0) return;
  ::kill(pid, sig);
  int st = 0;
  ::waitpid(pid, &st, 0);
}

// Starts `redis-server --port P --save "" --appendonly no --dir DIR --daemonize no <extra>` in
// `dir` (created), on `port` (0 = free_port()), and waits (up to 10 s) until it accepts
// connections. Log in DIR/redis.log. pid -1 (and a test failure) when it did not come up.
inline RedisProcess start_redis(const std::filesystem::path& dir, const std::vector<std::string>& extra_args = {},
                                int port = 0) {
  RedisProcess r;
  r.dir = dir;
  std::filesystem::create_directories(dir);
  r.port = port > 0 ? port : free_port();
  std::vector<std::string> argv = {kRedisServer, "--port", std::to_string(r.port), "--bind", "127.0.0.1",
                                   "--save", "", "--appendonly", "no", "--dir", dir.string(), "--daemonize", "no"};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  r.pid = spawn(argv, dir / "redis.log");
  if (r.pid < 0) {
    ADD_FAILURE() << "fork/exec of " << kRedisServer << " failed";
    return r;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int st = 0;
    if (::waitpid(r.pid, &st, WNOHANG) == r.pid) {
      std::ifstream f(dir / "redis.log");
      std::stringstream ss;
      ss << f.rdbuf();
      ADD_FAILURE() << "redis-server on port " << r.port << " exited at start:\n" << ss.str();
      r.pid = -1;
      return r;
    }
    if (port_accepts(r.port)) return r;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "redis-server on port " << r.port << " did not accept connections within 10 s";
  stop_redis(r.pid);
  r.pid = -1;
  return r;
}

struct RedisCluster {
  std::vector<RedisProcess> nodes;
  bool ok() const {
    if (nodes.empty()) return false;
    for (const auto& n : nodes) {
      if (n.pid <= 0) return false;
    }
    return true;
  }
  std::string seeds() const {  // "redis://127.0.0.1:P1,redis://127.0.0.1:P2,..."
    std::string s;
    for (const auto& n : nodes) s += (s.empty() ? "" : ",") + ("redis://127.0.0.1:" + std::to_string(n.port));
    return s;
  }
};

inline void stop_redis_cluster(RedisCluster& c) {
  for (auto& n : c.nodes) {
    stop_redis(n.pid);
    n.pid = -1;
  }
}

// `n` cluster-enabled masters (no replicas) in dir/node<i>, slots spread by
// `redis-cli --cluster create`, waits (up to 15 s) for cluster_state:ok on every node.
// `extra_args` go to every server (e.g. {"--cluster-require-full-coverage", "no"} so that the other
// nodes keep serving while one is down). A node restarted later with cluster_node_args() plus the
// same extra args, dir and port rejoins with its nodes.conf (same id and slots).
inline std::vector<std::string> cluster_node_args(const std::vector<std::string>& extra_args = {}) {
  std::vector<std::string> a = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                                "--cluster-node-timeout", "2000"};
  a.insert(a.end(), extra_args.begin(), extra_args.end());
  return a;
}

inline RedisCluster start_redis_cluster(const std::filesystem::path& dir, int n = 3,
                                        const std::vector<std::string>& extra_args = {}) {
  RedisCluster c;
  for (int i = 0; i < n; ++i) {
    c.nodes.push_back(start_redis(dir / ("node" + std::to_string(i)), cluster_node_args(extra_args)));
    if (c.nodes.back().pid <= 0) {
      stop_redis_cluster(c);
      return c;
    }
  }
  std::vector<std::string> argv = {kRedisCli, "--cluster", "create"};
  for (const auto& node : c.nodes) argv.push_back("127.0.0.1:" + std::to_string(node.port));
  argv.insert(argv.end(), {"--cluster-replicas", "0", "--cluster-yes"});
  const pid_t pid = spawn(argv, dir / "cluster-create.log");
  int st = 0;
  if (pid < 0 || ::waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    std::ifstream f(dir / "cluster-create.log");
    std::stringstream ss;
    ss << f.rdbuf();
    ADD_FAILURE() << "redis-cli --cluster create failed:\n" << ss.str();
    stop_redis_cluster(c);
    return c;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
  while (true) {
    bool all = true;
    for (const auto& node : c.nodes) {
      if (redis_cli(node.port, {"CLUSTER", "INFO"}).find("cluster_state:ok") == std::string::npos) all = false;
    }
    if (all) return c;
    if (std::chrono::steady_clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ADD_FAILURE() << "redis cluster did not reach cluster_state:ok within 15 s";
  stop_redis_cluster(c);
  return c;
}

// Stops the server / cluster when the scope ends (test failure included).
struct RedisGuard {
  RedisProcess* p;
  explicit RedisGuard(RedisProcess& r) : p(&r) {}
  ~RedisGuard() {
    stop_redis(p->pid);
    p->pid = -1;
  }
};
struct RedisClusterGuard {
  RedisCluster* c;
  explicit RedisClusterGuard(RedisCluster& cl) : c(&cl) {}
  ~RedisClusterGuard() { stop_redis_cluster(*c); }
};

}  // namespace ragd::kvstore::testing
