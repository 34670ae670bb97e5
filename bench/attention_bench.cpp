// bench_attention: CPU attention over paged KV stored as f32, bf16 or int8 (kv_dtype.h).
//
//   bench_attention [--ctx 200,2000,8000] [--seqs 1,8] [--prefill 2048,8192] [--heads 8]
//                   [--kv-heads 4] [--head-dim 64] [--block 16] [--threads 1] [--reps 30]
//                   [--kv-dtypes f32,bf16,int8]
//
// Each row is measured for every KV dtype listed, on the same random values; GB/s counts the bytes
// the stored type occupies (values and int8 scales).
// Decode (one query token per sequence, per context and sequence count): time of one call (best of
// reps), K+V bytes read per second, ns per (key, query head).
// Prefill (--prefill, causal, one sequence of that many tokens): time of one call (best of 3) and
// GFLOP/s (2 · 2 · L² / 2 · heads · head_dim), next to OpenBLAS sgemm 2048³ measured in the same run.
// The kernels are the ones this CPU gets; RAGD_CPU_LEVEL=avx2 (or generic) runs the portable ones
// instead, for a before / after on the same machine.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/cpu_features.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/kv_dtype.h"
#include "ragd/kernels/threads.h"

#include "bench_args.h"

using namespace ragd::kernels;

namespace {

std::vector<KvDtype> dtypes(const std::string& s) {
  std::vector<KvDtype> v;
  for (size_t p = 0; p < s.size();) {
    size_t e = s.find(',', p);
    if (e == std::string::npos) e = s.size();
    auto d = parse_kv_dtype(s.substr(p, e - p));
    if (!d.ok()) {
      std::fprintf(stderr, "--kv-dtypes: %s\n", d.status().to_string().c_str());
      std::exit(2);
    }
    v.push_back(*d);
    p = e + 1;
  }
  return v;
}

// f32 rows [slots, kv_heads, head_dim] converted to a stored type, and the view's pointers.
struct Stored {
  std::vector<unsigned char> k, v;
  std::vector<float> ks, vs;
  Stored(KvDtype dt, const std::vector<float>& kf, const std::vector<float>& vf, int kv_heads, int d) {
    const size_t tok = static_cast<size_t>(kv_heads) * d, slots = kf.size() / tok;
    k.resize(kf.size() * kv_dtype_bytes(dt));
    v.resize(k.size());
    ks.resize(slots * kv_heads);
    vs.resize(ks.size());
    kv_store_rows(dt, static_cast<int>(slots), kv_heads, d, kf.data(), tok, k.data(), ks.data());
    kv_store_rows(dt, static_cast<int>(slots), kv_heads, d, vf.data(), tok, v.data(), vs.data());
  }
  void fill(KvDtype dt, PagedKv* p) const {
    p->k = k.data();
    p->v = v.data();
    p->dtype = dt;
    p->k_scale = kv_dtype_scaled(dt) ? ks.data() : nullptr;
    p->v_scale = kv_dtype_scaled(dt) ? vs.data() : nullptr;
  }
  // bytes of one token's K and V of one layer
  static double token_bytes(KvDtype dt, int kv_heads, int d) {
    return 2.0 * kv_heads * (d * static_cast<double>(kv_dtype_bytes(dt)) + (kv_dtype_scaled(dt) ? 4.0 : 0.0));
  }
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> ctxs{200, 2000, 8000}, seq_counts{1, 8}, prefills;
  int nh = 8, nkv = 4, d = 64, bs = 16, threads = 1, reps = 30;
  std::string kv_dtypes = "f32";
  ragd::bench::BenchArgs args("bench_attention");
  args.list("ctx", &ctxs).list("seqs", &seq_counts).list("prefill", &prefills).opt("heads", &nh).opt("kv-heads", &nkv);
  args.opt("head-dim", &d).opt("block", &bs).opt("threads", &threads).opt("reps", &reps).opt("kv-dtypes", &kv_dtypes);
  if (!args.parse(argc, argv)) return 2;
  if (nh <= 0 || nkv <= 0 || nh % nkv != 0 || d <= 0 || bs <= 0 || reps <= 0) {
    std::fprintf(stderr, "bad shape\n");
    return 2;
  }
  set_num_threads(threads);
  std::printf("# bench_attention heads=%d kv_heads=%d head_dim=%d block=%d threads=%d kernels=%s\n", nh, nkv, d, bs,
              num_threads(), cpu_summary().c_str());
  const std::vector<KvDtype> kinds = dtypes(kv_dtypes);
  std::printf("%-8s %-6s %-5s %12s %10s %16s\n", "ctx", "seqs", "kv", "us/call", "GB/s", "ns/(key,head)");
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (int ctx : ctxs) {
    for (int seqs : seq_counts) {
      const int per_seq = (ctx + bs - 1) / bs;
      const size_t tok = static_cast<size_t>(nkv) * d;
      std::vector<float> k(static_cast<size_t>(per_seq) * seqs * bs * tok), v(k.size());
      std::vector<float> q(static_cast<size_t>(seqs) * nh * d), o(q.size()), lse(static_cast<size_t>(seqs) * nh);
      for (auto& x : k) x = dist(rng);
      for (auto& x : v) x = dist(rng);
      for (auto& x : q) x = dist(rng);
      // Pages of all sequences shuffled together, as a pool hands them out.
      std::vector<int32_t> table(static_cast<size_t>(per_seq) * seqs);
      for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
      std::shuffle(table.begin(), table.end(), rng);
      for (KvDtype dt : kinds) {
        const Stored stored(dt, k, v, nkv, d);
        std::vector<DecodeItem> items(seqs);
        for (int s = 0; s < seqs; ++s) {
          PagedKv p;
          stored.fill(dt, &p);
          p.block_table = table.data() + static_cast<size_t>(s) * per_seq;
          p.block_size = bs;
          p.num_kv_heads = nkv;
          p.head_dim = d;
          p.kv_len = ctx;
          items[s] = DecodeItem{q.data() + static_cast<size_t>(s) * nh * d, p, o.data() + static_cast<size_t>(s) * nh * d,
                                lse.data() + static_cast<size_t>(s) * nh};
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(d));
        double best = 1e30;
        for (int r = 0; r < reps; ++r) {
          const auto t0 = std::chrono::steady_clock::now();
          if (!attention_decode(items, nh, scale, 0).ok()) return 1;
          best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
        }
        const double bytes = Stored::token_bytes(dt, nkv, d) * ctx * seqs;
        std::printf("%-8d %-6d %-5s %12.1f %10.1f %16.2f\n", ctx, seqs, std::string(kv_dtype_name(dt)).c_str(),
                    best * 1e6, bytes / best / 1e9, best * 1e9 / (static_cast<double>(ctx) * nh * seqs));
      }
    }
  }
  if (prefills.empty()) return 0;
  // Prefill: one causal sequence, against sgemm's rate on this machine in the same run.
  double peak = 0.0;
  {
    const int n = 2048;
    std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
    for (int r = 0; r < 3; ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
      const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      peak = std::max(peak, 2.0 * n * n * n / sec);
    }
  }
  std::printf("# prefill (causal, one sequence); OpenBLAS sgemm 2048^3: %.1f GFLOP/s\n", peak / 1e9);
  std::printf("%-8s %-5s %12s %10s %14s\n", "tokens", "kv", "ms/call", "GFLOP/s", "of sgemm peak");
  for (int len : prefills) {
    const int blocks = (len + bs - 1) / bs;
    const size_t tok = static_cast<size_t>(nkv) * d;
    std::vector<float> k(static_cast<size_t>(blocks) * bs * tok), v(k.size());
    std::vector<float> q(static_cast<size_t>(len) * nh * d), o(q.size()), lse(static_cast<size_t>(len) * nh);
    for (auto& x : k) x = dist(rng);
    for (auto& x : v) x = dist(rng);
    for (auto& x : q) x = dist(rng);
    std::vector<int32_t> table(blocks);
    for (int i = 0; i < blocks; ++i) table[i] = i;
    std::shuffle(table.begin(), table.end(), rng);
    for (KvDtype dt : kinds) {
      const Stored stored(dt, k, v, nkv, d);
      PagedKv p;
      stored.fill(dt, &p);
      p.block_table = table.data();
      p.block_size = bs;
      p.num_kv_heads = nkv;
      p.head_dim = d;
      p.kv_len = len;
      double best = 1e30;
      for (int r = 0; r < 3; ++r) {
        const auto t0 = std::chrono::steady_clock::now();
        if (!attention_prefill(q.data(), len, nh, p, 1.0f / std::sqrt(static_cast<float>(d)), true, 0, o.data(), lse.data()).ok())
          return 1;
        best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
      }
      const double flops = 2.0 * 2.0 * static_cast<double>(len) * len / 2.0 * nh * d;
      std::printf("%-8d %-5s %12.1f %10.1f %13.0f%%\n", len, std::string(kv_dtype_name(dt)).c_str(), best * 1e3,
                  flops / best / 1e9, 100.0 * flops / best / peak);
    }
  }
  return 0;
}
