// BenchArgs (bench/bench_args.h): typed flags with defaults, lists, repeated flags, switches, custom
// values; unknown flags, missing values and bad values are errors naming the flag.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_args.h"

namespace ragd::bench {
namespace {

// argv from a list of words, argv[0] the program.
struct Argv {
  std::vector<std::string> words;
  std::vector<char*> ptrs;
  explicit Argv(std::vector<std::string> w) : words(std::move(w)) {
    words.insert(words.begin(), "bench_x");
    for (auto& s : words) ptrs.push_back(s.data());
  }
  int argc() const { return static_cast<int>(ptrs.size()); }
  char** argv() { return ptrs.data(); }
};

struct Flags {
  int reps = 10;
  int64_t big = 1;
  uint32_t seed = 7;
  double zipf = 0.9;
  std::string model;
  std::vector<int> rows{1, 8};
  std::vector<std::string> config;
  bool quick = false, check = true;
  std::string mode = "dense";
  BenchArgs args{"bench_x"};
  Flags() {
    args.opt("reps", &reps).opt("big", &big).opt("seed", &seed).opt("zipf", &zipf).opt("model", &model);
    args.list("rows", &rows).each("config", &config).flag("quick", &quick).flag("no-check", &check, false);
    args.custom("mode", "dense", [this](const std::string& v) {
      if (v != "dense" && v != "lexical") return std::string("dense or lexical");
      mode = v;
      return std::string();
    });
  }
  bool parse(std::vector<std::string> words) {
    Argv a(std::move(words));
    return args.parse(a.argc(), a.argv());
  }
};

TEST(BenchArgs, DefaultsStayWithoutFlags) {
  Flags f;
  ASSERT_TRUE(f.parse({}));
  EXPECT_EQ(f.reps, 10);
  EXPECT_EQ(f.rows, (std::vector<int>{1, 8}));
  EXPECT_FALSE(f.quick);
  EXPECT_TRUE(f.check);
  EXPECT_FALSE(f.args.given("reps"));
}

TEST(BenchArgs, FillsEachTypeInAnyOrder) {
  Flags f;
  ASSERT_TRUE(f.parse({"--quick", "--rows", "3,5,129", "--reps", "-7", "--big", "4294967296", "--seed", "4000000000",
                       "--zipf", "1.25", "--model", "models/x y", "--config", "a=1", "--no-check", "--config", "b=2",
                       "--mode", "lexical"}));
  EXPECT_EQ(f.reps, -7);
  EXPECT_EQ(f.big, int64_t{4294967296});
  EXPECT_EQ(f.seed, 4000000000u);
  EXPECT_DOUBLE_EQ(f.zipf, 1.25);
  EXPECT_EQ(f.model, "models/x y");
  EXPECT_EQ(f.rows, (std::vector<int>{3, 5, 129}));
  EXPECT_EQ(f.config, (std::vector<std::string>{"a=1", "b=2"}));
  EXPECT_TRUE(f.quick);
  EXPECT_FALSE(f.check);
  EXPECT_EQ(f.mode, "lexical");
  EXPECT_TRUE(f.args.given("reps"));
  EXPECT_FALSE(f.args.given("nothing"));
}

TEST(BenchArgs, RefusesUnknownFlagsMissingAndBadValues) {
  testing::internal::CaptureStderr();
  EXPECT_FALSE(Flags().parse({"--reps", "3", "--bogus", "1"}));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("bench_x: unknown flag '--bogus'"), std::string::npos);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(Flags().parse({"reps", "3"}));  // not a flag
  EXPECT_NE(testing::internal::GetCapturedStderr().find("unknown flag 'reps'"), std::string::npos);
  testing::internal::CaptureStderr();
  EXPECT_FALSE(Flags().parse({"--reps"}));
  EXPECT_NE(testing::internal::GetCapturedStderr().find("flag --reps needs a value"), std::string::npos);
  const std::vector<std::vector<std::string>> bad = {
      {"--reps", "12abc"}, {"--reps", ""},      {"--reps", "99999999999"}, {"--seed", "-1"},
      {"--zipf", "0.9x"},  {"--rows", "1,,2"},  {"--rows", "1,a"},         {"--mode", "hybrid"},
  };
  for (const auto& b : bad) {
    testing::internal::CaptureStderr();
    EXPECT_FALSE(Flags().parse(b)) << b[0] << " " << b[1];
    const std::string err = testing::internal::GetCapturedStderr();
    EXPECT_NE(err.find("bench_x: " + b[0] + ": "), std::string::npos) << err;
    EXPECT_NE(err.find("usage: bench_x [--reps 10]"), std::string::npos) << err;
  }
}

TEST(BenchArgs, UsageShowsDefaults) {
  Flags f;
  EXPECT_EQ(f.args.usage(),
            "usage: bench_x [--reps 10] [--big 1] [--seed 7] [--zipf 0.9] [--model VALUE] [--rows 1,8] [--config VALUE] "
            "[--quick] [--no-check] [--mode dense]");
}

}  // namespace
}  // namespace ragd::bench
