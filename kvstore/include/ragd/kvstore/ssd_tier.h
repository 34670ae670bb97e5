// SsdTier: segments in RocksDB on local SSD (large values in BlobDB blob files).
//
// One segment = one header record plus one record per layer, written in one atomic WriteBatch:
//   "h" + key(16, big-endian hi|lo)            -> encoded segment header
//   "l" + key(16) + layer(4, big-endian)       -> K bytes of the layer || V bytes of the layer
// so a reader can fetch and verify layer by layer. The WAL is on, so every completed put survives
// a kill -9; at open, scan_headers() rebuilds the index.
//
// Failures are returned as IOError / Corruption naming the operation and RocksDB's message;
// KvStore disables the tier on them. As a KvTier (tier.h) it is the store's built-in stored tier.
//
// Thread-safety: all methods are thread-safe (RocksDB is).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/kvstore/segment.h"
#include "ragd/kvstore/tier.h"

namespace rocksdb {
class FileSystem;
}

namespace ragd::kvstore {

struct SsdTierOptions {
  std::string dir;                     // RocksDB directory (created when missing)
  uint64_t min_blob_bytes = 4096;      // values at least this large go to blob files; default 4 KiB
  bool sync_writes = false;            // fsync the WAL per put (power-loss safety; kill -9 needs no sync)
  // The file system RocksDB runs on; null = the default one. Tests pass a wrapper that fails
  // operations on demand (tests/kvstore/fault_fs.h), as RocksDB's own tests inject faults.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

class SsdTier final : public KvTier {
 public:
  ~SsdTier() override;
  // Opens (creating) the database. IOError naming the directory when it cannot.
  static Result<std::unique_ptr<SsdTier>> open(const SsdTierOptions& opts);

  Status put(const SegmentBuffer& seg);
  Status remove(const Hash128& key, uint32_t num_layers);
  // Header bytes of a segment; NotFound when absent.
  Status read_header(const Hash128& key, std::string* out) const;
  // Copies one layer's K and V (layer_bytes each) straight out of RocksDB's pinned value into
  // k_dst / v_dst. NotFound when absent; Corruption when the record has the wrong size.
  Status read_layer(const Hash128& key, uint32_t layer, size_t layer_bytes, std::byte* k_dst, std::byte* v_dst) const;
  // Calls fn(key, header bytes) for every stored segment header.
  Status scan_headers(const std::function<void(const Hash128& key, std::span<const std::byte>)>& fn) const;
  Status flush() override;
  const std::string& dir() const;

  // KvTier: store = put, evict = remove, load = header then layer by layer (load_layered), scan =
  // scan_headers.
  std::string_view name() const override { return tier_name(Tier::kSsd); }
  TierKind kind() const override { return TierKind::kStored; }
  Status store(const SegmentRef& seg) override;
  Status evict(const Hash128& key, uint32_t num_layers) override;
  Status load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) override;
  Status scan(const std::function<void(const Hash128& key, std::span<const std::byte> header)>& fn) override;
  TierIoStats io_stats() const override;

  // Record keys (also used by tests that corrupt records on purpose).
  static std::string header_record_key(const Hash128& key);
  static std::string layer_record_key(const Hash128& key, uint32_t layer);

 private:
  SsdTier();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::kvstore
