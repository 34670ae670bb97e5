// CUDA paged prefill (flash-attention style) and split-KV decode vs a naive double reference and vs
// the CPU kernels (ragd/kernels/attention.h), on bf16-exact inputs in shuffled pages whose unused
// slots hold NaN (a kernel reading past kv_len poisons its output).
// Tolerances (max |a−b| / (1+|b|)):
//   prefill out 1e-2: P is rounded to bf16 (2^-9 relative) before the tensor-core P·V product;
//   prefill LSE 4e-3 (absolute, natural log): the row sum adds the bf16-rounded P;
//   decode out and LSE 1e-4: fp32 throughout, only the summation order differs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/cuda/attention.h"

namespace ragd::kernels::cuda {
namespace {

using namespace testing;  // NOLINT

constexpr uint16_t kBf16Nan = 0x7fc0;

// K/V of one sequence ([len, kv_heads, d], bf16-exact floats) written into shuffled pages of a pool.
struct Pages {
  std::vector<uint16_t> k, v;   // pool [num_blocks, block_size, kv_heads, d]
  std::vector<float> kf, vf;    // the same pool as floats (NaN in unused slots) for the CPU kernels
  std::vector<int32_t> table;   // [ceil(len / block_size)]
};

Pages make_pages(const std::vector<float>& kc, const std::vector<float>& vc, int len, int kv_heads, int d,
                 int block_size, int extra_blocks, uint32_t seed) {
  Pages p;
  const int nblk = (len + block_size - 1) / block_size;
  const int total = nblk + extra_blocks;
  const size_t tok = static_cast<size_t>(kv_heads) * d;
  p.k.assign(static_cast<size_t>(total) * block_size * tok, kBf16Nan);
  p.v = p.k;
  std::vector<int32_t> ids(total);
  std::iota(ids.begin(), ids.end(), 0);
  std::mt19937 rng(seed);
  std::shuffle(ids.begin(), ids.end(), rng);
  p.table.assign(ids.begin(), ids.begin() + nblk);
  for (int j = 0; j < len; ++j) {
    const size_t dst = (static_cast<size_t>(p.table[j / block_size]) * block_size + j % block_size) * tok;
    for (size_t i = 0; i < tok; ++i) {
      p.k[dst + i] = f32_to_bf16(kc[j * tok + i]);
      p.v[dst + i] = f32_to_bf16(vc[j * tok + i]);
    }
  }
  p.kf = from_bf16(p.k);
  p.vf = from_bf16(p.v);
  return p;
}

// Naive attention in double: q [n_q, H, d], k/v [kv_len, kvH, d] contiguous.
void reference(const std::vector<float>& q, int n_q, int H, const std::vector<float>& k, const std::vector<float>& v,
               int kv_len, int kvH, int d, double scale, bool causal, int q_offset, std::vector<double>& out,
               std::vector<double>& lse) {
  out.assign(static_cast<size_t>(n_q) * H * d, 0.0);
  lse.assign(static_cast<size_t>(n_q) * H, -INFINITY);
  const int group = H / kvH;
  for (int i = 0; i < n_q; ++i)
    for (int h = 0; h < H; ++h) {
      const int kh = h / group;
      const int last = causal ? std::min(kv_len - 1, i + q_offset) : kv_len - 1;
      if (last < 0) continue;
      std::vector<double> s(last + 1);
      double m = -INFINITY;
      for (int j = 0; j <= last; ++j) {
        double dot = 0;
        for (int t = 0; t < d; ++t) dot += double(q[(i * H + h) * d + t]) * k[(j * kvH + kh) * d + t];
        s[j] = dot * scale;
        m = std::max(m, s[j]);
      }
      double sum = 0;
      for (double& x : s) sum += (x = std::exp(x - m));
      for (int j = 0; j <= last; ++j)
        for (int t = 0; t < d; ++t) out[(i * H + h) * d + t] += s[j] / sum * v[(j * kvH + kh) * d + t];
      lse[i * H + h] = m + std::log(sum);
    }
}

struct PrefillCase {
  int d, heads, kv_heads, n_q, kv_len, q_offset;
  bool causal;
  DType out_dtype = DType::kF32;
  // Queries scaled by this before rounding: > 1 makes the softmax peaked, so that keys or values
  // read from the wrong rows of a tile change the output (a near-uniform softmax averages them out).
  float q_gain = 1.0f;
  int block_size = 16;  // not a power of two: the pool row is found by division instead of shifts
};

class PrefillCuda : public ::testing::TestWithParam<PrefillCase> {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
};

TEST_P(PrefillCuda, MatchesReferenceAndCpu) {
  const PrefillCase c = GetParam();
  const int bs = c.block_size;
  const uint32_t seed = c.d * 1000 + c.n_q * 10 + c.kv_len;
  const auto q = round_bf16(random_vec(static_cast<size_t>(c.n_q) * c.heads * c.d, seed, -c.q_gain, c.q_gain));
  const auto kc = round_bf16(random_vec(static_cast<size_t>(c.kv_len) * c.kv_heads * c.d, seed + 1));
  const auto vc = round_bf16(random_vec(static_cast<size_t>(c.kv_len) * c.kv_heads * c.d, seed + 2));
  const Pages pages = make_pages(kc, vc, c.kv_len, c.kv_heads, c.d, bs, 3, seed + 3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));

  std::vector<double> ref_o, ref_l;
  reference(q, c.n_q, c.heads, kc, vc, c.kv_len, c.kv_heads, c.d, scale, c.causal, c.q_offset, ref_o, ref_l);

  PagedKv cpu_kv{pages.kf.data(), pages.vf.data(), pages.table.data(), bs, c.kv_heads, c.d, c.kv_len};
  std::vector<float> cpu_o(ref_o.size()), cpu_l(ref_l.size());
  RAGD_STATUS_OK(kernels::attention_prefill(q.data(), c.n_q, c.heads, cpu_kv, scale, c.causal, c.q_offset,
                                            cpu_o.data(), cpu_l.data()));

  DeviceBuffer<uint16_t> dq(to_bf16(q)), dk(pages.k), dv(pages.v);
  DeviceBuffer<int32_t> dt(pages.table.empty() ? std::vector<int32_t>{0} : pages.table);
  DeviceBuffer<float> dl(ref_l.size());
  PagedKvBf16 kv{dk.get(), dv.get(), dt.get(), bs, c.kv_heads, c.d, c.kv_len};
  std::vector<float> gpu_o;
  if (c.out_dtype == DType::kF32) {
    DeviceBuffer<float> dout(ref_o.size());
    RAGD_STATUS_OK(attention_prefill(dq.get(), c.n_q, c.heads, kv, scale, c.causal, c.q_offset, dout.get(),
                                     DType::kF32, dl.get(), nullptr));
    gpu_o = dout.download();
  } else {
    DeviceBuffer<uint16_t> dout(ref_o.size());
    RAGD_STATUS_OK(attention_prefill(dq.get(), c.n_q, c.heads, kv, scale, c.causal, c.q_offset, dout.get(),
                                     DType::kBf16, dl.get(), nullptr));
    gpu_o = from_bf16(dout.download());
  }
  const auto gpu_l = dl.download();
  EXPECT_LE(max_err(gpu_o, ref_o), 1e-2);
  EXPECT_LE(max_err(gpu_o, cpu_o), 1e-2);
  EXPECT_LE(max_err(gpu_l, ref_l), 4e-3);
  EXPECT_LE(max_err(gpu_l, cpu_l), 4e-3);
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, PrefillCuda,
    ::testing::Values(PrefillCase{64, 4, 4, 7, 7, 0, true},             // tiny, one partial tile
                      PrefillCase{128, 8, 2, 33, 33, 0, true},          // GQA 4
                      PrefillCase{128, 8, 2, 129, 129, 0, true},        // 3 query tiles, 3 key tiles
                      PrefillCase{64, 8, 2, 33, 70, 37, true},          // chunked prefill (q_offset)
                      PrefillCase{128, 4, 1, 129, 200, 71, true},       // GQA 4, chunk after 71 cached keys
                      PrefillCase{128, 4, 4, 33, 129, 0, false},        // not causal
                      PrefillCase{64, 6, 3, 7, 33, 0, false},           // GQA 2
                      PrefillCase{128, 8, 2, 129, 129, 0, true, DType::kBf16},  // bf16 output
                      PrefillCase{64, 4, 2, 7, 0, 0, false},            // no keys: o = 0, lse = -inf
                      PrefillCase{32, 6, 2, 45, 80, 35, true},          // head_dim 32, GQA 3 (the QA model)
                      // Peaked softmax, several 128-query / 128-key tiles (the Hopper kernel's tile
                      // shape) with partial ones, unaligned chunk offsets:
                      PrefillCase{128, 4, 2, 300, 300, 0, true, DType::kF32, 6.0f},
                      PrefillCase{128, 2, 1, 257, 700, 443, true, DType::kBf16, 6.0f},
                      PrefillCase{64, 4, 4, 200, 390, 0, false, DType::kF32, 6.0f},
                      PrefillCase{128, 4, 4, 64, 1000, 936, true, DType::kF32, 4.0f},
                      PrefillCase{64, 8, 2, 129, 129, 0, true, DType::kBf16, 6.0f},
                      PrefillCase{128, 4, 2, 150, 290, 140, true, DType::kF32, 6.0f, 12}),
    [](const auto& info) {
      const PrefillCase& c = info.param;
      return "d" + std::to_string(c.d) + "_h" + std::to_string(c.heads) + "_kv" + std::to_string(c.kv_heads) + "_nq" +
             std::to_string(c.n_q) + "_len" + std::to_string(c.kv_len) + "_off" + std::to_string(c.q_offset) +
             (c.causal ? "_causal" : "_full") + (c.out_dtype == DType::kBf16 ? "_bf16out" : "") +
             (c.q_gain != 1.0f ? "_peaked" : "") + (c.block_size != 16 ? "_bs" + std::to_string(c.block_size) : "");
    });

// Sets an environment variable for the scope of one check, then restores it.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (had_) {
      ::setenv(name_, old_.c_str(), 1);
    } else {
      ::unsetenv(name_);
    }
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

bool device_is_hopper() {
  int major = 0, minor = 0;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0);
  return major == 9 && minor == 0;
}

// The dispatcher's choice follows the device and the switches: on a Hopper GPU head_dim 64 / 128
// take a wgmma kernel (the schedule from RAGD_PREFILL_SM90_SCHEDULE; an unknown value is refused by
// name), head_dim 32 the mma.sync kernel; elsewhere always mma.sync.
TEST(PrefillKernelChoice, FollowsTheDeviceAndTheSwitches) {
  RAGD_REQUIRE_CUDA();
  const bool hopper = device_is_hopper();
  EXPECT_STREQ(attention_prefill_kernel(128), hopper ? "sm90-wgmma" : "mma.sync");
  EXPECT_STREQ(attention_prefill_kernel(64), hopper ? "sm90-wgmma" : "mma.sync");
  EXPECT_STREQ(attention_prefill_kernel(32), "mma.sync");
  {
    ScopedEnv serial("RAGD_PREFILL_SM90_SCHEDULE", "serial");
    EXPECT_STREQ(attention_prefill_kernel(128), hopper ? "sm90-wgmma-serial" : "mma.sync");
  }
  {
    ScopedEnv ws("RAGD_PREFILL_SM90_SCHEDULE", "ws");
    EXPECT_STREQ(attention_prefill_kernel(64), hopper ? "sm90-wgmma-ws" : "mma.sync");
  }
  if (hopper) {
    ScopedEnv bad("RAGD_PREFILL_SM90_SCHEDULE", "fast");
    DeviceBuffer<uint16_t> q(4 * 64), k(16 * 64), v(16 * 64), out(4 * 64);
    DeviceBuffer<int32_t> table(std::vector<int32_t>{0});
    DeviceBuffer<float> lse(4);
    const PagedKvBf16 kv{k.get(), v.get(), table.get(), 16, 1, 64, 4};
    const Status st = attention_prefill(q.get(), 4, 1, kv, 0.125f, true, 0, out.get(), DType::kBf16, lse.get(), nullptr);
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
    EXPECT_NE(st.message().find("RAGD_PREFILL_SM90_SCHEDULE=fast"), std::string::npos) << st.to_string();
  }
  ScopedEnv off("RAGD_CUDA_WGMMA", "0");
  EXPECT_STREQ(attention_prefill_kernel(128), "mma.sync");
}

// Each prefill kernel, on one long causal chunk (1,531 queries after 211 cached keys, peaked softmax,
// bf16 out) against the double reference (same tolerances as above), so the schedules are checked on
// many full tiles. One instance per kernel (a kernel that hangs or faults is then one failed
// instance); the wgmma ones skip where the device is not a Hopper GPU.
struct KernelSetting {
  const char* name;  // the test instance and the kernel attention_prefill_kernel must report
  const char* wgmma;
  const char* schedule;
};

class PrefillKernels : public ::testing::TestWithParam<KernelSetting> {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
};

TEST_P(PrefillKernels, MatchTheReferenceOnALongChunk) {
  const KernelSetting st = GetParam();
  ScopedEnv e1("RAGD_CUDA_WGMMA", st.wgmma);
  ScopedEnv e2("RAGD_PREFILL_SM90_SCHEDULE", st.schedule);
  const int d = 128, heads = 4, kv_heads = 1, n_q = 1531, q_offset = 211, kv_len = q_offset + n_q, bs = 16;
  const std::string kernel = attention_prefill_kernel(d);
  if (std::string(st.wgmma) == "1" && !device_is_hopper()) GTEST_SKIP() << "not a Hopper GPU: " << kernel;
  ASSERT_EQ(kernel, std::string(st.wgmma) == "1" ? "sm90-wgmma" + std::string(st.name) : "mma.sync");
  const auto q = round_bf16(random_vec(static_cast<size_t>(n_q) * heads * d, 91, -6.0f, 6.0f));
  const auto kc = round_bf16(random_vec(static_cast<size_t>(kv_len) * kv_heads * d, 92));
  const auto vc = round_bf16(random_vec(static_cast<size_t>(kv_len) * kv_heads * d, 93));
  const Pages pages = make_pages(kc, vc, kv_len, kv_heads, d, bs, 5, 94);
  const float scale = 1.0f / std::sqrt(static_cast<float>(d));
  std::vector<double> ref_o, ref_l;
  reference(q, n_q, heads, kc, vc, kv_len, kv_heads, d, scale, true, q_offset, ref_o, ref_l);

  DeviceBuffer<uint16_t> dq(to_bf16(q)), dk(pages.k), dv(pages.v), dout(ref_o.size());
  DeviceBuffer<int32_t> dt(pages.table);
  DeviceBuffer<float> dl(ref_l.size());
  PagedKvBf16 kv{dk.get(), dv.get(), dt.get(), bs, kv_heads, d, kv_len};
  RAGD_STATUS_OK(attention_prefill(dq.get(), n_q, heads, kv, scale, true, q_offset, dout.get(), DType::kBf16,
                                   dl.get(), nullptr));
  EXPECT_LE(max_err(from_bf16(dout.download()), ref_o), 1e-2);
  EXPECT_LE(max_err(dl.download(), ref_l), 4e-3);
}

INSTANTIATE_TEST_SUITE_P(LongChunk, PrefillKernels,
                         ::testing::Values(KernelSetting{"", "1", "pipelined"}, KernelSetting{"-serial", "1", "serial"},
                                           KernelSetting{"-ws", "1", "ws"}, KernelSetting{"mma", "0", "pipelined"}),
                         [](const auto& info) {
                           const std::string n = info.param.name;
                           return n.empty() ? std::string("wgmma") : n == "mma" ? n : "wgmma_" + n.substr(1);
                         });

// Explicit positions (the engine's non-contiguous steps) against the CPU kernel of the same
// contract: sparse queries at shuffled positions over slot == position keys, and zigzag-like key
// positions with holes. Same tolerances as the prefill above.
struct PositionsCase {
  int d, heads, kv_heads, n_q, kv_len;
  bool key_positions;  // false: slot j holds position j
  // A 2-worker zigzag shard (needs key_positions, n_q == kv_len): slots hold positions [0, L/2) and
  // [3L/2, 2L), the queries are the same positions in order, so the first query tiles see none of
  // the far chunk's key tiles (the Hopper kernel skips those tiles).
  bool zigzag = false;
  float q_gain = 1.0f;  // as in PrefillCase
};

class PrefillPositionsCuda : public ::testing::TestWithParam<PositionsCase> {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
};

TEST_P(PrefillPositionsCuda, MatchesCpu) {
  const PositionsCase c = GetParam();
  const int bs = 16;
  const uint32_t seed = 7 * c.d + c.n_q + c.kv_len;
  std::mt19937 rng(seed);
  const auto q = round_bf16(random_vec(static_cast<size_t>(c.n_q) * c.heads * c.d, seed, -c.q_gain, c.q_gain));
  const auto kc = round_bf16(random_vec(static_cast<size_t>(c.kv_len) * c.kv_heads * c.d, seed + 1));
  const auto vc = round_bf16(random_vec(static_cast<size_t>(c.kv_len) * c.kv_heads * c.d, seed + 2));
  const Pages pages = make_pages(kc, vc, c.kv_len, c.kv_heads, c.d, bs, 2, seed + 3);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  std::vector<int32_t> key_pos;
  std::vector<int32_t> q_pos(c.n_q);
  if (c.zigzag) {
    ASSERT_TRUE(c.key_positions && c.n_q == c.kv_len);
    key_pos.resize(c.kv_len);
    for (int j = 0; j < c.kv_len; ++j) key_pos[j] = j < c.kv_len / 2 ? j : c.kv_len + j;
    q_pos = key_pos;
  } else {
    int32_t max_pos = c.kv_len - 1;
    if (c.key_positions) {  // two interleaved ranges (a zigzag shard) and a few holes
      key_pos.resize(c.kv_len);
      for (int j = 0; j < c.kv_len; ++j) key_pos[j] = j < c.kv_len / 2 ? j : 3 * c.kv_len + j;
      for (int j = 5; j < c.kv_len; j += 37) key_pos[j] = std::numeric_limits<int32_t>::max();
      max_pos = 4 * c.kv_len;
    }
    for (auto& p : q_pos) p = static_cast<int32_t>(rng() % (max_pos + 1));
    q_pos[0] = max_pos;  // one query sees everything
    for (auto& p : q_pos) p = std::max<int32_t>(p, 1);  // every query sees key 0 (position 0)
  }

  PagedKv cpu_kv{pages.kf.data(), pages.vf.data(), pages.table.data(), bs, c.kv_heads, c.d, c.kv_len};
  cpu_kv.key_pos = key_pos.empty() ? nullptr : key_pos.data();
  std::vector<float> cpu_o(static_cast<size_t>(c.n_q) * c.heads * c.d), cpu_l(static_cast<size_t>(c.n_q) * c.heads);
  RAGD_STATUS_OK(kernels::attention_prefill_positions(q.data(), c.n_q, c.heads, cpu_kv, scale, q_pos.data(),
                                                      cpu_o.data(), cpu_l.data()));

  DeviceBuffer<uint16_t> dq(to_bf16(q)), dk(pages.k), dv(pages.v);
  DeviceBuffer<int32_t> dt(pages.table), dqp(q_pos), dkp(key_pos.empty() ? std::vector<int32_t>{0} : key_pos);
  DeviceBuffer<float> dout(cpu_o.size()), dl(cpu_l.size());
  PagedKvBf16 kv{dk.get(), dv.get(), dt.get(), bs, c.kv_heads, c.d, c.kv_len};
  kv.key_pos = key_pos.empty() ? nullptr : dkp.get();
  RAGD_STATUS_OK(attention_prefill_positions(dq.get(), c.n_q, c.heads, kv, scale, dqp.get(), dout.get(), DType::kF32,
                                             dl.get(), nullptr));
  EXPECT_LE(max_err(dout.download(), cpu_o), 1e-2);
  EXPECT_LE(max_err(dl.download(), cpu_l), 4e-3);
}

INSTANTIATE_TEST_SUITE_P(Shapes, PrefillPositionsCuda,
                         ::testing::Values(PositionsCase{64, 4, 2, 37, 150, false}, PositionsCase{128, 8, 2, 70, 129, true},
                                           PositionsCase{32, 6, 2, 9, 200, true}, PositionsCase{64, 4, 4, 130, 77, false},
                                           // peaked, several 128-key tiles:
                                           PositionsCase{128, 4, 2, 300, 700, true, false, 6.0f},
                                           PositionsCase{64, 4, 4, 257, 400, false, false, 6.0f},
                                           // zigzag shards (tiles skipped), one with a partial tile:
                                           PositionsCase{128, 4, 1, 1024, 1024, true, true, 6.0f},
                                           PositionsCase{64, 2, 2, 700, 700, true, true, 6.0f}),
                         [](const auto& info) {
                           const PositionsCase& c = info.param;
                           return "d" + std::to_string(c.d) + "_h" + std::to_string(c.heads) + "_kv" +
                                  std::to_string(c.kv_heads) + "_nq" + std::to_string(c.n_q) + "_len" +
                                  std::to_string(c.kv_len) + (c.key_positions ? "_keypos" : "_slots") +
                                  (c.zigzag ? "_zigzag" : "") + (c.q_gain != 1.0f ? "_peaked" : "");
                         });

struct DecodeCase {
  int d, heads, kv_heads, splits;  // splits 0 = planner's choice
  int plan_len = 300;              // max_kv_len the plan is made for (< 300: the last split takes the rest)
};

class DecodeCuda : public ::testing::TestWithParam<DecodeCase> {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
};

TEST_P(DecodeCuda, MatchesReferenceAndCpu) {
  const DecodeCase c = GetParam();
  const int bs = 16;
  const std::vector<int> lens = {7, 33, 129, 0, 300};
  const int batch = static_cast<int>(lens.size());
  const int max_blocks = (300 + bs - 1) / bs + 1;
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.d));
  const size_t tok = static_cast<size_t>(c.kv_heads) * c.d;

  // One shared pool: every sequence's pages appended, tables offset into it.
  std::vector<uint16_t> pool_k, pool_v;
  std::vector<int32_t> tables(static_cast<size_t>(batch) * max_blocks, 0);
  std::vector<std::vector<float>> qs, ks, vs;
  std::vector<std::vector<double>> ref_o(batch), ref_l(batch);
  std::vector<Pages> pages;
  int base_block = 0;
  for (int b = 0; b < batch; ++b) {
    const uint32_t seed = 900 + 17 * b + c.d + c.heads;
    qs.push_back(round_bf16(random_vec(static_cast<size_t>(c.heads) * c.d, seed)));
    ks.push_back(round_bf16(random_vec(lens[b] * tok, seed + 1)));
    vs.push_back(round_bf16(random_vec(lens[b] * tok, seed + 2)));
    pages.push_back(make_pages(ks[b], vs[b], lens[b], c.kv_heads, c.d, bs, 2, seed + 3));
    for (size_t i = 0; i < pages[b].table.size(); ++i) tables[b * max_blocks + i] = pages[b].table[i] + base_block;
    pool_k.insert(pool_k.end(), pages[b].k.begin(), pages[b].k.end());
    pool_v.insert(pool_v.end(), pages[b].v.begin(), pages[b].v.end());
    base_block += static_cast<int>(pages[b].k.size() / (bs * tok));
    reference(qs[b], 1, c.heads, ks[b], vs[b], lens[b], c.kv_heads, c.d, scale, false, 0, ref_o[b], ref_l[b]);
  }

  // CPU oracle over the same pages.
  std::vector<float> cpu_o(static_cast<size_t>(batch) * c.heads * c.d), cpu_l(static_cast<size_t>(batch) * c.heads);
  std::vector<DecodeItem> items(batch);
  for (int b = 0; b < batch; ++b) {
    items[b].q = qs[b].data();
    items[b].kv = PagedKv{pages[b].kf.data(), pages[b].vf.data(), pages[b].table.data(), bs, c.kv_heads, c.d, lens[b]};
    items[b].out = cpu_o.data() + static_cast<size_t>(b) * c.heads * c.d;
    items[b].lse = cpu_l.data() + static_cast<size_t>(b) * c.heads;
  }
  RAGD_STATUS_OK(kernels::attention_decode(items, c.heads, scale, 2));

  std::vector<float> qall;
  for (auto& q : qs) qall.insert(qall.end(), q.begin(), q.end());
  DeviceBuffer<uint16_t> dq(to_bf16(qall)), dk(pool_k), dv(pool_v);
  DeviceBuffer<int32_t> dt(tables), dlen(std::vector<int32_t>(lens.begin(), lens.end()));
  DeviceBuffer<float> dout(cpu_o.size()), dl(cpu_l.size());
  DecodeBatchBf16 db{dq.get(), dk.get(), dv.get(), dt.get(), dlen.get(), batch, max_blocks, bs, c.heads, c.kv_heads, c.d};
  const DecodePlan plan = plan_attention_decode(batch, c.kv_heads, c.plan_len, 132, c.splits);
  const size_t ws_bytes = attention_decode_workspace_bytes(db, plan);
  DeviceBuffer<unsigned char> ws(std::max<size_t>(ws_bytes, 1));
  RAGD_STATUS_OK(attention_decode(db, scale, plan, ws.get(), ws_bytes, dout.get(), dl.get(), nullptr));
  const auto gpu_o = dout.download();
  const auto gpu_l = dl.download();

  for (int b = 0; b < batch; ++b) {
    const size_t no = static_cast<size_t>(c.heads) * c.d;
    std::vector<float> go(gpu_o.begin() + b * no, gpu_o.begin() + (b + 1) * no);
    std::vector<float> gl(gpu_l.begin() + b * c.heads, gpu_l.begin() + (b + 1) * c.heads);
    std::vector<float> co(cpu_o.begin() + b * no, cpu_o.begin() + (b + 1) * no);
    std::vector<float> cl(cpu_l.begin() + b * c.heads, cpu_l.begin() + (b + 1) * c.heads);
    EXPECT_LE(max_err(go, ref_o[b]), 1e-4) << "seq " << b << " kv_len " << lens[b] << " splits " << plan.num_splits;
    EXPECT_LE(max_err(gl, ref_l[b]), 1e-4) << "seq " << b << " kv_len " << lens[b] << " splits " << plan.num_splits;
    EXPECT_LE(max_err(go, co), 1e-4) << "seq " << b;
    EXPECT_LE(max_err(gl, cl), 1e-4) << "seq " << b;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DecodeCuda,
                         ::testing::Values(DecodeCase{128, 8, 8, 1}, DecodeCase{128, 32, 8, 3},
                                           DecodeCase{64, 16, 2, 0}, DecodeCase{64, 4, 2, 7},
                                           DecodeCase{128, 32, 8, 0}, DecodeCase{128, 16, 4, 3, 100},
                                           DecodeCase{32, 6, 2, 2}),
                         [](const auto& info) {
                           const DecodeCase& c = info.param;
                           return "d" + std::to_string(c.d) + "_h" + std::to_string(c.heads) + "_kv" +
                                  std::to_string(c.kv_heads) + "_splits" +
                                  (c.splits ? std::to_string(c.splits) : std::string("auto")) +
                                  (c.plan_len != 300 ? "_plan" + std::to_string(c.plan_len) : std::string());
                         });

}  // namespace
}  // namespace ragd::kernels::cuda
