#include "ragd/common/hash.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace ragd {
namespace {

TEST(Hash, StreamingEqualsOneShotAndIsDeterministic) {
  std::mt19937 rng(7);
  std::vector<uint8_t> buf(1237);
  for (auto& b : buf) b = static_cast<uint8_t>(rng());
  Hasher128 h;
  h.bytes(buf.data(), 100).bytes(buf.data() + 100, buf.size() - 100);
  EXPECT_EQ(h.digest(), xxh3_128(buf.data(), buf.size()));
  // A known-answer check: xxh3-128 of the empty input is a published constant.
  Hash128 e = xxh3_128(nullptr, 0);
  EXPECT_EQ(e.to_hex(), "99aa06d3014798d86001c324468d497f");
}

TEST(Hash, FieldsAreLengthPrefixed) {
  Hasher128 a, b;
  a.str("ab").str("c");
  b.str("a").str("bc");
  EXPECT_NE(a.digest(), b.digest());
}

TEST(Hash, HexRoundTrip) {
  Hash128 h = xxh3_128("ragd", 4);
  Hash128 back;
  ASSERT_TRUE(Hash128::from_hex(h.to_hex(), &back));
  EXPECT_EQ(h, back);
  EXPECT_FALSE(Hash128::from_hex("zz", &back));
}

}  // namespace
}  // namespace ragd
