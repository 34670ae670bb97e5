// The output-length head (length_model.h): its trainer against a naive dense reference, what it
// learns from question words, the remaining-length revision while decoding, its file, the length
// log and the ranking metrics.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "ragd/pipelines/length_log.h"
#include "ragd/pipelines/length_model.h"
#include "ragd/pipelines/length_predictor.h"
#include "ragd/pipelines/length_quality.h"

namespace ragd::pipelines {
namespace {

// The same objective and Adam, over dense double rows, written out the plain way.
std::vector<double> naive_train(const std::vector<std::vector<double>>& x, const std::vector<int>& y, int k, int cols,
                                int iters, double lr, double l2) {
  const int n = static_cast<int>(x.size());
  std::vector<double> w(k * cols, 0), m(w.size(), 0), v(w.size(), 0);
  for (int t = 1; t <= iters; ++t) {
    std::vector<double> g(w.size(), 0);
    for (size_t j = 0; j < w.size(); ++j) g[j] = l2 * w[j];
    for (int i = 0; i < n; ++i) {
      std::vector<double> p(k);
      double mx = -1e300;
      for (int c = 0; c < k; ++c) {
        for (int j = 0; j < cols; ++j) p[c] += w[c * cols + j] * x[i][j];
        mx = std::max(mx, p[c]);
      }
      double z = 0;
      for (int c = 0; c < k; ++c) z += std::exp(p[c] - mx);
      for (int c = 0; c < k; ++c) {
        const double prob = std::exp(p[c] - mx) / z;
        const double d = (prob - (c == y[i] ? 1.0 : 0.0)) / n;
        for (int j = 0; j < cols; ++j) g[c * cols + j] += d * x[i][j];
      }
    }
    for (size_t j = 0; j < w.size(); ++j) {
      m[j] = 0.9 * m[j] + 0.1 * g[j];
      v[j] = 0.999 * v[j] + 0.001 * g[j] * g[j];
      const double mh = m[j] / (1 - std::pow(0.9, t)), vh = v[j] / (1 - std::pow(0.999, t));
      w[j] -= lr * mh / (std::sqrt(vh) + 1e-8);
    }
  }
  return w;
}

TEST(LengthModel, TrainerMatchesNaiveReferenceOnRandomData) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> u(-1.5, 1.5);
  const int n = 37, cols = 13, k = 5;
  std::vector<SparseRow> sx;
  std::vector<std::vector<double>> dx;
  std::vector<int> y;
  for (int i = 0; i < n; ++i) {
    SparseRow r;
    std::vector<double> d(cols, 0);
    for (int j = 0; j < cols; ++j)
      if (rng() % 3 == 0 || j == 0) {
        const float v = static_cast<float>(u(rng));
        r.emplace_back(j, v);
        d[j] = v;
      }
    sx.push_back(r);
    dx.push_back(d);
    y.push_back(static_cast<int>(rng() % k));
  }
  const auto got = train_softmax(sx, y, k, cols, 33, 0.07, 3e-3);
  const auto want = naive_train(dx, y, k, cols, 33, 0.07, 3e-3);
  ASSERT_EQ(got.size(), want.size());
  double worst = 0;
  for (size_t j = 0; j < got.size(); ++j) worst = std::max(worst, std::abs(got[j] - want[j]));
  EXPECT_LT(worst, 1e-9);
  double norm = 0;
  for (double v : want) norm += v * v;
  EXPECT_GT(norm, 1e-2) << "the reference did not move: the comparison would prove nothing";
}

TEST(LengthModel, TrainerRecoversAPlantedSoftmaxModel) {
  std::mt19937_64 rng(5);
  std::normal_distribution<double> nd(0, 1);
  const int n = 600, cols = 7, k = 3;
  std::vector<double> truth(k * cols);
  for (double& v : truth) v = 2.5 * nd(rng);
  std::vector<SparseRow> x;
  std::vector<int> y;
  for (int i = 0; i < n; ++i) {
    SparseRow r;
    for (int j = 0; j < cols; ++j) r.emplace_back(j, static_cast<float>(nd(rng)));
    int best = 0;
    double bz = -1e300;
    for (int c = 0; c < k; ++c) {
      double z = 0;
      for (const auto& [j, v] : r) z += truth[c * cols + j] * v;
      if (z > bz) bz = z, best = c;
    }
    x.push_back(r);
    y.push_back(best);
  }
  const auto w = train_softmax(x, y, k, cols, 300, 0.05, 0);
  int hit = 0;
  for (int i = 0; i < n; ++i) {
    int best = 0;
    double bz = -1e300;
    for (int c = 0; c < k; ++c) {
      double z = 0;
      for (const auto& [j, v] : x[i]) z += w[c * cols + j] * v;
      if (z > bz) bz = z, best = c;
    }
    hit += best == y[i];
  }
  EXPECT_GT(hit, 0.9 * n);  // chance is about a third
}

// Questions whose first words decide the answer's length (noisy within a class), prompt lengths
// independent of it.
std::vector<LengthSample> question_samples(int n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const char* kinds[] = {"when did", "list every", "explain how", "how many"};
  const int base[] = {4, 200, 70, 6};
  std::vector<LengthSample> v;
  for (int i = 0; i < n; ++i) {
    const int c = static_cast<int>(rng() % 4);
    LengthSample s;
    s.features.pipeline = "qa";
    s.features.text = std::string(kinds[c]) + " the w" + std::to_string(rng() % 50) + " of w" + std::to_string(rng() % 50);
    s.features.prompt_tokens = 50 + static_cast<int>(rng() % 400);
    s.features.max_tokens = 512;
    s.output_tokens = std::max(1, static_cast<int>(base[c] * (0.75 + 0.5 * (rng() % 1000) / 1000.0)));
    v.push_back(s);
  }
  return v;
}

TEST(LengthModel, LearnsQuestionWordsAndRanksBetterThanTheOnlineEstimate) {
  const auto train = question_samples(400, 1), test = question_samples(200, 2);
  LengthTrainOptions o;
  o.dim = 1024;
  auto m = LengthModel::train(train, o);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  OutputLengthPredictor online;
  for (const auto& s : train) online.observe(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens, s.output_tokens);
  std::vector<double> pred_new, pred_old, actual;
  for (const auto& s : test) {
    pred_new.push_back((*m)->remaining(s.features, 0));
    pred_old.push_back(online.predict(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens));
    actual.push_back(s.output_tokens);
  }
  const double tau_new = kendall_tau(pred_new, actual), tau_old = kendall_tau(pred_old, actual);
  EXPECT_GT(tau_new, 0.6);
  EXPECT_LT(std::abs(tau_old), 0.2) << "prompt length says nothing about these lengths";
  EXPECT_GT(range_accuracy(pred_new, actual, o.edges), 0.5);
  // The bucket of the most probable range is the right one for each kind.
  const auto p = (*m)->probabilities({"qa", "list every the w1 of w2", 100, 512});
  EXPECT_EQ(std::max_element(p.begin(), p.end()) - p.begin(), (*m)->bucket_of(200));
}

TEST(LengthModel, RemainingLengthIsRevisedAsDecodingProceeds) {
  // One feature vector, half the runs 5 tokens long and half 200: at admission the expectation is
  // in between; once a run passes the short range it is expected to be long; near its end, short.
  std::vector<LengthSample> v;
  for (int i = 0; i < 200; ++i) {
    LengthSample s;
    s.features = {"p", "tell me", 40, 1000};
    s.output_tokens = i % 2 ? 5 : 200;
    v.push_back(s);
  }
  LengthTrainOptions o;
  o.dim = 64;
  auto m = LengthModel::train(v, o);
  ASSERT_TRUE(m.ok());
  const LengthFeatures f{"p", "tell me", 40, 1000};
  const double r0 = (*m)->remaining(f, 0), r10 = (*m)->remaining(f, 10), r150 = (*m)->remaining(f, 150);
  EXPECT_NEAR(r0, 0.5 * 5 + 0.5 * 200, 15);
  EXPECT_NEAR(r10, 190, 5);
  EXPECT_GT(r10, r0);
  EXPECT_LT(r150, r10);
  // At the longest length seen only the (improbable) longer ranges are left.
  EXPECT_LT((*m)->remaining(f, 199), 5);
  // Never more than max_tokens allows.
  EXPECT_LE((*m)->remaining({"p", "tell me", 40, 30}, 10), 20);
}

TEST(LengthModel, FileRoundTripAndErrors) {
  auto m = LengthModel::train(question_samples(100, 3), LengthTrainOptions{.dim = 32});
  ASSERT_TRUE(m.ok());
  auto back = LengthModel::parse((*m)->serialize());
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  const LengthFeatures f{"qa", "explain how the w3 works", 120, 512};
  const auto a = (*m)->probabilities(f), b = (*back)->probabilities(f);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  std::string text = (*m)->serialize();
  text.replace(text.find("edges 4 8"), 9, "edges 8 4");
  auto bad = LengthModel::parse(text);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 3"), std::string::npos) << bad.status().message();
  EXPECT_FALSE(LengthModel::parse("ragd-length-model 2\n").ok());
  EXPECT_FALSE(LengthModel::train({}, {}).ok());
}

TEST(LengthLog, LinesRoundTripAndBadLinesNameTheirLine) {
  LengthSample s;
  s.features = {"qa", "say \"hi\"\nthen list \\ things ✓", 17, 256};
  s.output_tokens = 42;
  s.finish_reason = "stop";
  const std::string log = length_log_line(s) + "\n\n" + length_log_line(s) + "\n";
  auto got = parse_length_log(log, "runs.jsonl");
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), 2u);
  EXPECT_EQ((*got)[1].features.text, s.features.text);
  EXPECT_EQ((*got)[1].features.prompt_tokens, 17);
  EXPECT_EQ((*got)[1].features.max_tokens, 256);
  EXPECT_EQ((*got)[1].output_tokens, 42);
  EXPECT_EQ((*got)[1].finish_reason, "stop");
  auto bad = parse_length_log(log + "{\"prompt_tokens\": 3, \"max_tokens\": 9}\n", "runs.jsonl");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "runs.jsonl:4: missing output_tokens");
}

TEST(LengthQuality, KendallTauAndRangeAccuracy) {
  EXPECT_NEAR(kendall_tau({1, 2, 3, 4}, {1, 3, 2, 4}), 4.0 / 6.0, 1e-12);
  EXPECT_NEAR(kendall_tau({1, 2, 2, 3}, {1, 2, 3, 3}), 0.8, 1e-12);  // tau-b with ties (scipy: 0.8)
  EXPECT_NEAR(kendall_tau({4, 3, 2, 1}, {1, 2, 3, 4}), -1.0, 1e-12);
  EXPECT_EQ(kendall_tau({1, 1, 1}, {1, 2, 3}), 0.0);
  EXPECT_NEAR(range_accuracy({3, 9, 100}, {4, 30, 120}, {4, 8, 16, 32, 64, 128}), 2.0 / 3.0, 1e-12);
}

}  // namespace
}  // namespace ragd::pipelines
