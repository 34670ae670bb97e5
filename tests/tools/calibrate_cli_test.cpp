// `ragctl calibrate --quick` end to end on the tiny model: it measures this machine, runs its real
// calibration against ragd daemons it starts and stops itself (a free loopback port, a work
// directory), fits with bench/sim/calibrate.py and writes a rates file that `ragctl simulate --rates`
// accepts and that carries what was measured, what ran and how well it fitted. The rates of a tiny
// model on a shared test machine are not checked for accuracy (timing claims live in bench/).
#include <gtest/gtest.h>

#include "../run_capture.h"

#include <simdjson.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <string>
#include <vector>

namespace ragd::testing {
namespace {

namespace fs = std::filesystem;

const std::string kRagctl = RAGD_BIN_DIR "/ragctl";

// Processes whose command line mentions `needle` (a daemon left running would).
std::vector<std::string> processes_mentioning(const std::string& needle) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator("/proc")) {
    const std::string pid = e.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp_file(e.path() / "cmdline");
    for (char& c : cmd)
      if (c == '\0') c = ' ';
    if (cmd.find(needle) != std::string::npos) out.push_back(pid + ": " + cmd);
  }
  return out;
}

class CalibrateCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!fs::exists(kRagctl) || !fs::exists(RAGD_BIN_DIR "/ragd")) GTEST_SKIP() << "bin/ragctl or bin/ragd not built";
    if (std::system("python3 -c 'import json, statistics, shlex' > /dev/null 2>&1") != 0)
      GTEST_SKIP() << "no python3 for bench/sim/calibrate.py";
    dir_ = fs::temp_directory_path() / ("ragd_calibrate_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    Ran m = run_capture({kRagctl, "make-model", "--preset", "tiny", "--out", (dir_ / "model").string()});
    ASSERT_EQ(m.status, 0) << m.err;
    // A small KV pool: each of the calibration's daemons starts in a fraction of a second.
    std::ofstream(dir_ / "ragd.toml") << "log_level = \"warn\"\n[runtime]\nkv_pool_bytes = 67108864\n";
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

TEST_F(CalibrateCliTest, QuickCalibrationWritesRatesTheSimulatorAccepts) {
  const std::string model = (dir_ / "model").string(), config = (dir_ / "ragd.toml").string();
  const std::string out = (dir_ / "rates.json").string(), work = (dir_ / "work").string();
  Ran r = run_capture({kRagctl, "calibrate", "--quick", "--model", model, "--config", config, "--out", out, "--work-dir", work});
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("self-check"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + out), std::string::npos) << r.out;
  // Every daemon it started is gone.
  EXPECT_EQ(processes_mentioning(work), std::vector<std::string>{});

  // The simulator takes the file as it is.
  Ran sim = run_capture({kRagctl, "simulate", "--rates", out, "--model", model, "--config", config, "--workload",
                         "rate=5,requests=20"});
  EXPECT_EQ(sim.status, 0) << sim.err;
  EXPECT_NE(sim.out.find("n=20 "), std::string::npos) << sim.out;

  simdjson::dom::parser parser;
  simdjson::dom::element d;
  ASSERT_EQ(parser.load(out).get(d), simdjson::SUCCESS);
  auto num = [&](const char* ptr) {
    double v = std::nan("");
    EXPECT_EQ(d.at_pointer(ptr).get_double().get(v), simdjson::SUCCESS) << ptr;
    return v;
  };
  auto size = [&](const char* ptr) {
    simdjson::dom::array a;
    EXPECT_EQ(d.at_pointer(ptr).get(a), simdjson::SUCCESS) << ptr;
    return a.size();
  };
  // Measured here: kernel rates, engine steps, the serving terms of the fit.
  EXPECT_GT(num("/dense_tokens_per_s"), 0);
  EXPECT_GT(num("/attn_pairs_per_s"), 0);
  std::string_view dense_model;
  EXPECT_EQ(d.at_pointer("/serving/dense_model").get(dense_model), simdjson::SUCCESS);
  EXPECT_EQ(dense_model, "measured");
  EXPECT_GE(size("/serving/dense_curve"), 10u);
  EXPECT_EQ(size("/serving/wake_quantiles"), 21u);
  EXPECT_EQ(size("/serving/network_quantiles"), 21u);
  for (const char* k : {"/serving/retrieval_s", "/serving/network_s", "/serving/step_overhead_s", "/serving/sample_s",
                        "/serving/engine_slowdown", "/serving/publish_s_per_byte", "/serving/wake_after_s"})
    EXPECT_GE(num(k), 0) << k;
  EXPECT_GT(num("/serving/retrieval_s"), 0);

  // What ran: wall time, machine, loads chosen from the measured service rate, every run.
  EXPECT_GT(num("/calibration/wall_s"), 0);
  EXPECT_GE(num("/calibration/machine/cpus"), 1);
  EXPECT_GE(num("/calibration/machine/other_processes_cpus"), 0);
  const double service = num("/calibration/loads/service_rate_per_s"), light = num("/calibration/loads/light_rate_per_s");
  EXPECT_GT(service, 0);
  EXPECT_NEAR(light, num("/calibration/loads/light_utilisation") * service, 0.01 * light);
  EXPECT_GT(num("/calibration/prefix_tokens"), 0);
  simdjson::dom::array runs;
  ASSERT_EQ(d.at_pointer("/calibration/runs").get(runs), simdjson::SUCCESS);
  std::set<std::string> names;
  for (simdjson::dom::element run : runs) {
    std::string_view name;
    ASSERT_EQ(run["name"].get(name), simdjson::SUCCESS);
    names.insert(std::string(name));
    double requests = 0;
    EXPECT_EQ(run["requests"].get_double().get(requests), simdjson::SUCCESS);
    EXPECT_GE(requests, 30) << name;
  }
  EXPECT_EQ(names, (std::set<std::string>{"hit-c1-1", "miss-none-c1-1", "miss-c1-1", "hit-open-1", "hit-c4-1"}));
  // The open-loop run ran at the light rate it chose.
  simdjson::dom::parser p2;
  simdjson::dom::element open;
  ASSERT_EQ(p2.load(work + "/runs/hit-open-1.json").get(open), simdjson::SUCCESS);
  double offered = 0;
  ASSERT_EQ(open.at_pointer("/runs/0/rate").get_double().get(offered), simdjson::SUCCESS);
  EXPECT_NEAR(offered, light, 1e-3 * light);

  // Its own fit checked: the line's residuals, the fit's checks, every run replayed.
  EXPECT_GT(num("/calibration/fit/line/requests"), 0);
  EXPECT_GE(num("/calibration/fit/line/residual_rms_s"), 0);
  EXPECT_EQ(size("/calibration/fit/checks"), 4u);  // publish, rows, wake, check
  EXPECT_EQ(size("/calibration/self_check"), 5u);
  EXPECT_GT(num("/calibration/self_check/0/metrics/ttft_p50_ms/measured"), 0);
  EXPECT_GT(num("/calibration/self_check/0/metrics/ttft_p50_ms/simulated"), 0);
  // Every clamp is a warning with its raw value, in fit_warnings and in the calibration's warnings.
  std::string warnings_text;
  simdjson::dom::array warnings;
  ASSERT_EQ(d.at_pointer("/calibration/warnings").get(warnings), simdjson::SUCCESS);
  for (simdjson::dom::element w : warnings) {
    std::string_view s;
    ASSERT_EQ(w.get(s), simdjson::SUCCESS);
    warnings_text += std::string(s) + "\n";
  }
  simdjson::dom::array clamps;
  if (d["fit_warnings"].get(clamps) == simdjson::SUCCESS)
    for (simdjson::dom::element c : clamps) {
      std::string_view term;
      double raw = 0, used = -1;
      ASSERT_EQ(c["term"].get(term), simdjson::SUCCESS);
      ASSERT_EQ(c["raw"].get_double().get(raw), simdjson::SUCCESS);
      ASSERT_EQ(c["used"].get_double().get(used), simdjson::SUCCESS);
      EXPECT_LT(raw, 0) << term;
      EXPECT_EQ(used, 0) << term;
      EXPECT_NE(warnings_text.find("fit: " + std::string(term) + " fitted as "), std::string::npos) << warnings_text;
      EXPECT_NE(r.out.find("warning: fit: " + std::string(term)), std::string::npos) << r.out;
    }
}

TEST_F(CalibrateCliTest, RefusesAModelItCannotRead) {
  Ran r = run_capture({kRagctl, "calibrate", "--quick", "--model", (dir_ / "no-model").string(), "--out",
                       (dir_ / "rates.json").string()});
  EXPECT_EQ(r.status, 1) << r.out << r.err;
  EXPECT_NE(r.err.find("ragctl calibrate: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(dir_ / "rates.json"));
}

}  // namespace
}  // namespace ragd::testing
