// Blocked prefill attention over paged KV: for each (kv head, query tile) the tile's queries of all
// heads in the GQA group form R = tile · group rows; keys are visited in chunks of kKeyChunk tokens
// gathered from the pages, S = Q·Kᵀ and O += P·V run through AVX-512 tiles (head dims that are
// multiples of 16 up to 128, attention_avx512.cpp) or sgemm, with an online softmax.
#include <algorithm>
#include <cstddef>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "attention_avx512.h"
#include "ragd/kernels/cpu_features.h"
#include "vec_math.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kRowsPerTile = 256;  // query rows (tokens × group heads) per task, before rounding
constexpr int kKeyChunk = 256;     // keys per online-softmax step

struct Scratch {
  std::vector<float> q, k, kt, v, s, o, m, l;
  std::vector<int32_t> qp;  // per query token of the tile: its position
  std::vector<int> lim;     // per query token: end of its visible key prefix (contiguous keys)
};

Scratch& scratch() {
  thread_local Scratch s;
  return s;
}

// Gathers keys [j0, j0 + n) of kv head g into dst_k / dst_v: [n, head_dim] f32, converting from
// the stored type (kv_dtype.h) as they are copied.
void gather_kv(const PagedKv& kv, int g, int j0, int n, float* dst_k, float* dst_v) {
  const int d = kv.head_dim;
  const size_t tok = static_cast<size_t>(kv.num_kv_heads) * d;
  const size_t vb = kv_dtype_bytes(kv.dtype);
  const auto* kb = static_cast<const std::byte*>(kv.k);
  const auto* vbase = static_cast<const std::byte*>(kv.v);
  const bool scaled = kv_dtype_scaled(kv.dtype);
  int j = j0;
  while (j < j0 + n) {
    const int blk = kv.block_table[j / kv.block_size];
    const int slot = j % kv.block_size;
    const int run = std::min(kv.block_size - slot, j0 + n - j);
    const size_t base = (static_cast<size_t>(blk) * kv.block_size + slot) * tok + static_cast<size_t>(g) * d;
    for (int t = 0; t < run; ++t) {
      const size_t e = base + t * tok;
      float* dk = dst_k + static_cast<size_t>(j - j0 + t) * d;
      float* dv = dst_v + static_cast<size_t>(j - j0 + t) * d;
      kv_load_values(kv.dtype, d, d, kb + e * vb, scaled ? kv.k_scale + e / d : nullptr, dk);
      kv_load_values(kv.dtype, d, d, vbase + e * vb, scaled ? kv.v_scale + e / d : nullptr, dv);
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

// Which keys a query sees: query i of the call has position q_pos[i], or i + q_offset without
// q_pos; not causal = kMaxPosition (every stored key, holes still hidden).
struct Mask {
  bool causal = true;
  int q_offset = 0;
  const int32_t* q_pos = nullptr;
  int32_t query_pos(int i) const {
    if (!causal) return kMaxPosition;
    if (q_pos != nullptr) return q_pos[i];
    const int64_t p = static_cast<int64_t>(i) + q_offset;
    return static_cast<int32_t>(std::clamp<int64_t>(p, -1, kMaxPosition));
  }
};

void prefill_task(const float* q, int num_heads, const PagedKv& kv, float scale, const Mask& mask, int g, int i0,
                  int ni, float* out, float* lse) {
  const int d = kv.head_dim;
  const int group = num_heads / kv.num_kv_heads;
  const int rows = ni * group;
  Scratch& sc = scratch();
  sc.q.resize(static_cast<size_t>(rows) * d);
  sc.o.assign(static_cast<size_t>(rows) * d, 0.0f);
  sc.m.assign(rows, kNegInf);
  sc.l.assign(rows, 0.0f);
  sc.qp.resize(ni);
  sc.lim.resize(ni);
  std::vector<float> alpha(rows);
  // Row r = i · group + jh holds query token i0 + i, head g · group + jh (pre-scaled).
  for (int i = 0; i < ni; ++i) {
    for (int jh = 0; jh < group; ++jh) {
      const float* src = q + (static_cast<size_t>(i0 + i) * num_heads + g * group + jh) * d;
      float* dst = sc.q.data() + static_cast<size_t>(i * group + jh) * d;
      for (int c = 0; c < d; ++c) dst[c] = src[c] * scale;
    }
  }
  // Contiguous keys (no key_pos): query i sees the key prefix [0, lim[i]); only chunks reaching past
  // the tile's smallest limit need masking, by a per-row limit (no per-key test). With key_pos:
  // every key of a chunk is tested against the row's position, and chunks invisible to the whole
  // tile are skipped.
  const bool by_pos = kv.key_pos != nullptr;
  const bool avx512 = cpu_level() >= CpuLevel::kAvx512;
  // AVX-512 tiles replace sgemm for the two products when the head dim suits them: the chunk's keys
  // are transposed (and both K and V padded with zero keys to a multiple of 16) as they are
  // gathered.
  const bool tiles = avx512 && d % 16 == 0 && d <= 128;
  int32_t q_max = -1, q_min = kMaxPosition;
  int lim_min = kv.kv_len, kv_end = 0;
  for (int i = 0; i < ni; ++i) {
    sc.qp[i] = mask.query_pos(i0 + i);
    q_max = std::max(q_max, sc.qp[i]);
    q_min = std::min(q_min, sc.qp[i]);
    sc.lim[i] = static_cast<int>(std::clamp<int64_t>(static_cast<int64_t>(sc.qp[i]) + 1, 0, kv.kv_len));
    lim_min = std::min(lim_min, sc.lim[i]);
    kv_end = std::max(kv_end, sc.lim[i]);
  }
  if (by_pos) kv_end = q_max >= 0 ? kv.kv_len : 0;
  // Queries in position order (a prefill, or an approximate-reuse step whose repair rows precede
  // the question): the rows that see nothing of a key chunk form a prefix of the tile, which that
  // chunk skips. An EPIC step of 93 rows over 4 documents computes about a quarter fewer scores.
  const bool sorted = std::is_sorted(sc.qp.begin(), sc.qp.begin() + ni);
  sc.k.resize(static_cast<size_t>(kKeyChunk) * d);
  sc.v.resize(static_cast<size_t>(kKeyChunk) * d);
  if (tiles) sc.kt.resize(static_cast<size_t>(kKeyChunk) * d);
  sc.s.resize(static_cast<size_t>(rows) * kKeyChunk);
  for (int j0 = 0; j0 < kv_end; j0 += kKeyChunk) {
    const int n = std::min(kKeyChunk, kv_end - j0);
    const int32_t* kp = by_pos ? kv.key_pos + j0 : nullptr;
    bool chunk_full = true;  // by_pos: every key of the chunk visible to every row of the tile
    int32_t kmin = kNoPosition, kmax = 0;  // by_pos: the chunk's smallest and largest key position
    if (by_pos) {
      for (int j = 0; j < n; ++j) {
        kmin = std::min(kmin, kp[j]);
        kmax = std::max(kmax, kp[j]);
      }
      if (kmin > q_max) continue;  // nothing here for this tile
      chunk_full = kmax <= q_min;
    }
    // Token rows [i_first, ni) see some key of the chunk (all of them when !sorted): only their
    // score rows [r0, rows) take part in this chunk; the others keep their running state.
    int i_first = 0;
    if (sorted) {
      if (by_pos) {
        while (i_first < ni && sc.qp[i_first] < kmin) ++i_first;
      } else {
        while (i_first < ni && sc.lim[i_first] <= j0) ++i_first;
      }
      if (i_first == ni) continue;
    }
    const int r0 = i_first * group, rc = rows - r0;
    const float* qc = sc.q.data() + static_cast<size_t>(r0) * d;
    gather_kv(kv, g, j0, n, sc.k.data(), sc.v.data());
    // ns: columns of the score rows (n, or n rounded up to 16 for the AVX-512 tiles).
    const int ns = tiles ? (n + 15) / 16 * 16 : n;
    if (tiles) {
      for (int c = 0; c < d; ++c) {
        float* dst = sc.kt.data() + static_cast<size_t>(c) * ns;
        for (int j = 0; j < n; ++j) dst[j] = sc.k[static_cast<size_t>(j) * d + c];
        for (int j = n; j < ns; ++j) dst[j] = 0.0f;
      }
      std::fill(sc.v.begin() + static_cast<size_t>(n) * d, sc.v.begin() + static_cast<size_t>(ns) * d, 0.0f);
      detail::attention_scores_avx512(rc, ns, d, qc, sc.kt.data(), sc.s.data());
      for (int r = 0; r < rc; ++r) {
        float* sr = sc.s.data() + static_cast<size_t>(r) * ns;
        for (int j = n; j < ns; ++j) sr[j] = kNegInf;
      }
    } else {
      gemm(false, true, rc, n, d, 1.0f, qc, d, sc.k.data(), d, 0.0f, sc.s.data(), n);
    }
    if (!by_pos && j0 + n > lim_min) {  // chunk reaches past some row's limit
      for (int i = i_first; i < ni; ++i) {
        for (int jh = 0; jh < group; ++jh) {
          float* sr = sc.s.data() + static_cast<size_t>((i - i_first) * group + jh) * ns;
          for (int j = std::max(0, sc.lim[i] - j0); j < n; ++j) sr[j] = kNegInf;
        }
      }
    } else if (by_pos && !chunk_full) {
      for (int i = i_first; i < ni; ++i) {
        const int32_t p = sc.qp[i];
        for (int jh = 0; jh < group; ++jh) {
          float* sr = sc.s.data() + static_cast<size_t>((i - i_first) * group + jh) * ns;
          for (int j = 0; j < n; ++j) sr[j] = kp[j] > p ? kNegInf : sr[j];
        }
      }
    }
    if (avx512) {
      detail::softmax_chunk_avx512(rc, ns, sc.s.data(), sc.m.data() + r0, sc.l.data() + r0, alpha.data() + r0);
    } else {
      softmax_chunk(rc, ns, sc.s.data(), sc.m.data() + r0, sc.l.data() + r0, alpha.data() + r0);
    }
    for (int r = r0; r < rows; ++r) {
      if (alpha[r] != 1.0f) {
        float* o = sc.o.data() + static_cast<size_t>(r) * d;
        for (int c = 0; c < d; ++c) o[c] *= alpha[r];
      }
    }
    if (tiles) {
      detail::attention_pv_avx512(rc, ns, d, sc.s.data(), sc.v.data(), sc.o.data() + static_cast<size_t>(r0) * d);
    } else {
      gemm(false, false, rc, d, n, 1.0f, sc.s.data(), n, sc.v.data(), d, 1.0f, sc.o.data() + static_cast<size_t>(r0) * d, d);
    }
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

Status run_prefill(const char* name, const float* q, int n_q, int num_heads, const PagedKv& kv, float scale,
                   const Mask& mask, float* out, float* lse) {
  if (n_q < 0 || kv.kv_len < 0 || kv.block_size <= 0 || kv.head_dim <= 0 || kv.num_kv_heads <= 0 ||
      num_heads <= 0 || num_heads % kv.num_kv_heads != 0) {
    return Status::InvalidArgument(std::string(name) + ": bad shape (n_q=" + std::to_string(n_q) +
                                   ", num_heads=" + std::to_string(num_heads) + ", num_kv_heads=" +
                                   std::to_string(kv.num_kv_heads) + ", head_dim=" + std::to_string(kv.head_dim) +
                                   ", block_size=" + std::to_string(kv.block_size) + ")");
  }
  if (kv_dtype_scaled(kv.dtype) && kv.kv_len > 0 && (kv.k_scale == nullptr || kv.v_scale == nullptr)) {
    return Status::InvalidArgument(std::string(name) + ": int8 KV without k_scale / v_scale");
  }
  if (n_q == 0) return Status::OK();
  if (mask.q_pos != nullptr) {
    for (int i = 0; i < n_q; ++i) {
      if (mask.q_pos[i] < 0 || mask.q_pos[i] > kMaxPosition) {
        return Status::InvalidArgument(std::string(name) + ": q_pos[" + std::to_string(i) + "] = " +
                                       std::to_string(mask.q_pos[i]) + " is not a valid position");
      }
    }
  }
  const int group = num_heads / kv.num_kv_heads;
  // Tiles of at least kRowsPerTile / group tokens, the remainder spread over them rather than left
  // as a small last tile: every tile gathers its keys from the pages again, so a step of 93 rows
  // (an EPIC repair and its question) runs one tile per KV head instead of 85 rows + 8 rows that
  // both gather the whole context.
  const int base = std::max(1, kRowsPerTile / group);
  const int want = std::max(1, n_q / base);
  const int tile = (n_q + want - 1) / want;
  const int tiles = (n_q + tile - 1) / tile;  // <= want, every one non-empty
  const int tasks = kv.num_kv_heads * tiles;
  auto task = [&](int t) {
    const int ti = tiles - 1 - t / kv.num_kv_heads;
    const int g = t % kv.num_kv_heads;
    const int i0 = ti * tile;
    prefill_task(q, num_heads, kv, scale, mask, g, i0, std::min(tile, n_q - i0), out, lse);
  };
  // Later tiles see more keys under the causal mask: dynamic scheduling, largest first. (Inside a
  // task, the sgemm path's OpenBLAS runs on the task's thread: threads.h.)
  parallel_tasks(tasks, true, task);
  return Status::OK();
}

}  // namespace

Status attention_prefill(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale, bool causal,
                         int q_offset, float* out, float* lse) {
  Mask m;
  m.causal = causal;
  m.q_offset = q_offset;
  return run_prefill("attention_prefill", q, n_q, num_heads, kv, scale, m, out, lse);
}

Status attention_prefill_positions(const float* q, int n_q, int num_heads, const PagedKv& kv, float scale,
                                   const int32_t* q_pos, float* out, float* lse) {
  if (q_pos == nullptr && n_q > 0) return Status::InvalidArgument("attention_prefill_positions: q_pos is null");
  Mask m;
  m.q_pos = q_pos;
  return run_prefill("attention_prefill_positions", q, n_q, num_heads, kv, scale, m, out, lse);
}

}  // namespace ragd::kernels
