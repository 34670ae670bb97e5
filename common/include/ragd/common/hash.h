// Deterministic content hashing (xxh3). Never process-seeded: keys survive restarts and are shared
// between replicas. Thread-safety: Hasher is a value type used by one thread; functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace ragd {

struct Hash128 {
  uint64_t lo = 0;
  uint64_t hi = 0;
  friend bool operator==(const Hash128&, const Hash128&) = default;
  friend auto operator<=>(const Hash128&, const Hash128&) = default;
  std::string to_hex() const;  // 32 lowercase hex digits, hi first
  static bool from_hex(std::string_view hex, Hash128* out);
};

struct Hash128Hasher {
  size_t operator()(const Hash128& h) const noexcept { return static_cast<size_t>(h.lo ^ (h.hi * 0x9E3779B97F4A7C15ULL)); }
};

uint64_t xxh3_64(const void* data, size_t n);
Hash128 xxh3_128(const void* data, size_t n);

// Streaming xxh3-128 over several fields. Integers are fed in little-endian byte order.
class Hasher128 {
 public:
  Hasher128();
  ~Hasher128();
  Hasher128(const Hasher128&) = delete;
  Hasher128& operator=(const Hasher128&) = delete;

  Hasher128& bytes(const void* data, size_t n);
  Hasher128& str(std::string_view s);  // length-prefixed, so ("ab","c") != ("a","bc")
  Hasher128& u64(uint64_t v);
  Hasher128& i32s(std::span<const int32_t> v);  // length-prefixed
  Hasher128& h128(const Hash128& h);
  Hash128 digest() const;

 private:
  void* state_;  // XXH3_state_t*
};

}  // namespace ragd
