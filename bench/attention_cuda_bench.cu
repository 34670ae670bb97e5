// CUDA attention benchmark: paged causal prefill (flash-attention style) and split-KV decode over
// bf16 KV. Prints one CSV line per configuration on stdout:
//   prefill,<tokens>,<heads>,<kv_heads>,<head_dim>,<ms>,<tflops>
//   prefill_positions,... the same tokens as a 2-worker zigzag shard (explicit positions, the ring's kernel)
//   decode,<batch>,<kv_len>,<heads>,<kv_heads>,<head_dim>,<us>,<gb_per_s>
// FLOPs of causal prefill: 4 · head_dim · heads · N(N+1)/2 (the visible (query, key) pairs); the
// SDPA comparison (scripts/gpu/attention_vs_sdpa.py) uses the same formula.
// Usage: bench_attention_cuda [--tokens 4096,8192,...] [--heads 32] [--kv-heads 8] [--head-dim 128]
//                             [--iters 5] [--decode-batches 1,8,32] [--decode-len 4096,32768]
//                             [--dump-dir DIR --dump-tokens 4001] [--print-kernel]
// --print-kernel prints the prefill kernel the dispatcher picks for --head-dim and exits.
// --dump-dir writes one causal prefill's inputs and output as raw bf16 (q.bin [N, heads, head_dim],
// k.bin / v.bin [N, kv_heads, head_dim], out.bin [N, heads, head_dim]) so that a script can check
// the kernel against another implementation at sizes far beyond the unit tests.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ragd/kernels/cuda/attention.h"
#include "ragd/kernels/cuda/device.h"

namespace rc = ragd::kernels::cuda;

namespace {

#define CHECK_CUDA(x)                                                                         \
  do {                                                                                        \
    cudaError_t e_ = (x);                                                                     \
    if (e_ != cudaSuccess) {                                                                  \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)
#define CHECK_OK(x)                                                                           \
  do {                                                                                        \
    ragd::Status s_ = (x);                                                                    \
    if (!s_.ok()) {                                                                           \
      std::fprintf(stderr, "%s: %s\n", #x, s_.to_string().c_str());                           \
      std::exit(1);                                                                           \
    }                                                                                         \
  } while (0)

// Deterministic pseudo-random bf16 in [-1, 1) (a hash of the index), generated on the device.
__global__ void fill_bf16(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t{blockDim.x} + threadIdx.x; i < n; i += size_t{gridDim.x} * blockDim.x) {
    uint32_t x = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    const float f = static_cast<float>(x & 0xffffff) / 8388608.0f - 1.0f;
    p[i] = static_cast<uint16_t>(__float_as_uint(f) >> 16);
  }
}

__global__ void fill_iota(int32_t* p, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = i;
}

std::vector<int> parse_list(const char* s) {
  std::vector<int> v;
  std::string cur;
  for (const char* c = s;; ++c) {
    if (*c == ',' || *c == 0) {
      if (!cur.empty()) v.push_back(std::atoi(cur.c_str()));
      cur.clear();
      if (*c == 0) break;
    } else {
      cur += *c;
    }
  }
  return v;
}

uint16_t* alloc_random(size_t n, uint32_t seed) {
  uint16_t* p = nullptr;
  CHECK_CUDA(cudaMalloc(&p, n * 2));
  fill_bf16<<<1024, 256>>>(p, n, seed);
  CHECK_CUDA(cudaGetLastError());
  return p;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int> tokens = {4096, 8192, 16384, 32768, 65536};
  std::vector<int> dec_batches = {1, 8, 32};
  std::vector<int> dec_lens = {4096, 32768};
  int heads = 32, kv_heads = 8, d = 128, iters = 5, dump_tokens = 4001;
  std::string dump_dir;
  const int bs = 16;
  bool print_kernel = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--print-kernel") {
      print_kernel = true;
      continue;
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "flag %s needs a value\n", a.c_str());
      return 2;
    }
    const char* v = argv[++i];
    if (a == "--tokens") tokens = parse_list(v);
    else if (a == "--heads") heads = std::atoi(v);
    else if (a == "--kv-heads") kv_heads = std::atoi(v);
    else if (a == "--head-dim") d = std::atoi(v);
    else if (a == "--iters") iters = std::atoi(v);
    else if (a == "--decode-batches") dec_batches = parse_list(v);
    else if (a == "--decode-len") dec_lens = parse_list(v);
    else if (a == "--dump-dir") dump_dir = v;
    else if (a == "--dump-tokens") dump_tokens = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s\n", a.c_str());
      return 2;
    }
  }
  std::string why;
  if (rc::device_count(&why) == 0) {
    std::fprintf(stderr, "no CUDA device: %s\n", why.c_str());
    return 1;
  }
  cudaDeviceProp prop{};
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  std::fprintf(stderr, "device: %s, %d SMs\n", prop.name, prop.multiProcessorCount);
  if (print_kernel) {
    std::printf("%s\n", rc::attention_prefill_kernel(d));
    return 0;
  }
  std::fprintf(stderr, "prefill kernel: %s\n", rc::attention_prefill_kernel(d));
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  cudaEvent_t t0, t1;
  CHECK_CUDA(cudaEventCreate(&t0));
  CHECK_CUDA(cudaEventCreate(&t1));

  if (!dump_dir.empty()) {
    const int n = dump_tokens;
    const int nblk = (n + bs - 1) / bs;
    const size_t nq = static_cast<size_t>(n) * heads * d;
    const size_t nkv = static_cast<size_t>(nblk) * bs * kv_heads * d;
    uint16_t* q = alloc_random(nq, 11);
    uint16_t* k = alloc_random(nkv, 12);
    uint16_t* v = alloc_random(nkv, 13);
    int32_t* table = nullptr;
    CHECK_CUDA(cudaMalloc(&table, nblk * sizeof(int32_t)));
    fill_iota<<<64, 256>>>(table, nblk);
    uint16_t* out = nullptr;
    float* lse = nullptr;
    CHECK_CUDA(cudaMalloc(&out, nq * 2));
    CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(n) * heads * 4));
    const rc::PagedKvBf16 kv{k, v, table, bs, kv_heads, d, n};
    CHECK_OK(rc::attention_prefill(q, n, heads, kv, scale, true, 0, out, rc::DType::kBf16, lse, nullptr));
    CHECK_CUDA(cudaDeviceSynchronize());
    // With the identity block table the pool is [n_padded, kv_heads, d]: its first n rows are K / V.
    const size_t nkv_used = static_cast<size_t>(n) * kv_heads * d;
    const struct { const char* name; const uint16_t* p; size_t n; } files[] = {
        {"q.bin", q, nq}, {"k.bin", k, nkv_used}, {"v.bin", v, nkv_used}, {"out.bin", out, nq}};
    for (const auto& f : files) {
      std::vector<uint16_t> host(f.n);
      CHECK_CUDA(cudaMemcpy(host.data(), f.p, f.n * 2, cudaMemcpyDeviceToHost));
      const std::string path = dump_dir + "/" + f.name;
      FILE* fp = std::fopen(path.c_str(), "wb");
      if (!fp || std::fwrite(host.data(), 2, f.n, fp) != f.n) {
        std::fprintf(stderr, "cannot write %s\n", path.c_str());
        return 1;
      }
      std::fclose(fp);
    }
    std::fprintf(stderr, "dumped a %d-token causal prefill to %s\n", n, dump_dir.c_str());
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(table); cudaFree(out); cudaFree(lse);
  }

  std::printf("kind,tokens_or_batch,kv_len,heads,kv_heads,head_dim,time,rate\n");
  for (int n : tokens) {
    const int nblk = (n + bs - 1) / bs;
    uint16_t* q = alloc_random(static_cast<size_t>(n) * heads * d, 1);
    uint16_t* k = alloc_random(static_cast<size_t>(nblk) * bs * kv_heads * d, 2);
    uint16_t* v = alloc_random(static_cast<size_t>(nblk) * bs * kv_heads * d, 3);
    int32_t* table = nullptr;
    CHECK_CUDA(cudaMalloc(&table, nblk * sizeof(int32_t)));
    fill_iota<<<64, 256>>>(table, nblk);
    uint16_t* out = nullptr;
    float* lse = nullptr;
    CHECK_CUDA(cudaMalloc(&out, static_cast<size_t>(n) * heads * d * 2));
    CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(n) * heads * 4));
    const rc::PagedKvBf16 kv{k, v, table, bs, kv_heads, d, n};
    CHECK_OK(rc::attention_prefill(q, n, heads, kv, scale, true, 0, out, rc::DType::kBf16, lse, nullptr));  // warm-up
    CHECK_CUDA(cudaDeviceSynchronize());
    CHECK_CUDA(cudaEventRecord(t0));
    for (int it = 0; it < iters; ++it) {
      CHECK_OK(rc::attention_prefill(q, n, heads, kv, scale, true, 0, out, rc::DType::kBf16, lse, nullptr));
    }
    CHECK_CUDA(cudaEventRecord(t1));
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
    ms /= iters;
    const double flops = 4.0 * d * heads * (static_cast<double>(n) * (n + 1) / 2.0);
    std::printf("prefill,%d,%d,%d,%d,%d,%.3f,%.1f\n", n, n, heads, kv_heads, d, ms, flops / (ms * 1e-3) / 1e12);
    std::fflush(stdout);
    // The same tokens as a zigzag shard of 2 workers (what a ring worker's local block runs): chunks
    // at positions [0, n/2) and [3n/2, 2n), queries and keys by explicit position; every key at or
    // before a query's position is visible, so the pairs (and FLOPs) are those of the causal case.
    {
      std::vector<int32_t> hpos(n);
      for (int i = 0; i < n; ++i) hpos[i] = i < n / 2 ? i : n + i;
      int32_t* pos = nullptr;
      CHECK_CUDA(cudaMalloc(&pos, n * sizeof(int32_t)));
      CHECK_CUDA(cudaMemcpy(pos, hpos.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice));
      rc::PagedKvBf16 kvp = kv;
      kvp.key_pos = pos;
      CHECK_OK(rc::attention_prefill_positions(q, n, heads, kvp, scale, pos, out, rc::DType::kBf16, lse, nullptr));
      CHECK_CUDA(cudaDeviceSynchronize());
      CHECK_CUDA(cudaEventRecord(t0));
      for (int it = 0; it < iters; ++it) {
        CHECK_OK(rc::attention_prefill_positions(q, n, heads, kvp, scale, pos, out, rc::DType::kBf16, lse, nullptr));
      }
      CHECK_CUDA(cudaEventRecord(t1));
      CHECK_CUDA(cudaEventSynchronize(t1));
      float pms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&pms, t0, t1));
      pms /= iters;
      std::printf("prefill_positions,%d,%d,%d,%d,%d,%.3f,%.1f\n", n, n, heads, kv_heads, d, pms,
                  flops / (pms * 1e-3) / 1e12);
      std::fflush(stdout);
      cudaFree(pos);
    }
    cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(table); cudaFree(out); cudaFree(lse);
  }

  for (int len : dec_lens) {
    for (int batch : dec_batches) {
      const int nblk = (len + bs - 1) / bs;
      const size_t pool_tokens = static_cast<size_t>(batch) * nblk * bs;
      uint16_t* q = alloc_random(static_cast<size_t>(batch) * heads * d, 4);
      uint16_t* k = alloc_random(pool_tokens * kv_heads * d, 5);
      uint16_t* v = alloc_random(pool_tokens * kv_heads * d, 6);
      int32_t *tables = nullptr, *lens = nullptr;
      CHECK_CUDA(cudaMalloc(&tables, static_cast<size_t>(batch) * nblk * sizeof(int32_t)));
      fill_iota<<<64, 256>>>(tables, batch * nblk);
      std::vector<int32_t> hl(batch, len);
      CHECK_CUDA(cudaMalloc(&lens, batch * sizeof(int32_t)));
      CHECK_CUDA(cudaMemcpy(lens, hl.data(), batch * sizeof(int32_t), cudaMemcpyHostToDevice));
      float *out = nullptr, *lse = nullptr;
      CHECK_CUDA(cudaMalloc(&out, static_cast<size_t>(batch) * heads * d * 4));
      CHECK_CUDA(cudaMalloc(&lse, static_cast<size_t>(batch) * heads * 4));
      const rc::DecodeBatchBf16 db{q, k, v, tables, lens, batch, nblk, bs, heads, kv_heads, d};
      const rc::DecodePlan plan = rc::plan_attention_decode(batch, kv_heads, len, prop.multiProcessorCount);
      const size_t wsb = rc::attention_decode_workspace_bytes(db, plan);
      void* ws = nullptr;
      if (wsb) CHECK_CUDA(cudaMalloc(&ws, wsb));
      CHECK_OK(rc::attention_decode(db, scale, plan, ws, wsb, out, lse, nullptr));
      CHECK_CUDA(cudaDeviceSynchronize());
      const int reps = 20;
      CHECK_CUDA(cudaEventRecord(t0));
      for (int it = 0; it < reps; ++it) CHECK_OK(rc::attention_decode(db, scale, plan, ws, wsb, out, lse, nullptr));
      CHECK_CUDA(cudaEventRecord(t1));
      CHECK_CUDA(cudaEventSynchronize(t1));
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, t0, t1));
      const double us = ms * 1e3 / reps;
      const double bytes = 2.0 * pool_tokens * kv_heads * d * 2;  // K and V read once
      std::printf("decode,%d,%d,%d,%d,%d,%.2f,%.1f\n", batch, len, heads, kv_heads, d, us, bytes / (us * 1e-6) / 1e9);
      std::fflush(stdout);
      cudaFree(q); cudaFree(k); cudaFree(v); cudaFree(tables); cudaFree(lens); cudaFree(out); cudaFree(lse);
      if (ws) cudaFree(ws);
    }
  }
  return 0;
}
