#include "ragd/kernels/cuda/memory.h"

#include <cuda_runtime.h>

#include <string>

#include "cuda_util.cuh"

namespace ragd::kernels::cuda {

using detail::as_stream;
using detail::cuda_status;

Status set_device(int device) { return cuda_status(cudaSetDevice(device), "cudaSetDevice"); }

namespace {

Status alloc_status(cudaError_t e, const char* what, size_t bytes) {
  if (e == cudaSuccess) return Status::OK();
  cudaGetLastError();  // an out-of-memory error is not sticky; clear it for the next call
  if (e == cudaErrorMemoryAllocation) {
    return Status::ResourceExhausted(std::string(what) + ": out of memory allocating " + std::to_string(bytes) +
                                     " bytes");
  }
  return cuda_status(e, what);
}

}  // namespace

template <Memory kWhere>
Result<Buffer<kWhere>> Buffer<kWhere>::alloc(size_t bytes) {
  Buffer b;
  if (bytes == 0) return Result<Buffer>(std::move(b));
  const cudaError_t e = kWhere == Memory::kDevice ? cudaMalloc(&b.p_, bytes) : cudaMallocHost(&b.p_, bytes);
  RAGD_RETURN_IF_ERROR(alloc_status(e, kWhere == Memory::kDevice ? "cudaMalloc" : "cudaMallocHost", bytes));
  b.n_ = bytes;
  return Result<Buffer>(std::move(b));
}

template <Memory kWhere>
void Buffer<kWhere>::release() {
  if (p_ == nullptr) return;
  if (kWhere == Memory::kDevice) {
    cudaFree(p_);
  } else {
    cudaFreeHost(p_);
  }
  p_ = nullptr;
  n_ = 0;
}

template class Buffer<Memory::kDevice>;
template class Buffer<Memory::kPinnedHost>;

Result<Stream> Stream::create() {
  Stream s;
  cudaStream_t h = nullptr;
  RAGD_RETURN_IF_ERROR(cuda_status(cudaStreamCreateWithFlags(&h, cudaStreamNonBlocking), "cudaStreamCreate"));
  s.s_ = h;
  return Result<Stream>(std::move(s));
}

Stream& Stream::operator=(Stream&& o) noexcept {
  if (this != &o) {
    if (s_) cudaStreamDestroy(as_stream(s_));
    s_ = std::exchange(o.s_, nullptr);
  }
  return *this;
}

Stream::~Stream() {
  if (s_) cudaStreamDestroy(as_stream(s_));
}

Status Stream::sync() const { return cuda_status(cudaStreamSynchronize(as_stream(s_)), "cudaStreamSynchronize"); }

Result<Event> Event::create() {
  cudaEvent_t e = nullptr;
  RAGD_RETURN_IF_ERROR(cuda_status(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate"));
  Event out;
  out.e_ = e;
  return Result<Event>(std::move(out));
}

Event& Event::operator=(Event&& o) noexcept {
  if (this != &o) {
    if (e_) cudaEventDestroy(static_cast<cudaEvent_t>(e_));
    e_ = std::exchange(o.e_, nullptr);
  }
  return *this;
}

Event::~Event() {
  if (e_) cudaEventDestroy(static_cast<cudaEvent_t>(e_));
}

Status Event::record(void* stream) {
  return cuda_status(cudaEventRecord(static_cast<cudaEvent_t>(e_), as_stream(stream)), "cudaEventRecord");
}

Status Event::wait(void* stream) const {
  return cuda_status(cudaStreamWaitEvent(as_stream(stream), static_cast<cudaEvent_t>(e_), 0), "cudaStreamWaitEvent");
}

Status Event::sync() const { return cuda_status(cudaEventSynchronize(static_cast<cudaEvent_t>(e_)), "cudaEventSynchronize"); }

Status copy_to_device(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::OK();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, as_stream(stream)), "copy_to_device");
}

Status copy_to_host(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::OK();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, as_stream(stream)), "copy_to_host");
}

Status copy_on_device(void* dst, const void* src, size_t bytes, void* stream) {
  if (bytes == 0) return Status::OK();
  return cuda_status(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, as_stream(stream)), "copy_on_device");
}

Status copy_rows_on_device(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t row_bytes,
                           size_t rows, void* stream) {
  if (rows == 0 || row_bytes == 0) return Status::OK();
  return cuda_status(cudaMemcpy2DAsync(dst, dst_pitch, src, src_pitch, row_bytes, rows, cudaMemcpyDeviceToDevice,
                                       as_stream(stream)),
                     "copy_rows_on_device");
}

Status fill_zero(void* dst, size_t bytes, void* stream) {
  if (bytes == 0) return Status::OK();
  return cuda_status(cudaMemsetAsync(dst, 0, bytes, as_stream(stream)), "fill_zero");
}

}  // namespace ragd::kernels::cuda
