// Paged decode attention: one query token per sequence. Work items are (sequence, kv head, split);
// each reads its keys and values straight from the pages for all query heads of its GQA group,
// then split partials are merged with merge_state. On AVX-512 machines a one-pass kernel
// (attention_avx512.cpp: online softmax over chunks of 16 keys) does the work; elsewhere,
// and for head dims it has no kernel for, the portable two-pass kernel below.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <string>
#include <vector>


#include "attention_avx512.h"
#include "ragd/kernels/cpu_features.h"
#include "vec_math.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/lse_merge.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
constexpr int kMinSplitKeys = 256;  // auto split: never partitions shorter than this

// One head's row of K or V at element index e as f32: in place for f32 storage, else widened into
// tmp [head_dim].
inline const float* kv_row(const PagedKv& kv, const void* base, const float* scales, size_t e, float* tmp) {
  if (kv.dtype == KvDtype::kF32) return static_cast<const float*>(base) + e;
  const auto* b = static_cast<const std::byte*>(base) + e * kv_dtype_bytes(kv.dtype);
  kv_load_values(kv.dtype, kv.head_dim, kv.head_dim, b, scales != nullptr ? scales + e / kv.head_dim : nullptr, tmp);
  return tmp;
}

// Attention of `group` query rows q: [group, d] (pre-scaled) at position q_pos over keys [j0, j1)
// of kv head g. o: [group, d], lse: [group]; s: scratch of group · (j1 - j0) floats; tmp: scratch
// of d floats (stored types other than f32). With
// kv.key_pos, keys whose position is > q_pos are masked (the caller clips the range otherwise).
__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void decode_range(const float* q, int group, const PagedKv& kv, int32_t q_pos, int g, int j0, int j1, float* s,
                  float* tmp, float* o, float* lse) {
  const int d = kv.head_dim;
  const int n = j1 - j0;
  const size_t tok = static_cast<size_t>(kv.num_kv_heads) * d;
  // Pass 1: scores, page by page (rows of another stored type are widened into tmp first).
  for (int j = j0; j < j1;) {
    const int blk = kv.block_table[j / kv.block_size];
    const int slot = j % kv.block_size;
    const int run = std::min(kv.block_size - slot, j1 - j);
    size_t e = (static_cast<size_t>(blk) * kv.block_size + slot) * tok + static_cast<size_t>(g) * d;
    for (int t = 0; t < run; ++t, e += tok) {
      const float* kp = kv_row(kv, kv.k, kv.k_scale, e, tmp);
      for (int r = 0; r < group; ++r) {
        const float* qr = q + static_cast<size_t>(r) * d;
        float acc = 0.0f;
#pragma omp simd reduction(+ : acc)
        for (int c = 0; c < d; ++c) acc += qr[c] * kp[c];
        s[static_cast<size_t>(r) * n + (j - j0 + t)] = acc;
      }
    }
    j += run;
  }
  if (kv.key_pos != nullptr) {  // masked path: sparse / out-of-order KV
    const int32_t* kp = kv.key_pos + j0;
    for (int r = 0; r < group; ++r) {
      float* sr = s + static_cast<size_t>(r) * n;
      for (int j = 0; j < n; ++j) sr[j] = kp[j] > q_pos ? kNegInf : sr[j];
    }
  }
  // Softmax per row.
  for (int r = 0; r < group; ++r) {
    float* sr = s + static_cast<size_t>(r) * n;
    float m = kNegInf;
    for (int j = 0; j < n; ++j) m = sr[j] > m ? sr[j] : m;
    if (m == kNegInf) {  // no visible key in this range: the identity state
      for (int j = 0; j < n; ++j) sr[j] = 0.0f;
      lse[r] = kNegInf;
      continue;
    }
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (int j = 0; j < n; ++j) {
      const float p = detail::exp_approx(sr[j] - m);
      sr[j] = p;
      sum += p;
    }
    const float inv = 1.0f / sum;
    for (int j = 0; j < n; ++j) sr[j] *= inv;
    lse[r] = m + std::log(sum);
  }
  // Pass 2: o = Σ p · v, page by page.
  std::fill(o, o + static_cast<size_t>(group) * d, 0.0f);
  for (int j = j0; j < j1;) {
    const int blk = kv.block_table[j / kv.block_size];
    const int slot = j % kv.block_size;
    const int run = std::min(kv.block_size - slot, j1 - j);
    size_t e = (static_cast<size_t>(blk) * kv.block_size + slot) * tok + static_cast<size_t>(g) * d;
    for (int t = 0; t < run; ++t, e += tok) {
      const float* vp = kv_row(kv, kv.v, kv.v_scale, e, tmp);
      for (int r = 0; r < group; ++r) {
        const float p = s[static_cast<size_t>(r) * n + (j - j0 + t)];
        float* orow = o + static_cast<size_t>(r) * d;
#pragma omp simd
        for (int c = 0; c < d; ++c) orow[c] += p * vp[c];
      }
    }
    j += run;
  }
}

}  // namespace

Status attention_decode(std::span<const DecodeItem> items, int num_heads, float scale, int num_splits) {
  if (items.empty()) return Status::OK();
  const int kvh = items[0].kv.num_kv_heads;
  const int d = items[0].kv.head_dim;
  if (kvh <= 0 || d <= 0 || num_heads <= 0 || num_heads % kvh != 0 || num_splits < 0) {
    return Status::InvalidArgument("attention_decode: bad shape (num_heads=" + std::to_string(num_heads) +
                                   ", num_kv_heads=" + std::to_string(kvh) + ", head_dim=" + std::to_string(d) +
                                   ", num_splits=" + std::to_string(num_splits) + ")");
  }
  // Keys each item visits: without key_pos, a query at q_pos sees the prefix [0, q_pos + 1).
  auto visible_len = [](const DecodeItem& it) {
    if (it.kv.key_pos != nullptr) return it.kv.kv_len;
    return static_cast<int>(std::min<int64_t>(it.kv.kv_len, static_cast<int64_t>(it.q_pos) + 1));
  };
  int max_len = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const PagedKv& kv = items[i].kv;
    if (kv.num_kv_heads != kvh || kv.head_dim != d || kv.block_size <= 0 || kv.kv_len < 0) {
      return Status::InvalidArgument("attention_decode: item " + std::to_string(i) +
                                     " has a different KV shape or a bad block size / length");
    }
    if (kv_dtype_scaled(kv.dtype) && kv.kv_len > 0 && (kv.k_scale == nullptr || kv.v_scale == nullptr)) {
      return Status::InvalidArgument("attention_decode: item " + std::to_string(i) + " has int8 KV without scales");
    }
    if (items[i].q_pos < 0 || items[i].q_pos > kMaxPosition) {
      return Status::InvalidArgument("attention_decode: item " + std::to_string(i) + " has q_pos " +
                                     std::to_string(items[i].q_pos) + ", not a valid position");
    }
    max_len = std::max(max_len, visible_len(items[i]));
  }
  const int group = num_heads / kvh;
  // The AVX-512 kernel walks all KV heads of a sequence per chunk of keys (whole token rows); the
  // portable kernel one head at a time. A task is (item, heads, split).
  const bool avx512 = cpu_level() >= CpuLevel::kAvx512 && detail::decode_avx512_takes(d, num_heads);
  const int hpt = avx512 ? kvh : 1;  // KV heads per task
  const int rows = hpt * group;      // query rows per task
  const int head_tasks = kvh / hpt;
  const int base_tasks = static_cast<int>(items.size()) * head_tasks;
  int splits = num_splits;
  if (splits == 0) {
    const int want = (2 * num_threads() + base_tasks - 1) / base_tasks;
    splits = std::max(1, std::min(want, max_len / kMinSplitKeys));
  }
  splits = std::max(1, std::min(splits, std::max(1, max_len)));
  const int tasks = base_tasks * splits;
  // Partial states per (item, heads, split): o [rows, d], lse [rows].
  std::vector<float> part_o, part_lse;
  if (splits > 1) {
    part_o.resize(static_cast<size_t>(tasks) * rows * d);
    part_lse.resize(static_cast<size_t>(tasks) * rows);
  }

  // Tasks are taken one at a time (their lengths differ by item); the merge of split states runs
  // after all of them, as a second team call. Scratch per thread, kept between calls.
  parallel_tasks(tasks, tasks > 1, [&](int t) {
    thread_local std::vector<float> qs, s;
    qs.resize(static_cast<size_t>(rows) * d);
    const int item = t / (head_tasks * splits);
    const int g0 = (t / splits) % head_tasks * hpt;
    const int sp = t % splits;
    const DecodeItem& it = items[item];
    const int len = visible_len(it);
    const int j0 = static_cast<int>(static_cast<int64_t>(len) * sp / splits);
    const int j1 = static_cast<int>(static_cast<int64_t>(len) * (sp + 1) / splits);
    // Heads g0 .. g0 + hpt - 1 own query rows g0 · group .. (consecutive in q, out and lse).
    float* o = splits > 1 ? part_o.data() + static_cast<size_t>(t) * rows * d
                          : it.out + static_cast<size_t>(g0) * group * d;
    float* l = splits > 1 ? part_lse.data() + static_cast<size_t>(t) * rows : it.lse + g0 * group;
    if (j1 <= j0) {
      std::fill(o, o + static_cast<size_t>(rows) * d, 0.0f);
      std::fill(l, l + rows, kNegInf);
      return;
    }
    const float* qg = it.q + static_cast<size_t>(g0) * group * d;
    for (size_t c = 0; c < qs.size(); ++c) qs[c] = qg[c] * scale;
    if (avx512) {
      detail::decode_range_avx512(qs.data(), group, it.kv, it.q_pos, g0, hpt, j0, j1, o, l);
    } else {
      s.resize(static_cast<size_t>(group) * (j1 - j0) + d);
      decode_range(qs.data(), group, it.kv, it.q_pos, g0, j0, j1, s.data() + d, s.data(), o, l);
    }
  });
  if (splits > 1) {
    parallel_for(base_tasks, base_tasks > 1, [&](int b0, int b1) {
      for (int bt = b0; bt < b1; ++bt) {
        const DecodeItem& it = items[bt / head_tasks];
        const int h0 = bt % head_tasks * rows;
        for (int r = 0; r < rows; ++r) {
          float* o = it.out + static_cast<size_t>(h0 + r) * d;
          float* l = it.lse + h0 + r;
          const size_t t0 = static_cast<size_t>(bt) * splits;
          std::copy_n(part_o.data() + (t0 * rows + r) * d, d, o);
          *l = part_lse[t0 * rows + r];
          for (int sp = 1; sp < splits; ++sp) {
            const size_t ts = t0 + sp;
            merge_state(d, o, *l, part_o.data() + (ts * rows + r) * d, part_lse[ts * rows + r], o, l);
          }
        }
      }
    });
  }
  return Status::OK();
}

}  // namespace ragd::kernels
