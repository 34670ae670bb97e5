// Child processes of a ragctl command that drives other programs (`ragctl calibrate`): a command run
// to completion with its output in files, and a ragd daemon on a loopback port, started, waited for
// until ready and stopped by its PID.
//
// Every child is asked to die with its parent (PR_SET_PDEATHSIG, SIGTERM), so that a command that is
// killed (a test's timeout, ^C) leaves no daemon behind; the children share the command's process
// group and terminal.
// Thread-safety: call from one thread (the one that started the children: the death signal follows
// the thread that forked).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::tools {

// The running executable's path (/proc/self/exe); "" where it cannot be read.
std::string self_exe_path();

// Runs argv[0] (a path, no PATH search unless it has no '/') with argv until it exits. stdout goes
// to `out_path`, stderr is appended to `err_path` ("" for either: /dev/null). Returns the exit
// status; a child ended by a signal, or one that could not be started, is an error naming it.
[[nodiscard]] Result<int> run_child(const std::vector<std::string>& argv, const std::string& out_path,
                                    const std::string& err_path);

// One ragd process. start() runs it with `--listen 127.0.0.1:PORT` (PORT 0: ragd picks a free one
// and prints it), reads the port from its "ragd listening on http://ADDR" line and waits until
// GET /readyz answers 200. stop() sends SIGTERM and waits (SIGKILL after `kStopTimeoutMs`); it is
// idempotent, and the destructor stops a daemon still running.
class DaemonProcess {
 public:
  static constexpr int kStopTimeoutMs = 20000;

  DaemonProcess() = default;
  DaemonProcess(const DaemonProcess&) = delete;
  DaemonProcess& operator=(const DaemonProcess&) = delete;
  ~DaemonProcess();

  // `args`: ragd's path and its options other than --listen; `log_path` receives its stderr
  // (appended). Fails (and leaves nothing running) if ragd exits, prints no address or is not
  // ready within `ready_timeout_s`.
  [[nodiscard]] Status start(const std::vector<std::string>& args, uint16_t port, const std::string& log_path,
                             double ready_timeout_s = 300);
  // Its exit status: 0 for a clean shutdown; an error when it had to be killed or died by a signal.
  [[nodiscard]] Status stop();

  pid_t pid() const { return pid_; }
  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  uint16_t port_ = 0;
};

}  // namespace ragd::tools
