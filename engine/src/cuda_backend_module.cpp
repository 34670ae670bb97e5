// The CUDA backend module's entry points (cuda_backend_module.h). Built into libragd_cuda.so with
// cuda_backend.cpp, cuda_kv_storage.cpp and the CUDA launchers; its version script exports these two
// symbols and keeps every other one local.
#include <exception>
#include <new>
#include <utility>

#include "cuda_backend_module.h"

extern "C" __attribute__((visibility("default"))) uint64_t ragd_cuda_backend_abi() {
  return ragd::engine::cuda_module_abi();
}

extern "C" __attribute__((visibility("default"))) void ragd_cuda_backend_create(
    const ragd::engine::ModelConfig* cfg, ragd::engine::HostWeights* weights,
    const ragd::engine::CudaBackendOptions* opts, std::unique_ptr<ragd::engine::Backend>* out,
    ragd::Status* status) {
  using ragd::Status;
  try {
    auto r = ragd::engine::create_cuda_backend(*cfg, std::move(*weights), *opts);
    if (!r.ok()) {
      *status = r.status();
      return;
    }
    *out = std::move(r).value();
    *status = Status::OK();
  } catch (const std::bad_alloc&) {
    *status = Status::ResourceExhausted("cuda backend: out of host memory while creating the backend");
  } catch (const std::exception& e) {
    *status = Status::Internal(std::string("cuda backend: ") + e.what());
  }
}
