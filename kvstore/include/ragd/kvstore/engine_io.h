// Moving KV between the engine's paged pool (engine::KvPool / BlockTable) and kvstore segments.
//
// gather_kv copies tokens [t0, t0 + n) of a sequence out of its block table into contiguous
// host arrays k, v: [num_layers][n, kv_heads, head_dim] f32 (what KvStore::insert takes);
// host_kv does the same for a loaded segment (so callers never read a segment's header);
// append_segment appends a loaded segment's tokens to a block table (BlockTable::append).
// On a GPU build these become device copies; the contract (shapes, positions) stays.
//
// Thread-safety: the engine objects are owned by the scheduler thread; call these there.
#pragma once

#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/segment.h"

namespace ragd::kvstore {

struct HostKv {
  int num_tokens = 0;
  int first_position = 0;   // position of token t0 in the sequence
  std::vector<float> k, v;  // [num_layers][num_tokens, kv_heads, head_dim]
  KvData data() const { return {num_tokens, first_position, k.data(), v.data()}; }
};

// Bytes of the HostKv of num_tokens tokens of a pool with `layout` (f32 K and V of every layer),
// before it is gathered.
size_t host_kv_bytes(const engine::KvLayout& layout, int num_tokens);

// InvalidArgument when [t0, t0 + n) is not inside the table.
Result<HostKv> gather_kv(const engine::KvPool& pool, const engine::BlockTable& table, int t0, int n);

// The K and V of every layer of `seg` as f32 (bf16 widens exactly), first_position = the position
// its first token had when K was computed (segment header).
HostKv host_kv(const SegmentBuffer& seg);
// K and V of seg as f32 host arrays: a view of the segment's own bytes for kF32 (nothing copied;
// valid while seg lives), else widened into *keep.
KvData host_kv_view(const SegmentBuffer& seg, HostKv* keep);

// Appends seg's tokens to `table`. FailedPrecondition when the segment's shape does not match the
// pool's layout; ResourceExhausted (table unchanged) when the pool has no room.
Status append_segment(const SegmentBuffer& seg, engine::KvPool& pool, engine::BlockTable& table);

}  // namespace ragd::kvstore
