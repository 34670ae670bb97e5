// Shared helpers for the kvstore tests: deterministic, never-zero KV data and temp directories.
#pragma once

#include <cmath>
#include <cstring>
#include <functional>
#include <cstdint>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include "ragd/common/check.h"
#include "ragd/kvstore/segment.h"

namespace ragd::kvstore::testing {

inline KvFormat test_format(int layers = 3, int heads = 2, int dim = 5, uint64_t model = 0x5eed) {
  KvFormat f;
  f.model_fingerprint = {model, model * 31 + 7};
  f.num_layers = layers;
  f.num_kv_heads = heads;
  f.head_dim = dim;
  return f;
}

// K and V for `tokens` tokens of document `doc`: [layers][tokens, heads, dim], seeded, non-zero.
struct KvBlob {
  std::vector<float> k, v;
  int tokens = 0;
  KvData data(int first_position = 0) const { return {tokens, first_position, k.data(), v.data()}; }
};

inline KvBlob make_kv(const KvFormat& f, int tokens, uint64_t doc) {
  KvBlob b;
  b.tokens = tokens;
  const size_t n = static_cast<size_t>(f.num_layers) * tokens * f.token_elems();
  b.k.resize(n);
  b.v.resize(n);
  std::mt19937_64 rng(doc * 0x9E3779B97F4A7C15ULL + 1);
  std::uniform_real_distribution<float> u(0.25f, 2.0f);
  for (size_t i = 0; i < n; ++i) {
    b.k[i] = (i & 1) ? u(rng) : -u(rng);
    b.v[i] = u(rng);
  }
  return b;
}

inline std::vector<int32_t> doc_tokens(uint64_t doc, int n) {
  std::vector<int32_t> t(n);
  for (int i = 0; i < n; ++i) t[i] = static_cast<int32_t>((doc * 7919 + i * 104729) % 32000);
  return t;
}

inline Hash128 dk(uint64_t doc) {
  auto t = doc_tokens(doc, 8);
  return doc_key(t);
}

class TempDir {
 public:
  TempDir() {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("ragd_kv_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter++) + "_" + std::to_string(std::random_device{}()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string str() const { return path_.string(); }
  std::string sub(const std::string& s) const { return (path_ / s).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace ragd::kvstore::testing
