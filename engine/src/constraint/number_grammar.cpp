#include "number_grammar.h"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

namespace ragd::engine::constraint {

namespace {

// Equal-length digit strings x <= y: every digit string of that length in [x, y].
Frag same_length(NfaBuilder& b, const std::string& x, const std::string& y) {
  if (x.empty()) return b.empty();
  const size_t rest = x.size() - 1;
  const std::string xs = x.substr(1), ys = y.substr(1);
  auto any_digits = [&]() { return b.repeat([&]() { return b.byte_range('0', '9'); }, static_cast<int>(rest), static_cast<int>(rest)); };
  if (x[0] == y[0]) return b.seq({b.literal(std::string(1, x[0])), same_length(b, xs, ys)});
  const bool x_low = xs == std::string(rest, '0'), y_high = ys == std::string(rest, '9');
  std::vector<Frag> alts;
  char from = x[0], to = y[0];
  if (!x_low) {
    alts.push_back(b.seq({b.literal(std::string(1, x[0])), same_length(b, xs, std::string(rest, '9'))}));
    ++from;
  }
  if (!y_high) --to;
  if (from <= to) alts.push_back(b.seq({b.byte_range(static_cast<uint8_t>(from), static_cast<uint8_t>(to)), any_digits()}));
  if (!y_high) alts.push_back(b.seq({b.literal(std::string(1, y[0])), same_length(b, std::string(rest, '0'), ys)}));
  return b.alt(alts);
}

// Non-negative integers in [lo, hi], 0 <= lo <= hi.
Frag nonneg_range(NfaBuilder& b, int64_t lo, int64_t hi) {
  std::vector<Frag> alts;
  const size_t lo_len = std::to_string(lo).size(), hi_len = std::to_string(hi).size();
  int64_t pow = 1;
  for (size_t k = 1; k < lo_len; ++k) pow *= 10;
  for (size_t len = lo_len; len <= hi_len; ++len, pow *= 10) {
    const int64_t a = std::max(lo, len == 1 ? int64_t{0} : pow);
    const int64_t z = std::min(hi, pow * 10 - 1);
    if (a <= z) alts.push_back(same_length(b, std::to_string(a), std::to_string(z)));
  }
  return alts.size() == 1 ? alts[0] : b.alt(alts);
}

// A fraction whose last digit is not 0 (so n.f > n): "." [0-9]{0,k-1} [1-9].
Frag fraction(NfaBuilder& b) {
  return b.seq({b.literal("."), b.repeat([&]() { return b.byte_range('0', '9'); }, 0, kMaxFractionDigits - 1),
                b.byte_range('1', '9')});
}

int64_t clamp_floor(double v) { return static_cast<int64_t>(std::floor(std::clamp(v, -1e15, 1e15))); }
int64_t clamp_ceil(double v) { return static_cast<int64_t>(std::ceil(std::clamp(v, -1e15, 1e15))); }

// Magnitudes in the interval from a (exclusive or not) to z (exclusive or not), 0 <= a <= z:
// integers n (n >= bare_min), and unless `integer` n.f with a non-zero fraction. Sound bounds:
//   n alone: n >= a (n > a when exclusive), n <= z (n < z when exclusive);
//   n.f:     n >= a when a is an integer (n.f > n >= a), else n >= ceil(a); n + 1 <= z.
std::optional<Frag> magnitude_interval(NfaBuilder& b, double a, bool a_excl, double z, bool z_excl, int64_t bare_min,
                                       bool integer) {
  const bool a_int = std::floor(a) == a, z_int = std::floor(z) == z;
  const int64_t bare_lo = std::max(a_int && a_excl ? clamp_floor(a) + 1 : clamp_ceil(a), bare_min);
  const int64_t bare_hi = std::min(z_int && z_excl ? clamp_floor(z) - 1 : clamp_floor(z), kMaxMagnitude);
  const int64_t frac_lo = clamp_ceil(a);
  const int64_t frac_hi = integer ? -1 : std::min(clamp_floor(z) - 1, kMaxMagnitude);
  std::vector<Frag> alts;
  if (bare_lo <= bare_hi) alts.push_back(nonneg_range(b, bare_lo, bare_hi));
  if (frac_lo <= frac_hi) alts.push_back(b.seq({nonneg_range(b, frac_lo, frac_hi), fraction(b)}));
  if (alts.empty()) return std::nullopt;
  return alts.size() == 1 ? alts[0] : b.alt(alts);
}

}  // namespace

Frag emit_int_range(NfaBuilder& b, int64_t lo, int64_t hi) {
  lo = std::max(lo, -kMaxMagnitude);
  hi = std::min(hi, kMaxMagnitude);
  if (lo > hi) throw GrammarError("no integer within minimum/maximum");
  std::vector<Frag> alts;
  if (hi >= 0) alts.push_back(nonneg_range(b, std::max<int64_t>(lo, 0), hi));
  if (lo < 0) alts.push_back(b.seq({b.literal("-"), nonneg_range(b, std::max<int64_t>(1, hi < 0 ? -hi : 1), -lo)}));
  return alts.size() == 1 ? alts[0] : b.alt(alts);
}

namespace {
// Unbounded magnitudes: 0 | [1-9][0-9]{0,14} (no leading zeros, at most 15 digits).
Frag any_magnitude(NfaBuilder& b, bool allow_zero) {
  Frag nonzero = b.seq({b.byte_range('1', '9'), b.repeat([&]() { return b.byte_range('0', '9'); }, 0, 14)});
  return allow_zero ? b.alt({b.literal("0"), nonzero}) : nonzero;
}
}  // namespace

Frag emit_number(NfaBuilder& b, const NumberBounds& nb, bool integer) {
  if (!nb.min && !nb.max) {
    // No bounds: the short form. Negative: "-" then a non-zero integer part, or "0" with a fraction.
    if (integer) return b.alt({any_magnitude(b, true), b.seq({b.literal("-"), any_magnitude(b, false)})});
    Frag neg = b.seq({b.literal("-"), b.alt({b.seq({any_magnitude(b, false), b.opt(fraction(b))}),
                                             b.seq({b.literal("0"), fraction(b)})})});
    return b.alt({b.seq({any_magnitude(b, true), b.opt(fraction(b))}), neg});
  }
  const double big = static_cast<double>(kMaxMagnitude);
  const double lo = nb.min ? std::max(*nb.min, -big) : -big;
  const double hi = nb.max ? std::min(*nb.max, big) : big;
  const bool lo_excl = nb.min && nb.min_exclusive && *nb.min >= -big;
  const bool hi_excl = nb.max && nb.max_exclusive && *nb.max <= big;
  std::vector<Frag> alts;
  // Non-negative values: magnitudes in [max(lo, 0), hi].
  if (hi > 0 || (hi == 0 && !hi_excl)) {
    const bool a_excl = lo >= 0 && lo_excl;
    if (auto f = magnitude_interval(b, std::max(lo, 0.0), a_excl, hi, hi_excl, 0, integer)) alts.push_back(*f);
  }
  // Negative values -m: m in (max(-hi, 0), -lo]; never "-0" (an integer part 0 only with a fraction).
  if (lo < 0) {
    const double a = hi < 0 ? -hi : 0.0;
    const bool a_excl = hi < 0 ? hi_excl : true;
    if (auto f = magnitude_interval(b, a, a_excl, -lo, lo_excl, 1, integer)) alts.push_back(b.seq({b.literal("-"), *f}));
  }
  if (alts.empty())
    throw GrammarError(fmt::format("no {} within minimum/maximum has the supported encoding (at most {} fraction digits)",
                                   integer ? "integer" : "number", kMaxFractionDigits));
  return alts.size() == 1 ? alts[0] : b.alt(alts);
}

}  // namespace ragd::engine::constraint
