// Where the bytes of the paged in-engine KV live. The backend provides the storage (host memory
// for the CPU backend; a device pool for a CUDA backend); KvPool and BlockTable (kv_cache.h) only
// keep bookkeeping (block ids, ref counts, per-slot positions) and reach the bytes through this
// interface.
//
// Layout of a block, per layer, in the layout's dtype (f32, bf16, or int8 with one f32 scale per
// (slot, kv head); kernels/kv_dtype.h):
//   k: [block_size, num_kv_heads, head_dim]   K stored AFTER RoPE
//   v: [block_size, num_kv_heads, head_dim]
//   int8 only: k_scale, v_scale: [block_size, num_kv_heads]
// Whatever the dtype, read() and write() move f32 rows (converted on the way), so the tiers,
// CacheBlend and tests see one type; only the attention kernels read the stored type directly.
//
// Thread-safety: NOT thread-safe; owned with the KvPool by the engine's scheduler thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/kernels/kv_dtype.h"

namespace ragd::engine {

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  kernels::KvDtype dtype = kernels::KvDtype::kF32;  // how the values are stored
  // values per (layer, block) for K (same for V)
  size_t block_floats() const { return static_cast<size_t>(block_size) * num_kv_heads * head_dim; }
  // values per token per layer for K (same for V); host rows of read() / write() are this many f32
  size_t token_floats() const { return static_cast<size_t>(num_kv_heads) * head_dim; }
  // stored bytes per token, K and V of every layer (values and int8 scales)
  size_t token_bytes() const {
    const size_t scales = kernels::kv_dtype_scaled(dtype) ? sizeof(float) * num_kv_heads : 0;
    return 2 * static_cast<size_t>(num_layers) * (token_floats() * kernels::kv_dtype_bytes(dtype) + scales);
  }
  // bytes of one block, K and V of every layer
  size_t block_bytes() const { return token_bytes() * block_size; }
  // InvalidArgument naming the field when a dimension is not positive.
  Status validate() const;
};

class KvStorage {
 public:
  virtual ~KvStorage() = default;

  virtual std::string_view device() const = 0;  // "cpu", "cuda:0", ...
  const KvLayout& layout() const { return layout_; }
  size_t num_blocks() const { return num_blocks_; }
  size_t bytes() const { return layout_.block_bytes() * num_blocks_; }

  // Copies block src to block dst, K and V of every layer (copy-on-write of a shared block).
  virtual void copy_block(int32_t dst, int32_t src) = 0;
  // Host transfers of n consecutive slots [slot, slot + n) of one block of one layer (import and
  // export: kvstore segments, tests). k, v: [n, num_kv_heads, head_dim] f32, host memory.
  virtual void read(int layer, int32_t block, int slot, int n, float* k, float* v) const = 0;
  virtual void write(int layer, int32_t block, int slot, int n, const float* k, const float* v) = 0;
  // The same for tokens [t0, t0 + n) of a sequence whose blocks are `blocks` (block_size slots each),
  // one layer: BlockTable::read / write. The default is one read() / write() per block; a device
  // storage moves the whole run with one gather / scatter and one copy each way.
  virtual void read_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const;
  virtual void write_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v);
  // Tokens [t0, t0 + n) of every layer at once: k, v are [num_layers][n, num_kv_heads, head_dim]
  // (BlockTable::append: a segment loaded from a slower tier). The default writes layer by layer; a
  // device storage converts the segment on the host in parallel, copies it in few large copies and
  // synchronises once per copy instead of twice per layer.
  virtual void write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v);
  // The inverse (gather_kv: a sequence's KV exported to a slower tier), same shapes.
  virtual void read_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const;

 protected:
  KvStorage(const KvLayout& layout, size_t num_blocks) : layout_(layout), num_blocks_(num_blocks) {}

 private:
  KvLayout layout_;
  size_t num_blocks_ = 0;
};

// KV in host memory (the CPU backend's storage, and the default of KvPool::create(layout, n)).
// Per layer, one array [num_blocks, block_size, num_kv_heads, head_dim] of the layout's dtype for K
// and one for V (plus, for int8, [num_blocks, block_size, num_kv_heads] scales for each), zeroed at
// creation by the kernel's zero pages: a page is mapped when a block on it is first written, so
// resident memory grows with the KV in use (the pool hands out low block ids first), not with the
// pool's size.
class HostKvStorage final : public KvStorage {
 public:
  // InvalidArgument on a bad layout or block count.
  static Result<std::unique_ptr<HostKvStorage>> create(const KvLayout& layout, size_t num_blocks);

  std::string_view device() const override { return "cpu"; }
  void copy_block(int32_t dst, int32_t src) override;
  void read(int layer, int32_t block, int slot, int n, float* k, float* v) const override;
  void write(int layer, int32_t block, int slot, int n, const float* k, const float* v) override;
  // Layers in parallel on the kernels' thread team (kernels/threads.h; BlockTable::append runs on
  // the thread that steps the model).
  void write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k,
                               const float* v) override;

  // Base of one layer's arrays (block 0), for paged kernels: values of layout().dtype.
  void* k_layer(int layer) { return k_[layer].get(); }
  void* v_layer(int layer) { return v_[layer].get(); }
  const void* k_layer(int layer) const { return k_[layer].get(); }
  const void* v_layer(int layer) const { return v_[layer].get(); }
  // int8: the layer's scales (block 0); null for other dtypes.
  float* k_scale(int layer) { return ks_.empty() ? nullptr : ks_[layer].get(); }
  float* v_scale(int layer) { return vs_.empty() ? nullptr : vs_[layer].get(); }
  const float* k_scale(int layer) const { return ks_.empty() ? nullptr : ks_[layer].get(); }
  const float* v_scale(int layer) const { return vs_.empty() ? nullptr : vs_[layer].get(); }

  // Gives the memory pages that lie wholly inside these blocks (every layer's K, V and scales) back
  // to the kernel: resident memory drops, and what the blocks hold is unspecified until written
  // again (a long sequence's KV that moved to a lower tier, kv_spill.h); a page shared with a block
  // not listed keeps its bytes. The blocks must be free or about to be.
  void discard(std::span<const int32_t> blocks);
  // Stores `rows` f32 K and V rows (row r at k + r · stride, v + r · stride; kv_heads · head_dim
  // values each) into slots [slot, slot + rows) of one block of one layer, converting to the dtype.
  void store(int layer, int32_t block, int slot, int rows, const float* k, const float* v, size_t stride);

 private:
  HostKvStorage(const KvLayout& layout, size_t num_blocks);
  size_t value_bytes() const { return kernels::kv_dtype_bytes(layout().dtype); }
  struct FreeDeleter {
    void operator()(void* p) const noexcept;
  };
  std::vector<std::unique_ptr<std::byte[], FreeDeleter>> k_, v_;
  std::vector<std::unique_ptr<float[], FreeDeleter>> ks_, vs_;  // int8 only
};

}  // namespace ragd::engine
