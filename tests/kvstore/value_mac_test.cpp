// ValueMac: seals verify under the same secret and context, for both algorithms and odd sizes; any
// change to the envelope, the payload or the context, another secret, a truncated or missing
// envelope are refused; GMAC nonces are fresh per seal.
#include "ragd/kvstore/value_mac.h"

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace ragd::kvstore {
namespace {

std::vector<std::byte> random_bytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<std::byte> v(n);
  for (auto& b : v) b = static_cast<std::byte>(rng() & 0xff);
  return v;
}

std::span<const std::byte> env_of(const std::string& e) { return {reinterpret_cast<const std::byte*>(e.data()), e.size()}; }

class ValueMacTest : public ::testing::TestWithParam<MacAlgorithm> {};

TEST_P(ValueMacTest, SealsVerifyAndAnyChangeIsRefused) {
  auto mac = ValueMac::from_secret("0123456789abcdef0123456789abcdef", GetParam());
  ASSERT_TRUE(mac.ok()) << mac.status().to_string();
  std::mt19937 rng(7);
  for (size_t n : {size_t{0}, size_t{1}, size_t{7}, size_t{33}, size_t{129}, size_t{65537}, size_t{1} << 20}) {
    SCOPED_TRACE(n);
    const auto payload = random_bytes(n, static_cast<uint32_t>(n) + 1);
    const std::string ctx = "ragd:kv:{00ff}:0";
    const std::string env = mac->seal(ctx, payload);
    ASSERT_EQ(env.size(), ValueMac::kEnvelopeBytes);
    EXPECT_TRUE(mac->verify(ctx, env_of(env), payload).ok());
    // Another context (the value moved to another key).
    EXPECT_EQ(mac->verify("ragd:kv:{00fe}:0", env_of(env), payload).code(), StatusCode::kUnauthenticated);
    // Every byte of the envelope matters (a flipped bit in each position in turn).
    for (size_t i = 0; i < env.size(); ++i) {
      std::string bad = env;
      bad[i] = static_cast<char>(bad[i] ^ (1 << (i % 8)));
      EXPECT_FALSE(mac->verify(ctx, env_of(bad), payload).ok()) << "envelope byte " << i;
    }
    // A flipped bit in the payload at random positions, and a payload one byte shorter or longer.
    for (int t = 0; t < 16 && n > 0; ++t) {
      auto bad = payload;
      const size_t at = rng() % n;
      bad[at] ^= std::byte{static_cast<uint8_t>(1u << (rng() % 8))};
      EXPECT_FALSE(mac->verify(ctx, env_of(env), bad).ok()) << "payload byte " << at;
    }
    if (n > 0) EXPECT_FALSE(mac->verify(ctx, env_of(env), std::span(payload).first(n - 1)).ok());
    auto longer = payload;
    longer.push_back(std::byte{0});
    EXPECT_FALSE(mac->verify(ctx, env_of(env), longer).ok());
    // Truncated or missing envelope.
    EXPECT_FALSE(mac->verify(ctx, env_of(env).first(ValueMac::kEnvelopeBytes - 1), payload).ok());
    EXPECT_FALSE(mac->verify(ctx, {}, payload).ok());
  }
}

TEST_P(ValueMacTest, AnotherSecretOrAlgorithmIsRefused) {
  auto a = ValueMac::from_secret("fleet secret number one, long enough", GetParam());
  auto b = ValueMac::from_secret("fleet secret number two, long enough", GetParam());
  const MacAlgorithm other =
      GetParam() == MacAlgorithm::kGmacAes256 ? MacAlgorithm::kHmacSha256 : MacAlgorithm::kGmacAes256;
  auto c = ValueMac::from_secret("fleet secret number one, long enough", other);
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());
  const auto payload = random_bytes(4099, 3);
  const std::string env = a->seal("k", payload);
  EXPECT_TRUE(a->verify("k", env_of(env), payload).ok());
  const Status sb = b->verify("k", env_of(env), payload);
  EXPECT_EQ(sb.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(sb.message().find("MAC mismatch"), std::string::npos) << sb.message();
  const Status sc = c->verify("k", env_of(env), payload);
  EXPECT_EQ(sc.code(), StatusCode::kUnauthenticated);
  EXPECT_NE(sc.message().find("algorithm"), std::string::npos) << sc.message();
}

INSTANTIATE_TEST_SUITE_P(Algorithms, ValueMacTest,
                         ::testing::Values(MacAlgorithm::kGmacAes256, MacAlgorithm::kHmacSha256),
                         [](const auto& info) { return std::string(enum_name(info.param)) == "gmac-aes256" ? "Gmac" : "Hmac"; });

TEST(ValueMac, GmacNoncesAreFreshAndShortSecretsRefused) {
  auto mac = ValueMac::from_secret("0123456789abcdef", MacAlgorithm::kGmacAes256);
  ASSERT_TRUE(mac.ok());
  const auto payload = random_bytes(100, 1);
  const std::string e1 = mac->seal("k", payload), e2 = mac->seal("k", payload);
  EXPECT_NE(e1.substr(8, 12), e2.substr(8, 12)) << "two seals of the same value share a nonce";
  EXPECT_NE(e1, e2);
  EXPECT_TRUE(mac->verify("k", env_of(e2), payload).ok());
  auto shorter = ValueMac::from_secret("0123456789abcde", MacAlgorithm::kGmacAes256);
  EXPECT_EQ(shorter.status().code(), StatusCode::kInvalidArgument);
  // HMAC has no nonce: the same value seals to the same envelope.
  auto h = ValueMac::from_secret("0123456789abcdef", MacAlgorithm::kHmacSha256);
  EXPECT_EQ(h->seal("k", payload), h->seal("k", payload));
}

}  // namespace
}  // namespace ragd::kvstore
