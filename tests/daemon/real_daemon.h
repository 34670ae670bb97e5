// The real `ragd` binary (tests/ragd_process.h) on a free loopback port, with a tiny random
// model (`ragctl make-model --preset tiny`) and temp data directories, for end-to-end tests. Tests
// skip (with a message) when bin/ragd or bin/ragctl is not built.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "ragd/daemon/client.h"
#include "../ragd_process.h"  // RagdProcess, run_program
#include "test_util.h"

namespace ragd::testing {

namespace fs = std::filesystem;
using daemon::HttpClient;
using daemon::WsClient;

inline const std::string kBin = RAGD_BIN_DIR;

class E2eTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!fs::exists(kBin + "/ragd") || !fs::exists(kBin + "/ragctl")) return;
    dir_ = fs::temp_directory_path() / ("ragd_e2e_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    model_ok_ = run_program({kBin + "/ragctl", "make-model", "--preset", "tiny", "--out", (dir_ / "model").string()}) == 0;
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
  RagdProcess d_;
};

}  // namespace ragd::testing
