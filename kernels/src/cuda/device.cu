#include "ragd/kernels/cuda/device.h"

#include <cuda_profiler_api.h>
#include <cuda_runtime.h>

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

void profiler_start() { cudaProfilerStart(); }
void profiler_stop() { cudaProfilerStop(); }

}  // namespace ragd::kernels::cuda
