// Safetensors files (engine/src/safetensors.cpp): the 8-byte header length, the JSON header
// (dtypes, shapes, data offsets, __metadata__) and its checks against the file size. The input is
// the whole file, placed in an in-memory file (memfd) that WeightStore::open_file maps as it maps
// a checkpoint. What opens is read: every tensor's view, small ones converted to f32, the checksum.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ragd/engine/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  int fd = memfd_create("model.safetensors", MFD_CLOEXEC);
  if (fd < 0) return 0;
  size_t off = 0;
  while (off < size) {
    ssize_t w = ::write(fd, data + off, size - off);
    if (w <= 0) break;
    off += static_cast<size_t>(w);
  }
  auto store = ragd::engine::WeightStore::open_file("/proc/self/fd/" + std::to_string(fd));
  ::close(fd);
  if (!store.ok()) return 0;
  const auto& ws = **store;
  std::vector<float> f32;
  for (const auto& name : ws.names()) {
    auto view = ws.get(name);
    if (!view.ok()) continue;
    const int64_t n = view->numel();
    (void)ws.contains(name);
    if (n >= 0 && n <= 4096) {
      f32.resize(static_cast<size_t>(n));
      view->to_f32(f32.data());
    }
  }
  (void)ws.get("absent.weight").ok();
  (void)ws.checksum();
  return 0;
}
