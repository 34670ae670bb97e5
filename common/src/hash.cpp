#include "ragd/common/hash.h"

#include <bit>
#include <cstring>

#include <xxhash.h>

namespace ragd {

static_assert(std::endian::native == std::endian::little, "ragd assumes a little-endian host");

std::string Hash128::to_hex() const {
  static const char* kDigits = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[15 - i] = kDigits[(hi >> (4 * i)) & 0xF];
    s[31 - i] = kDigits[(lo >> (4 * i)) & 0xF];
  }
  return s;
}

bool Hash128::from_hex(std::string_view hex, Hash128* out) {
  if (hex.size() != 32) return false;
  uint64_t parts[2] = {0, 0};
  for (size_t i = 0; i < 32; ++i) {
    char c = hex[i];
    int d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    parts[i / 16] = (parts[i / 16] << 4) | static_cast<uint64_t>(d);
  }
  out->hi = parts[0];
  out->lo = parts[1];
  return true;
}

uint64_t xxh3_64(const void* data, size_t n) { return XXH3_64bits(data, n); }

Hash128 xxh3_128(const void* data, size_t n) {
  XXH128_hash_t h = XXH3_128bits(data, n);
  return {h.low64, h.high64};
}

Hasher128::Hasher128() : state_(XXH3_createState()) { XXH3_128bits_reset(static_cast<XXH3_state_t*>(state_)); }
Hasher128::~Hasher128() { XXH3_freeState(static_cast<XXH3_state_t*>(state_)); }

Hasher128& Hasher128::bytes(const void* data, size_t n) {
  XXH3_128bits_update(static_cast<XXH3_state_t*>(state_), data, n);
  return *this;
}
Hasher128& Hasher128::u64(uint64_t v) { return bytes(&v, sizeof v); }
Hasher128& Hasher128::str(std::string_view s) {
  u64(s.size());
  return bytes(s.data(), s.size());
}
Hasher128& Hasher128::i32s(std::span<const int32_t> v) {
  u64(v.size());
  return bytes(v.data(), v.size_bytes());
}
Hasher128& Hasher128::h128(const Hash128& h) {
  u64(h.lo);
  return u64(h.hi);
}
Hash128 Hasher128::digest() const {
  XXH128_hash_t h = XXH3_128bits_digest(static_cast<XXH3_state_t*>(state_));
  return {h.low64, h.high64};
}

}  // namespace ragd
