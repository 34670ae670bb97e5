// KV segments as they come back from DRAM or SSD (kvstore/src/segment.cpp): the header alone
// (decode_segment_header, as the SSD index reads it) and the whole segment (SegmentBuffer::parse
// with payload verification), then what a consumer does with a segment that parsed: the format
// check, per-layer checksums and K/V views.
#include <cstddef>
#include <cstdint>
#include <span>

#include "ragd/kvstore/segment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data), size);
  auto header = ragd::kvstore::decode_segment_header(bytes);
  if (header.ok()) {
    (void)header->layer_bytes();
    (void)header->total_bytes();
    ragd::kvstore::KvFormat fmt;
    fmt.num_layers = 2;
    fmt.num_kv_heads = 2;
    fmt.head_dim = 4;
    (void)ragd::kvstore::check_segment_format(*header, fmt);
    // The encoder must accept what the decoder produced.
    (void)ragd::kvstore::encode_segment_header(*header);
  }
  for (bool verify : {false, true}) {
    auto seg = ragd::kvstore::SegmentBuffer::parse(bytes, verify);
    if (!seg.ok()) continue;
    const auto& s = **seg;
    (void)s.verify_all();
    const int layers = static_cast<int>(s.header().num_layers);
    for (int l = 0; l < layers && l < 64; ++l) {
      if (!s.verify_layer(l).ok()) continue;
      if (s.header().dtype != ragd::kvstore::KvDtype::kF32 || s.num_tokens() == 0) continue;
      // Touch the first and last value of the layer (what attention reads first and last).
      const size_t n = static_cast<size_t>(s.num_tokens()) * s.header().num_kv_heads * s.header().head_dim;
      if (n == 0) continue;
      volatile float sink = s.k(l)[0] + s.k(l)[n - 1] + s.v(l)[0] + s.v(l)[n - 1];
      (void)sink;
    }
  }
  return 0;
}
