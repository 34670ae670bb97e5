#include "ragd/kernels/cuda/device.h"

#include "cuda_util.cuh"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <string>
#include <string_view>

namespace ragd::kernels::cuda {

int device_count(std::string* why) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    if (why) *why = std::string("cudaGetDeviceCount: ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) + ")";
    cudaGetLastError();  // clear the sticky-free error so later calls start clean
    return 0;
  }
  if (n == 0 && why) *why = "cudaGetDeviceCount returned 0 devices";
  return n;
}

int multiprocessor_count(int device) {
  int v = 0;
  if (cudaDeviceGetAttribute(&v, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return v;
}

bool switch_off(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string_view(e) == "0";
}

bool switch_on(const char* name) {
  const char* e = std::getenv(name);
  return e != nullptr && std::string_view(e) == "1";
}

namespace detail {

int compute_capability() {
  constexpr int kMaxDevices = 64;
  static std::atomic<int> cache[kMaxDevices] = {};  // 0 = not read yet, -1 = unknown
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || dev < 0 || dev >= kMaxDevices) {
    cudaGetLastError();
    return 0;
  }
  int v = cache[dev].load(std::memory_order_relaxed);
  if (v == 0) {
    int major = 0, minor = 0;
    const bool ok = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
                    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess;
    if (!ok) cudaGetLastError();
    v = ok ? major * 10 + minor : -1;
    cache[dev].store(v, std::memory_order_relaxed);
  }
  return v > 0 ? v : 0;
}

bool pdl_enabled() { return switch_on("RAGD_CUDA_PDL") && compute_capability() >= 90; }

}  // namespace detail

void profiler_start() { cudaProfilerStart(); }
void profiler_stop() { cudaProfilerStop(); }

}  // namespace ragd::kernels::cuda
