// KV segments: the unit the kvstore keeps, moves between tiers and hands to the engine.
//
// A segment is the K and V of n consecutive tokens for all layers of one model, plus a header.
// Byte layout (little-endian, one contiguous buffer, 64-byte aligned):
//
//   [header, padded to a multiple of 64 bytes]
//   K: [num_layers][num_tokens, num_kv_heads, head_dim]  dtype (f32 or bf16)
//   V: [num_layers][num_tokens, num_kv_heads, head_dim]
//
// K of all layers is contiguous and so is V, so `k_all()` / `v_all()` are exactly the
// `k_src` / `v_src` arguments of engine::BlockTable::append. The header also records the byte
// offset and an xxh3-64 checksum of every layer's K and V, so a consumer may start on layer i
// while later layers are still being read, and every layer is verified before it is used.
//
// Header fields: magic, format version, model fingerprint, dtype, layout version, shape, token
// count, position of the first token, whether K is stored after RoPE, tree key / parent key /
// document key / depth (so the SSD index can rebuild the knowledge tree after a restart), the
// per-layer table, and an xxh3-64 checksum of the header itself.
//
// Thread-safety: SegmentBuffer is immutable once published (shared as SegmentRef between tiers
// and readers); the free functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/kvstore/keys.h"  // the keys segments carry (doc_key, child_key, scope keys)
#include "ragd/kernels/kv_dtype.h"

namespace ragd::kvstore {

inline constexpr uint64_t kSegmentMagic = 0x31534B5644474152ULL;  // "RAGDKVS1"
inline constexpr uint32_t kSegmentFormatVersion = 1;
// Version of the in-engine KV layout the payload follows ([layer][token, kv_head, head_dim]).
inline constexpr uint8_t kKvLayoutVersion = 1;

// The element type of K and V: the engine's (kernels/kv_dtype.h), whose values are the codes the
// header stores (byte 32). Segments hold f32 or bf16 (KvFormat::validate).
using KvDtype = kernels::KvDtype;

// Everything about the KV that must match for a segment to be usable by a model.
struct KvFormat {
  Hash128 model_fingerprint;            // engine::Model::fingerprint(): architecture, shapes, RoPE, weights
  KvDtype dtype = KvDtype::kF32;        // element type of K and V
  uint8_t layout_version = kKvLayoutVersion;
  int num_layers = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  bool k_rotated = true;                // K stored after RoPE (the engine's convention)

  static KvFormat from_layout(const engine::KvLayout& layout, const Hash128& fingerprint);
  size_t token_elems() const { return static_cast<size_t>(num_kv_heads) * head_dim; }  // per layer, K or V
  size_t bytes_per_token() const { return 2 * num_layers * token_elems() * kernels::kv_dtype_bytes(dtype); }
  Status validate() const;  // InvalidArgument naming the bad field
};

struct LayerEntry {
  uint64_t k_offset = 0;    // bytes from the start of the segment
  uint64_t v_offset = 0;
  uint64_t k_checksum = 0;  // xxh3-64 of the layer's K bytes
  uint64_t v_checksum = 0;
};

struct SegmentHeader {
  uint32_t format_version = kSegmentFormatVersion;
  Hash128 model_fingerprint;
  KvDtype dtype = KvDtype::kF32;
  uint8_t layout_version = kKvLayoutVersion;
  bool k_rotated = true;
  bool is_chunk = false;       // position-independent chunk (no parent), not a tree node
  uint32_t num_layers = 0;
  uint32_t num_kv_heads = 0;
  uint32_t head_dim = 0;
  uint32_t num_tokens = 0;
  int32_t first_position = 0;  // RoPE position of the first token when K was computed
  uint32_t depth = 0;          // 0 = child of a root (scope) key
  Hash128 key;                 // this segment's key
  Hash128 parent_key;          // the tree parent's key (a scope key when depth == 0)
  Hash128 doc_key;             // the document (token ids) this segment holds
  uint64_t payload_offset = 0; // = header size (multiple of 64)
  uint64_t payload_bytes = 0;
  std::vector<LayerEntry> layers;

  size_t layer_bytes() const;  // bytes of one layer's K (same for V)
  size_t total_bytes() const { return payload_offset + payload_bytes; }
};

// Header size in bytes (padded to 64) for a given layer count.
size_t segment_header_size(uint32_t num_layers);
// Bytes of a whole segment of num_tokens tokens in `fmt` (header + K + V): the size
// SegmentBuffer::build gives it, and what a tier accounts for one it has not built (a pool copy).
size_t segment_bytes(const KvFormat& fmt, int num_tokens);

// Parses and checks a header (magic, version, sizes, header checksum). Corruption naming the
// field on failure. `bytes` may be longer than the header.
Result<SegmentHeader> decode_segment_header(std::span<const std::byte> bytes);
std::vector<std::byte> encode_segment_header(const SegmentHeader& h);  // header_size bytes

// Rejects a header whose model, dtype, layout version, shape or RoPE convention differs from
// `fmt` (FailedPrecondition naming the field and both values).
Status check_segment_format(const SegmentHeader& h, const KvFormat& fmt);

// What a caller supplies to build a segment. k / v: [num_layers][num_tokens, kv_heads, head_dim].
struct KvData {
  int num_tokens = 0;
  int first_position = 0;
  const float* k = nullptr;
  const float* v = nullptr;
};

class SegmentBuffer;
using SegmentRef = std::shared_ptr<const SegmentBuffer>;

// Identity of a segment inside the store.
struct SegmentIdentity {
  Hash128 key;
  Hash128 parent_key;
  Hash128 doc_key;
  uint32_t depth = 0;
  bool is_chunk = false;
};

class SegmentBuffer {
 public:
  ~SegmentBuffer();
  SegmentBuffer(const SegmentBuffer&) = delete;
  SegmentBuffer& operator=(const SegmentBuffer&) = delete;

  // Builds a segment (copies and checksums the KV). InvalidArgument on a bad format / count.
  static Result<std::shared_ptr<SegmentBuffer>> build(const KvFormat& fmt, const SegmentIdentity& id,
                                                      const KvData& kv);
  // Parses a complete encoded segment. With verify_payload, every layer checksum is checked.
  static Result<std::shared_ptr<SegmentBuffer>> parse(std::span<const std::byte> bytes, bool verify_payload);
  // A zero-filled segment with `h`'s header written, to be filled layer by layer (SSD loads).
  static std::shared_ptr<SegmentBuffer> allocate(const SegmentHeader& h);

  const SegmentHeader& header() const { return header_; }
  std::span<const std::byte> bytes() const { return {data_, size_}; }
  size_t size() const { return size_; }
  int num_tokens() const { return static_cast<int>(header_.num_tokens); }

  // f32 views (dtype kF32 only). k_all/v_all: [num_layers][num_tokens, kv_heads, head_dim].
  const float* k_all() const;
  const float* v_all() const;
  // K and V of every layer as f32, whatever the dtype (bf16 widens exactly):
  // [num_layers][num_tokens, kv_heads, head_dim] each.
  void read_all(float* k, float* v) const;
  const float* k(int layer) const;  // [num_tokens, kv_heads, head_dim]
  const float* v(int layer) const;

  // Checks one layer's K and V against the header checksums. Corruption naming the layer.
  Status verify_layer(int layer) const;
  Status verify_all() const;

  // Writable views for filling an allocate()d buffer before it is published.
  std::byte* mutable_layer_k(int layer);
  std::byte* mutable_layer_v(int layer);

 private:
  SegmentBuffer(SegmentHeader h, size_t size);
  SegmentHeader header_;
  std::byte* data_ = nullptr;  // 64-byte aligned, size_ bytes
  size_t size_ = 0;
};

}  // namespace ragd::kvstore
