// Test helper: runs a command to completion and captures its exit status, stdout and stderr (each
// through a temporary file, so output of any size never blocks the child). `as_limit` > 0 sets
// RLIMIT_AS (bytes) in the child before exec. Shared by the CLI and daemon tests that check what a
// binary prints and how it exits. Test-only, header-only.
// Thread-safety: call from the test's main thread (fork + exec).
#pragma once

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ragd::testing {

struct Ran {
  int status = -1;  // exit status; -1 when ended by a signal
  std::string out, err;
};

inline std::string slurp_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline Ran run_capture(const std::vector<std::string>& args, rlim_t as_limit = 0) {
  static std::atomic<int> counter{0};
  const std::filesystem::path base = std::filesystem::temp_directory_path() /
                                     ("ragd_run_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
  const std::string out_path = base.string() + ".out", err_path = base.string() + ".err";
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (as_limit > 0) {
      rlimit rl{as_limit, as_limit};
      if (::setrlimit(RLIMIT_AS, &rl) != 0) ::_exit(126);
    }
    const int o = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int e = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(o, 1);
    ::dup2(e, 2);
    std::vector<char*> argv;
    for (const auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  int st = 0;
  if (pid > 0) ::waitpid(pid, &st, 0);
  Ran r{pid > 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1, slurp_file(out_path), slurp_file(err_path)};
  std::filesystem::remove(out_path);
  std::filesystem::remove(err_path);
  return r;
}

}  // namespace ragd::testing
