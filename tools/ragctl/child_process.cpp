#include "child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "ragd/daemon/client.h"

namespace ragd::tools {
namespace {

using Clock = std::chrono::steady_clock;

// In the child, before exec: die with the parent, then the redirections. Only async-signal-safe
// calls here (the parent may have threads).
[[noreturn]] void exec_child(const std::vector<std::string>& argv, pid_t parent, const std::string& out_path,
                             const std::string& err_path, bool err_to_out) {
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (::getppid() != parent) ::_exit(126);  // the parent died before the line above
  const int out = ::open(out_path.empty() ? "/dev/null" : out_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (out < 0) ::_exit(126);
  ::dup2(out, 1);
  if (err_to_out) {
    ::dup2(out, 2);
  } else {
    const int err = ::open(err_path.empty() ? "/dev/null" : err_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (err < 0) ::_exit(126);
    ::dup2(err, 2);
  }
  std::vector<char*> av;
  for (const std::string& a : argv) av.push_back(const_cast<char*>(a.c_str()));
  av.push_back(nullptr);
  if (argv[0].find('/') == std::string::npos) ::execvp(av[0], av.data());
  else ::execv(av[0], av.data());
  ::_exit(127);
}

std::string describe_status(const std::string& what, int st) {
  if (WIFSIGNALED(st)) return what + " was killed by signal " + std::to_string(WTERMSIG(st)) + " (" + ::strsignal(WTERMSIG(st)) + ")";
  return what + " exited with status " + std::to_string(WEXITSTATUS(st));
}

}  // namespace

std::string self_exe_path() {
  char buf[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "";
  return std::string(buf, static_cast<size_t>(n));
}

Result<int> run_child(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path) {
  if (argv.empty()) return Status::InvalidArgument("run_child: no command");
  // Truncate the output file here (the child appends: stderr may share it).
  if (!out_path.empty() && !std::ofstream(out_path, std::ios::trunc))
    return Status::IOError(out_path + ": cannot write: " + std::strerror(errno));
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) exec_child(argv, parent, out_path, err_path, !out_path.empty() && out_path == err_path);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0) {
    if (errno != EINTR) return Status::Internal(std::string("waitpid: ") + std::strerror(errno));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 127) return Status::NotFound("cannot run " + argv[0]);
  if (!WIFEXITED(st)) return Status::Internal(describe_status(argv[0], st));
  return WEXITSTATUS(st);
}

DaemonProcess::~DaemonProcess() { (void)stop(); }

Status DaemonProcess::start(const std::vector<std::string>& args, uint16_t port, const std::string& log_path,
                            double ready_timeout_s) {
  if (pid_ > 0) return Status::FailedPrecondition("a daemon is already running (pid " + std::to_string(pid_) + ")");
  if (args.empty()) return Status::InvalidArgument("no ragd path");
  std::vector<std::string> argv = args;
  argv.push_back("--listen");
  argv.push_back("127.0.0.1:" + std::to_string(port));
  // stdout and stderr both go to the log; the address line is read from it past where it ended.
  size_t offset = 0;
  {
    std::ifstream in(log_path, std::ios::binary | std::ios::ate);
    if (in) offset = static_cast<size_t>(in.tellg());
  }
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid < 0) return Status::Internal(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) exec_child(argv, parent, log_path, log_path, true);
  pid_ = pid;
  port_ = 0;
  const auto deadline = Clock::now() + std::chrono::duration<double>(ready_timeout_s);
  auto fail = [&](const std::string& why) {
    (void)stop();
    return Status::Unavailable(why + " (log: " + log_path + ")");
  };
  auto exited = [&](std::string* why) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) != pid_) return false;
    pid_ = -1;
    *why = describe_status("ragd", st);
    return true;
  };
  const std::string marker = "ragd listening on http://";
  while (port_ == 0) {
    std::string why;
    if (exited(&why)) return fail(why + " before it listened");
    if (Clock::now() > deadline) return fail("ragd printed no address within " + std::to_string(ready_timeout_s) + " s");
    std::ifstream in(log_path, std::ios::binary);
    in.seekg(static_cast<std::streamoff>(offset));
    std::stringstream ss;
    ss << in.rdbuf();
    const std::string text = ss.str();
    const size_t at = text.find(marker);
    const size_t eol = at == std::string::npos ? at : text.find('\n', at);
    if (eol != std::string::npos) {
      const std::string addr = text.substr(at + marker.size(), eol - at - marker.size());
      const int p = std::atoi(addr.substr(addr.rfind(':') + 1).c_str());
      if (p <= 0 || p > 65535) return fail("ragd printed an address without a port: " + addr);
      port_ = static_cast<uint16_t>(p);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // Listening comes before the model and the stores are loaded: wait for /readyz.
  while (true) {
    std::string why;
    if (exited(&why)) return fail(why + " while loading");
    {
      daemon::HttpClient c("127.0.0.1", port_, 2000);
      auto r = c.request("GET", "/readyz");
      if (r.ok() && r->status == 200) return Status::OK();
    }
    if (Clock::now() > deadline) return fail("ragd was not ready within " + std::to_string(ready_timeout_s) + " s");
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

Status DaemonProcess::stop() {
  if (pid_ <= 0) return Status::OK();
  const pid_t pid = pid_;
  pid_ = -1;
  ::kill(pid, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::milliseconds(kStopTimeoutMs);
  int st = 0;
  while (true) {
    const pid_t r = ::waitpid(pid, &st, WNOHANG);
    if (r == pid) break;
    if (r < 0 && errno != EINTR) return Status::Internal(std::string("waitpid: ") + std::strerror(errno));
    if (Clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, &st, 0);
      return Status::Internal("ragd (pid " + std::to_string(pid) + ") did not stop within " +
                              std::to_string(kStopTimeoutMs / 1000) + " s of SIGTERM; killed");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return Status::OK();
  return Status::Internal(describe_status("ragd (pid " + std::to_string(pid) + ")", st));
}

}  // namespace ragd::tools
