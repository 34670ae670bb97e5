// CUDA device discovery and the types shared by the CUDA launchers. This header (like every header
// in ragd/kernels/cuda/) is CUDA-free: device pointers are plain pointers, a cudaStream_t is passed
// as `void*` (nullptr = the legacy default stream), bf16 tensors are `uint16_t` bit patterns.
//
// Launcher contract (all of ragd/kernels/cuda/*.h): a launcher checks its shapes on the host,
// enqueues work on the stream and returns; it never allocates and never synchronises. Device
// scratch comes from the caller (see each op's *_workspace_bytes()). A bad shape or an
// unsupported compile-time value (head dim, GQA group, dtype) is InvalidArgument naming the value;
// a launch failure is Internal with the CUDA error string. Kernel faults surface at the caller's
// next synchronisation.
// Thread-safety: launchers are pure host functions; concurrent calls on different streams are safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "ragd/common/status.h"

namespace ragd::kernels::cuda {

// Element type of activations / weights handed to a dtype-generic launcher.
enum class DType : uint8_t { kF32, kBf16 };

// Number of visible CUDA devices; 0 with `why` set when there is no driver, no device, or the
// runtime cannot start. Never aborts (safe in binaries run on machines without a GPU).
int device_count(std::string* why);

// Streaming multiprocessors of `device` (0 when unknown); used by planners.
int multiprocessor_count(int device);

// True when the environment variable `name` is exactly "0": the measurement switches that turn a
// CUDA path off (RAGD_CUDA_GEMV, RAGD_CUDA_FUSED, RAGD_CUDA_GRAPHS, RAGD_CUDA_KV_OVERLAP,
// RAGD_CUDA_WGMMA, RAGD_CUDA_DECODE_PIPELINE), read at every call so that one process can compare
// both settings.
bool switch_off(const char* name);
// True when `name` is exactly "1": the opt-in switches of paths not yet measured on a GPU
// (RAGD_CUDA_PDL), read at every call.
bool switch_on(const char* name);

// Brackets the work to profile when a profiler runs with collection off at start (Nsight Compute
// `--profile-from-start off`, Nsight Systems `--capture-range=cudaProfilerApi`); no-ops otherwise.
void profiler_start();
void profiler_stop();

// Host-side bf16 <-> f32 (round to nearest even; NaN stays NaN).
inline uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_to_f32(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace ragd::kernels::cuda
