#include "ragd/kvstore/tier.h"

#include <atomic>
#include <mutex>
#include <set>

#include <fmt/format.h>

namespace ragd::kvstore {

namespace {
// Names are interned (never freed), so a view handed out stays valid when a later store records
// another name under the same id.
std::mutex g_names_mu;
std::set<std::string, std::less<>>& interned() {
  static auto* s = new std::set<std::string, std::less<>>();
  return *s;
}
}  // namespace

void record_tier_name(Tier t, std::string_view name) {
  const size_t i = static_cast<size_t>(t);
  if (i < static_cast<size_t>(kNumBuiltinTiers) || i >= g_registered_tier_names.size()) return;
  std::lock_guard<std::mutex> lock(g_names_mu);
  const std::string* s = &*interned().emplace(name).first;
  g_registered_tier_names[i].store(s, std::memory_order_release);
}

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
