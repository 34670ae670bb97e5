// Helpers for the CUDA kernel tests: device detection with a clean skip, RAII device buffers,
// bf16 rounding of host data, seeded random data and error measures.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda::testing {

// Skips the current test when no CUDA device can be used (CI has nvcc but no GPU).
#define RAGD_REQUIRE_CUDA()                                                          \
  do {                                                                               \
    std::string why_;                                                                \
    if (::ragd::kernels::cuda::device_count(&why_) == 0) {                           \
      GTEST_SKIP() << "no CUDA device: " << why_;                                    \
    }                                                                                \
  } while (0)

#define RAGD_CUDA_OK(expr) ASSERT_EQ((expr), cudaSuccess) << #expr
#define RAGD_STATUS_OK(expr)                        \
  do {                                              \
    ::ragd::Status st_ = (expr);                    \
    ASSERT_TRUE(st_.ok()) << st_.to_string();       \
  } while (0)

// Device buffer of n elements of T; freed on scope exit.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n) : n_(n) {
    if (n_ > 0 && cudaMalloc(&p_, n_ * sizeof(T)) != cudaSuccess) {
      p_ = nullptr;
      ADD_FAILURE() << "cudaMalloc of " << n_ * sizeof(T) << " bytes failed";
    }
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return static_cast<T*>(p_); }
  size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    EXPECT_EQ(host.size(), n_);
    if (p_) {
      EXPECT_EQ(cudaMemcpy(p_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    }
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    if (p_) {
      EXPECT_EQ(cudaMemcpy(host.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    }
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t n_ = 0;
};

inline std::vector<float> random_vec(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

inline std::vector<uint16_t> to_bf16(const std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = f32_to_bf16(v[i]);
  return out;
}
inline std::vector<float> from_bf16(const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = bf16_to_f32(v[i]);
  return out;
}
// The values a bf16 tensor actually holds: inputs are rounded once, then every reference works on
// exactly what the kernel sees.
inline std::vector<float> round_bf16(const std::vector<float>& v) { return from_bf16(to_bf16(v)); }

// Max |a - b| / (1 + |b|) (mixed absolute / relative error). Matching infinities count as 0.
inline double max_err(const float* a, const double* b, size_t n) {
  double e = 0.0;
  for (size_t i = 0; i < n; ++i) {
    if (std::isinf(b[i]) && a[i] == static_cast<float>(b[i])) continue;
    const double d = std::fabs(a[i] - b[i]) / (1.0 + std::fabs(b[i]));
    e = std::max(e, std::isnan(d) ? INFINITY : d);
  }
  return e;
}
inline double max_err(const std::vector<float>& a, const std::vector<double>& b) {
  EXPECT_EQ(a.size(), b.size());
  return max_err(a.data(), b.data(), std::min(a.size(), b.size()));
}
inline double max_err(const std::vector<float>& a, const std::vector<float>& b) {
  return max_err(a, std::vector<double>(b.begin(), b.end()));
}

}  // namespace ragd::kernels::cuda::testing
