// `ragctl simulate` through the real command line: a workload is sized before anything is
// generated and refused, with the estimate and the limit, when it cannot fit in the memory left
// (security issue 48: requests=100000000 grew to 13.5 GiB and ended in an uncaught std::bad_alloc
// under a memory limit); --replicas must be 1..4096 (0 and -3 ran one replica).
#include <gtest/gtest.h>

#include "../run_capture.h"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace ragd::testing {
namespace {

namespace fs = std::filesystem;

// Runs ragctl simulate with `args`; `as_limit` > 0 sets RLIMIT_AS (bytes) in the child first.
Ran simulate(const std::vector<std::string>& args, rlim_t as_limit = 0) {
  std::vector<std::string> argv_s = {RAGD_BIN_DIR "/ragctl", "simulate", "--rates",
                                     RAGD_SOURCE_DIR "/bench/rates/h200-llama3-8b.json", "--preset", "llama3-8b"};
  argv_s.insert(argv_s.end(), args.begin(), args.end());
  return run_capture(argv_s, as_limit);
}

constexpr rlim_t kTwoGiB = rlim_t{2} << 30;

class SimulateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(RAGD_BIN_DIR "/ragctl")) GTEST_SKIP() << "bin/ragctl not built";
  }
};

TEST_F(SimulateCliTest, WorkloadThatCannotFitIsRefusedWithTheEstimate) {
  Ran r = simulate({"--workload", "rate=5,requests=100000000"}, kTwoGiB);
  EXPECT_EQ(r.status, 2) << r.err;
  EXPECT_NE(r.err.find("ragctl simulate: --workload: the simulation needs about "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("100000000 requests at about "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("of memory available (RLIMIT_AS)"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");  // refused before simulating anything
  // Under the same limit: the same rate for a minute (requests= no longer decides), and a small
  // workload, run.
  r = simulate({"--workload", "rate=5,requests=100000000,duration_s=60"}, kTwoGiB);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("refused=0"), std::string::npos) << r.out;
  r = simulate({"--workload", "rate=5,requests=2000"}, kTwoGiB);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("n=2000 "), std::string::npos) << r.out;
}

TEST_F(SimulateCliTest, ReplicasMustBeAtLeastOne) {
  for (const std::vector<std::string> bad : {std::vector<std::string>{"--replicas", "0"},
                                             std::vector<std::string>{"--replicas", "-3"},
                                             std::vector<std::string>{"--replicas=-3"},
                                             std::vector<std::string>{"--replicas", "5000"}}) {
    std::vector<std::string> args = {"--workload", "rate=5,requests=20"};
    args.insert(args.end(), bad.begin(), bad.end());
    Ran r = simulate(args);
    EXPECT_EQ(r.status, 2) << bad.back() << ": " << r.out << r.err;
    EXPECT_NE(r.err.find("--replicas: expected an integer in [1, 4096], got '" + bad.back().substr(bad.back().find('=') + 1) + "'"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.out, "");
  }
  Ran r = simulate({"--workload", "rate=5,requests=20", "--replicas", "3"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(3 replicas)"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace ragd::testing
