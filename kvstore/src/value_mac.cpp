#include "ragd/kvstore/value_mac.h"

#include <algorithm>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include "ragd/common/check.h"
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

namespace ragd::kvstore {

namespace {

constexpr char kMagic[4] = {'R', 'G', 'D', 'A'};
constexpr uint8_t kVersion = 1;
constexpr size_t kHeadBytes = 8 + 12;  // magic, version, algorithm, tag length, reserved, nonce
constexpr std::string_view kDomain = "ragd remote kv value v1";
constexpr std::string_view kKeyLabel = "ragd fleet secret -> remote kv mac key v1";

size_t tag_bytes(MacAlgorithm a) { return a == MacAlgorithm::kGmacAes256 ? 16 : 32; }

struct CipherCtxFree {
  void operator()(EVP_CIPHER_CTX* c) const { EVP_CIPHER_CTX_free(c); }
};
struct MacCtxFree {
  void operator()(EVP_MAC_CTX* c) const { EVP_MAC_CTX_free(c); }
};
struct MacFree {
  void operator()(EVP_MAC* m) const { EVP_MAC_free(m); }
};

// The fields before the payload, framed so that no two (context, payload) pairs feed the same bytes.
std::string frame(std::string_view context, std::span<const std::byte> head) {
  std::string f(kDomain);
  const uint32_t n = static_cast<uint32_t>(context.size());
  for (int i = 0; i < 4; ++i) f.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  f.append(context);
  f.append(reinterpret_cast<const char*>(head.data()), head.size());
  return f;
}

}  // namespace

Result<ValueMac> ValueMac::from_secret(std::string_view secret, MacAlgorithm alg) {
  if (secret.size() < kMinSecretBytes)
    return Status::InvalidArgument(fmt::format(
        "kvstore.remote secret: {} bytes; at least {} are needed (e.g. `openssl rand -hex 32 > fleet.key`)",
        secret.size(), kMinSecretBytes));
  ValueMac m;
  m.alg_ = alg;
  unsigned int len = 0;
  if (HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()), reinterpret_cast<const unsigned char*>(kKeyLabel.data()),
           kKeyLabel.size(), m.key_.data(), &len) == nullptr ||
      len != m.key_.size())
    return Status::Internal("kvstore.remote secret: key derivation failed in libcrypto");
  return m;
}

bool ValueMac::tag(std::string_view context, std::span<const std::byte> head, std::span<const std::byte> payload,
                   const uint8_t* nonce, uint8_t* out) const {
  const std::string pre = frame(context, head);
  // libcrypto takes int lengths: feed at most 1 GiB at a time.
  constexpr size_t kStep = size_t{1} << 30;
  if (alg_ == MacAlgorithm::kGmacAes256) {
    std::unique_ptr<EVP_CIPHER_CTX, CipherCtxFree> c(EVP_CIPHER_CTX_new());
    int n = 0;
    if (!c || EVP_EncryptInit_ex(c.get(), EVP_aes_256_gcm(), nullptr, key_.data(), nonce) != 1) return false;
    if (EVP_EncryptUpdate(c.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(pre.data()), static_cast<int>(pre.size())) != 1)
      return false;
    for (size_t at = 0; at < payload.size(); at += kStep) {
      const size_t len = std::min(kStep, payload.size() - at);
      if (EVP_EncryptUpdate(c.get(), nullptr, &n, reinterpret_cast<const unsigned char*>(payload.data()) + at, static_cast<int>(len)) != 1)
        return false;
    }
    if (EVP_EncryptFinal_ex(c.get(), nullptr, &n) != 1) return false;
    return EVP_CIPHER_CTX_ctrl(c.get(), EVP_CTRL_GCM_GET_TAG, 16, out) == 1;
  }
  std::unique_ptr<EVP_MAC, MacFree> mac(EVP_MAC_fetch(nullptr, "HMAC", nullptr));
  if (!mac) return false;
  std::unique_ptr<EVP_MAC_CTX, MacCtxFree> c(EVP_MAC_CTX_new(mac.get()));
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0), OSSL_PARAM_construct_end()};
  if (!c || EVP_MAC_init(c.get(), key_.data(), key_.size(), params) != 1) return false;
  if (EVP_MAC_update(c.get(), reinterpret_cast<const unsigned char*>(pre.data()), pre.size()) != 1) return false;
  if (EVP_MAC_update(c.get(), reinterpret_cast<const unsigned char*>(payload.data()), payload.size()) != 1) return false;
  size_t len = 0;
  return EVP_MAC_final(c.get(), out, &len, 32) == 1 && len == 32;
}

std::string ValueMac::seal(std::string_view context, std::span<const std::byte> payload) const {
  std::string env(kEnvelopeBytes, '\0');
  auto* e = reinterpret_cast<uint8_t*>(env.data());
  std::memcpy(e, kMagic, 4);
  e[4] = kVersion;
  e[5] = static_cast<uint8_t>(alg_);
  e[6] = static_cast<uint8_t>(tag_bytes(alg_));
  e[7] = 0;
  if (alg_ == MacAlgorithm::kGmacAes256) {
    // A fresh random nonce per value: GMAC's security rests on never repeating a nonce under one key.
    if (RAND_bytes(e + 8, 12) != 1) RAGD_CHECK(false) << "libcrypto's RAND_bytes failed";
  }
  const bool ok = tag(context, {reinterpret_cast<const std::byte*>(e), kHeadBytes}, payload, e + 8, e + kHeadBytes);
  RAGD_CHECK(ok) << "libcrypto failed to compute a MAC";
  return env;
}

bool ValueMac::looks_sealed(std::span<const std::byte> value) {
  return value.size() >= kEnvelopeBytes && std::memcmp(value.data(), kMagic, 4) == 0;
}

Status ValueMac::verify(std::string_view context, std::span<const std::byte> envelope,
                        std::span<const std::byte> payload) const {
  if (!looks_sealed(envelope))
    return Status::Unauthenticated("not a sealed value (no MAC envelope): written without the fleet secret, or not by ragd");
  const auto* e = reinterpret_cast<const uint8_t*>(envelope.data());
  if (e[4] != kVersion) return Status::Unauthenticated(fmt::format("MAC envelope version {} is not {}", e[4], kVersion));
  if (e[5] != static_cast<uint8_t>(alg_))
    return Status::Unauthenticated(fmt::format("value sealed with MAC algorithm {}, this replica uses {}", e[5],
                                               enum_name(alg_)));
  if (e[6] != tag_bytes(alg_) || e[7] != 0) return Status::Unauthenticated("malformed MAC envelope");
  uint8_t want[32] = {};
  if (!tag(context, envelope.first(kHeadBytes), payload, e + 8, want))
    return Status::Internal("libcrypto failed to compute a MAC");
  // The unused tail of the tag field must be zero too (nothing in the envelope goes unchecked).
  if (CRYPTO_memcmp(want, e + kHeadBytes, 32) != 0)
    return Status::Unauthenticated("MAC mismatch: the value was not written by a replica holding this fleet secret");
  return Status::OK();
}

}  // namespace ragd::kvstore
