#include "output_ngrams.h"

#include <algorithm>
#include <functional>
#include <string>

namespace ragd::pipelines {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

uint64_t scope_hash(std::string_view scope) { return mix(std::hash<std::string_view>{}(scope), scope.size()); }

}  // namespace

uint64_t OutputNgrams::key(uint64_t scope_h, const int32_t* gram) {
  uint64_t h = scope_h;
  for (int i = 0; i < kOrder; ++i) h = mix(h, static_cast<uint32_t>(gram[i]));
  return h;
}

void OutputNgrams::add(std::string_view scope, std::span<const int32_t> output) {
  if (max_entries_ == 0 || output.size() <= static_cast<size_t>(kOrder)) return;
  const uint64_t sh = scope_hash(scope);
  for (size_t p = 0; p + kOrder < output.size(); ++p) {
    const uint64_t k = key(sh, output.data() + p);
    Entry e;
    e.len = static_cast<int>(std::min<size_t>(kSpan, output.size() - p - kOrder));
    std::copy_n(output.data() + p + kOrder, e.len, e.next);
    if (map_.insert_or_assign(k, e).second) order_.push_back(k);  // a new key: remembered in order
    while (map_.size() > max_entries_ && !order_.empty()) {
      map_.erase(order_.front());
      order_.pop_front();
    }
  }
}

std::vector<int32_t> OutputNgrams::draft(std::string_view scope, std::span<const int32_t> tokens, int k) const {
  if (k <= 0 || tokens.size() < static_cast<size_t>(kOrder) || map_.empty()) return {};
  const auto it = map_.find(key(scope_hash(scope), tokens.data() + tokens.size() - kOrder));
  if (it == map_.end()) return {};
  const int n = std::min(k, it->second.len);
  return std::vector<int32_t>(it->second.next, it->second.next + n);
}

}  // namespace ragd::pipelines
