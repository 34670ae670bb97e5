// `ragctl eval --fit-adapt`: fits an adaptive pipeline's profile on a question set. Every candidate
// of the pipeline's [adapt] table answers every question (forced by name); per candidate the fitted
// models (adapt_fit.h) are written as the profile beside the spec; the report says which signal
// predicts which candidate's right answers, and what the policy would have chosen on these
// questions (in-sample, idle).
// Thread-safety: run_fit_adapt calls `ask` from its caller's thread only.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "eval_load.h"

namespace ragd::tools {

struct FitAdaptArgs {
  std::string questions;      // the fit question file (informational: the profile's source)
  std::string pipeline;       // the adaptive pipeline's name
  std::string pipelines_dir;  // where its spec is (required); the profile goes beside it
  std::string out;            // "" = <pipelines_dir>/<spec stem>.profile
  std::vector<int> levels = {1};  // clients every candidate runs at (TTFT over all, quality on the first)
  // The TTFT quantile the profile's quantile model predicts (0..1; 0 = none: the SLO is then
  // checked against the mean model), fitted on every level's answers.
  double ttft_quantile = 0.99;
  // The quantile model also sees a mixed run at every level above 1 (question i forced to
  // candidate i mod the number of candidates): runs ahead of differing work, as under the policy.
  bool mixed_runs = true;
};

// Answers of every question i with candidate_of(i) forced, `concurrency` in flight, in question order.
using AskCandidate = std::function<std::vector<std::optional<Result<EvalAnswer>>>(
    const std::function<std::string(size_t)>& candidate_of, int concurrency)>;

// Exit status: 0 written, 1 runs failed, 2 bad arguments.
int run_fit_adapt(const FitAdaptArgs& args, const std::vector<EvalQuestion>& qs, const AskCandidate& ask);

}  // namespace ragd::tools
