// Paged in-engine KV bookkeeping: a pool of fixed-size blocks (ids and ref counts) and
// per-sequence block tables. The bytes live in a KvStorage (kv_storage.h) that the backend
// provides; nothing here touches them except through that interface.
//
// A sequence's KV is a run of slots 0 .. num_tokens()-1; slot i lives in block
// table.blocks()[i / block_size] at offset i % block_size. Each slot holds one token's K/V and
// that token's position (its RoPE position and its place under the causal mask). Usually slot i
// holds position i (positions_are_slots(), the contiguous fast path, stored as nothing); sparse
// recompute (CacheBlend / EPIC: rewrite chosen slots in the middle), rollback (truncate, then
// append again) and sequence-parallel shards (a zigzag shard holds non-contiguous positions in
// contiguous slots) record explicit per-slot positions. A slot that was skipped by an
// out-of-order write holds kNoPosition (a hole: never attended to) until it is written.
//
// Blocks are ref-counted: fork() shares a prefix between sequences; a write into a block whose
// ref count is > 1 copies it first (copy-on-write), whether the write appends or rewrites a slot
// in the middle.
//
// Thread-safety: KvPool and BlockTable are NOT thread-safe; they are owned by the engine's
// scheduler thread. Other threads hand data in through the scheduler's queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/kv_storage.h"

namespace ragd::engine {

// Position of a slot that holds no token (larger than every real position; = kernels::kNoPosition).
inline constexpr int32_t kNoPosition = std::numeric_limits<int32_t>::max();

class KvPool {
 public:
  // A pool over host storage of num_blocks blocks (HostKvStorage). InvalidArgument on a bad layout.
  static Result<std::unique_ptr<KvPool>> create(const KvLayout& layout, size_t num_blocks);
  // A pool over storage the backend made (Backend::make_kv_storage). InvalidArgument when null.
  static Result<std::unique_ptr<KvPool>> create(std::unique_ptr<KvStorage> storage);

  const KvLayout& layout() const { return storage_->layout(); }
  size_t num_blocks() const { return refcount_.size(); }
  size_t free_blocks() const { return free_.size(); }
  size_t used_blocks() const { return num_blocks() - free_blocks(); }
  size_t bytes() const { return storage_->bytes(); }  // total bytes held (K and V, all layers)
  KvStorage& storage() { return *storage_; }
  const KvStorage& storage() const { return *storage_; }

  // A free block with ref count 1, or nullopt when the pool is full (soft outcome).
  std::optional<int32_t> allocate();
  void retain(int32_t block);
  void release(int32_t block);  // back to the free list when the count reaches 0
  int refcount(int32_t block) const { return refcount_[block]; }

 private:
  explicit KvPool(std::unique_ptr<KvStorage> storage);
  std::unique_ptr<KvStorage> storage_;
  std::vector<int> refcount_;
  std::vector<int32_t> free_;
};

// The KV of one sequence: its blocks in order, how many slots they hold, and each slot's position.
class BlockTable {
 public:
  BlockTable() = default;
  BlockTable(BlockTable&&) noexcept = default;
  BlockTable& operator=(BlockTable&&) noexcept = default;
  BlockTable(const BlockTable&) = delete;  // use fork()
  BlockTable& operator=(const BlockTable&) = delete;

  const std::vector<int32_t>& blocks() const { return blocks_; }
  int num_tokens() const { return num_tokens_; }  // slots in use (holes included)

  // True when slot i holds position i for every slot (no explicit positions, no holes).
  bool positions_are_slots() const { return positions_.empty(); }
  // Position of the token in slot s < num_tokens(); kNoPosition for a hole.
  int32_t position(int slot) const { return positions_.empty() ? slot : positions_[slot]; }
  // [num_tokens()] per-slot positions; empty when positions_are_slots().
  std::span<const int32_t> positions() const { return positions_; }
  // Relabels slots [slot0, slot0 + pos.size()) (all < num_tokens()) with new positions, e.g. a
  // sequence-parallel shard's imported KV. Bookkeeping only: re-rotating K is the caller's job.
  void set_positions(int slot0, std::span<const int32_t> pos);

  // ---- contiguous append (the common case): slots = positions = num_tokens() .. + n - 1 ----

  // Makes room for n more tokens: allocates blocks as needed and copies a shared (ref > 1) last
  // block before it is written. Returns false, changing nothing, when the pool runs out.
  bool reserve(KvPool& pool, int n);
  // Blocks that reserve(pool, n) would take from the pool (new blocks plus a copy-on-write copy),
  // so that a batch can check all its sequences before reserving any.
  int blocks_needed(const KvPool& pool, int n) const;
  // Marks n reserved tokens as written (called by the forward pass). n must fit the reservation.
  void commit(int n);

  // ---- explicit slots (sparse rewrite, out-of-order or shard writes) ----

  // Blocks that reserve_slots(pool, slots) would take: blocks up to the largest slot plus a
  // copy-on-write copy of every shared block that a slot falls in.
  int blocks_needed(const KvPool& pool, std::span<const int32_t> slots) const;
  // Makes the blocks of `slots` (distinct, >= 0) writable: allocates blocks up to the largest slot
  // and copies shared ones. Returns false, changing nothing, when the pool runs out.
  bool reserve_slots(KvPool& pool, std::span<const int32_t> slots);
  // Records that slots[i] now holds a token at positions[i] (called by the forward pass after
  // reserve_slots). Grows num_tokens() to cover the largest slot; slots skipped on the way
  // become holes (kNoPosition).
  void commit_slots(std::span<const int32_t> slots, std::span<const int32_t> positions);
  // Shares every block with a new table (ref counts +1).
  BlockTable fork(KvPool& pool) const;
  // Shares only the first n tokens' blocks (n need not be block-aligned; the partial last block
  // is shared and copied on the next write).
  BlockTable fork_prefix(KvPool& pool, int n) const;
  // Shares only the blocks that hold slots [begin, end): the new table's slot 0 is this table's
  // slot range_base(begin) (begin rounded down to the block size), so it holds end - that many
  // slots; explicit positions come along. A knowledge-tree node keeps its own tokens this way, in
  // O(its tokens) instead of the whole path before it.
  BlockTable fork_range(KvPool& pool, int begin, int end) const;
  static int range_base(const KvPool& pool, int begin);
  // Appends slots [from, from + n) of `src` by sharing its blocks (no copy). from must sit in its
  // block where num_tokens() sits in the last block of this table (from % block == num_tokens() %
  // block); when this table's last block is partial, src's block holding `from` replaces it — it
  // must hold the same KV for the slots before `from` (the same path's tokens: a node's range
  // table after its parent's).
  void append_shared(KvPool& pool, const BlockTable& src, int from, int n);
  // Drops slots from n onwards (rollback): releases whole blocks past the new end. A partial last
  // block that is shared stays shared and is copied on the next write into it, so truncate then
  // recompute never changes another table's KV.
  void truncate(KvPool& pool, int n);
  void release(KvPool& pool);  // releases every block; the table becomes empty

  // Host copies through the pool's storage.
  // Copies K/V of slots [t0, t0 + n) of one layer into dst, [n, kv_heads, head_dim] f32 each.
  void read(const KvPool& pool, int layer, int t0, int n, float* k_dst, float* v_dst) const;
  // The same for every layer at once: k_dst / v_dst are [num_layers][n, kv_heads, head_dim]
  // (KvStorage::read_tokens_all_layers: one transfer per group of layers on a device).
  void read_all_layers(const KvPool& pool, int t0, int n, float* k_dst, float* v_dst) const;
  // Writes K/V for slots [t0, t0 + n) of one layer (their blocks must be reserved and not shared).
  // K is post-RoPE.
  void write(KvPool& pool, int layer, int t0, int n, const float* k_src, const float* v_src);
  // Appends n tokens of imported KV (e.g. from the kvstore) for all layers: reserve, one
  // KvStorage::write_tokens_all_layers, commit. k_src/v_src: [num_layers][n, kv_heads, head_dim].
  // False when the pool is full.
  bool append(KvPool& pool, int n, const float* k_src, const float* v_src);
  // The same with the writing left to `write(storage, blocks, t0)`, which must fill slots
  // [t0, t0 + n) of every layer of the table's blocks (e.g. keys re-rotated on the way:
  // Model::append_shifted). Reserve, write, commit; false (nothing changed) when the pool is full.
  bool append_with(KvPool& pool, int n,
                   const std::function<void(KvStorage& storage, std::span<const int32_t> blocks, int t0)>& write);

 private:
  // True when the next token goes into a partially filled block that other tables share.
  bool needs_cow(const KvPool& pool) const;
  // Replaces block index idx with a private copy (copy-on-write). The pool must have a free block.
  void copy_on_write(KvPool& pool, int idx);
  // Drops positions_ when it has become the identity (e.g. after out-of-order writes filled every hole).
  void normalize_positions();
  // Checks (fatal) that slots [t0, t0 + n) are reserved and their blocks not shared.
  void check_writable(const KvPool& pool, int t0, int n) const;

  std::vector<int32_t> blocks_;
  int num_tokens_ = 0;
  int reserved_ = 0;  // slots with a block (>= num_tokens_)
  std::vector<int32_t> positions_;  // [num_tokens_] per-slot positions; empty = slot i holds position i
};

}  // namespace ragd::engine
