// JSON numbers within bounds, as NFA fragments. Integers are written without leading zeros and
// never as "-0"; numbers get an optional fraction of 1..kMaxFractionDigits digits whose last digit
// is not 0, and never an exponent. Bounds are clamped to ±kMaxMagnitude, so every number output is bounded in length.
// The sets are sound, not complete: every output lies within the bounds, but a number type with
// non-integer bounds may lose values near them (e.g. maximum 2.5 allows up to 1.999999 and 2).
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>

#include "nfa_builder.h"

namespace ragd::engine::constraint {

inline constexpr int64_t kMaxMagnitude = 999999999999999;  // 15 digits
inline constexpr int kMaxFractionDigits = 6;

struct NumberBounds {
  std::optional<double> min, max;
  bool min_exclusive = false, max_exclusive = false;
};

// Decimal integers in [lo, hi] (GrammarError when empty).
Frag emit_int_range(NfaBuilder& b, int64_t lo, int64_t hi);
// `integer`: JSON integers within the bounds; otherwise JSON numbers (GrammarError when the
// encoding above holds none).
Frag emit_number(NfaBuilder& b, const NumberBounds& nb, bool integer);

}  // namespace ragd::engine::constraint
