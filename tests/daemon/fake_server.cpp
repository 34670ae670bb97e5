// ragd_fake_server: the real HTTP server and routes over the deterministic fake runtime (test
// double), so that SDK tests can run when no model runtime is built.
//   ragd_fake_server [--listen 127.0.0.1:0] [--api-key KEY=TENANT]
// Prints "ragd listening on http://ADDR", serves until SIGINT/SIGTERM.
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include <pthread.h>

#include "fake_runtime.h"
#include "ragd/daemon/api.h"
#include "ragd/daemon/server.h"

int main(int argc, char** argv) {
  ragd::daemon::DaemonConfig cfg;
  cfg.server.listen = "127.0.0.1:0";
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--listen") {
      cfg.server.listen = v;
    } else if (a == "--api-key") {
      auto eq = v.find('=');
      if (eq == std::string::npos) return 2;
      cfg.auth.keys[v.substr(0, eq)] = v.substr(eq + 1);
    } else {
      std::fprintf(stderr, "unknown option %s\n", a.c_str());
      return 2;
    }
  }
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  ragd::testing::FakeExecutor ex;
  ragd::testing::FakeDocuments docs;
  auto api = std::make_shared<ragd::daemon::Api>(cfg);
  api->set_runtime(&ex, &docs);
  auto server = ragd::daemon::Server::start(cfg.server, api);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().to_string().c_str());
    return 1;
  }
  std::printf("ragd listening on http://%s\n", (*server)->address().c_str());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&sigs, &sig);
  (*server)->stop();
  ex.wait_idle(5000);
  return 0;
}
