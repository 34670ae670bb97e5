// ragctl eval's questions and answers, and asking them under load: N questions in flight at once
// (N clients), latency percentiles, and what an adaptive pipeline chose (usage.adapt).
// Thread-safety: value types; answer_all runs `ask` on its own worker threads.
#pragma once

#include <array>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/pipelines/adapt_policy.h"

namespace ragd::tools {

struct EvalQuestion {
  std::string id, question, answer, gold, kind;
};

// usage.adapt of an answer: the chosen candidate, why, the query's signals, the load it saw.
struct EvalAdapt {
  std::string choice, reason;
  std::array<double, pipelines::kNumAdaptSignals> signals{};  // QuerySignals::features() order
  int ahead = 0;
  double work_ahead = 0;  // usage.adapt.load.work_ahead_tokens
};
EvalAdapt adapt_answer(const pipelines::AdaptReport& r);

struct EvalAnswer {
  std::string text;
  std::vector<std::string> sources;  // doc ids, in prompt order
  int prompt_tokens = 0, reused_tokens = 0;
  double ttft_ms = 0;
  bool approximate = false;  // blended KV was used (cacheblend / epic)
  std::optional<EvalAdapt> adapt;
};

// Answers questions 0..n-1 with `workers` of them in flight: worker w calls ask(w, i) for the next
// unasked i until none is left. Results in question order.
std::vector<std::optional<Result<EvalAnswer>>> answer_all(size_t n, int workers,
                                                          const std::function<Result<EvalAnswer>(int, size_t)>& ask);

// The p-th percentile (0..100) by nearest rank; 0 for no values.
double percentile(std::vector<double> v, double p);

}  // namespace ragd::tools
