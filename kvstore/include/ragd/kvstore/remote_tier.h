// RemoteTier: KV segments in Redis (one server or a Redis Cluster), below the SSD tier, shared by
// every replica that uses the same Redis.
//
// Layout. A segment is stored whole (the same bytes as in the local tiers: header with the model
// fingerprint, KV format, keys and per-layer checksums, then K and V), cut into values of at most
// RemoteOptions::max_value_bytes:
//   <prefix>{<segment key, 32 hex>}:0     the first piece (starts with the header)
//   <prefix>{<segment key, 32 hex>}:i     piece i (every piece but the last is as long as piece 0)
// The hash tag {key} puts every piece of one segment on one cluster node, so a segment is written
// in one pipelined batch and read in two round trips (piece 0, then the rest). Piece 0 is written
// last, so a reader that finds it finds the others unless Redis evicted one since.
//
// Keys are the local tiers' keys (keys.h: model fingerprint + KV format + tenant scope +
// cache_salt), so a segment of another model, format, tenant or salt is never even asked for. A
// value that is there but wrong — another model's bytes under the key, a checksum mismatch, a
// piece evicted by Redis — is a miss with a metric (format_rejects, checksum_failures,
// partial_misses), never KV in a prompt.
//
// Trust. Checksums catch accidents, not an adversary: anyone who can write to Redis could store a
// well-formed segment with recomputed checksums under another tenant's key. So every value is
// sealed (value_mac.h: a keyed MAC under the fleet secret, over the Redis key and the whole
// segment) and verified before the segment is parsed for use; a value that fails is a miss counted
// in mac_failures, ignored (left in Redis: a replica with a wrong secret must not erase the
// fleet's values) and never promoted to a local tier. Redis AUTH (password, ACL user) keeps
// others from reading the KV at all. Without a secret the tier refuses to open unless
// trust_unauthenticated says Redis is private. Stored value (pieces split as above):
//   [MAC envelope, ValueMac::kEnvelopeBytes] [segment bytes]     (trust_unauthenticated: segment only)
//
// Writes are behind: put() queues a segment (bounded by write_queue_bytes; beyond it the put is
// dropped and counted) for one background writer thread. Eviction is Redis's own (maxmemory +
// maxmemory-policy, allkeys-lru or allkeys-lfu), optionally with a TTL per value (ttl_s).
//
// Failure handling. Every Redis call is bounded by timeout_ms. A call that fails for the network
// (timeout, refused, reset) opens the circuit breaker: while it is open, get() answers Unavailable
// at once and put() drops, so a dead or slow Redis costs a request at most one timeout; a
// background probe (PING, every breaker_backoff_ms, doubling up to 30 s) closes it again.
//
// Thread-safety: every method is thread-safe. get() blocks for at most about two timeouts and must
// only run on the caller's I/O threads (KvStore's remote loads), never on a scheduler or retrieval
// thread. Each concurrent get() uses its own Redis connection (a small set, grown on demand).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/kvstore/segment.h"
#include "ragd/kvstore/tier.h"
#include "ragd/kvstore/value_mac.h"

namespace ragd::kvstore {

struct RemoteOptions {
  // "redis://host:port", or a comma-separated list of cluster seed nodes; "" = no remote tier.
  std::string url;
  int timeout_ms = 250;                   // per connect and per reply; 1..60000
  size_t max_value_bytes = 1ull << 20;    // one Redis value (a piece of a segment); 64 KiB..512 MiB; default 1 MiB
  int ttl_s = 0;                          // expiry of every value; 0 = none (Redis's maxmemory policy evicts)
  size_t write_queue_bytes = 256ull << 20;  // queued puts; beyond it puts are dropped; default 256 MiB
  int breaker_backoff_ms = 1000;          // first probe delay after a failure (doubles up to 30 s)
  std::string key_prefix = "ragd:kv:";    // every key starts with it
  // Trust. Whoever can write to this Redis can put KV into any tenant's prompt unless values are
  // authenticated: every value is sealed with a keyed MAC under the fleet secret (value_mac.h) and
  // checked before use. secret_file: a file holding the fleet secret (>= 16 bytes; the same on every
  // replica; e.g. `openssl rand -hex 32`). Without it the tier refuses to open unless
  // trust_unauthenticated is set (only for a Redis no one else can reach).
  std::string secret_file;
  MacAlgorithm mac = MacAlgorithm::kGmacAes256;  // gmac-aes256 (default) | hmac-sha256
  bool trust_unauthenticated = false;
  // Redis AUTH: a file holding the password ("" = no AUTH) and the ACL user ("" = default user).
  std::string password_file;
  std::string username;
  Status validate() const;                // InvalidArgument naming the field
};

struct RemoteStats {
  bool enabled = false;
  std::string breaker = "closed";   // closed | open
  std::string last_error;           // why the breaker last opened ("" = never)
  uint64_t gets = 0, hits = 0, misses = 0, hit_bytes = 0;
  uint64_t puts = 0, put_bytes = 0;  // segments written
  uint64_t puts_dropped = 0;         // not written: queue full, breaker open, or a write error
  uint64_t errors = 0;               // Redis calls that failed
  uint64_t skipped = 0;              // gets answered at once while the breaker was open
  uint64_t checksum_failures = 0, format_rejects = 0, partial_misses = 0;
  uint64_t mac_failures = 0;         // values refused by the MAC: forged, moved, or another secret
  uint64_t breaker_trips = 0;
  uint64_t queued_bytes = 0;
};

// As a KvTier (tier.h) it is the store's shared tier: store = put (queued), evict = nothing (Redis
// evicts by its own policy), load = get.
class RemoteTier final : public KvTier {
 public:
  // Never fails because Redis is down (the breaker opens and the probe keeps trying); fails only
  // on bad options.
  static Result<std::unique_ptr<RemoteTier>> open(const RemoteOptions& opts, const KvFormat& fmt);
  ~RemoteTier() override;
  RemoteTier(const RemoteTier&) = delete;
  RemoteTier& operator=(const RemoteTier&) = delete;

  // Queues `seg` for writing. False when it was dropped (queue full, breaker open, closed).
  bool put(SegmentRef seg);
  // The segment stored under `key`, checked (format of this tier's model, key, every checksum).
  // NotFound: not there (or a piece evicted). Unavailable: breaker open / network. Corruption /
  // FailedPrecondition: a bad value (also counted).
  Result<SegmentRef> get(const Hash128& key);
  // False while the breaker is open.
  bool available() const override;
  // Waits until every queued put is written or dropped (tests, shutdown).
  void drain() override;
  // Drains and stops the writer and the probe. Idempotent.
  void close() override;
  RemoteStats stats() const;

  std::string_view name() const override { return tier_name(Tier::kRemote); }
  TierKind kind() const override { return TierKind::kShared; }
  Status store(const SegmentRef& seg) override;  // Unavailable when the put was dropped
  Status evict(const Hash128& key, uint32_t num_layers) override;
  Status load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) override;
  TierIoStats io_stats() const override;

  // The Redis key of piece i of a segment (tests corrupt values on purpose).
  std::string piece_key(const Hash128& key, uint32_t piece) const;

 private:
  RemoteTier();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::kvstore
