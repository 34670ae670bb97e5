// ragctl length-train --log RUNS.jsonl --out HEAD: fits the output-length head that the srtf
// scheduler reads (runtime.length_model), from length logs the daemon wrote (runtime.length_log,
// one JSON line per finished run). Before fitting on every run it reports, on a held-out share of
// the runs (a seeded shuffle), how well the head and today's sjf estimate (per-pipeline mean +
// regression on prompt length, replayed online: predict each held-out run, then observe it) rank
// and size the true lengths: Kendall's tau, range accuracy (the head's ranges), mean absolute error.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/common/text_file.h"
#include "ragd/pipelines/length_log.h"
#include "ragd/pipelines/length_model.h"
#include "ragd/pipelines/length_predictor.h"
#include "ragd/pipelines/length_quality.h"

namespace ragd::tools {
namespace {

struct LengthTrainArgs {
  std::vector<std::string> logs;
  std::string out;
  std::string edges;
  uint32_t dim = pipelines::LengthTrainOptions{}.dim;
  int iterations = pipelines::LengthTrainOptions{}.iterations;
  double learning_rate = pipelines::LengthTrainOptions{}.learning_rate;
  double l2 = pipelines::LengthTrainOptions{}.l2;
  double holdout = 0.2;
  uint64_t seed = 1;
};

struct Quality {
  double tau = 0, range_acc = 0, mae = 0;
};

Quality quality_of(const std::vector<double>& pred, const std::vector<double>& actual, const std::vector<int>& edges) {
  return {pipelines::kendall_tau(pred, actual), pipelines::range_accuracy(pred, actual, edges),
          pipelines::mean_abs_error(pred, actual)};
}

int run_length_train(const LengthTrainArgs& a) {
  pipelines::LengthTrainOptions opts;
  opts.dim = a.dim;
  opts.iterations = a.iterations;
  opts.learning_rate = a.learning_rate;
  opts.l2 = a.l2;
  if (!a.edges.empty()) {
    opts.edges.clear();
    std::stringstream in(a.edges);
    for (std::string e; std::getline(in, e, ',');) {
      try {
        opts.edges.push_back(std::stoi(e));
      } catch (...) {
        std::fprintf(stderr, "ragctl length-train: --edges: '%s' is not an integer\n", e.c_str());
        return 2;
      }
    }
  }
  if (Status st = opts.validate(); !st.ok()) {
    std::fprintf(stderr, "ragctl length-train: %s\n", st.message().c_str());
    return 2;
  }
  if (!(a.holdout >= 0 && a.holdout < 1)) {
    std::fprintf(stderr, "ragctl length-train: --holdout must be in [0, 1)\n");
    return 2;
  }
  std::vector<pipelines::LengthSample> all;
  for (const std::string& path : a.logs) {
    auto text = read_text_file(path, "length log");
    if (!text.ok()) {
      std::fprintf(stderr, "ragctl length-train: %s\n", text.status().message().c_str());
      return 1;
    }
    auto samples = pipelines::parse_length_log(*text, path);
    if (!samples.ok()) {
      std::fprintf(stderr, "ragctl length-train: %s\n", samples.status().message().c_str());
      return 2;
    }
    all.insert(all.end(), samples->begin(), samples->end());
  }
  if (all.empty()) {
    std::fprintf(stderr, "ragctl length-train: the logs hold no runs\n");
    return 2;
  }
  std::printf("%zu runs from %zu log(s)\n", all.size(), a.logs.size());
  const size_t n_hold = static_cast<size_t>(a.holdout * all.size());
  if (n_hold >= 2 && n_hold < all.size()) {
    std::vector<pipelines::LengthSample> shuffled = all;
    std::mt19937_64 rng(a.seed);
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    const std::vector<pipelines::LengthSample> hold(shuffled.begin(), shuffled.begin() + n_hold),
        fit(shuffled.begin() + n_hold, shuffled.end());
    auto head = pipelines::LengthModel::train(fit, opts);
    if (!head.ok()) {
      std::fprintf(stderr, "ragctl length-train: %s\n", head.status().message().c_str());
      return 1;
    }
    pipelines::OutputLengthPredictor today;
    for (const auto& s : fit) today.observe(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens, s.output_tokens);
    std::vector<double> p_head, p_today, actual;
    for (const auto& s : hold) {
      p_head.push_back((*head)->remaining(s.features, 0));
      p_today.push_back(today.predict(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens));
      today.observe(s.features.pipeline, s.features.prompt_tokens, s.features.max_tokens, s.output_tokens);
      actual.push_back(std::max(1, s.output_tokens));
    }
    const Quality qh = quality_of(p_head, actual, opts.edges), qt = quality_of(p_today, actual, opts.edges);
    std::printf("held out %zu runs (fitted on %zu):\n", hold.size(), fit.size());
    std::printf("  %-28s  tau %6.3f  range accuracy %5.1f %%  MAE %7.1f tokens\n", "sjf estimate (today)", qt.tau,
                100 * qt.range_acc, qt.mae);
    std::printf("  %-28s  tau %6.3f  range accuracy %5.1f %%  MAE %7.1f tokens\n", "length head", qh.tau,
                100 * qh.range_acc, qh.mae);
  }
  auto head = pipelines::LengthModel::train(all, opts);
  if (!head.ok()) {
    std::fprintf(stderr, "ragctl length-train: %s\n", head.status().message().c_str());
    return 1;
  }
  if (Status st = (*head)->save(a.out); !st.ok()) {
    std::fprintf(stderr, "ragctl length-train: %s\n", st.message().c_str());
    return 1;
  }
  std::printf("wrote %s (%d length ranges, %u hashed features, fitted on all %zu runs); serve it with\n"
              "  [runtime] scheduler = \"srtf\", length_model = \"%s\"\n",
              a.out.c_str(), (*head)->buckets(), opts.dim, all.size(), a.out.c_str());
  return 0;
}

Registration reg("length-train",
                 "fit the output-length head of the srtf scheduler (runtime.length_model) on length logs "
                 "(runtime.length_log); reports held-out Kendall's tau and range accuracy against today's sjf estimate",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<LengthTrainArgs>();
                   sub.add_option("--log", a->logs, "length log(s): one JSON line per finished run")->required();
                   sub.add_option("--out", a->out, "model file to write")->required();
                   sub.add_option("--edges", a->edges, "length-range upper edges, ascending (default 4,8,16,32,64,128,256,512)");
                   sub.add_option("--dim", a->dim, "hashed feature slots (default 4096)");
                   sub.add_option("--iterations", a->iterations, "full-batch Adam steps (default 300)");
                   sub.add_option("--lr", a->learning_rate, "Adam step size (default 0.05)");
                   sub.add_option("--l2", a->l2, "L2 penalty (default 1e-4)");
                   sub.add_option("--holdout", a->holdout, "share of the runs held out for the report (default 0.2; 0 = none)");
                   sub.add_option("--seed", a->seed, "seed of the held-out split (default 1)");
                   return [a]() { return run_length_train(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
