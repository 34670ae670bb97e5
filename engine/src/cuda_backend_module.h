// The seam between the engine and its CUDA backend module (libragd_cuda.so): two C entry points, a
// check that both sides were built from the same sources, and the module's file name. The engine
// loads the module on the first make_cuda_backend (cuda_backend_loader.cpp); the module
// (cuda_backend_module.cpp) exports nothing else — everything it links is local to it.
#pragma once

#include <cstdint>
#include <memory>

#include "backend.h"
#include "ragd/engine/model_config.h"

namespace ragd::engine {

inline constexpr const char* kCudaModuleFile = "libragd_cuda.so";
inline constexpr const char* kCudaModuleAbiSymbol = "ragd_cuda_backend_abi";
inline constexpr const char* kCudaModuleCreateSymbol = "ragd_cuda_backend_create";
// Bumped whenever the entry points' arguments change meaning.
inline constexpr uint64_t kCudaModuleVersion = 1;

// What both sides compute; the loader refuses a module whose answer differs (a libragd_cuda.so of
// another build next to the binary). The sizes catch the common slip, a struct grown on one side.
constexpr uint64_t cuda_module_abi() {
  uint64_t h = kCudaModuleVersion;
  for (uint64_t v : {uint64_t{sizeof(ModelConfig)}, uint64_t{sizeof(HostWeights)}, uint64_t{sizeof(CudaBackendOptions)},
                     uint64_t{sizeof(Status)}, uint64_t{sizeof(std::unique_ptr<Backend>)}})
    h = h * 1000003u + v;
  return h;
}

// ragd_cuda_backend_create(cfg, weights, opts, out, status): create_cuda_backend's result as out-params
// (the weights are moved from). Never throws.
using CudaModuleAbiFn = uint64_t (*)();
using CudaModuleCreateFn = void (*)(const ModelConfig* cfg, HostWeights* weights, const CudaBackendOptions* opts,
                                    std::unique_ptr<Backend>* out, Status* status);

}  // namespace ragd::engine
