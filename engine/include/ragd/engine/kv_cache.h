// Paged in-engine KV: a pool of fixed-size blocks and per-sequence block tables.
//
// Layout (CPU backend, f32), per layer:
//   k: [num_blocks, block_size, num_kv_heads, head_dim]   K stored AFTER RoPE
//   v: [num_blocks, block_size, num_kv_heads, head_dim]
// Token i of a sequence lives in block table.blocks[i / block_size], slot i % block_size, and its
// RoPE position is i (positions are explicit in stored kvstore segments; inside the engine the
// position of a token is its index in the sequence).
//
// Blocks are ref-counted: fork() shares a prefix between sequences; a write into a block whose
// ref count is > 1 copies it first (copy-on-write).
//
// Thread-safety: KvPool and BlockTable are NOT thread-safe; they are owned by the engine's
// scheduler thread. Other threads hand data in through the scheduler's queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
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
};

class KvPool {
 public:
  // Allocates num_blocks blocks for every layer up front. InvalidArgument on a bad layout.
  static Result<std::unique_ptr<KvPool>> create(const KvLayout& layout, size_t num_blocks);

  const KvLayout& layout() const { return layout_; }
  size_t num_blocks() const { return refcount_.size(); }
  size_t free_blocks() const { return free_.size(); }
  size_t used_blocks() const { return num_blocks() - free_blocks(); }
  size_t bytes() const;  // total bytes held (K and V, all layers)

  // A free block with ref count 1, or nullopt when the pool is full (soft outcome).
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  void release(int32_t block);  // back to the free list when the count reaches 0
  int refcount(int32_t block) const { return refcount_[block]; }

  float* k(int layer, int32_t block);
  float* v(int layer, int32_t block);
  const float* k(int layer, int32_t block) const;
  const float* v(int layer, int32_t block) const;

 private:
  KvPool(const KvLayout& layout, size_t num_blocks);
  KvLayout layout_;
  // Per layer, block_floats() * num_blocks floats each; left uninitialised (pages are touched on first
  // write, so a large pool costs nothing until used). Only written slots are ever read.
  std::vector<std::unique_ptr<float[]>> k_, v_;
  std::vector<int> refcount_;
  std::vector<int32_t> free_;
};

// The KV of one sequence: its blocks in order and how many tokens they hold.
class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(BlockTable&&) noexcept = default;
  BlockTable& operator=(BlockTable&&) noexcept = default;
  BlockTable(const BlockTable&) = delete;  // use fork()
  BlockTable& operator=(const BlockTable&) = delete;

  const std::vector<int32_t>& blocks() const { return blocks_; }
  int num_tokens() const { return num_tokens_; }

  // Makes room for n more tokens: allocates blocks as needed and copies a shared (ref > 1) last
  // block before it is written. Returns false, changing nothing, when the pool runs out.
  bool reserve(KvPool& pool, int n);
  // Blocks that reserve(pool, n) would take from the pool (new blocks plus a copy-on-write copy),
  // so that a batch can check all its sequences before reserving any.
  int blocks_needed(const KvPool& pool, int n) const;
  // Marks n reserved tokens as written (called by the forward pass). n must fit the reservation.
  void commit(int n);
  // Shares every block with a new table (ref counts +1).
  BlockTable fork(KvPool& pool) const;
  // Shares only the first n tokens' blocks (n need not be block-aligned; the partial last block
  // is shared and copied on the next write).
  BlockTable fork_prefix(KvPool& pool, int n) const;
  // Drops tokens from n onwards (releases whole blocks past the new end).
  void truncate(KvPool& pool, int n);
  void release(KvPool& pool);  // releases every block; the table becomes empty

  // Copies K/V of tokens [t0, t0 + n) of one layer into dst, [n, kv_heads, head_dim] f32 each.
  void read(const KvPool& pool, int layer, int t0, int n, float* k_dst, float* v_dst) const;
  // Writes K/V for tokens [t0, t0 + n) of one layer (they must be reserved). K is post-RoPE.
  void write(KvPool& pool, int layer, int t0, int n, const float* k_src, const float* v_src);
  // Appends n tokens of imported KV (e.g. from the kvstore) for all layers: reserve + write + commit.
  // k_src/v_src: [num_layers][n, kv_heads, head_dim]. False when the pool is full.
  bool append(KvPool& pool, int n, const float* k_src, const float* v_src);

 private:
  // True when the next token goes into a partially filled block that other tables share.
  bool needs_cow(const KvPool& pool) const;

  std::vector<int32_t> blocks_;
  int num_tokens_ = 0;
  int reserved_ = 0;  // tokens with a slot (>= num_tokens_)
};

}  // namespace ragd::engine
