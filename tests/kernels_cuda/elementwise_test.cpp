// CUDA RMSNorm, RoPE (+ re-rotation), SwiGLU, embedding gather, LSE merge, argmax, paged KV writes
// and bf16 GEMM vs naive double references and vs the CPU kernels (the oracle).
// Tolerances (max |a−b| / (1+|b|)): f32 outputs 1e-5 (same formula, different summation order);
// bf16 outputs 8e-3 (one bf16 rounding of the result: 2^-8 relative); bf16 GEMM into f32 1e-4;
// LSE merge 2e-6 (a few ulp of expf / logf on each side).
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ragd/kernels/activation.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/gemm.h"
#include "ragd/kernels/cuda/lse_merge.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/cuda/sampling.h"
#include "ragd/kernels/lse_merge.h"
#include "ragd/kernels/norm.h"
#include "ragd/kernels/rope.h"

namespace ragd::kernels::cuda {
namespace {

using namespace testing;  // NOLINT

constexpr double kTolF32 = 1e-5;
constexpr double kTolBf16 = 8e-3;

// Device copy of host floats in `dtype` (bf16 inputs must already be bf16-exact).
class DeviceTensor {
 public:
  DeviceTensor(DType dtype, const std::vector<float>& host) : dtype_(dtype), f32_(dtype == DType::kF32 ? host.size() : 0),
                                                              b16_(dtype == DType::kBf16 ? host.size() : 0) {
    if (dtype_ == DType::kF32) f32_.upload(host);
    else b16_.upload(to_bf16(host));
  }
  void* get() const { return dtype_ == DType::kF32 ? static_cast<void*>(f32_.get()) : static_cast<void*>(b16_.get()); }
  std::vector<float> download() const { return dtype_ == DType::kF32 ? f32_.download() : from_bf16(b16_.download()); }

 private:
  DType dtype_;
  DeviceBuffer<float> f32_;
  DeviceBuffer<uint16_t> b16_;
};

class ElementwiseCuda : public ::testing::TestWithParam<DType> {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
  DType dtype() const { return GetParam(); }
  double tol() const { return GetParam() == DType::kF32 ? kTolF32 : kTolBf16; }
  std::vector<float> input(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) const {
    auto v = random_vec(n, seed, lo, hi);
    return GetParam() == DType::kF32 ? v : round_bf16(v);
  }
};

TEST_P(ElementwiseCuda, RmsNormMatchesReferenceAndCpu) {
  for (int rows : {7, 33}) {
    const int dim = 129, xs = dim + 3, ys = dim + 5;
    const float eps = 1e-5f;
    auto x = input(static_cast<size_t>(rows) * xs, 11 + rows);
    auto w = input(dim, 12, 0.5f, 1.5f);
    DeviceTensor dx(dtype(), x), dw(dtype(), w), dy(dtype(), std::vector<float>(static_cast<size_t>(rows) * ys, 7.0f));
    RAGD_STATUS_OK(rmsnorm(dtype(), dx.get(), rows, dim, xs, dw.get(), eps, dy.get(), ys, nullptr));
    const auto y = dy.download();
    std::vector<float> cpu(static_cast<size_t>(rows) * ys, 7.0f);
    kernels::rmsnorm(x.data(), rows, dim, xs, w.data(), eps, cpu.data(), ys);
    std::vector<double> ref(y.size(), 7.0);
    for (int r = 0; r < rows; ++r) {
      double ss = 0;
      for (int i = 0; i < dim; ++i) ss += double(x[r * xs + i]) * x[r * xs + i];
      const double inv = 1.0 / std::sqrt(ss / dim + eps);
      for (int i = 0; i < dim; ++i) ref[r * ys + i] = x[r * xs + i] * inv * w[i];
    }
    EXPECT_LE(max_err(y, ref), tol()) << "rows=" << rows;
    EXPECT_LE(max_err(y, cpu), tol()) << "rows=" << rows;
    // Output in the other dtype (f32 residual → bf16 GEMM input, and back); rows past dim untouched.
    const DType other = dtype() == DType::kF32 ? DType::kBf16 : DType::kF32;
    DeviceTensor dz(other, std::vector<float>(static_cast<size_t>(rows) * ys, 7.0f));
    RAGD_STATUS_OK(rmsnorm(dtype(), dx.get(), rows, dim, xs, dw.get(), eps, other, dz.get(), ys, nullptr));
    EXPECT_LE(max_err(dz.download(), ref), kTolBf16) << "rows=" << rows << " (other output dtype)";
  }
  // An output that aliases the input cannot change dtype.
  DeviceTensor dx(dtype(), std::vector<float>(129, 1.0f)), dw(dtype(), std::vector<float>(129, 1.0f));
  const DType other = dtype() == DType::kF32 ? DType::kBf16 : DType::kF32;
  EXPECT_EQ(rmsnorm(dtype(), dx.get(), 1, 64, 64, dw.get(), 1e-5f, other, dx.get(), 64, nullptr).code(),
            StatusCode::kInvalidArgument);
}

TEST_P(ElementwiseCuda, RopeApplyAndRerotateMatchCpu) {
  const int rows = 33, heads = 3, hd = 64, stride = heads * hd + 5;
  RopeConfig cfg;
  cfg.head_dim = hd;
  cfg.theta = 500000.0;
  cfg.scaling = RopeConfig::Scaling::kLlama3;
  cfg.factor = 8.0;
  std::vector<float> inv(hd / 2);
  rope_inv_freq(cfg, inv.data());
  std::vector<int32_t> pos(rows);
  std::mt19937 rng(5);
  for (auto& p : pos) p = static_cast<int32_t>(rng() % 131072);
  const auto x = input(static_cast<size_t>(rows) * stride, 21);
  DeviceBuffer<float> dinv(inv);
  DeviceBuffer<int32_t> dpos(pos);

  DeviceTensor dx(dtype(), x);
  RAGD_STATUS_OK(rope_apply(dtype(), dx.get(), rows, heads, hd, stride, dpos.get(), dinv.get(), nullptr));
  const auto y = dx.download();
  auto cpu = x;
  kernels::rope_apply(cpu.data(), rows, heads, hd, stride, pos.data(), inv.data());
  std::vector<double> ref(x.begin(), x.end());
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < heads; ++h)
      for (int i = 0; i < hd / 2; ++i) {
        const size_t a = static_cast<size_t>(r) * stride + h * hd + i, b = a + hd / 2;
        const double ang = double(pos[r]) * inv[i];
        ref[a] = x[a] * std::cos(ang) - double(x[b]) * std::sin(ang);
        ref[b] = x[b] * std::cos(ang) + double(x[a]) * std::sin(ang);
      }
  EXPECT_LE(max_err(y, ref), tol());
  EXPECT_LE(max_err(y, cpu), tol());

  // Re-rotation by a delta (negative too) turns RoPE at p into RoPE at p + delta.
  for (int64_t delta : {int64_t{1234}, int64_t{-77}}) {
    DeviceTensor dz(dtype(), x);
    RAGD_STATUS_OK(rope_apply(dtype(), dz.get(), rows, heads, hd, stride, dpos.get(), dinv.get(), nullptr));
    RAGD_STATUS_OK(rope_rerotate(dtype(), dz.get(), rows, heads, hd, stride, delta, dinv.get(), nullptr));
    const auto z = dz.download();
    std::vector<int32_t> moved(pos);
    for (auto& p : moved) p = static_cast<int32_t>(p + delta);
    auto want = x;
    kernels::rope_apply(want.data(), rows, heads, hd, stride, moved.data(), inv.data());
    // Two rotations in a row: twice the single-rotation rounding (bf16 rounds after each).
    EXPECT_LE(max_err(z, want), 2 * tol() + 1e-5) << "delta=" << delta;
  }
}

TEST_P(ElementwiseCuda, SwiGluFusedLayoutMatchesReferenceAndCpu) {
  const int rows = 7, dim = 129;
  const auto gu = input(static_cast<size_t>(rows) * 2 * dim, 31, -4.0f, 4.0f);
  DeviceTensor dgu(dtype(), gu), dy(dtype(), std::vector<float>(static_cast<size_t>(rows) * dim, 3.0f));
  // gate = p, up = p + dim, both with stride 2·dim (fused gate_up projection); y contiguous.
  const size_t esz = dtype() == DType::kF32 ? 4 : 2;
  const void* gate = dgu.get();
  const void* up = static_cast<const char*>(dgu.get()) + dim * esz;
  RAGD_STATUS_OK(swiglu(dtype(), rows, dim, gate, 2 * dim, up, 2 * dim, dy.get(), dim, nullptr));
  const auto y = dy.download();
  std::vector<float> cpu(static_cast<size_t>(rows) * dim);
  kernels::swiglu(rows, dim, gu.data(), 2 * dim, gu.data() + dim, 2 * dim, cpu.data(), dim);
  std::vector<double> ref(cpu.size());
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < dim; ++i) {
      const double g = gu[r * 2 * dim + i], u = gu[r * 2 * dim + dim + i];
      ref[r * dim + i] = g / (1.0 + std::exp(-g)) * u;
    }
  EXPECT_LE(max_err(y, ref), tol());
  EXPECT_LE(max_err(y, cpu), tol());
}

TEST_P(ElementwiseCuda, EmbeddingGatherCopiesRowsAndCountsBadIds) {
  const int vocab = 33, hidden = 129;
  const auto table = input(static_cast<size_t>(vocab) * hidden, 41);
  const std::vector<int32_t> ids = {5, 0, 32, -1, 7, 33, 5};
  DeviceTensor dt(dtype(), table), dout(dtype(), std::vector<float>(ids.size() * hidden, 9.0f));
  DeviceBuffer<int32_t> dids(ids);
  DeviceBuffer<int> bad(std::vector<int>{0});
  RAGD_STATUS_OK(embedding_gather(dtype(), dt.get(), vocab, hidden, dids.get(), static_cast<int>(ids.size()),
                                  dout.get(), bad.get(), nullptr));
  const auto out = dout.download();
  for (size_t r = 0; r < ids.size(); ++r)
    for (int i = 0; i < hidden; ++i) {
      const float want = (ids[r] < 0 || ids[r] >= vocab) ? 0.0f : table[ids[r] * hidden + i];
      ASSERT_EQ(out[r * hidden + i], want) << "row " << r << " id " << ids[r];
    }
  EXPECT_EQ(bad.download()[0], 2);
}

INSTANTIATE_TEST_SUITE_P(Dtypes, ElementwiseCuda, ::testing::Values(DType::kF32, DType::kBf16),
                         [](const auto& info) { return info.param == DType::kF32 ? "f32" : "bf16"; });

class MiscCuda : public ::testing::Test {
 protected:
  void SetUp() override { RAGD_REQUIRE_CUDA(); }
};

TEST_F(MiscCuda, MergeStatesMatchesCpuIncludingEmptyStates) {
  const int rows = 129, hd = 64;
  auto oa = random_vec(static_cast<size_t>(rows) * hd, 51), ob = random_vec(static_cast<size_t>(rows) * hd, 52);
  auto la = random_vec(rows, 53, -5.0f, 5.0f), lb = random_vec(rows, 54, -5.0f, 5.0f);
  const float ninf = -std::numeric_limits<float>::infinity();
  la[3] = ninf;              // a empty
  lb[7] = ninf;              // b empty
  la[11] = lb[11] = ninf;    // both empty -> o = 0, lse = -inf
  la[13] = 80.0f;            // far apart: must not overflow
  lb[13] = -80.0f;
  std::vector<float> co(oa.size()), cl(rows);
  kernels::merge_states(rows, hd, oa.data(), la.data(), ob.data(), lb.data(), co.data(), cl.data());
  std::vector<double> ro(oa.size()), rl(rows);
  for (int r = 0; r < rows; ++r) {
    const double m = std::max<double>(la[r], lb[r]);
    if (std::isinf(m)) {
      rl[r] = ninf;
      for (int i = 0; i < hd; ++i) ro[r * hd + i] = 0.0;
      continue;
    }
    const double l = m + std::log(std::exp(la[r] - m) + std::exp(lb[r] - m));
    rl[r] = l;
    for (int i = 0; i < hd; ++i) ro[r * hd + i] = std::exp(la[r] - l) * oa[r * hd + i] + std::exp(lb[r] - l) * ob[r * hd + i];
  }
  DeviceBuffer<float> doa(oa), dob(ob), dla(la), dlb(lb);
  DeviceBuffer<float> dout(oa.size()), dl(rows);
  RAGD_STATUS_OK(merge_states(rows, hd, doa.get(), dla.get(), dob.get(), dlb.get(), dout.get(), dl.get(), nullptr));
  EXPECT_LE(max_err(dout.download(), ro), 2e-6);
  EXPECT_LE(max_err(dl.download(), rl), 2e-6);
  EXPECT_LE(max_err(dout.download(), co), 2e-6);
  EXPECT_LE(max_err(dl.download(), cl), 2e-6);
  // In place (outputs alias a).
  RAGD_STATUS_OK(merge_states(rows, hd, doa.get(), dla.get(), dob.get(), dlb.get(), doa.get(), dla.get(), nullptr));
  EXPECT_LE(max_err(doa.download(), ro), 2e-6);
  EXPECT_LE(max_err(dla.download(), rl), 2e-6);
}

TEST_F(MiscCuda, ArgmaxPicksLowestIndexOnTiesAndSkipsNan) {
  const int rows = 7, vocab = 1033, stride = vocab + 3;
  auto logits = random_vec(static_cast<size_t>(rows) * stride, 61, -10.0f, 10.0f);
  std::vector<int32_t> want(rows);
  for (int r = 0; r < rows; ++r) {
    float* row = logits.data() + static_cast<size_t>(r) * stride;
    row[vocab] = 1000.0f;  // padding past vocab must be ignored
    const int a = (r * 97 + 13) % vocab, b = (r * 389 + 500) % vocab;
    row[a] = row[b] = 50.0f;  // tie
    if (r % 2) row[(a + 1) % vocab] = std::numeric_limits<float>::quiet_NaN();
    want[r] = std::min(a, b);
  }
  DeviceBuffer<float> dl(logits);
  DeviceBuffer<int32_t> dout(rows);
  RAGD_STATUS_OK(argmax_rows(dl.get(), rows, vocab, stride, dout.get(), nullptr, nullptr));
  EXPECT_EQ(dout.download(), want);
  // With the log-probability: −log Σ e^(v − max) over the row (NaNs skipped), in double on the host.
  DeviceBuffer<float> dlp(rows);
  RAGD_STATUS_OK(argmax_rows(dl.get(), rows, vocab, stride, dout.get(), dlp.get(), nullptr));
  EXPECT_EQ(dout.download(), want);
  const auto lp = dlp.download();
  for (int r = 0; r < rows; ++r) {
    const float* row = logits.data() + static_cast<size_t>(r) * stride;
    double sum = 0.0;
    for (int i = 0; i < vocab; ++i) {
      if (!std::isnan(row[i])) sum += std::exp(static_cast<double>(row[i]) - 50.0);
    }
    EXPECT_NEAR(lp[r], -std::log(sum), 1e-5) << "row " << r;
  }
}

TEST_F(MiscCuda, KvWriteScattersRowsIntoSlotsAndSkipsNegativeSlots) {
  const int n = 33, kvh = 2, d = 64, bs = 16, blocks = 5, stride = 3 * kvh * d + 8;  // rows of a fused qkv buffer
  const size_t row = static_cast<size_t>(kvh) * d;
  const auto src = to_bf16(random_vec(static_cast<size_t>(n) * stride, 81));
  std::vector<int32_t> slots(n);
  std::vector<int32_t> perm(blocks * bs);
  std::iota(perm.begin(), perm.end(), 0);
  std::mt19937 rng(82);
  std::shuffle(perm.begin(), perm.end(), rng);
  for (int i = 0; i < n; ++i) slots[i] = perm[i];
  slots[5] = -1;  // padding row
  const std::vector<uint16_t> pool0(static_cast<size_t>(blocks) * bs * row, 0x7fc0);  // NaN
  DeviceBuffer<uint16_t> dsrc(src), dk(pool0), dv(pool0);
  DeviceBuffer<int32_t> dslots(slots);
  // K at column offset kvh·d of each source row, V at 2·kvh·d (the q | k | v order of the fused buffer).
  RAGD_STATUS_OK(kv_write(dsrc.get() + row, dsrc.get() + 2 * row, n, stride, kvh, d, dslots.get(), dk.get(), dv.get(),
                          nullptr));
  auto want_k = pool0, want_v = pool0;
  for (int i = 0; i < n; ++i) {
    if (slots[i] < 0) continue;
    for (size_t e = 0; e < row; ++e) {
      want_k[slots[i] * row + e] = src[i * stride + row + e];
      want_v[slots[i] * row + e] = src[i * stride + 2 * row + e];
    }
  }
  EXPECT_EQ(dk.download(), want_k);
  EXPECT_EQ(dv.download(), want_v);
}

// Both paths of linear_bf16: cuBLAS (k = 129: not a multiple of 8; m > 1) and the one-row GEMV
// (m == 1, k % 8 == 0; k = 264 and 1032 leave a partial last pass of 256 per warp, n = 77 a partial
// last block of 8 warps).
TEST_F(MiscCuda, LinearBf16MatchesDoubleReference) {
  auto handle = CublasHandle::create();
  ASSERT_TRUE(handle.ok()) << handle.status().to_string();
  DeviceBuffer<unsigned char> ws(kGemmWorkspaceBytes);
  struct Case {
    int m, k, n;
  };
  for (const Case c : {Case{7, 129, 129}, Case{33, 129, 129}, Case{1, 264, 77}, Case{2, 1032, 77}, Case{1, 1032, 200},
                       Case{2, 264, 200}, Case{3, 1032, 77}, Case{33, 264, 77}}) {
    const int m = c.m, k = c.k, n = c.n;
    const auto x = round_bf16(random_vec(static_cast<size_t>(m) * k, 71 + m));
    const auto w = round_bf16(random_vec(static_cast<size_t>(n) * k, 72 + k));
    const auto y0 = random_vec(static_cast<size_t>(m) * n, 73);
    std::vector<double> ref(static_cast<size_t>(m) * n);
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double s = 0;
        for (int t = 0; t < k; ++t) s += double(x[i * k + t]) * w[j * k + t];
        ref[i * n + j] = s;
      }
    // fp32 accumulation over k products of magnitude <= 1: summation-order error grows like √k.
    const double tol = 1e-4 * std::sqrt(k / 129.0);
    const std::string what = "m=" + std::to_string(m) + " k=" + std::to_string(k) + " n=" + std::to_string(n);
    DeviceBuffer<uint16_t> dx(to_bf16(x)), dw(to_bf16(w));
    DeviceBuffer<float> dy(y0);
    RAGD_STATUS_OK(linear_bf16(*handle, nullptr, dx.get(), m, k, dw.get(), n, dy.get(), DType::kF32, false,
                               ws.get(), ws.size()));
    EXPECT_LE(max_err(dy.download(), ref), tol) << what;
    // accumulate: y = y0 + x·wᵀ (a residual add)
    dy.upload(y0);
    RAGD_STATUS_OK(linear_bf16(*handle, nullptr, dx.get(), m, k, dw.get(), n, dy.get(), DType::kF32, true,
                               ws.get(), ws.size()));
    std::vector<double> acc(ref);
    for (size_t i = 0; i < acc.size(); ++i) acc[i] += y0[i];
    EXPECT_LE(max_err(dy.download(), acc), tol) << what;
    // bf16 output: one rounding of the result
    DeviceBuffer<uint16_t> db(static_cast<size_t>(m) * n);
    RAGD_STATUS_OK(linear_bf16(*handle, nullptr, dx.get(), m, k, dw.get(), n, db.get(), DType::kBf16, false,
                               ws.get(), ws.size()));
    EXPECT_LE(max_err(from_bf16(db.download()), ref), kTolBf16 * std::max(1.0, std::sqrt(k / 129.0))) << what;
  }
}

}  // namespace
}  // namespace ragd::kernels::cuda
