// Private to the engine: the large host allocations of a model — packed weights and the KV pool.
// 64-byte aligned (the kernels' vector loads). From 2 MiB up, aligned to 2 MiB and advised as
// transparent huge pages (madvise MADV_HUGEPAGE, which Debian's default THP setting "madvise" waits
// for): decode streams every weight byte once per step, and with 4 KiB pages that walk touches a
// new page-table entry every 4 KiB (measured: the `small` shape's bf16 decode on one thread 206 ->
// 285 tok/s, two threads 359 -> 414, docs/benchmarks.md). Only whole 2 MiB pages inside the buffer
// are advised, so the memory used is the buffer's. RAGD_HUGEPAGES=0 in the environment turns the
// advice off (4 KiB pages, as a plain allocation gets).
// Thread-safety: a value; the memory is the caller's to synchronise.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <memory>

namespace ragd::engine {

class HostBuffer {
 public:
  HostBuffer() = default;
  // Throws std::bad_alloc when the memory is not there. zero: every byte 0 (and every page mapped).
  explicit HostBuffer(size_t bytes, bool zero = false);

  std::byte* data() const { return mem_.get(); }
  size_t size() const { return size_; }
  bool empty() const { return mem_ == nullptr; }
  // Whether buffers of this size get the huge-page advice (RAGD_HUGEPAGES unset or not 0).
  static bool huge_pages_for(size_t bytes);

  static constexpr size_t kHugePage = size_t{2} << 20;

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> mem_;
  size_t size_ = 0;
};

}  // namespace ragd::engine
