#include "speculation_cache.h"

#include <algorithm>

namespace ragd::pipelines {

void SpeculationCache::add(const ContextDoc& doc, std::vector<float> vec, int64_t list) {
  Entry& e = entries_[doc.chunk_id];
  e.doc = doc;
  e.vec = std::move(vec);
  e.list = list;
  e.stamp = ++clock_;
  while (entries_.size() > capacity_) {
    auto oldest = std::min_element(entries_.begin(), entries_.end(),
                                   [](const auto& a, const auto& b) { return a.second.stamp < b.second.stamp; });
    entries_.erase(oldest);
  }
}

std::vector<ContextDoc> SpeculationCache::top_k(std::span<const float> query, int k, std::span<const int64_t> probed) {
  std::vector<std::pair<float, Entry*>> scored;
  scored.reserve(entries_.size());
  for (auto& [id, e] : entries_) {
    if (e.vec.size() != query.size()) continue;
    if (!probed.empty() && std::find(probed.begin(), probed.end(), e.list) == probed.end()) continue;
    float s = 0;
    for (size_t i = 0; i < query.size(); ++i) s += query[i] * e.vec[i];
    scored.emplace_back(s, &e);
  }
  const size_t n = std::min(scored.size(), static_cast<size_t>(std::max(k, 0)));
  std::partial_sort(scored.begin(), scored.begin() + n, scored.end(), [](const auto& a, const auto& b) {
    if (a.first != b.first) return a.first > b.first;
    return a.second->doc.chunk_id < b.second->doc.chunk_id;
  });
  std::vector<ContextDoc> out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    scored[i].second->stamp = ++clock_;
    out.push_back(scored[i].second->doc);
    out.back().source.score = scored[i].first;
  }
  return out;
}

}  // namespace ragd::pipelines
