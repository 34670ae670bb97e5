// Binary record encoding for the document store: little-endian fixed integers, length-prefixed
// strings and arrays, and a trailing xxh3-64 checksum per record.
// Thread-safety: value types used by one thread.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/hash.h"

namespace ragd::retrieval {

class Encoder {
 public:
  void u8(uint8_t v) { b_.push_back(static_cast<char>(v)); }
  void u32(uint32_t v) { b_.append(reinterpret_cast<const char*>(&v), 4); }
  void u64(uint64_t v) { b_.append(reinterpret_cast<const char*>(&v), 8); }
  void str(std::string_view s) {
    u64(s.size());
    b_.append(s);
  }
  void strs(const std::vector<std::string>& v) {
    u64(v.size());
    for (const auto& x : v) str(x);
  }
  template <typename T>
  void array(const std::vector<T>& v) {
    u64(v.size());
    b_.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
  }
  // Appends the checksum and returns the record.
  std::string finish() {
    u64(xxh3_64(b_.data(), b_.size()));
    return std::move(b_);
  }

 private:
  std::string b_;
};

class Decoder {
 public:
  // Verifies the trailing checksum; ok() is false when it does not match.
  explicit Decoder(std::string_view rec) {
    if (rec.size() < 8) {
      ok_ = false;
      return;
    }
    uint64_t sum;
    std::memcpy(&sum, rec.data() + rec.size() - 8, 8);
    b_ = rec.substr(0, rec.size() - 8);
    ok_ = xxh3_64(b_.data(), b_.size()) == sum;
  }
  bool ok() const { return ok_; }
  bool done() const { return ok_ && pos_ == b_.size(); }
  uint8_t u8() { uint8_t v = 0; take(&v, 1); return v; }
  uint32_t u32() { uint32_t v = 0; take(&v, 4); return v; }
  uint64_t u64() { uint64_t v = 0; take(&v, 8); return v; }
  std::string str() {
    uint64_t n = u64();
    if (!ok_ || b_.size() - pos_ < n) { ok_ = false; return {}; }
    std::string s(b_.substr(pos_, n));
    pos_ += n;
    return s;
  }
  std::vector<std::string> strs() {
    uint64_t n = u64();
    std::vector<std::string> v;
    // each string takes at least its 8-byte length: a count beyond that is a bad record
    if (!ok_ || (b_.size() - pos_) / 8 < n) { ok_ = false; return v; }
    v.reserve(n);
    for (uint64_t i = 0; i < n && ok_; ++i) v.push_back(str());
    return v;
  }
  template <typename T>
  std::vector<T> array() {
    uint64_t n = u64();
    if (!ok_ || (b_.size() - pos_) / sizeof(T) < n) { ok_ = false; return {}; }
    std::vector<T> v(n);
    take(v.data(), n * sizeof(T));
    return v;
  }

 private:
  void take(void* dst, size_t n) {
    if (!ok_ || b_.size() - pos_ < n) { ok_ = false; return; }
    if (n > 0) std::memcpy(dst, b_.data() + pos_, n);  // an empty array has no buffer (dst may be null)
    pos_ += n;
  }
  std::string_view b_;
  size_t pos_ = 0;
  bool ok_ = true;
};

inline std::string be64(uint64_t v) {
  std::string k(8, '\0');
  for (int i = 7; i >= 0; --i) {
    k[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return k;
}
inline uint64_t from_be64(std::string_view k) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < k.size(); ++i) v = (v << 8) | static_cast<unsigned char>(k[i]);
  return v;
}

}  // namespace ragd::retrieval
