// Where the bytes of the paged in-engine KV live. The backend provides the storage (host memory
// for the CPU backend; a device pool for a CUDA backend); KvPool and BlockTable (kv_cache.h) only
// keep bookkeeping (block ids, ref counts, per-slot positions) and reach the bytes through this
// interface.
//
// Layout of a block (every storage, f32), per layer:
//   k: [block_size, num_kv_heads, head_dim]   K stored AFTER RoPE
//   v: [block_size, num_kv_heads, head_dim]
//
// Thread-safety: NOT thread-safe; owned with the KvPool by the engine's scheduler thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine {

struct KvLayout {
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int block_size = 16;  // tokens per block
  // floats per (layer, block) for K (same for V)
  size_t block_floats() const { return static_cast<size_t>(block_size) * num_kv_heads * head_dim; }
  // floats per token per layer for K (same for V)
  size_t token_floats() const { return static_cast<size_t>(num_kv_heads) * head_dim; }
  // bytes of one block, K and V of every layer
  size_t block_bytes() const { return 2 * sizeof(float) * block_floats() * static_cast<size_t>(num_layers); }
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

 protected:
  KvStorage(const KvLayout& layout, size_t num_blocks) : layout_(layout), num_blocks_(num_blocks) {}

 private:
  KvLayout layout_;
  size_t num_blocks_ = 0;
};

// KV in host memory (the CPU backend's storage, and the default of KvPool::create(layout, n)).
// Per layer, one array [num_blocks, block_size, num_kv_heads, head_dim] for K and one for V, left
// uninitialised (pages are touched on first write, so a large pool costs nothing until used; only
// written slots are ever read).
class HostKvStorage final : public KvStorage {
 public:
  // InvalidArgument on a bad layout or block count.
  static Result<std::unique_ptr<HostKvStorage>> create(const KvLayout& layout, size_t num_blocks);

  std::string_view device() const override { return "cpu"; }
  void copy_block(int32_t dst, int32_t src) override;
  void read(int layer, int32_t block, int slot, int n, float* k, float* v) const override;
  void write(int layer, int32_t block, int slot, int n, const float* k, const float* v) override;

  // Base of one layer's arrays (block 0), for paged kernels: [num_blocks, block_size, kv_heads, head_dim].
  float* k_layer(int layer) { return k_[layer].get(); }
  float* v_layer(int layer) { return v_[layer].get(); }
  const float* k_layer(int layer) const { return k_[layer].get(); }
  const float* v_layer(int layer) const { return v_[layer].get(); }

 private:
  HostKvStorage(const KvLayout& layout, size_t num_blocks);
  std::vector<std::unique_ptr<float[]>> k_, v_;
};

}  // namespace ragd::engine
