#include "host_buffer.h"

#include <sys/mman.h>

#include <cstring>
#include <new>

namespace ragd::engine {

namespace {

bool huge_pages_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("RAGD_HUGEPAGES");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

bool HostBuffer::huge_pages_for(size_t bytes) { return bytes >= kHugePage && huge_pages_enabled(); }

HostBuffer::HostBuffer(size_t bytes, bool zero) {
  if (bytes == 0) return;
  const bool huge = huge_pages_for(bytes);
  void* p = nullptr;
  if (posix_memalign(&p, huge ? kHugePage : 64, bytes) != 0 || p == nullptr) throw std::bad_alloc();
  mem_.reset(static_cast<std::byte*>(p));
  size_ = bytes;
  // Advice before the first touch, so the pages are huge from their first fault. A kernel without
  // THP refuses it (EINVAL): the buffer is then what a plain allocation is.
  if (huge) madvise(p, bytes & ~(kHugePage - 1), MADV_HUGEPAGE);
  if (zero) std::memset(p, 0, bytes);
}

}  // namespace ragd::engine
