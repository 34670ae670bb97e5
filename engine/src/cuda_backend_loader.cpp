// make_cuda_backend: loads the CUDA backend module (cuda_backend_module.h) on first use and calls it.
// Where the module is looked for, in order: $RAGD_CUDA_MODULE (a file), lib/ beside the binary's
// bin/ (the build tree's and an install's layout), the binary's own directory, then the dynamic
// linker's search path. The first file that loads and agrees on the ABI is kept for the process;
// a failure is remembered too (each path with its reason) and reported by every later call.
#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

#include "backend.h"
#include "cuda_backend_module.h"
#include "ragd/common/log.h"

namespace ragd::engine {

namespace {

struct CudaModule {
  CudaModuleCreateFn create = nullptr;
  std::string path;
  std::string error;  // why no module was loaded: each candidate with its reason
};

std::vector<std::string> module_candidates() {
  std::vector<std::string> out;
  if (const char* e = std::getenv("RAGD_CUDA_MODULE"); e != nullptr && *e != '\0') return {e};
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    out.push_back((exe.parent_path().parent_path() / "lib" / kCudaModuleFile).string());
    out.push_back((exe.parent_path() / kCudaModuleFile).string());
  }
  out.emplace_back(kCudaModuleFile);  // LD_LIBRARY_PATH, the ld.so cache
  return out;
}

CudaModule load_module() {
  CudaModule m;
  std::string tried;
  for (const std::string& path : module_candidates()) {
    if (!tried.empty()) tried += "; ";
    void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* why = dlerror();
      tried += why != nullptr ? why : path + ": not loadable";
      continue;
    }
    auto abi = reinterpret_cast<CudaModuleAbiFn>(dlsym(h, kCudaModuleAbiSymbol));
    auto create = reinterpret_cast<CudaModuleCreateFn>(dlsym(h, kCudaModuleCreateSymbol));
    if (abi == nullptr || create == nullptr) {
      tried += path + ": not a ragd CUDA module (entry points missing)";
      dlclose(h);
      continue;
    }
    if (abi() != cuda_module_abi()) {
      tried += path + ": built from other sources than this binary (ABI check failed)";
      dlclose(h);
      continue;
    }
    m.create = create;  // the handle stays open for the process's life
    m.path = path;
    log::engine()->info("cuda backend module: {}", path);
    return m;
  }
  m.error = tried;
  return m;
}

}  // namespace

Result<std::unique_ptr<Backend>> make_cuda_backend(const ModelConfig& cfg, HostWeights weights,
                                                   const CudaBackendOptions& opts) {
  static const CudaModule module = load_module();  // thread-safe initialisation, once per process
  if (module.create == nullptr)
    return Status::FailedPrecondition("cuda backend: the CUDA module (" + std::string(kCudaModuleFile) +
                                      ") could not be loaded: " + module.error);
  std::unique_ptr<Backend> out;
  Status st = Status::OK();
  module.create(&cfg, &weights, &opts, &out, &st);
  if (!st.ok()) return st;
  return out;
}

}  // namespace ragd::engine
