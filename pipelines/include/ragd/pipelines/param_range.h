// Ranges of run parameters, each declared once: request bodies (run_params.h), pipeline specs
// (pipeline_spec.cpp) and the executor's own checks (BlendParams, IterativeParams) use them.
// Thread-safety: constants and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd::pipelines {

// An inclusive range of a numeric parameter; its message names the field.
struct ParamRange {
  double lo = 0, hi = 0;
  bool contains(double v) const { return v >= lo && v <= hi; }
  Status check(std::string_view field, double v) const;
};

// Ranges shared by request bodies, pipeline specs and the executor.
inline constexpr ParamRange kRangeRetrievalTopK{1, 64};
inline constexpr ParamRange kRangeMaxTokens{1, 1 << 20};
inline constexpr ParamRange kRangeTemperature{0.0, 2.0};
inline constexpr ParamRange kRangeTopP{1e-9, 1.0};
inline constexpr ParamRange kRangeSamplingTopK{0, 1 << 20};
inline constexpr ParamRange kRangeMinP{0.0, 1.0};
inline constexpr ParamRange kRangePresencePenalty{-2.0, 2.0};    // OpenAI's range; 0 = off
inline constexpr ParamRange kRangeFrequencyPenalty{-2.0, 2.0};   // OpenAI's range; 0 = off
inline constexpr ParamRange kRangeRepetitionPenalty{0.01, 10.0};  // 1 = off
inline constexpr ParamRange kRangeRecomputeRatio{0.0, 1.0};
inline constexpr ParamRange kRangeEpicK{0, 4096};
inline constexpr ParamRange kRangeRetrievalInterval{1, 4096};
inline constexpr ParamRange kRangeSloTtftMs{1e-9, 3600000};  // ms, > 0
inline constexpr ParamRange kRangeSpeculativeK{0, 16};  // draft tokens per decode step; 0 = off
inline constexpr ParamRange kRangeScoreRatio{0.0, 1.0};  // [retriever] min_score_ratio; 0 = off

// A bound or value as messages and docs write it: integers without a point, others without
// trailing zeros.
inline std::string param_number(double x) {
  if (x == static_cast<double>(static_cast<int64_t>(x))) return std::to_string(static_cast<int64_t>(x));
  std::string s = std::to_string(x);
  while (!s.empty() && s.back() == '0') s.pop_back();
  return s;
}

inline Status ParamRange::check(std::string_view field, double v) const {
  if (contains(v)) return Status::OK();
  return Status::InvalidArgument(std::string(field) + " must be in [" + param_number(lo) + ", " + param_number(hi) +
                                 "], got " + param_number(v));
}

}  // namespace ragd::pipelines
