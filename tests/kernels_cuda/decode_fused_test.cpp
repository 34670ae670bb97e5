// The fused decode kernels (ragd/kernels/cuda/gemv.h's prologue / epilogue forms, rope_store_qkv)
// vs the unfused launch chains they replace and vs naive double references, on odd sizes and
// random data.
// Tolerances (max |a−b| / (1+|b|)):
//  - vs the chain: 1e-6 where x̂ is formed identically (f32 → bf16 input: the same products in
//    the same order); 1e-3 for the RMSNorm prologue (Σ x² is reduced in another order, so a few x̂
//    elements may round to the neighbouring bf16 value: each moves y by |w|·2⁻⁸·|x̂|); 8e-3 for
//    bf16 outputs (one bf16 rounding);
//  - vs the double references (which do not round x̂): 8e-3 (x̂'s bf16 rounding, 2⁻⁹ relative per
//    element, accumulated over k).
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cuda_test_util.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/gemm.h"
#include "ragd/kernels/cuda/gemv.h"
#include "ragd/kernels/cuda/memory.h"
#include "ragd/kernels/cuda/paged_kv.h"

namespace ragd::kernels::cuda {
namespace {

using namespace testing;  // NOLINT
using testing::DeviceBuffer;  // not memory.h's

constexpr double kTolBf16 = 8e-3;

class DecodeFusedCuda : public ::testing::Test {
 protected:
  void SetUp() override {
    RAGD_REQUIRE_CUDA();
    auto h = CublasHandle::create();
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    handle_ = std::move(*h);
    ws_ = std::make_unique<DeviceBuffer<unsigned char>>(kGemmWorkspaceBytes);  // after the skip: no device, no buffer
  }
  Status linear(const uint16_t* x, int k, const uint16_t* w, int n, void* y, DType dt, bool acc) {
    return linear_bf16(handle_, nullptr, x, 1, k, w, n, y, dt, acc, ws_->get(), ws_->size());
  }
  CublasHandle handle_;
  std::unique_ptr<DeviceBuffer<unsigned char>> ws_;
};

struct Shape {
  int k, n;
};
// k = 264 and 1032 leave a partial last pass of 256 elements per warp; n = 77 a partial last block
// of 16 outputs; k = 4104 is the largest here (8 KB of x̂ in shared memory).
const Shape kShapes[] = {{264, 77}, {1032, 200}, {4104, 77}, {1032, 16}};

std::vector<double> matvec(const std::vector<float>& w, const std::vector<double>& x, int n, int k) {
  std::vector<double> y(n, 0.0);
  for (int j = 0; j < n; ++j)
    for (int t = 0; t < k; ++t) y[j] += double(w[static_cast<size_t>(j) * k + t]) * x[t];
  return y;
}

TEST_F(DecodeFusedCuda, RmsNormPrologueMatchesChainAndReference) {
  for (const Shape c : kShapes) {
    const int k = c.k, n = c.n;
    const std::string what = "k=" + std::to_string(k) + " n=" + std::to_string(n);
    const auto x = random_vec(k, 11 + k, -3.0f, 3.0f);
    const auto g = random_vec(k, 12 + k, 0.5f, 1.5f);
    const auto w = round_bf16(random_vec(static_cast<size_t>(n) * k, 13 + n));
    const float eps = 1e-5f;
    DeviceBuffer<float> dx(x), dg(g), dy(n), dchain(n);
    DeviceBuffer<uint16_t> dw(to_bf16(w)), dxb(k);
    GemvArgs a;
    a.input = GemvInput::kRmsNormF32;
    a.x = dx.get();
    a.norm_w = dg.get();
    a.eps = eps;
    a.k = k;
    a.w = dw.get();
    a.n = n;
    a.y = dy.get();
    ASSERT_TRUE(gemv_fusable(a)) << what;
    RAGD_STATUS_OK(gemv_bf16(a, nullptr));
    RAGD_STATUS_OK(rmsnorm(DType::kF32, dx.get(), 1, k, k, dg.get(), eps, DType::kBf16, dxb.get(), k, nullptr));
    RAGD_STATUS_OK(linear(dxb.get(), k, dw.get(), n, dchain.get(), DType::kF32, false));
    const auto got = dy.download();
    EXPECT_LE(max_err(got, dchain.download()), 1e-3) << what;
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / k + eps);
    std::vector<double> xn(k);
    for (int t = 0; t < k; ++t) xn[t] = x[t] * inv * g[t];
    EXPECT_LE(max_err(got, matvec(w, xn, n, k)), kTolBf16) << what;
  }
}

TEST_F(DecodeFusedCuda, F32InputAccumulatesLikeConvertThenGemv) {
  for (const Shape c : kShapes) {
    const int k = c.k, n = c.n;
    const std::string what = "k=" + std::to_string(k) + " n=" + std::to_string(n);
    const auto x = random_vec(k, 21 + k);
    const auto w = round_bf16(random_vec(static_cast<size_t>(n) * k, 22 + n));
    const auto y0 = random_vec(n, 23);
    DeviceBuffer<float> dx(x), dy(y0), dchain(y0);
    DeviceBuffer<uint16_t> dw(to_bf16(w)), dxb(k);
    GemvArgs a;
    a.input = GemvInput::kF32;
    a.x = dx.get();
    a.k = k;
    a.w = dw.get();
    a.n = n;
    a.y = dy.get();
    a.accumulate = true;  // o_proj's residual add
    RAGD_STATUS_OK(gemv_bf16(a, nullptr));
    RAGD_STATUS_OK(convert(DType::kF32, dx.get(), DType::kBf16, dxb.get(), k, nullptr));
    RAGD_STATUS_OK(linear(dxb.get(), k, dw.get(), n, dchain.get(), DType::kF32, true));
    const auto got = dy.download();
    EXPECT_LE(max_err(got, dchain.download()), 1e-6) << what;
    std::vector<double> xd(x.begin(), x.end());
    auto ref = matvec(w, xd, n, k);
    for (int j = 0; j < n; ++j) ref[j] += y0[j];
    EXPECT_LE(max_err(got, ref), kTolBf16) << what;
    // bf16 output, no accumulation: the chain's bf16 product
    DeviceBuffer<uint16_t> db(n), dbc(n);
    a.accumulate = false;
    a.out_dtype = DType::kBf16;
    a.y = db.get();
    RAGD_STATUS_OK(gemv_bf16(a, nullptr));
    RAGD_STATUS_OK(linear(dxb.get(), k, dw.get(), n, dbc.get(), DType::kBf16, false));
    EXPECT_LE(max_err(from_bf16(db.download()), from_bf16(dbc.download())), 1e-6) << what;
  }
}

TEST_F(DecodeFusedCuda, SwiGluEpilogueMatchesChainAndReference) {
  for (const Shape c : kShapes) {
    const int k = c.k, im = c.n, n = 2 * im;  // gate rows [0, im), up rows [im, 2·im)
    const std::string what = "k=" + std::to_string(k) + " intermediate=" + std::to_string(im);
    const auto x = random_vec(k, 31 + k, -2.0f, 2.0f);
    const auto g = random_vec(k, 32 + k, 0.5f, 1.5f);
    const auto w = round_bf16(random_vec(static_cast<size_t>(n) * k, 33 + n, -0.1f, 0.1f));
    DeviceBuffer<float> dx(x), dg(g);
    DeviceBuffer<uint16_t> dw(to_bf16(w)), dy(im), dxb(k), dgu(n), dchain(im);
    GemvArgs a;
    a.input = GemvInput::kRmsNormF32;
    a.x = dx.get();
    a.norm_w = dg.get();
    a.k = k;
    a.w = dw.get();
    a.n = n;
    a.output = GemvOutput::kSwiGlu;
    a.y = dy.get();
    RAGD_STATUS_OK(gemv_bf16(a, nullptr));
    RAGD_STATUS_OK(rmsnorm(DType::kF32, dx.get(), 1, k, k, dg.get(), a.eps, DType::kBf16, dxb.get(), k, nullptr));
    RAGD_STATUS_OK(linear(dxb.get(), k, dw.get(), n, dgu.get(), DType::kBf16, false));
    RAGD_STATUS_OK(swiglu(DType::kBf16, 1, im, dgu.get(), n, dgu.get() + im, n, dchain.get(), im, nullptr));
    const auto got = from_bf16(dy.download());
    EXPECT_LE(max_err(got, from_bf16(dchain.download())), kTolBf16) << what;
    double ss = 0;
    for (float v : x) ss += double(v) * v;
    const double inv = 1.0 / std::sqrt(ss / k + a.eps);
    std::vector<double> xn(k);
    for (int t = 0; t < k; ++t) xn[t] = x[t] * inv * g[t];
    const auto gu = matvec(w, xn, n, k);
    std::vector<double> ref(im);
    for (int j = 0; j < im; ++j) ref[j] = gu[j] / (1.0 + std::exp(-gu[j])) * gu[im + j];
    EXPECT_LE(max_err(got, ref), 2 * kTolBf16) << what;  // three bf16 roundings (g, u, the result)
  }
}

// The one-launch QKV tail vs rope_apply + convert + kv_write + the query copy, and vs a double
// reference of the rotation; a negative slot leaves the pools untouched.
TEST_F(DecodeFusedCuda, RopeStoreQkvMatchesTheLaunchChain) {
  const int n = 7, nh = 6, nkv = 2, d = 64, bs = 16, blocks = 3;
  const int qkv_dim = (nh + 2 * nkv) * d, stride = qkv_dim + 8;
  const size_t kv_row = static_cast<size_t>(nkv) * d;
  const auto qkv = random_vec(static_cast<size_t>(n) * stride, 41, -2.0f, 2.0f);
  const std::vector<int32_t> pos = {0, 1, 17, 4095, 131071, 1000003, 5};
  std::vector<int32_t> slots(n);
  std::iota(slots.begin(), slots.end(), 9);
  slots[3] = -1;  // padding row
  std::vector<float> inv_freq(d / 2);
  for (int i = 0; i < d / 2; ++i) inv_freq[i] = static_cast<float>(std::pow(500000.0, -2.0 * i / d));
  const std::vector<uint16_t> pool0(static_cast<size_t>(blocks) * bs * kv_row, 0x7fc0);  // NaN
  DeviceBuffer<float> dqkv(qkv), dchain_qkv(qkv), dfreq(inv_freq);
  DeviceBuffer<int32_t> dpos(pos), dslots(slots);
  DeviceBuffer<uint16_t> dq(static_cast<size_t>(n) * nh * d), dk(pool0), dv(pool0);
  RAGD_STATUS_OK(rope_store_qkv(dqkv.get(), n, stride, nh, nkv, d, dpos.get(), dfreq.get(), dq.get(), dslots.get(),
                                dk.get(), dv.get(), nullptr));
  // The chain, as the engine ran it before.
  DeviceBuffer<uint16_t> dqkvb(static_cast<size_t>(n) * stride), dq2(static_cast<size_t>(n) * nh * d), dk2(pool0),
      dv2(pool0);
  RAGD_STATUS_OK(rope_apply(DType::kF32, dchain_qkv.get(), n, nh + nkv, d, stride, dpos.get(), dfreq.get(), nullptr));
  RAGD_STATUS_OK(convert(DType::kF32, dchain_qkv.get(), DType::kBf16, dqkvb.get(), static_cast<size_t>(n) * stride,
                         nullptr));
  RAGD_STATUS_OK(kv_write(dqkvb.get() + nh * d, dqkvb.get() + (nh + nkv) * d, n, stride, nkv, d, dslots.get(), dk2.get(),
                          dv2.get(), nullptr));
  RAGD_STATUS_OK(copy_rows_on_device(dq2.get(), sizeof(uint16_t) * nh * d, dqkvb.get(), sizeof(uint16_t) * stride,
                                     sizeof(uint16_t) * nh * d, n, nullptr));
  const auto q = from_bf16(dq.download()), k = from_bf16(dk.download()), v = from_bf16(dv.download());
  EXPECT_LE(max_err(q, from_bf16(dq2.download())), kTolBf16);
  EXPECT_LE(max_err(k, from_bf16(dk2.download())), kTolBf16);
  EXPECT_EQ(dv.download(), dv2.download());  // V is only converted
  // Double reference of the rotation (HF rotate_half) for Q and K.
  std::vector<double> want_q(q.size());
  std::vector<double> want_k(k.begin(), k.end());  // untouched slots compare NaN to NaN below
  for (int r = 0; r < n; ++r)
    for (int h = 0; h < nh + nkv; ++h)
      for (int i = 0; i < d / 2; ++i) {
        const double ang = double(pos[r]) * inv_freq[i];
        const double x1 = qkv[r * stride + h * d + i], x2 = qkv[r * stride + h * d + i + d / 2];
        const double y1 = x1 * std::cos(ang) - x2 * std::sin(ang), y2 = x2 * std::cos(ang) + x1 * std::sin(ang);
        if (h < nh) {
          want_q[(r * nh + h) * d + i] = y1;
          want_q[(r * nh + h) * d + i + d / 2] = y2;
        } else if (slots[r] >= 0) {
          want_k[slots[r] * kv_row + (h - nh) * d + i] = y1;
          want_k[slots[r] * kv_row + (h - nh) * d + i + d / 2] = y2;
        }
      }
  // f32 angles' rounding at position 10^6 (~6e-8 relative, times the angle) stays well inside bf16.
  EXPECT_LE(max_err(q, want_q), kTolBf16);
  for (size_t i = 0; i < k.size(); ++i) {
    if (std::isnan(want_k[i])) {
      EXPECT_TRUE(std::isnan(k[i])) << "pool element " << i << " was written, but no row's slot holds it";
    } else {
      EXPECT_LE(std::fabs(k[i] - want_k[i]) / (1.0 + std::fabs(want_k[i])), kTolBf16) << "pool element " << i;
    }
  }
}

TEST_F(DecodeFusedCuda, MeasurementSwitchTurnsTheFusedFormsOff) {
  DeviceBuffer<float> dx(264);
  DeviceBuffer<uint16_t> dw(264 * 8);
  DeviceBuffer<float> dy(8);
  GemvArgs a;
  a.input = GemvInput::kF32;
  a.x = dx.get();
  a.k = 264;
  a.w = dw.get();
  a.n = 8;
  a.y = dy.get();
  ASSERT_TRUE(gemv_fusable(a));
  setenv("RAGD_CUDA_FUSED", "0", 1);
  EXPECT_FALSE(gemv_fusable(a));
  const Status st = gemv_bf16(a, nullptr);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  unsetenv("RAGD_CUDA_FUSED");
  EXPECT_TRUE(gemv_fusable(a));
}

}  // namespace
}  // namespace ragd::kernels::cuda
