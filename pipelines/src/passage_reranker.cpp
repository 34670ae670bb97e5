#include "passage_reranker.h"

#include <algorithm>
#include <numeric>

namespace ragd::pipelines {

void keep_best_scored(const std::vector<double>& scores, int keep, std::vector<ContextDoc>* docs) {
  std::vector<size_t> order(scores.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return scores[a] > scores[b]; });
  std::vector<ContextDoc> kept;
  for (size_t i = 0; i < order.size() && static_cast<int>(kept.size()) < keep; ++i)
    kept.push_back(std::move((*docs)[order[i]]));
  *docs = std::move(kept);
}

}  // namespace ragd::pipelines
