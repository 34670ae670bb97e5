// KV blocks in GPU memory: the CUDA backend's KvStorage, so KvPool's block tables, ref counts and
// copy-on-write work unchanged while the bytes live in HBM.
//
// Layout, per layer, as the CUDA attention kernels read it (ragd/kernels/cuda/attention.h): one bf16
// array [num_blocks, block_size, num_kv_heads, head_dim] for K (after RoPE) and one for V. Only bf16
// is stored on the device (the layout's dtype must be kBF16). copy_block is a device-to-device copy
// enqueued on the backend's stream (ordered with the kernels that read the blocks); read() / write()
// move f32 rows through a pinned staging buffer and wait for their copy.
// A whole segment (write_tokens_all_layers: KV coming up from DRAM / SSD) goes up on the storage's
// own copy stream instead, in groups of layers through two pinned staging halves (the host converts
// group i + 1 while group i is copied), and returns before the copies finish: the compute stream
// waits for each layer's copy only when it reaches that layer (wait_layer, called by the backend
// at the top of every layer), so a step's first layers run while later layers' KV is still coming
// up. Every other access waits for all pending uploads first (wait_uploads). The copy stream
// itself first waits for what the compute stream had enqueued (a reused block may still be read).
// RAGD_CUDA_KV_OVERLAP=0 keeps the synchronous upload on the compute stream (a measurement
// switch, read at every segment).
// A CUDA error in these void methods is fatal (RAGD_CHECK): the device context is unusable then.
//
// Thread-safety: NOT thread-safe; used with the KvPool and the backend by one thread at a time.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ragd/engine/kv_storage.h"
#include "ragd/kernels/cuda/memory.h"

namespace ragd::engine {

class CudaKvStorage final : public KvStorage {
 public:
  // InvalidArgument on a bad layout or a dtype other than bf16; ResourceExhausted when the blocks do
  // not fit in device memory. `stream` is shared with the backend that runs the kernels.
  static Result<std::unique_ptr<CudaKvStorage>> create(const KvLayout& layout, size_t num_blocks, int device,
                                                       std::shared_ptr<kernels::cuda::Stream> stream);
  ~CudaKvStorage() override;

  std::string_view device() const override { return name_; }
  void copy_block(int32_t dst, int32_t src) override;
  void read(int layer, int32_t block, int slot, int n, float* k, float* v) const override;
  void write(int layer, int32_t block, int slot, int n, const float* k, const float* v) override;
  // A whole run of a sequence's tokens with one gather (read) or scatter (write) kernel and one copy
  // each way, instead of two synchronised copies per block.
  void read_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const override;
  void write_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v) override;
  // A whole segment: layers converted to bf16 in parallel into the pinned staging, groups of layers
  // (at most kSegmentStagingBytes of values) copied up with one copy and scattered with one kernel
  // per layer, one synchronisation per group.
  void write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v) override;
  // The inverse: groups of layers gathered on the device, one copy down and one synchronisation per
  // group, converted to f32 on the host in parallel.
  void read_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const override;

  // The compute stream's later work waits for the pending segment upload of `layer` / of every
  // layer (no-ops when none is pending; enqueue only, the host does not block).
  void wait_layer(int layer) const;
  void wait_uploads() const;

  // Base of one layer's bf16 arrays (block 0), device memory.
  uint16_t* k_layer(int layer) const { return k_[layer].as<uint16_t>(); }
  uint16_t* v_layer(int layer) const { return v_[layer].as<uint16_t>(); }

 private:
  CudaKvStorage(const KvLayout& layout, size_t num_blocks, int device, std::shared_ptr<kernels::cuda::Stream> stream);
  // Element offset of (block, slot) in a layer's array.
  size_t offset(int32_t block, int slot) const;
  // Room for value_bytes of K/V rows in the staging buffers and n slots on the device; the global
  // pool slots of tokens [t0, t0 + n) uploaded.
  void stage(std::span<const int32_t> blocks, int t0, int n, size_t value_bytes) const;
  // Layers [l0, l0 + g) of tokens [t0, t0 + n) (k, v: [g][n, kv_heads, head_dim] f32, host): converted
  // to bf16 in the staging (layers in parallel), one copy up and one scatter per layer; returns
  // without waiting for them.
  void upload_layers(std::span<const int32_t> blocks, int t0, int n, int l0, int g, const float* k, const float* v);
  // The inverse: one gather per layer and one copy down, waited for, converted to f32.
  void download_layers(std::span<const int32_t> blocks, int t0, int n, int l0, int g, float* k, float* v) const;
  // The global pool slots of tokens [t0, t0 + n).
  void fill_slots(std::span<const int32_t> blocks, int t0, int n, int32_t* slots) const;
  // Layers [0, g) of n tokens (k, v: [g][n, kv_heads, head_dim] f32) as bf16 rows, K then V per
  // layer, into dst (layers in parallel).
  void to_bf16_rows(int n, int g, const float* k, const float* v, uint16_t* dst) const;
  // Layers moved per copy: as many as fit kSegmentStagingBytes (cuda_kv_storage.cpp), at least one.
  int layers_per_copy(int n) const;
  // write_tokens_all_layers on the copy stream (see the class comment).
  void upload_segment_async(std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v);

  int device_ = 0;
  std::string name_;
  std::shared_ptr<kernels::cuda::Stream> stream_;
  std::vector<kernels::cuda::DeviceBuffer> k_, v_;
  mutable kernels::cuda::PinnedBuffer staging_;  // K then V rows, bf16, and the slots of a run
  mutable kernels::cuda::DeviceBuffer rows_dev_;  // K then V rows gathered / to scatter, bf16
  mutable kernels::cuda::DeviceBuffer slots_dev_;
  // The overlapped segment upload.
  struct UploadHalf {
    kernels::cuda::PinnedBuffer host;  // K then V rows of a group of layers, bf16
    kernels::cuda::DeviceBuffer dev;
    kernels::cuda::Event done;  // its last copy and scatters finished
  };
  kernels::cuda::Stream copy_stream_;
  UploadHalf up_[2];
  kernels::cuda::PinnedBuffer up_slots_host_;
  kernels::cuda::DeviceBuffer up_slots_dev_;
  kernels::cuda::Event compute_mark_;
  std::vector<kernels::cuda::Event> layer_ready_;  // recorded on the copy stream after a layer's scatter
  mutable std::vector<char> pending_;              // layer_ready_[l] not yet waited for by the compute stream
  mutable bool any_pending_ = false;
};

}  // namespace ragd::engine
