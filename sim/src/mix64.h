// splitmix64's finalizer: a 64-bit bijection whose outputs look independent for nearby inputs (the
// simulator's hash routing and its seeded noise draws).
#pragma once

#include <cstdint>

namespace ragd::sim {

inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}

}  // namespace ragd::sim
