#include "ragd/kvstore/segment.h"

#include <cstring>
#include <new>

#include <fmt/format.h>

#include "ragd/kernels/kv_dtype.h"

namespace ragd::kvstore {
namespace {

constexpr size_t kFixedHeader = 128;
constexpr size_t kLayerEntryBytes = 32;
constexpr size_t kAlign = 64;
constexpr uint32_t kMaxLayers = 4096;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

template <typename T>
void put(std::byte* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}
template <typename T>
T get(const std::byte* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

}  // namespace

KvFormat KvFormat::from_layout(const engine::KvLayout& layout, const Hash128& fingerprint) {
  KvFormat f;
  f.model_fingerprint = fingerprint;
  // A bf16 pool's values are bf16: its segments store them as they are (exact, half of f32's bytes).
  // f32 and int8 pools store f32 rows (int8 segments are not a format yet).
  f.dtype = layout.dtype == KvDtype::kBF16 ? KvDtype::kBF16 : KvDtype::kF32;
  f.num_layers = layout.num_layers;
  f.num_kv_heads = layout.num_kv_heads;
  f.head_dim = layout.head_dim;
  return f;
}

Status KvFormat::validate() const {
  if (num_layers <= 0 || static_cast<uint32_t>(num_layers) > kMaxLayers)
    return Status::InvalidArgument(fmt::format("kv format: num_layers must be in 1..{}, got {}", kMaxLayers, num_layers));
  if (num_kv_heads <= 0) return Status::InvalidArgument(fmt::format("kv format: num_kv_heads must be positive, got {}", num_kv_heads));
  if (head_dim <= 0) return Status::InvalidArgument(fmt::format("kv format: head_dim must be positive, got {}", head_dim));
  if (dtype != KvDtype::kF32 && dtype != KvDtype::kBF16)
    return Status::Unimplemented(fmt::format("kv format: dtype {} is not supported by this build (f32 or bf16)", kv_dtype_name(dtype)));
  return Status::OK();
}

size_t SegmentHeader::layer_bytes() const {
  return static_cast<size_t>(num_tokens) * num_kv_heads * head_dim * kernels::kv_dtype_bytes(dtype);
}

size_t segment_header_size(uint32_t num_layers) {
  return round_up(kFixedHeader + kLayerEntryBytes * num_layers + 8, kAlign);
}

size_t segment_bytes(const KvFormat& fmt, int num_tokens) {
  return segment_header_size(static_cast<uint32_t>(fmt.num_layers)) + static_cast<size_t>(num_tokens) * fmt.bytes_per_token();
}

std::vector<std::byte> encode_segment_header(const SegmentHeader& h) {
  const size_t hs = segment_header_size(h.num_layers);
  std::vector<std::byte> out(hs, std::byte{0});
  std::byte* p = out.data();
  put<uint64_t>(p, 0, kSegmentMagic);
  put<uint32_t>(p, 8, h.format_version);
  put<uint32_t>(p, 12, static_cast<uint32_t>(hs));
  put<uint64_t>(p, 16, h.model_fingerprint.lo);
  put<uint64_t>(p, 24, h.model_fingerprint.hi);
  put<uint8_t>(p, 32, kernels::kv_dtype_code(h.dtype));
  put<uint8_t>(p, 33, h.layout_version);
  put<uint8_t>(p, 34, h.k_rotated ? 1 : 0);
  put<uint8_t>(p, 35, h.is_chunk ? 1 : 0);
  put<uint32_t>(p, 36, h.num_layers);
  put<uint32_t>(p, 40, h.num_kv_heads);
  put<uint32_t>(p, 44, h.head_dim);
  put<uint32_t>(p, 48, h.num_tokens);
  put<int32_t>(p, 52, h.first_position);
  put<uint32_t>(p, 56, h.depth);
  put<uint64_t>(p, 64, h.key.lo);
  put<uint64_t>(p, 72, h.key.hi);
  put<uint64_t>(p, 80, h.parent_key.lo);
  put<uint64_t>(p, 88, h.parent_key.hi);
  put<uint64_t>(p, 96, h.doc_key.lo);
  put<uint64_t>(p, 104, h.doc_key.hi);
  put<uint64_t>(p, 112, h.payload_offset);
  put<uint64_t>(p, 120, h.payload_bytes);
  for (size_t l = 0; l < h.layers.size(); ++l) {
    const size_t o = kFixedHeader + kLayerEntryBytes * l;
    put<uint64_t>(p, o, h.layers[l].k_offset);
    put<uint64_t>(p, o + 8, h.layers[l].v_offset);
    put<uint64_t>(p, o + 16, h.layers[l].k_checksum);
    put<uint64_t>(p, o + 24, h.layers[l].v_checksum);
  }
  const size_t cs_off = kFixedHeader + kLayerEntryBytes * h.num_layers;
  put<uint64_t>(p, cs_off, xxh3_64(p, cs_off));
  return out;
}

Result<SegmentHeader> decode_segment_header(std::span<const std::byte> bytes) {
  if (bytes.size() < kFixedHeader)
    return Status::Corruption(fmt::format("kv segment: header truncated ({} bytes, need at least {})", bytes.size(), kFixedHeader));
  const std::byte* p = bytes.data();
  if (get<uint64_t>(p, 0) != kSegmentMagic) return Status::Corruption("kv segment: bad magic (not a ragd KV segment)");
  SegmentHeader h;
  h.format_version = get<uint32_t>(p, 8);
  if (h.format_version != kSegmentFormatVersion)
    return Status::Corruption(fmt::format("kv segment: format version {} is not supported (expected {})", h.format_version,
                                          kSegmentFormatVersion));
  const uint32_t hs = get<uint32_t>(p, 12);
  h.num_layers = get<uint32_t>(p, 36);
  if (h.num_layers == 0 || h.num_layers > kMaxLayers)
    return Status::Corruption(fmt::format("kv segment: num_layers {} out of range", h.num_layers));
  if (hs != segment_header_size(h.num_layers) || bytes.size() < hs)
    return Status::Corruption(fmt::format("kv segment: header size {} inconsistent with {} layers / {} bytes available", hs,
                                          h.num_layers, bytes.size()));
  const size_t cs_off = kFixedHeader + kLayerEntryBytes * h.num_layers;
  if (get<uint64_t>(p, cs_off) != xxh3_64(p, cs_off)) return Status::Corruption("kv segment: header checksum mismatch");
  h.model_fingerprint = {get<uint64_t>(p, 16), get<uint64_t>(p, 24)};
  const uint8_t dt = get<uint8_t>(p, 32);
  const std::optional<KvDtype> dtype = kernels::kv_dtype_from_code(dt);
  if (!dtype) return Status::Corruption(fmt::format("kv segment: unknown dtype code {}", dt));
  h.dtype = *dtype;
  h.layout_version = get<uint8_t>(p, 33);
  h.k_rotated = get<uint8_t>(p, 34) != 0;
  h.is_chunk = get<uint8_t>(p, 35) != 0;
  h.num_kv_heads = get<uint32_t>(p, 40);
  h.head_dim = get<uint32_t>(p, 44);
  h.num_tokens = get<uint32_t>(p, 48);
  h.first_position = get<int32_t>(p, 52);
  h.depth = get<uint32_t>(p, 56);
  h.key = {get<uint64_t>(p, 64), get<uint64_t>(p, 72)};
  h.parent_key = {get<uint64_t>(p, 80), get<uint64_t>(p, 88)};
  h.doc_key = {get<uint64_t>(p, 96), get<uint64_t>(p, 104)};
  h.payload_offset = get<uint64_t>(p, 112);
  h.payload_bytes = get<uint64_t>(p, 120);
  if (h.payload_offset != hs) return Status::Corruption("kv segment: payload offset does not follow the header");
  const size_t lb = h.layer_bytes();
  if (h.payload_bytes != 2 * lb * h.num_layers)
    return Status::Corruption(fmt::format("kv segment: payload size {} != 2 x {} layers x {} bytes", h.payload_bytes,
                                          h.num_layers, lb));
  h.layers.resize(h.num_layers);
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    const size_t o = kFixedHeader + kLayerEntryBytes * l;
    LayerEntry& e = h.layers[l];
    e.k_offset = get<uint64_t>(p, o);
    e.v_offset = get<uint64_t>(p, o + 8);
    e.k_checksum = get<uint64_t>(p, o + 16);
    e.v_checksum = get<uint64_t>(p, o + 24);
    if (e.k_offset != hs + lb * l || e.v_offset != hs + lb * (h.num_layers + l))
      return Status::Corruption(fmt::format("kv segment: layer {} offsets inconsistent", l));
  }
  return h;
}

Status check_segment_format(const SegmentHeader& h, const KvFormat& f) {
  if (h.model_fingerprint != f.model_fingerprint)
    return Status::FailedPrecondition(fmt::format("kv segment: model fingerprint {} does not match this model {}",
                                                  h.model_fingerprint.to_hex(), f.model_fingerprint.to_hex()));
  if (h.dtype != f.dtype)
    return Status::FailedPrecondition(fmt::format("kv segment: dtype {} does not match {}", kv_dtype_name(h.dtype),
                                                  kv_dtype_name(f.dtype)));
  if (h.layout_version != f.layout_version)
    return Status::FailedPrecondition(fmt::format("kv segment: layout version {} does not match {}", h.layout_version,
                                                  f.layout_version));
  if (h.num_layers != static_cast<uint32_t>(f.num_layers) || h.num_kv_heads != static_cast<uint32_t>(f.num_kv_heads) ||
      h.head_dim != static_cast<uint32_t>(f.head_dim))
    return Status::FailedPrecondition(fmt::format("kv segment: shape {}x{}x{} (layers x kv_heads x head_dim) does not match {}x{}x{}",
                                                  h.num_layers, h.num_kv_heads, h.head_dim, f.num_layers, f.num_kv_heads,
                                                  f.head_dim));
  if (h.k_rotated != f.k_rotated)
    return Status::FailedPrecondition(fmt::format("kv segment: K stored {} RoPE, this store expects {} RoPE",
                                                  h.k_rotated ? "after" : "before", f.k_rotated ? "after" : "before"));
  return Status::OK();
}

// ---- SegmentBuffer ------------------------------------------------------------------------------

SegmentBuffer::SegmentBuffer(SegmentHeader h, size_t size) : header_(std::move(h)), size_(size) {
  data_ = static_cast<std::byte*>(::operator new(round_up(size_, kAlign), std::align_val_t{kAlign}));
}

SegmentBuffer::~SegmentBuffer() { ::operator delete(data_, std::align_val_t{kAlign}); }

std::shared_ptr<SegmentBuffer> SegmentBuffer::allocate(const SegmentHeader& h) {
  std::shared_ptr<SegmentBuffer> s(new SegmentBuffer(h, h.total_bytes()));
  std::vector<std::byte> enc = encode_segment_header(h);
  std::memcpy(s->data_, enc.data(), enc.size());
  std::memset(s->data_ + enc.size(), 0, s->size_ - enc.size());
  return s;
}

Result<std::shared_ptr<SegmentBuffer>> SegmentBuffer::build(const KvFormat& f, const SegmentIdentity& id, const KvData& kv) {
  RAGD_RETURN_IF_ERROR(f.validate());
  if (kv.num_tokens <= 0) return Status::InvalidArgument(fmt::format("kv segment: num_tokens must be positive, got {}", kv.num_tokens));
  if (kv.k == nullptr || kv.v == nullptr) return Status::InvalidArgument("kv segment: k and v data must not be null");
  if (kv.first_position < 0)
    return Status::InvalidArgument(fmt::format("kv segment: first_position must be >= 0, got {}", kv.first_position));
  SegmentHeader h;
  h.model_fingerprint = f.model_fingerprint;
  h.dtype = f.dtype;
  h.layout_version = f.layout_version;
  h.k_rotated = f.k_rotated;
  h.is_chunk = id.is_chunk;
  h.num_layers = static_cast<uint32_t>(f.num_layers);
  h.num_kv_heads = static_cast<uint32_t>(f.num_kv_heads);
  h.head_dim = static_cast<uint32_t>(f.head_dim);
  h.num_tokens = static_cast<uint32_t>(kv.num_tokens);
  h.first_position = kv.first_position;
  h.depth = id.depth;
  h.key = id.key;
  h.parent_key = id.parent_key;
  h.doc_key = id.doc_key;
  const size_t hs = segment_header_size(h.num_layers);
  const size_t lb = h.layer_bytes();
  h.payload_offset = hs;
  h.payload_bytes = 2 * lb * h.num_layers;
  h.layers.resize(h.num_layers);
  std::shared_ptr<SegmentBuffer> s(new SegmentBuffer(h, hs + h.payload_bytes));
  if (h.dtype == KvDtype::kF32) {
    std::memcpy(s->data_ + hs, kv.k, lb * h.num_layers);
    std::memcpy(s->data_ + hs + lb * h.num_layers, kv.v, lb * h.num_layers);
  } else {  // bf16: every (layer, token) row rounded, as a bf16 pool stores it
    const int rows = static_cast<int>(h.num_layers * h.num_tokens);
    const size_t width = static_cast<size_t>(h.num_kv_heads) * h.head_dim;
    kernels::kv_store_rows(kernels::KvDtype::kBF16, rows, static_cast<int>(h.num_kv_heads), static_cast<int>(h.head_dim),
                           kv.k, width, s->data_ + hs, nullptr);
    kernels::kv_store_rows(kernels::KvDtype::kBF16, rows, static_cast<int>(h.num_kv_heads), static_cast<int>(h.head_dim),
                           kv.v, width, s->data_ + hs + lb * h.num_layers, nullptr);
  }
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    LayerEntry& e = s->header_.layers[l];
    e.k_offset = hs + lb * l;
    e.v_offset = hs + lb * (h.num_layers + l);
    e.k_checksum = xxh3_64(s->data_ + e.k_offset, lb);
    e.v_checksum = xxh3_64(s->data_ + e.v_offset, lb);
  }
  std::vector<std::byte> enc = encode_segment_header(s->header_);
  std::memcpy(s->data_, enc.data(), enc.size());
  return s;
}

Result<std::shared_ptr<SegmentBuffer>> SegmentBuffer::parse(std::span<const std::byte> bytes, bool verify_payload) {
  RAGD_ASSIGN_OR_RETURN(SegmentHeader h, decode_segment_header(bytes));
  if (bytes.size() != h.total_bytes())
    return Status::Corruption(fmt::format("kv segment: {} bytes, header says {}", bytes.size(), h.total_bytes()));
  std::shared_ptr<SegmentBuffer> s(new SegmentBuffer(std::move(h), bytes.size()));
  std::memcpy(s->data_, bytes.data(), bytes.size());
  if (verify_payload) RAGD_RETURN_IF_ERROR(s->verify_all());
  return s;
}

const float* SegmentBuffer::k_all() const { return reinterpret_cast<const float*>(data_ + header_.payload_offset); }
const float* SegmentBuffer::v_all() const {
  return reinterpret_cast<const float*>(data_ + header_.payload_offset + header_.layer_bytes() * header_.num_layers);
}
void SegmentBuffer::read_all(float* k, float* v) const {
  const size_t values = static_cast<size_t>(header_.num_layers) * header_.num_tokens * header_.num_kv_heads * header_.head_dim;
  const KvDtype t = header_.dtype;  // f32 or bf16 (KvFormat::validate)
  const std::byte* base = data_ + header_.payload_offset;
  kernels::kv_load_values(t, values, static_cast<int>(header_.head_dim), base, nullptr, k);
  kernels::kv_load_values(t, values, static_cast<int>(header_.head_dim), base + header_.layer_bytes() * header_.num_layers,
                          nullptr, v);
}

const float* SegmentBuffer::k(int layer) const { return reinterpret_cast<const float*>(data_ + header_.layers[layer].k_offset); }
const float* SegmentBuffer::v(int layer) const { return reinterpret_cast<const float*>(data_ + header_.layers[layer].v_offset); }
std::byte* SegmentBuffer::mutable_layer_k(int layer) { return data_ + header_.layers[layer].k_offset; }
std::byte* SegmentBuffer::mutable_layer_v(int layer) { return data_ + header_.layers[layer].v_offset; }

Status SegmentBuffer::verify_layer(int layer) const {
  const LayerEntry& e = header_.layers[layer];
  const size_t lb = header_.layer_bytes();
  if (xxh3_64(data_ + e.k_offset, lb) != e.k_checksum)
    return Status::Corruption(fmt::format("kv segment {}: layer {} K checksum mismatch", header_.key.to_hex(), layer));
  if (xxh3_64(data_ + e.v_offset, lb) != e.v_checksum)
    return Status::Corruption(fmt::format("kv segment {}: layer {} V checksum mismatch", header_.key.to_hex(), layer));
  return Status::OK();
}

Status SegmentBuffer::verify_all() const {
  for (uint32_t l = 0; l < header_.num_layers; ++l) RAGD_RETURN_IF_ERROR(verify_layer(static_cast<int>(l)));
  return Status::OK();
}

}  // namespace ragd::kvstore
