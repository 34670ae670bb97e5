// A small MessagePack writer (https://github.com/msgpack/msgpack/blob/master/spec.md): what the KV
// events need (nil, bool, integers in their smallest encoding up to uint64, float64, str, bin, array
// and map headers). Write-only; decoding is the subscribers' business (tests decode with the
// reference Python msgpack). Debian's msgpack-cxx package cannot be installed next to our Boost, so
// ragd carries this instead.
//
// Thread-safety: a value type used by one thread.
#pragma once

#include <bit>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace ragd::kvstore {

class MsgpackWriter {
 public:
  MsgpackWriter& nil() { return byte(0xc0); }
  MsgpackWriter& boolean(bool v) { return byte(v ? 0xc3 : 0xc2); }

  MsgpackWriter& uint(uint64_t v) {
    if (v < 0x80) return byte(static_cast<uint8_t>(v));  // positive fixint
    if (v <= 0xff) return byte(0xcc).be(v, 1);
    if (v <= 0xffff) return byte(0xcd).be(v, 2);
    if (v <= 0xffffffffull) return byte(0xce).be(v, 4);
    return byte(0xcf).be(v, 8);
  }
  MsgpackWriter& integer(int64_t v) {
    if (v >= 0) return uint(static_cast<uint64_t>(v));
    if (v >= -32) return byte(static_cast<uint8_t>(static_cast<int8_t>(v)));  // negative fixint
    if (v >= INT8_MIN) return byte(0xd0).be(static_cast<uint64_t>(v), 1);
    if (v >= INT16_MIN) return byte(0xd1).be(static_cast<uint64_t>(v), 2);
    if (v >= INT32_MIN) return byte(0xd2).be(static_cast<uint64_t>(v), 4);
    return byte(0xd3).be(static_cast<uint64_t>(v), 8);
  }
  MsgpackWriter& float64(double v) { return byte(0xcb).be(std::bit_cast<uint64_t>(v), 8); }

  MsgpackWriter& str(std::string_view s) {
    const size_t n = s.size();
    if (n < 32) byte(static_cast<uint8_t>(0xa0 | n));
    else if (n <= 0xff) byte(0xd9).be(n, 1);
    else if (n <= 0xffff) byte(0xda).be(n, 2);
    else byte(0xdb).be(n, 4);
    out_.append(s.data(), n);
    return *this;
  }
  MsgpackWriter& bin(const void* data, size_t n) {
    if (n <= 0xff) byte(0xc4).be(n, 1);
    else if (n <= 0xffff) byte(0xc5).be(n, 2);
    else byte(0xc6).be(n, 4);
    out_.append(static_cast<const char*>(data), n);
    return *this;
  }
  MsgpackWriter& array(size_t n) {
    if (n < 16) return byte(static_cast<uint8_t>(0x90 | n));
    if (n <= 0xffff) return byte(0xdc).be(n, 2);
    return byte(0xdd).be(n, 4);
  }
  MsgpackWriter& map(size_t n) {
    if (n < 16) return byte(static_cast<uint8_t>(0x80 | n));
    if (n <= 0xffff) return byte(0xde).be(n, 2);
    return byte(0xdf).be(n, 4);
  }

  const std::string& data() const { return out_; }
  std::string take() { return std::move(out_); }
  void clear() { out_.clear(); }

 private:
  MsgpackWriter& byte(uint8_t b) {
    out_.push_back(static_cast<char>(b));
    return *this;
  }
  // The low `n` bytes of v, big-endian.
  MsgpackWriter& be(uint64_t v, int n) {
    for (int i = n - 1; i >= 0; --i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    return *this;
  }

  std::string out_;
};

}  // namespace ragd::kvstore
