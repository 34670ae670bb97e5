// Shared helpers for the kernel tests: seeded random data and paged-KV construction.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "ragd/kernels/attention.h"

namespace ragd::kernels::testing {

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// Max |a - b| / (1 + |b|) over the arrays (a mixed absolute / relative error).
inline double max_err(const float* a, const double* b, size_t n) {
  double e = 0.0;
  for (size_t i = 0; i < n; ++i) e = std::max(e, std::fabs(a[i] - b[i]) / (1.0 + std::fabs(b[i])));
  return e;
}

// Contiguous K/V [len, kv_heads, d] laid out in shuffled pages, unused slots filled with NaN so that
// a kernel reading past kv_len poisons its output.
struct PagedData {
  std::vector<float> k, v;
  std::vector<int32_t> table;
  PagedKv view;

  PagedData(const std::vector<float>& kc, const std::vector<float>& vc, int len, int kv_heads, int d,
            int block_size, uint32_t seed) {
    const int nblk = (len + block_size - 1) / block_size;
    const int total = nblk + 3;  // a few never-referenced blocks
    const size_t tok = static_cast<size_t>(kv_heads) * d;
    k.assign(static_cast<size_t>(total) * block_size * tok, std::numeric_limits<float>::quiet_NaN());
    v = k;
    std::vector<int32_t> ids(total);
    std::iota(ids.begin(), ids.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(ids.begin(), ids.end(), rng);
    table.assign(ids.begin(), ids.begin() + nblk);
    for (int j = 0; j < len; ++j) {
      const size_t dst = (static_cast<size_t>(table[j / block_size]) * block_size + j % block_size) * tok;
      std::copy_n(kc.data() + j * tok, tok, k.data() + dst);
      std::copy_n(vc.data() + j * tok, tok, v.data() + dst);
    }
    view.k = k.data();
    view.v = v.data();
    view.block_table = table.data();
    view.block_size = block_size;
    view.num_kv_heads = kv_heads;
    view.head_dim = d;
    view.kv_len = len;
  }
};

// Naive attention in double. q: [n_q, H, d]; K/V: [len, KVH, d]. out: [n_q, H, d]; lse: [n_q, H].
inline void ref_attention(const std::vector<float>& q, int n_q, int heads, const std::vector<float>& kc,
                          const std::vector<float>& vc, int len, int kv_heads, int d, double scale, bool causal,
                          int q_offset, std::vector<double>* out, std::vector<double>* lse) {
  out->assign(static_cast<size_t>(n_q) * heads * d, 0.0);
  lse->assign(static_cast<size_t>(n_q) * heads, -std::numeric_limits<double>::infinity());
  const int group = heads / kv_heads;
  for (int i = 0; i < n_q; ++i) {
    for (int h = 0; h < heads; ++h) {
      const int g = h / group;
      const int last = causal ? std::min(len - 1, i + q_offset) : len - 1;
      if (last < 0) continue;
      std::vector<double> s(last + 1);
      double m = -std::numeric_limits<double>::infinity();
      for (int j = 0; j <= last; ++j) {
        double acc = 0.0;
        for (int c = 0; c < d; ++c) {
          acc += static_cast<double>(q[(static_cast<size_t>(i) * heads + h) * d + c]) *
                 kc[(static_cast<size_t>(j) * kv_heads + g) * d + c];
        }
        s[j] = acc * scale;
        m = std::max(m, s[j]);
      }
      double sum = 0.0;
      for (double& x : s) {
        x = std::exp(x - m);
        sum += x;
      }
      for (int j = 0; j <= last; ++j) {
        for (int c = 0; c < d; ++c) {
          (*out)[(static_cast<size_t>(i) * heads + h) * d + c] +=
              s[j] / sum * vc[(static_cast<size_t>(j) * kv_heads + g) * d + c];
        }
      }
      (*lse)[static_cast<size_t>(i) * heads + h] = m + std::log(sum);
    }
  }
}

// Naive attention in double with explicit positions: query i sees key j iff key_pos[j] <= q_pos[i]
// (key_pos empty: key j has position j). Same layouts as ref_attention.
inline void ref_attention_positions(const std::vector<float>& q, int n_q, int heads, const std::vector<float>& kc,
                                    const std::vector<float>& vc, int len, int kv_heads, int d, double scale,
                                    const std::vector<int32_t>& q_pos, const std::vector<int32_t>& key_pos,
                                    std::vector<double>* out, std::vector<double>* lse) {
  out->assign(static_cast<size_t>(n_q) * heads * d, 0.0);
  lse->assign(static_cast<size_t>(n_q) * heads, -std::numeric_limits<double>::infinity());
  const int group = heads / kv_heads;
  for (int i = 0; i < n_q; ++i) {
    for (int h = 0; h < heads; ++h) {
      const int g = h / group;
      std::vector<int> vis;
      for (int j = 0; j < len; ++j) {
        const int64_t kp = key_pos.empty() ? j : key_pos[j];
        if (kp <= q_pos[i]) vis.push_back(j);
      }
      if (vis.empty()) continue;
      std::vector<double> s(vis.size());
      double m = -std::numeric_limits<double>::infinity();
      for (size_t t = 0; t < vis.size(); ++t) {
        double acc = 0.0;
        for (int c = 0; c < d; ++c) {
          acc += static_cast<double>(q[(static_cast<size_t>(i) * heads + h) * d + c]) *
                 kc[(static_cast<size_t>(vis[t]) * kv_heads + g) * d + c];
        }
        s[t] = acc * scale;
        m = std::max(m, s[t]);
      }
      double sum = 0.0;
      for (double& x : s) {
        x = std::exp(x - m);
        sum += x;
      }
      for (size_t t = 0; t < vis.size(); ++t) {
        for (int c = 0; c < d; ++c) {
          (*out)[(static_cast<size_t>(i) * heads + h) * d + c] +=
              s[t] / sum * vc[(static_cast<size_t>(vis[t]) * kv_heads + g) * d + c];
        }
      }
      (*lse)[static_cast<size_t>(i) * heads + h] = m + std::log(sum);
    }
  }
}

}  // namespace ragd::kernels::testing
