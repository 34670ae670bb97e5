// Eviction policies of the knowledge tree and the prefill-cost model that PGDSF uses.
//
// Priorities (the lowest evictable leaf goes first; one clock per tier, set to the priority of
// the last victim of that tier, so old entries age out):
//   lru    last access tick
//   lfu    access count, ties by last access
//   gdsf   clock + frequency / size            (classic GreedyDual-Size-Frequency, cost 1)
//   pgdsf  clock + frequency * cost / size     (RAGCache): cost = T(cached, new), the prefill time
//          the node saves given the tokens of its ancestors are cached, from a profiled model.
// size is in KiB.
//
// Thread-safety: PrefillCostModel is immutable after construction (safe to share); the policy
// functions are pure.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/status.h"

namespace ragd::kvstore {

enum class EvictionPolicy : uint8_t { kLru, kLfu, kGdsf, kPgdsf };
inline constexpr auto kEvictionPolicyNames = make_enum_names<EvictionPolicy>(
    "eviction", {{EvictionPolicy::kPgdsf, "pgdsf"},
                 {EvictionPolicy::kLru, "lru"},
                 {EvictionPolicy::kLfu, "lfu"},
                 {EvictionPolicy::kGdsf, "gdsf"}});
constexpr const auto& ragd_enum_names(EvictionPolicy) { return kEvictionPolicyNames; }
static_assert(enum_names_valid(kEvictionPolicyNames));
inline std::string_view eviction_policy_name(EvictionPolicy p) { return enum_name(p); }
// "pgdsf" | "lru" | "lfu" | "gdsf"; InvalidArgument listing them otherwise.
inline Result<EvictionPolicy> parse_eviction_policy(std::string_view name) { return parse_enum<EvictionPolicy>(name); }

// T(cached, new): prefill time (seconds) of `new` tokens appended to `cached` tokens already in
// KV. Bilinear interpolation over a profiled grid; linear extrapolation in `new` and clamping in
// `cached` outside it. Without a profile an analytic shape is used:
//   T = new * (1 + (cached + new / 2) / 4096) * 1e-4
// (a per-token linear cost plus an attention term growing with context).
class PrefillCostModel {
 public:
  PrefillCostModel() = default;
  // grid_cached, grid_new: strictly increasing, >= 2 points each (new > 0);
  // seconds: [grid_cached.size()][grid_new.size()] row-major, positive.
  static Result<PrefillCostModel> from_grid(std::vector<int> grid_cached, std::vector<int> grid_new,
                                            std::vector<double> seconds);
  // Profiles by calling measure(cached, new) -> seconds on every grid point (e.g. timing the
  // running engine's prefill). Errors from measure are returned.
  static Result<PrefillCostModel> profile(const std::function<Result<double>(int cached, int fresh)>& measure,
                                          std::vector<int> grid_cached, std::vector<int> grid_new);

  double seconds(double cached, double fresh) const;
  bool profiled() const { return !seconds_.empty(); }
  std::string to_json() const;

 private:
  std::vector<int> grid_cached_, grid_new_;
  std::vector<double> seconds_;
};

}  // namespace ragd::kvstore
