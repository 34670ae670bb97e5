// Bad shapes and unsupported compile-time values are rejected on the host, before anything touches
// the device: these tests run on machines without a GPU too. Each checks that the message names the
// problem.
#include <cstdint>
#include <string>

#include <gtest/gtest.h>

#include "ragd/kernels/cuda/attention.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/gemm.h"
#include "ragd/kernels/cuda/gemv.h"
#include "ragd/kernels/cuda/lse_merge.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/cuda/sampling.h"

namespace ragd::kernels::cuda {
namespace {

// A non-null address that is never dereferenced (validation fails first).
template <typename T>
T* fake() {
  return reinterpret_cast<T*>(uintptr_t{4096});
}

void expect_invalid(const Status& st, const std::string& needle) {
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find(needle), std::string::npos) << st.message();
}

PagedKvBf16 kv(int d, int kv_heads) {
  return PagedKvBf16{fake<uint16_t>(), fake<uint16_t>(), fake<int32_t>(), 16, kv_heads, d, 33};
}

DecodeBatchBf16 batch(int d, int heads, int kv_heads) {
  return DecodeBatchBf16{fake<uint16_t>(), fake<uint16_t>(), fake<uint16_t>(), fake<int32_t>(), fake<int32_t>(),
                         3, 4, 16, heads, kv_heads, d};
}

TEST(CudaBadInput, PrefillRejectsUnsupportedHeadDim) {
  expect_invalid(attention_prefill(fake<uint16_t>(), 7, 4, kv(96, 4), 0.1f, true, 0, fake<float>(), DType::kF32,
                                   fake<float>(), nullptr),
                 "unsupported head_dim 96");
}

TEST(CudaBadInput, PrefillRejectsHeadsNotMultipleOfKvHeads) {
  expect_invalid(attention_prefill(fake<uint16_t>(), 7, 6, kv(64, 4), 0.1f, true, 0, fake<float>(), DType::kF32,
                                   fake<float>(), nullptr),
                 "num_heads 6 is not a positive multiple of num_kv_heads 4");
}

TEST(CudaBadInput, PrefillRejectsNullPointers) {
  expect_invalid(attention_prefill(nullptr, 7, 4, kv(64, 4), 0.1f, true, 0, fake<float>(), DType::kF32,
                                   fake<float>(), nullptr),
                 "null q");
}

TEST(CudaBadInput, DecodeRejectsUnsupportedGqaGroup) {
  const auto b = batch(128, 20, 4);
  const DecodePlan plan{1, 64};
  expect_invalid(attention_decode(b, 0.1f, plan, nullptr, 0, fake<float>(), fake<float>(), nullptr),
                 "unsupported GQA group 5");
}

TEST(CudaBadInput, DecodeRejectsUnsupportedHeadDim) {
  const auto b = batch(80, 8, 8);
  expect_invalid(attention_decode(b, 0.1f, DecodePlan{1, 64}, nullptr, 0, fake<float>(), fake<float>(), nullptr),
                 "unsupported head_dim 80");
}

TEST(CudaBadInput, DecodeRejectsSmallWorkspace) {
  const auto b = batch(64, 8, 2);
  const DecodePlan plan{4, 16};
  const size_t need = attention_decode_workspace_bytes(b, plan);
  EXPECT_EQ(need, sizeof(float) * 3 * 8 * 4 * 65);
  expect_invalid(attention_decode(b, 0.1f, plan, fake<void>(), need - 4, fake<float>(), fake<float>(), nullptr),
                 "need " + std::to_string(need));
}

TEST(CudaBadInput, DecodePlannerSplitsLongContextsAndKeepsShortOnesWhole) {
  const DecodePlan longp = plan_attention_decode(1, 8, 65536, 132);
  EXPECT_GT(longp.num_splits, 1);
  EXPECT_GE(longp.num_splits * longp.keys_per_split, 65536);
  const DecodePlan shortp = plan_attention_decode(64, 8, 200, 132);
  EXPECT_EQ(shortp.num_splits, 1);
  EXPECT_EQ(plan_attention_decode(2, 8, 1000, 132, 5).num_splits, 5);
}

TEST(CudaBadInput, LinearRejectsNonPositiveShape) {
  CublasHandle none;
  expect_invalid(linear_bf16(none, nullptr, fake<uint16_t>(), 0, 16, fake<uint16_t>(), 16, fake<float>(), DType::kF32,
                             false, nullptr, 0),
                 "m, n, k must be positive (m=0");
}

TEST(CudaBadInput, RopeRejectsOddHeadDim) {
  expect_invalid(rope_apply(DType::kBf16, fake<void>(), 7, 2, 63, 126, fake<int32_t>(), fake<float>(), nullptr),
                 "head_dim must be even");
}

TEST(CudaBadInput, RopeRejectsShortRowStride) {
  expect_invalid(rope_rerotate(DType::kF32, fake<void>(), 7, 2, 64, 100, 5, fake<float>(), nullptr),
                 "row_stride 100 < heads · head_dim 128");
}

TEST(CudaBadInput, RmsNormRejectsShortStride) {
  expect_invalid(rmsnorm(DType::kF32, fake<void>(), 7, 129, 128, fake<void>(), 1e-5f, fake<void>(), 129, nullptr),
                 "x_stride=128");
}

TEST(CudaBadInput, SwiGluRejectsShortStride) {
  expect_invalid(swiglu(DType::kBf16, 7, 129, fake<void>(), 100, fake<void>(), 258, fake<void>(), 129, nullptr),
                 "strides must be >= dim");
}

TEST(CudaBadInput, EmbeddingRejectsEmptyVocab) {
  expect_invalid(embedding_gather(DType::kF32, fake<void>(), 0, 64, fake<int32_t>(), 3, fake<void>(), nullptr, nullptr),
                 "vocab=0");
}

TEST(CudaBadInput, MergeRejectsBadHeadDim) {
  expect_invalid(merge_states(3, 0, fake<float>(), fake<float>(), fake<float>(), fake<float>(), fake<float>(),
                              fake<float>(), nullptr),
                 "head_dim=0");
}

TEST(CudaBadInput, ArgmaxRejectsStrideBelowVocab) {
  expect_invalid(argmax_rows(fake<float>(), 2, 100, 99, fake<int32_t>(), nullptr, nullptr), "stride=99");
}

TEST(CudaBadInput, KvWriteRejectsShortSourceStride) {
  expect_invalid(kv_write(fake<uint16_t>(), fake<uint16_t>(), 7, 100, 2, 64, fake<int32_t>(), fake<uint16_t>(),
                          fake<uint16_t>(), nullptr),
                 "src_stride=100");
}

// The fused one-row GEMV forms take k a multiple of 8 whose bf16 row fits a block's shared memory
// (48 KB), 16-byte aligned operands and an even n for the SwiGLU epilogue; the engine checks
// gemv_fusable first and falls back to the unfused chain.
TEST(CudaBadInput, FusedGemvRefusesOperandsItCannotTake) {
  GemvArgs a;
  a.input = GemvInput::kRmsNormF32;
  a.x = fake<float>();
  a.norm_w = fake<float>();
  a.w = fake<uint16_t>();
  a.y = fake<float>();
  a.n = 77;
  a.k = 4096;
  EXPECT_TRUE(gemv_fusable(a));
  a.k = 129;
  EXPECT_FALSE(gemv_fusable(a));
  expect_invalid(gemv_bf16(a, nullptr), "k=129");
  a.k = 24 * 1024;  // 48 KB of x̂: with the kernel's static shared memory over the limit
  EXPECT_FALSE(gemv_fusable(a));
  a.k = 24 * 1024 - 128;
  EXPECT_TRUE(gemv_fusable(a));
  a.k = 4096;
  a.norm_w = reinterpret_cast<const float*>(uintptr_t{4100});  // 4-byte aligned only
  EXPECT_FALSE(gemv_fusable(a));
  a.norm_w = nullptr;
  expect_invalid(gemv_bf16(a, nullptr), "null x, w, y or norm weights");
  a.norm_w = fake<float>();
  a.output = GemvOutput::kSwiGlu;
  expect_invalid(gemv_bf16(a, nullptr), "even for the SwiGLU epilogue), got 77");
}

TEST(CudaBadInput, RopeStoreQkvRejectsBadShapes) {
  expect_invalid(rope_store_qkv(fake<float>(), 3, 100, 4, 2, 63, fake<int32_t>(), fake<float>(), fake<uint16_t>(),
                                fake<int32_t>(), fake<uint16_t>(), fake<uint16_t>(), nullptr),
                 "head_dim must be even");
  expect_invalid(rope_store_qkv(fake<float>(), 3, 500, 4, 2, 64, fake<int32_t>(), fake<float>(), fake<uint16_t>(),
                                fake<int32_t>(), fake<uint16_t>(), fake<uint16_t>(), nullptr),
                 "qkv_stride=500");
  expect_invalid(rope_store_qkv(fake<float>(), 3, 512, 4, 2, 64, fake<int32_t>(), fake<float>(), nullptr,
                                fake<int32_t>(), fake<uint16_t>(), fake<uint16_t>(), nullptr),
                 "null pointer");
}

}  // namespace
}  // namespace ragd::kernels::cuda
