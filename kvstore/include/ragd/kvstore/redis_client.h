// RedisClient: a small synchronous Redis / Redis Cluster client over hiredis (Debian's
// libhiredis-dev 0.14, which has no cluster support: the slot map, CRC16 key slots and MOVED / ASK
// redirects are handled here).
//
// Modes, found at connect():
//   single   one server (`redis://host:port`): every command goes to it.
//   cluster  `CLUSTER SLOTS` answers on a seed: the client keeps the slot -> master map, sends each
//            command to the master of its key's slot, follows `-MOVED slot host:port` (updates the
//            map, retries once more) and `-ASK slot host:port` (`ASKING` + the command on that node,
//            map unchanged), and reloads the map after a MOVED.
// Keys with a hash tag (`{...}`, Redis's rule: the first `{` with a non-empty body before the next
// `}`) hash to the tag's slot, so one segment's header and pieces live on one node and a batch
// below goes to one node.
//
// Every call is bounded by Options::timeout (connect and each reply). A timeout, a refused or broken
// connection, or an unknown node is Unavailable naming the node and the cause; the connection is
// dropped and re-made on the next call. A Redis error reply (other than MOVED / ASK) is IOError with
// Redis's message. Never throws.
//
// Thread-safety: not thread-safe; use one client per thread (the remote tier holds one per I/O
// thread).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::kvstore {

struct RedisEndpoint {
  std::string host;
  int port = 6379;
  std::string to_string() const;  // "host:port"
};

// Parses `redis://host:port` or a comma-separated list of them (cluster seed nodes; a bare
// `host:port` is accepted too). InvalidArgument naming the bad entry (scheme, host, port range).
Result<std::vector<RedisEndpoint>> parse_redis_urls(std::string_view spec);

// Redis Cluster's slot of a key: CRC16 (XMODEM) of the key, or of its hash tag, mod 16384.
uint16_t redis_key_slot(std::string_view key);

struct RedisOptions {
  std::vector<RedisEndpoint> seeds;             // at least one
  std::chrono::milliseconds timeout{100};       // connect and per reply
  int max_redirects = 5;                        // MOVED / ASK hops per command before giving up
  // AUTH on every connection when password is set (Redis 6 ACL user, or the default user when
  // username is empty). A refusal is PermissionDenied with the server's message.
  std::string username;
  std::string password;
};

struct RedisClientStats {
  uint64_t commands = 0;    // commands sent (a pipelined batch counts each command)
  uint64_t moved = 0;       // MOVED redirects followed
  uint64_t ask = 0;         // ASK redirects followed
  uint64_t slot_reloads = 0;
  uint64_t reconnects = 0;
  uint64_t errors = 0;      // calls that returned an error
};

class RedisClient {
 public:
  // Connects to the first seed that answers and detects the mode. Unavailable when none answers
  // within the timeout. The client stays usable after errors (it reconnects per call).
  static Result<std::unique_ptr<RedisClient>> connect(const RedisOptions& opts);
  ~RedisClient();
  RedisClient(const RedisClient&) = delete;
  RedisClient& operator=(const RedisClient&) = delete;

  bool cluster() const;

  // SET key value [EX ttl_s] for every pair (ttl_s 0 = no expiry), pipelined on one node: every key
  // must hash to the same slot (InvalidArgument otherwise). OK when every SET succeeded.
  Status set_many(std::span<const std::pair<std::string, std::string>> kvs, uint32_t ttl_s);
  // GET of every key (same-slot rule), pipelined on one node, in order; nullopt for a missing key.
  Result<std::vector<std::optional<std::string>>> get_many(std::span<const std::string> keys);
  // DEL of every key (same-slot rule). Returns how many existed.
  Result<int64_t> del_many(std::span<const std::string> keys);
  // PING on every known node (single: the server); OK when all answer. The breaker's probe.
  Status ping();
  // One command routed by `route_key`'s slot (empty = the first node), for tools and tests
  // (e.g. {"CONFIG", "SET", "maxmemory", "1mb"}). The reply rendered as text: a status / string /
  // integer as is, nil as "(nil)", arrays as lines.
  Result<std::string> command(std::span<const std::string> args, std::string_view route_key = {});

  RedisClientStats stats() const;

 private:
  RedisClient();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::kvstore
