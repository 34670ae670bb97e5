// FileTier: a stored KV tier of one file per segment in a directory — the KvTier interface
// (kvstore/tier.h) implemented end to end outside the kvstore library, as a new tier would be, and
// registered through kvstore::Options::extra_tiers. Tests use it to show that the store's placement,
// demotion, write-behind, restore at open, layer-by-layer loads and corruption handling hold for a
// tier the store was not written for.
//
// Layout: <dir>/<key, 32 hex>.seg holds the segment's bytes exactly as SegmentBuffer lays them out
// (header, then each layer's K and V at the header's offsets). A write goes to <key>.tmp, is
// flushed, then renamed, so a crash leaves the old file or the new one; leftover .tmp files are
// removed at open.
//
// Thread-safety: every method is thread-safe (each call opens its own file descriptor; the
// counters are atomics).
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "ragd/kvstore/tier.h"

namespace ragd::kvstore::testing {

class FileTier final : public KvTier {
 public:
  // Creates `dir` when missing. IOError naming the directory when it cannot.
  static Result<std::unique_ptr<FileTier>> open(std::string dir, const KvFormat& fmt);

  std::string_view name() const override { return "file"; }
  TierKind kind() const override { return TierKind::kStored; }
  Status store(const SegmentRef& seg) override;
  Status evict(const Hash128& key, uint32_t num_layers) override;
  Status load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) override;
  Status scan(const std::function<void(const Hash128& key, std::span<const std::byte> header)>& fn) override;
  TierIoStats io_stats() const override;

  std::string path_of(const Hash128& key) const;  // tests corrupt files on purpose

  // The registration for kvstore::Options::extra_tiers.
  static TierRegistration registration(std::string dir, uint64_t capacity_bytes);

 private:
  FileTier(std::string dir, size_t header_bytes) : dir_(std::move(dir)), header_bytes_(header_bytes) {}
  const std::string dir_;
  const size_t header_bytes_;  // the header size of this format's segments
  std::atomic<uint64_t> loads_{0}, load_bytes_{0}, stores_{0}, store_bytes_{0}, evictions_{0}, errors_{0};
};

}  // namespace ragd::kvstore::testing
