// Device memory, pinned host memory, streams and copies for the CUDA backend, behind a CUDA-free
// header (device pointers are plain pointers, a stream is `void*`). Unlike the launchers, these
// allocate and (where named) synchronise: they are the engine's only door to the CUDA runtime.
// Errors are Internal with the CUDA error name and string (ResourceExhausted for an allocation that
// does not fit, naming the bytes).
// Thread-safety: the owning types are movable, not copyable, and not thread-safe; the free functions
// are safe from any thread (a device is current per thread: call set_device on each thread first).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "ragd/kernels/cuda/device.h"

namespace ragd::kernels::cuda {

// Makes `device` current for the calling thread.
Status set_device(int device);

// Bytes owned until destruction: device memory (cudaMalloc, 256-byte aligned) or page-locked host
// memory (cudaMallocHost: the staging of every host <-> device copy, so copies are asynchronous DMA).
enum class Memory : uint8_t { kDevice, kPinnedHost };

template <Memory kWhere>
class Buffer {
 public:
  static Result<Buffer> alloc(size_t bytes);
  Buffer() = default;
  Buffer(Buffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), n_(std::exchange(o.n_, 0)) {}
  Buffer& operator=(Buffer&& o) noexcept {
    if (this != &o) {
      release();
      p_ = std::exchange(o.p_, nullptr);
      n_ = std::exchange(o.n_, 0);
    }
    return *this;
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  ~Buffer() { release(); }
  void* get() const { return p_; }
  template <typename T>
  T* as() const { return static_cast<T*>(p_); }
  size_t bytes() const { return n_; }
  // Grows to at least `bytes` (the old memory is freed first, so the peak is the new size; the
  // contents are not kept); nothing to do when it is already that large.
  Status reserve(size_t bytes) {
    if (n_ >= bytes) return Status::OK();
    release();
    RAGD_ASSIGN_OR_RETURN(*this, alloc(bytes));
    return Status::OK();
  }

 private:
  void release();  // memory.cu (explicitly instantiated for both kinds)
  void* p_ = nullptr;
  size_t n_ = 0;
};
using DeviceBuffer = Buffer<Memory::kDevice>;
using PinnedBuffer = Buffer<Memory::kPinnedHost>;

// A non-blocking stream (does not synchronise with the legacy default stream).
class Stream {
 public:
  static Result<Stream> create();
  Stream() = default;
  Stream(Stream&& o) noexcept : s_(std::exchange(o.s_, nullptr)) {}
  Stream& operator=(Stream&& o) noexcept;
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream();
  void* get() const { return s_; }
  Status sync() const;  // waits for everything enqueued; reports a fault of earlier kernels

 private:
  void* s_ = nullptr;
};

// An event for ordering two streams (no timing): record() marks the point reached by a stream's
// enqueued work, wait() makes another stream's later work wait for that point without blocking the
// host, sync() blocks the host until it is reached.
class Event {
 public:
  static Result<Event> create();
  Event() = default;
  Event(Event&& o) noexcept : e_(std::exchange(o.e_, nullptr)) {}
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event();
  Status record(void* stream);
  Status wait(void* stream) const;  // `stream`'s later work waits for the recorded point
  Status sync() const;

 private:
  void* e_ = nullptr;
};

// Asynchronous copies on `stream` (host sides should be pinned for overlap; pageable memory works
// but the copy is then staged by the driver).
Status copy_to_device(void* dst, const void* src, size_t bytes, void* stream);
Status copy_to_host(void* dst, const void* src, size_t bytes, void* stream);
Status copy_on_device(void* dst, const void* src, size_t bytes, void* stream);
// Device-to-device copy of `rows` rows of `row_bytes` each, rows dst_pitch / src_pitch bytes apart.
Status copy_rows_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                           size_t rows, void* stream);
Status fill_zero(void* dst, size_t bytes, void* stream);

}  // namespace ragd::kernels::cuda
