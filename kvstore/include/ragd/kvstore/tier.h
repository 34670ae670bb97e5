// Tiers: the places a KV segment can live, and the one interface the tiers with I/O implement.
//
// A store's tiers form an ordered list, fastest first; a tier's id (Tier) is its position:
//   0 hbm      the engine's KV pool (or, without a pool, a host-memory tier in the HBM role)
//   1 dram     host memory
//   2 ssd      RocksDB on local SSD (ssd_tier.h)
//   3 remote   Redis shared by replicas (remote_tier.h)
//   4, 5       stored tiers registered by the embedding code (Options::extra_tiers)
// Each tier has a kind, which is all the knowledge tree and the store need to know of it:
//   kMemory  its bytes are in this process (a pool copy or a SegmentRef the tree holds): evicting
//            a node from it can demote the node to a slower tier, since the bytes are at hand.
//   kStored  its bytes are behind I/O and its index is the tree's: the tree emits TierActions
//            (put / delete) that the store's writer carries out in order through KvTier::store /
//            evict, with a pending-write budget; at open, KvTier::scan finds the segments again.
//            Loads read a segment layer by layer (KvTier::load). Evicting from it drops.
//   kShared  outside the tree, shared by other replicas (its index is its own): written behind
//            when a segment gets a host copy, asked by key after the local tiers miss.
// Demotion and placement walk the tree's tiers (kMemory, kStored) in id order; loads try a node's
// fastest tier first. Adding a tier = one KvTier class + one Options::extra_tiers registration
// (docs/design/extending.md).
#pragma once

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "ragd/common/enum_names.h"
#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/kvstore/segment.h"

namespace ragd::kvstore {

enum class Tier : uint8_t { kHbm = 0, kDram = 1, kSsd = 2, kRemote = 3 };
inline constexpr int kNumBuiltinTiers = 4;
inline constexpr int kMaxTiers = 6;  // built-in + two registered; fits TreeNodeInfo::tiers (bits)
inline constexpr auto kTierNames = make_enum_names<Tier>(
    "tier", {{Tier::kHbm, "hbm"}, {Tier::kDram, "dram"}, {Tier::kSsd, "ssd"}, {Tier::kRemote, "remote"}});
constexpr const auto& ragd_enum_names(Tier) { return kTierNames; }
static_assert(enum_names_valid(kTierNames));
// A registered tier's name, as the store that registered it gave it (KvStore::open records it with
// record_tier_name; "" = none registered under that id). Names are interned, so the view stays
// valid for the process's life. Header-only reads, so that modules holding usage without linking
// the kvstore (the daemon's tests) name tiers the same way.
inline std::array<std::atomic<const std::string*>, kMaxTiers> g_registered_tier_names{};
inline std::string_view registered_tier_name(Tier t) {
  const size_t i = static_cast<size_t>(t);
  const std::string* s = i < g_registered_tier_names.size() ? g_registered_tier_names[i].load(std::memory_order_acquire) : nullptr;
  return s ? std::string_view(*s) : std::string_view();
}
void record_tier_name(Tier t, std::string_view name);
// Every tier's name, from this one table: the built-in names, then the registered ones.
inline std::string_view tier_name(Tier t) {
  return static_cast<int>(t) < kNumBuiltinTiers ? enum_name(t) : registered_tier_name(t);
}
inline uint8_t tier_bit(Tier t) { return static_cast<uint8_t>(1u << static_cast<int>(t)); }
inline constexpr Tier tier_at(int i) { return static_cast<Tier>(i); }

// A count per tier (tokens reused from each, ...), index = Tier: what usage, stats and reports carry
// instead of one field per tier.
struct TierCounts {
  std::array<int64_t, kMaxTiers> n{};
  int64_t& operator[](Tier t) { return n[static_cast<size_t>(t)]; }
  int64_t operator[](Tier t) const { return n[static_cast<size_t>(t)]; }
  int64_t total() const {
    int64_t s = 0;
    for (int64_t v : n) s += v;
    return s;
  }
  TierCounts& operator+=(const TierCounts& o) {
    for (size_t i = 0; i < n.size(); ++i) n[i] += o.n[i];
    return *this;
  }
  // Takes `over` away, from the slowest tier up (the prompt's last token, which is always fed
  // again, came from the slowest source of the path's end).
  void trim(int64_t over) {
    for (size_t i = n.size(); i-- > 0 && over > 0;) {
      const int64_t d = std::min(n[i], over);
      n[i] -= d;
      over -= d;
    }
  }
  // fn(name, count) for each built-in tier and each registered tier with a count.
  template <class Fn>
  void for_each(Fn&& fn) const {
    for (int t = 0; t < kMaxTiers; ++t)
      if (t < kNumBuiltinTiers || n[static_cast<size_t>(t)] != 0) fn(tier_name(tier_at(t)), n[static_cast<size_t>(t)]);
  }
};

enum class TierKind : uint8_t { kNone = 0, kMemory = 1, kStored = 2, kShared = 3 };
inline constexpr auto kTierKindNames = make_enum_names<TierKind>(
    "tier kind", {{TierKind::kNone, "none"}, {TierKind::kMemory, "memory"}, {TierKind::kStored, "stored"},
                  {TierKind::kShared, "shared"}});
constexpr const auto& ragd_enum_names(TierKind) { return kTierKindNames; }
static_assert(enum_names_valid(kTierKindNames));

// Where a load puts the segment it reads: begin() once with the segment (allocated from its header,
// or complete), then layers_ready(n) each time layers [0, n) are in place and verified.
// Thread-safety: called on the loading thread only.
class SegmentSink {
 public:
  virtual ~SegmentSink() = default;
  virtual void begin(SegmentRef seg) = 0;
  virtual void layers_ready(int n) = 0;
};

// A tier's own I/O counters (the tree counts placements; these count what the tier did).
struct TierIoStats {
  uint64_t loads = 0, load_bytes = 0;    // segments read
  uint64_t stores = 0, store_bytes = 0;  // segments written (shared tiers: queued and written)
  uint64_t evictions = 0;                // segments removed on the store's request
  uint64_t errors = 0;                   // failed calls
};

// A tier whose bytes live behind I/O (kStored, kShared). Failures are Status: NotFound (absent),
// Corruption (a checksum or a record of the wrong size), FailedPrecondition (another model / format,
// or a header whose key is not the one asked for), IOError (the device; the store disables a
// stored tier on it), Unavailable (a shared tier that cannot be reached now).
//
// Thread-safety: every method is thread-safe. The store calls store() / evict() of a stored tier on
// one writer thread, in the tree's order; load() on its I/O threads, concurrently.
class KvTier {
 public:
  virtual ~KvTier() = default;
  virtual std::string_view name() const = 0;
  virtual TierKind kind() const = 0;
  // Writes a segment under its header's key. A shared tier may queue it (Unavailable when dropped).
  virtual Status store(const SegmentRef& seg) = 0;
  // Removes a segment (evicted or dropped by the tree). A shared tier may ignore it (its own eviction).
  virtual Status evict(const Hash128& key, uint32_t num_layers) = 0;
  // Reads the segment stored under `key` into `sink`, checked against `fmt` (model, format, key,
  // every layer's checksum before the layer is reported ready).
  virtual Status load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) = 0;
  // Stored tiers: fn(key, header bytes) for every segment found at open. Shared tiers: nothing.
  virtual Status scan(const std::function<void(const Hash128& key, std::span<const std::byte> header)>& fn) {
    (void)fn;
    return Status::OK();
  }
  // False while the tier cannot be reached (a shared tier's breaker); loads then fail at once.
  virtual bool available() const { return true; }
  virtual Status flush() { return Status::OK(); }  // makes written segments durable
  virtual void drain() {}                          // waits for queued writes (shared tiers)
  virtual void close() {}                          // drains and stops; idempotent
  virtual TierIoStats io_stats() const = 0;
};

// Reads a segment laid out as one header record and one record per layer (the SSD tier's layout,
// and any tier that stores layers separately): header, checks, then each layer read into place and
// verified before it is reported ready. `read_header` fills the header bytes; `read_layer` copies
// layer l's K and V (layer_bytes each) and answers NotFound when the record is missing.
Status load_layered(const Hash128& key, const KvFormat& fmt, SegmentSink& sink,
                    const std::function<Status(std::string* header)>& read_header,
                    const std::function<Status(uint32_t layer, size_t layer_bytes, std::byte* k, std::byte* v)>& read_layer);

// A stored tier the embedding code adds below the built-in ones (kvstore::Options::extra_tiers):
// in the tree with its capacity, after SSD in demotion order (or in its place without an SSD tier).
struct TierRegistration {
  std::string name;             // in stats, metrics and logs; unique, not a built-in tier's name
  uint64_t capacity_bytes = 0;  // the tree's capacity for it
  // Opens the tier for the store's model / KV format (called once, at KvStore::open).
  std::function<Result<std::unique_ptr<KvTier>>(const KvFormat& fmt)> open;
};

}  // namespace ragd::kvstore
