#include "ragd/kvstore/tier.h"

#include <fmt/format.h>

namespace ragd::kvstore {

Status load_layered(const Hash128& key, const KvFormat& fmt, SegmentSink& sink,
                    const std::function<Status(std::string* header)>& read_header,
                    const std::function<Status(uint32_t layer, size_t layer_bytes, std::byte* k, std::byte* v)>& read_layer) {
  std::string buf;
  RAGD_RETURN_IF_ERROR(read_header(&buf));
  RAGD_ASSIGN_OR_RETURN(SegmentHeader hd, decode_segment_header({reinterpret_cast<const std::byte*>(buf.data()), buf.size()}));
  RAGD_RETURN_IF_ERROR(check_segment_format(hd, fmt));
  if (hd.key != key)
    return Status::FailedPrecondition(fmt::format("kv segment: header key {} does not match {}", hd.key.to_hex(), key.to_hex()));
  std::shared_ptr<SegmentBuffer> seg = SegmentBuffer::allocate(hd);
  sink.begin(seg);
  const size_t lb = hd.layer_bytes();
  for (uint32_t l = 0; l < hd.num_layers; ++l) {
    const int li = static_cast<int>(l);
    Status st = read_layer(l, lb, seg->mutable_layer_k(li), seg->mutable_layer_v(li));
    if (st.code() == StatusCode::kNotFound)
      return Status::Corruption(fmt::format("kv segment {}: layer {} record missing", key.to_hex(), l));
    RAGD_RETURN_IF_ERROR(st);
    RAGD_RETURN_IF_ERROR(seg->verify_layer(li));
    sink.layers_ready(li + 1);
  }
  return Status::OK();
}

}  // namespace ragd::kvstore
