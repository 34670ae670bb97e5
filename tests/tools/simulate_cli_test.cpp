// `ragctl simulate` through the real command line: a workload is sized before anything is
// generated and refused, with the estimate and the limit, when it cannot fit in the memory left
// (security issue 48: requests=100000000 grew to 13.5 GiB and ended in an uncaught std::bad_alloc
// under a memory limit); --replicas must be 1..4096 (0 and -3 ran one replica); the busy share and
// its warning; --real beside the prediction.
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

// Every point prints its engine's busy share; an open-loop point past the validated region
// (80 % busy) is warned about, a light one and a closed loop (its clients bound the queue) are not.
TEST_F(SimulateCliTest, BusySharePrintedAndWarnedPastTheValidatedRegion) {
  // llama3-8b on the H200 rates serves about 55 of these a second from one replica.
  const std::string plain = "prompt_tokens=256,answer_tokens=16,requests=300";
  Ran light = simulate({"--workload", "rate=1," + plain});
  ASSERT_EQ(light.status, 0) << light.err;
  EXPECT_NE(light.out.find("engine busy "), std::string::npos) << light.out;
  EXPECT_EQ(light.out.find("warning: the engine is busy"), std::string::npos) << light.out;
  Ran heavy = simulate({"--workload", "rate=50," + plain});
  ASSERT_EQ(heavy.status, 0) << heavy.err;
  EXPECT_NE(heavy.out.find("warning: the engine is busy"), std::string::npos) << heavy.out;
  EXPECT_NE(heavy.out.find("above the 80 %"), std::string::npos) << heavy.out;
  Ran closed = simulate({"--workload", "concurrency=16," + plain});
  ASSERT_EQ(closed.status, 0) << closed.err;
  EXPECT_NE(closed.out.find("engine busy "), std::string::npos) << closed.out;
  EXPECT_EQ(closed.out.find("warning: the engine is busy"), std::string::npos) << closed.out;
}

// --real: measured runs beside the prediction. A simulated run written as bench JSON stands in for
// a measured one: the same workload predicted again is 0 % off and within every target; a file
// that is not there, or a sweep, is refused by name.
TEST_F(SimulateCliTest, RealRunsArePrintedBesideThePrediction) {
  const fs::path dir = fs::temp_directory_path() / ("simulate_cli_real_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string run = (dir / "run.json").string(), out = (dir / "cmp.json").string();
  const std::string wl = "rate=3,requests=60,docs=40,topic_docs=4,docs_per_query=2,zipf=1";
  Ran first = simulate({"--workload", wl, "--json", run});
  ASSERT_EQ(first.status, 0) << first.err;
  Ran again = simulate({"--workload", wl, "--real", run + "," + run, "--json", out});
  ASSERT_EQ(again.status, 0) << again.err;
  EXPECT_NE(again.out.find("measured (2 runs) against the prediction (the deterministic run)"), std::string::npos)
      << again.out;
  EXPECT_NE(again.out.find("0.0 % within 10 %"), std::string::npos) << again.out;  // +0.0 or -0.0 (JSON rounding)
  EXPECT_EQ(again.out.find("MISSED"), std::string::npos) << again.out;
  std::ifstream f(out);
  std::stringstream text;
  text << f.rdbuf();
  EXPECT_NE(text.str().find("\"comparison\":[{\"metric\":\"ttft_p50_ms\""), std::string::npos);
  Ran missing = simulate({"--workload", wl, "--real", (dir / "nope.json").string()});
  EXPECT_EQ(missing.status, 2);
  EXPECT_NE(missing.err.find("--real " + (dir / "nope.json").string()), std::string::npos) << missing.err;
  Ran sweep = simulate({"--workload", wl, "--sweep", "rate=1,2", "--real", run});
  EXPECT_EQ(sweep.status, 2);
  EXPECT_NE(sweep.err.find("--real compares one point"), std::string::npos) << sweep.err;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ragd::testing
