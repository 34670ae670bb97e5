#include "eval_load.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

namespace ragd::tools {

EvalAdapt adapt_answer(const pipelines::AdaptReport& r) {
  EvalAdapt a;
  a.choice = r.choice;
  a.reason = r.reason;
  a.signals = r.signals.features();
  a.ahead = r.load.ahead;
  a.work_ahead = r.load.work_ahead_tokens;
  return a;
}

std::vector<std::optional<Result<EvalAnswer>>> answer_all(size_t n, int workers,
                                                          const std::function<Result<EvalAnswer>(int, size_t)>& ask) {
  std::vector<std::optional<Result<EvalAnswer>>> out(n);
  std::atomic<size_t> next{0};
  auto work = [&](int w) {
    for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) out[i].emplace(ask(w, i));
  };
  const int threads = std::max(1, std::min<int>(workers, static_cast<int>(n)));
  if (threads == 1) {
    work(0);
    return out;
  }
  std::vector<std::thread> pool;
  for (int w = 0; w < threads; ++w) pool.emplace_back(work, w);
  for (auto& t : pool) t.join();
  return out;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double rank = std::ceil(p / 100.0 * static_cast<double>(v.size()));
  const size_t i = static_cast<size_t>(std::clamp(rank, 1.0, static_cast<double>(v.size()))) - 1;
  return v[i];
}

}  // namespace ragd::tools
