// Blocked prefill attention over paged KV: for each (kv head, query tile) the tile's queries of all
// heads in the GQA group form R = tile · group rows; keys are visited in chunks of kKeyChunk tokens
// gathered from the pages, S = Q·Kᵀ and O += P·V run through sgemm, with an online softmax.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "vec_math.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/gemm.h"

namespace ragd::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kRowsPerTile = 64;   // query rows (tokens × group heads) per task, before rounding
constexpr int kKeyChunk = 256;     // keys per online-softmax step

struct Scratch {
  std::vector<float> q, k, v, s, o, m, l;
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Gathers keys [j0, j0 + n) of kv head g into dst_k / dst_v: [n, head_dim].
void gather_kv(const PagedKv& kv, int g, int j0, int n, float* dst_k, float* dst_v) {
  const int d = kv.head_dim;
  const size_t tok = static_cast<size_t>(kv.num_kv_heads) * d;
  int j = j0;
  while (j < j0 + n) {
    const int blk = kv.block_table[j / kv.block_size];
    const int slot = j % kv.block_size;
    const int run = std::min(kv.block_size - slot, j0 + n - j);
    const size_t base = (static_cast<size_t>(blk) * kv.block_size + slot) * tok + static_cast<size_t>(g) * d;
    for (int t = 0; t < run; ++t) {
      std::copy_n(kv.k + base + t * tok, d, dst_k + static_cast<size_t>(j - j0 + t) * d);
      std::copy_n(kv.v + base + t * tok, d, dst_v + static_cast<size_t>(j - j0 + t) * d);
    }
    j += run;
  }
}

// Online-softmax update of one chunk for rows [0, rows): s: [rows, n] scores (masked with -inf),
// turned into probabilities; returns per row the factor alpha by which o must be scaled.
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void softmax_chunk(int rows, int n, float* s, float* m, float* l, float* alpha) {
  for (int r = 0; r < rows; ++r) {
    float* sr = s + static_cast<size_t>(r) * n;
    float cm = kNegInf;
    for (int j = 0; j < n; ++j) cm = sr[j] > cm ? sr[j] : cm;
    const float m_new = std::max(m[r], cm);
    if (m_new == kNegInf) {  // nothing visible yet
      alpha[r] = 1.0f;
      for (int j = 0; j < n; ++j) sr[j] = 0.0f;
      continue;
    }
    alpha[r] = std::exp(m[r] - m_new);  // 0 when m[r] = -inf
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; ++j) {
      const float p = detail::exp_approx(sr[j] - m_new);
      sr[j] = p;
      sum += p;
    }
    l[r] = l[r] * alpha[r] + sum;
    m[r] = m_new;
  }
}

void prefill_task(const float* q, int num_heads, const PagedKv& kv, float scale, bool causal, int q_offset,
                  int g, int i0, int ni, float* out, float* lse) {
  const int d = kv.head_dim;
  const int group = num_heads / kv.num_kv_heads;
  const int rows = ni * group;
  Scratch& sc = scratch();
  sc.q.resize(static_cast<size_t>(rows) * d);
  sc.o.assign(static_cast<size_t>(rows) * d, 0.0f);
  sc.m.assign(rows, kNegInf);
  sc.l.assign(rows, 0.0f);
  std::vector<float> alpha(rows);
  // Row r = i · group + jh holds query token i0 + i, head g · group + jh (pre-scaled).
  for (int i = 0; i < ni; ++i) {
    for (int jh = 0; jh < group; ++jh) {
      const float* src = q + (static_cast<size_t>(i0 + i) * num_heads + g * group + jh) * d;
      float* dst = sc.q.data() + static_cast<size_t>(i * group + jh) * d;
      for (int c = 0; c < d; ++c) dst[c] = src[c] * scale;
    }
  }
  int kv_end = kv.kv_len;
  if (causal) kv_end = std::min(kv_end, i0 + ni - 1 + q_offset + 1);
  sc.k.resize(static_cast<size_t>(kKeyChunk) * d);
  sc.v.resize(static_cast<size_t>(kKeyChunk) * d);
  sc.s.resize(static_cast<size_t>(rows) * kKeyChunk);
  for (int j0 = 0; j0 < kv_end; j0 += kKeyChunk) {
    const int n = std::min(kKeyChunk, kv_end - j0);
    gather_kv(kv, g, j0, n, sc.k.data(), sc.v.data());
    gemm(false, true, rows, n, d, 1.0f, sc.q.data(), d, sc.k.data(), d, 0.0f, sc.s.data(), n);
    if (causal && j0 + n - 1 > i0 + q_offset) {  // chunk reaches past the first row's horizon
      for (int i = 0; i < ni; ++i) {
        const int last = i0 + i + q_offset;  // last visible key of this token
        for (int jh = 0; jh < group; ++jh) {
          float* sr = sc.s.data() + static_cast<size_t>(i * group + jh) * n;
          for (int j = std::max(0, last + 1 - j0); j < n; ++j) sr[j] = kNegInf;
        }
      }
    }
    softmax_chunk(rows, n, sc.s.data(), sc.m.data(), sc.l.data(), alpha.data());
    for (int r = 0; r < rows; ++r) {
      if (alpha[r] != 1.0f) {
        float* o = sc.o.data() + static_cast<size_t>(r) * d;
        for (int c = 0; c < d; ++c) o[c] *= alpha[r];
      }
    }
    gemm(false, false, rows, d, n, 1.0f, sc.s.data(), n, sc.v.data(), d, 1.0f, sc.o.data(), d);
  }
  for (int i = 0; i < ni; ++i) {
    for (int jh = 0; jh < group; ++jh) {
      const int r = i * group + jh;
      const int h = g * group + jh;
      float* dst = out + (static_cast<size_t>(i0 + i) * num_heads + h) * d;
      const float* o = sc.o.data() + static_cast<size_t>(r) * d;
      if (sc.l[r] > 0.0f) {
        const float inv = 1.0f / sc.l[r];
        for (int c = 0; c < d; ++c) dst[c] = o[c] * inv;
        lse[static_cast<size_t>(i0 + i) * num_heads + h] = sc.m[r] + std::log(sc.l[r]);
      } else {
        for (int c = 0; c < d; ++c) dst[c] = 0.0f;
        lse[static_cast<size_t>(i0 + i) * num_heads + h] = kNegInf;
      }
    }
  }
}

}  // namespace

Status attention_prefill(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale, bool causal,
                         int q_offset, float* out, float* lse) {
  if (n_q < 0 || kv.kv_len < 0 || kv.block_size <= 0 || kv.head_dim <= 0 || kv.num_kv_heads <= 0 ||
      num_heads <= 0 || num_heads % kv.num_kv_heads != 0) {
    return Status::InvalidArgument("attention_prefill: bad shape (n_q=" + std::to_string(n_q) +
                                   ", num_heads=" + std::to_string(num_heads) + ", num_kv_heads=" +
                                   std::to_string(kv.num_kv_heads) + ", head_dim=" + std::to_string(kv.head_dim) +
                                   ", block_size=" + std::to_string(kv.block_size) + ")");
  }
  if (n_q == 0) return Status::OK();
  const int group = num_heads / kv.num_kv_heads;
  const int tile = std::max(1, kRowsPerTile / group);
  const int tiles = (n_q + tile - 1) / tile;
  const int tasks = kv.num_kv_heads * tiles;
  // Later tiles see more keys under the causal mask: dynamic scheduling, largest first.
#pragma omp parallel for schedule(dynamic, 1) if (tasks > 1)
  for (int t = 0; t < tasks; ++t) {
    const int ti = tiles - 1 - t / kv.num_kv_heads;
    const int g = t % kv.num_kv_heads;
    const int i0 = ti * tile;
    prefill_task(q, num_heads, kv, scale, causal, q_offset, g, i0, std::min(tile, n_q - i0), out, lse);
  }
  return Status::OK();
}

}  // namespace ragd::kernels
