// The reuse strategy registry: one line per ReuseMode.
#include "reuse_strategy.h"

#include <array>
#include <utility>

#include "ragd/common/check.h"

namespace ragd::pipelines {

namespace {

using ReuseFactory = std::unique_ptr<ReuseStrategy> (*)();

constexpr std::pair<ReuseMode, ReuseFactory> kRegistry[] = {
    {ReuseMode::kNone, &make_no_reuse},
    {ReuseMode::kPrefix, &make_prefix_reuse},
    {ReuseMode::kKnowledgeTree, &make_knowledge_tree_reuse},
    {ReuseMode::kCacheBlend, &make_cacheblend_reuse},
    {ReuseMode::kEpic, &make_epic_reuse},
    {ReuseMode::kAuto, &make_auto_reuse},
};
static_assert(std::size(kRegistry) == kNumReuseModes, "every reuse mode has one strategy");

}  // namespace

std::unique_ptr<ReuseStrategy> make_reuse_strategy(ReuseMode mode) {
  for (const auto& [m, make] : kRegistry)
    if (m == mode) return make();
  RAGD_CHECK(false) << "no reuse strategy registered for mode " << static_cast<int>(mode);
  return nullptr;
}

const ReuseStrategy& reuse_strategy_rules(ReuseMode mode) {
  static const std::array<std::unique_ptr<ReuseStrategy>, kNumReuseModes> rules = [] {
    std::array<std::unique_ptr<ReuseStrategy>, kNumReuseModes> a;
    for (int m = 0; m < kNumReuseModes; ++m) a[static_cast<size_t>(m)] = make_reuse_strategy(static_cast<ReuseMode>(m));
    return a;
  }();
  RAGD_CHECK(static_cast<size_t>(mode) < rules.size()) << "reuse mode " << static_cast<int>(mode) << " out of range";
  return *rules[static_cast<size_t>(mode)];
}

bool is_approximate(ReuseMode m) { return reuse_strategy_rules(m).approximate(); }

}  // namespace ragd::pipelines
