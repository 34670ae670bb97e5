#include "ragd/kvstore/engine_io.h"

#include <vector>

#include <fmt/format.h>

namespace ragd::kvstore {

size_t host_kv_bytes(const engine::KvLayout& layout, int num_tokens) {
  return 2 * static_cast<size_t>(num_tokens) * layout.token_floats() * layout.num_layers * sizeof(float);
}

Result<HostKv> gather_kv(const engine::KvPool& pool, const engine::BlockTable& table, int t0, int n) {
  if (t0 < 0 || n <= 0 || t0 + n > table.num_tokens())
    return Status::InvalidArgument(
        fmt::format("gather_kv: tokens [{}, {}) are not inside the sequence of {} tokens", t0, t0 + n, table.num_tokens()));
  const engine::KvLayout& L = pool.layout();
  HostKv out;
  out.num_tokens = n;
  out.first_position = t0;
  const size_t per_layer = static_cast<size_t>(n) * L.token_floats();
  out.k.resize(per_layer * L.num_layers);
  out.v.resize(per_layer * L.num_layers);
  table.read_all_layers(pool, t0, n, out.k.data(), out.v.data());
  return out;
}

HostKv host_kv(const SegmentBuffer& seg) {
  const SegmentHeader& h = seg.header();
  HostKv kv;
  kv.num_tokens = seg.num_tokens();
  kv.first_position = static_cast<int>(h.first_position);
  const size_t n = static_cast<size_t>(h.num_layers) * seg.num_tokens() * h.num_kv_heads * h.head_dim;
  kv.k.resize(n);
  kv.v.resize(n);
  seg.read_all(kv.k.data(), kv.v.data());
  return kv;
}

KvData host_kv_view(const SegmentBuffer& seg, HostKv* keep) {
  if (seg.header().dtype != KvDtype::kF32) {
    *keep = host_kv(seg);
    return keep->data();
  }
  return {seg.num_tokens(), static_cast<int>(seg.header().first_position), seg.k_all(), seg.v_all()};
}

Status append_segment(const SegmentBuffer& seg, engine::KvPool& pool, engine::BlockTable& table) {
  const SegmentHeader& h = seg.header();
  const engine::KvLayout& L = pool.layout();
  if ((h.dtype != KvDtype::kF32 && h.dtype != KvDtype::kBF16) || h.num_layers != static_cast<uint32_t>(L.num_layers) ||
      h.num_kv_heads != static_cast<uint32_t>(L.num_kv_heads) || h.head_dim != static_cast<uint32_t>(L.head_dim))
    return Status::FailedPrecondition(fmt::format(
        "append_segment: segment {} x {} x {} ({}) does not match the pool layout {} x {} x {}", h.num_layers,
        h.num_kv_heads, h.head_dim, kv_dtype_name(h.dtype), L.num_layers, L.num_kv_heads, L.head_dim));
  HostKv widened;  // bf16 widens exactly, stored again in the pool's type
  const KvData kv = host_kv_view(seg, &widened);
  if (!table.append(pool, kv.num_tokens, kv.k, kv.v))
    return Status::ResourceExhausted(fmt::format("append_segment: KV pool has no room for {} more tokens", seg.num_tokens()));
  return Status::OK();
}

}  // namespace ragd::kvstore
