// KV events: the cache's changes announced in vLLM's KV-event format (vLLM 0.10.x,
// vllm/distributed/kv_events.py) over ZeroMQ, so that KV-aware routers that subscribe to vLLM
// (llm-d, NVIDIA Dynamo, SGLang's gateway) can route by what ragd holds. docs/design/kv-events.md
// has the format, the block mapping and the limits.
//
//   KvEventsOptions     endpoint "" = off; bind / connect; CURVE keys; token ids or hashes only
//   map_node_blocks()   the blocks a tree node owns (pure)
//   KvEventTracker      tree tier changes -> BlockStored / BlockRemoved (KvStore's mutex held)
//   KvEventPublisher    batches events into EventBatch messages on a ZMQ PUB socket, keeps the last
//                       batches for replay on a ROUTER socket; its own thread, never blocks a caller;
//                       with CURVE, its ZAP handler admits only the allowed client keys
//   encode_event_batch  the msgpack payload of one batch
//
// Thread-safety: map_node_blocks / encode_event_batch are pure; KvEventTracker is not thread-safe
// (KvStore calls it under its mutex, from the tree's on_tier_change observer); KvEventPublisher is
// thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/kvstore/knowledge_tree.h"

namespace ragd::kvstore {

// How the PUB endpoint is opened. kAuto is vLLM's rule: bound when it contains '*' or '::' or
// starts with ipc:// or inproc://, connected otherwise. kBind binds any endpoint (so
// tcp://127.0.0.1:P and tcp://[::1]:P can be served on loopback only); kConnect connects.
enum class KvEventsSocketMode : uint8_t { kAuto, kBind, kConnect };
inline constexpr auto kKvEventsSocketModeNames = make_enum_names<KvEventsSocketMode>(
    "kv_events socket mode",
    {{KvEventsSocketMode::kAuto, "auto"}, {KvEventsSocketMode::kBind, "bind"}, {KvEventsSocketMode::kConnect, "connect"}});
constexpr const auto& ragd_enum_names(KvEventsSocketMode) { return kKvEventsSocketModeNames; }
static_assert(enum_names_valid(kKvEventsSocketModeNames));

// What the stream reveals: BlockStored carries the token ids of every stored block of every tenant
// (a subscriber with the model's tokenizer reads the documents), unless token_ids is false; block
// hashes and the medium carry no text. docs/design/kv-events.md says how to keep it to the routers.
struct KvEventsOptions {
  // ZMQ endpoint of the PUB socket ("" = no events), e.g. "tcp://127.0.0.1:5557" with mode kBind,
  // or "ipc:///run/ragd/kv-events".
  std::string endpoint;
  KvEventsSocketMode mode = KvEventsSocketMode::kAuto;
  // ZMQ endpoint of the replay ROUTER socket (always bound); "" = no replay.
  std::string replay_endpoint;
  std::string topic;               // first frame of every message; default "" (vLLM's default)
  int block_size = 16;             // tokens per announced block when there is no engine pool
  size_t buffer_batches = 10000;   // batches kept for replay
  size_t max_queue = 100000;       // events waiting for the publisher; beyond it they are dropped
  // BlockStored's token_ids field: true = the tokens (vLLM's format, for routers that hash tokens
  // themselves); false = an empty list (routers that match block hashes only; no document text).
  bool token_ids = true;
  // ZeroMQ CURVE (authentication + encryption) on the PUB and the replay ROUTER. A file holding the
  // server's secret key in Z85 (40 characters; `ragctl curve-keypair` makes one); "" = plaintext.
  std::string curve_secret_key_file;
  // With CURVE: a file of the client public keys allowed to subscribe (Z85, one per line, '#'
  // comments on their own lines). Required with CURVE; a handshake by any other key is refused (counted).
  std::string curve_allowed_clients_file;
};

// One event, as vLLM's KVCacheEvent subclasses.
struct KvEvent {
  enum class Kind : uint8_t { kBlockStored, kBlockRemoved, kAllBlocksCleared };
  Kind kind = Kind::kBlockStored;
  std::vector<uint64_t> block_hashes;          // stored / removed
  std::optional<uint64_t> parent_block_hash;   // stored: the block before the first (nil: none)
  std::vector<int32_t> token_ids;              // stored: block_hashes.size() * block_size tokens
  int block_size = 0;                          // stored
  const char* medium = nullptr;                // stored / removed: "GPU" / "CPU" / "DISK" (null = nil)
};

// vLLM's medium names for ragd's tiers: HBM (the engine pool, also on the CPU backend) "GPU", DRAM
// "CPU", SSD "DISK".
const char* event_medium(Tier t);

// msgpack of EventBatch as vLLM's msgspec encodes it (array_like): [ts, [event...], dp_rank], each
// event [tag, fields...].
std::string encode_event_batch(double ts, std::span<const KvEvent> events, int data_parallel_rank = 0);

// Where a path's block chain stands after a node: the hash of its last full block (none before the
// first one) and the tokens after it (fewer than block_size).
struct BlockChainEnd {
  std::optional<uint64_t> last_hash;
  std::vector<int32_t> tail;
};

// The full blocks a node completes: blocks are block_size tokens at absolute positions of the
// path; the node owns the blocks whose end lies within its tokens (the first may begin in its
// ancestors' tail).
struct NodeBlocks {
  std::optional<uint64_t> parent_hash;  // the chain before the node's first block
  std::vector<uint64_t> hashes;
  std::vector<int32_t> token_ids;       // hashes.size() * block_size tokens
  BlockChainEnd end;                    // what a child continues from
};

// `parent`: where the path stands before the node ({} for a path's first node or a chunk entry).
NodeBlocks map_node_blocks(const BlockChainEnd& parent, std::span<const int32_t> tokens, int block_size,
                           const Hash128& scope_root);

class KvEventPublisher;

// Turns tree tier changes into events, for nodes whose token ids were given (set_tokens). Keeps per
// node: scope, blocks and chain end, the tiers announced. An entry is forgotten when its node leaves
// its last tier; entries of nodes that never got into the tree are forgotten after `limbo` others.
class KvEventTracker {
 public:
  using Sink = std::function<void(KvEvent)>;
  KvEventTracker(int block_size, Sink sink, size_t limbo = 1024);

  // The node `key`'s own token ids, before the tree call that may place it. parent_is_root: the
  // parent is a scope root (`parent_key` == scope_root). Without an entry for the parent (its tokens
  // were never given) the node cannot be chained and stays unannounced. in_tree: the node exists.
  void set_tokens(const Hash128& key, const Hash128& parent_key, bool parent_is_root, const Hash128& scope_root,
                  std::span<const int32_t> tokens, bool in_tree);
  // The tree's on_tier_change observer.
  void on_tier_change(const TreeNodeInfo& node, Tier t, bool entered);
  // AllBlocksCleared followed by a BlockStored of every announced entry per tier, parents first
  // (a subscriber's resync after dropped events), returned rather than sunk.
  std::vector<KvEvent> resync_events() const;
  // AllBlocksCleared (store closed).
  void clear_all();

  int block_size() const { return block_size_; }
  size_t num_entries() const { return entries_.size(); }
  // The blocks of a known node (tests); null when unknown.
  const NodeBlocks* blocks(const Hash128& key) const;

 private:
  struct Entry {
    NodeBlocks blocks;
    uint32_t depth = 0;
    uint8_t announced = 0;  // tier bits
  };
  KvEvent stored(const Entry& e, Tier t) const;

  int block_size_;
  Sink sink_;
  size_t limbo_max_;
  std::unordered_map<Hash128, Entry, Hash128Hasher> entries_;
  std::deque<Hash128> limbo_;
};

struct KvEventCounters {
  uint64_t batches = 0, events = 0, dropped = 0, replays = 0;
  uint64_t auth_denied = 0;  // CURVE handshakes refused: a client key not in the allowed list
};

// A CURVE key pair in Z85 (40 characters each), from libzmq. InvalidArgument when libzmq was built
// without CURVE.
struct CurveKeyPair {
  std::string public_key, secret_key;
};
Result<CurveKeyPair> make_curve_keypair();
// The public key of a Z85 secret key. InvalidArgument when it is not 40 Z85 characters.
Result<std::string> curve_public_key(const std::string& secret_z85);

class KvEventPublisher {
 public:
  // Opens the sockets and starts the publisher thread. Bad endpoints: InvalidArgument.
  static Result<std::unique_ptr<KvEventPublisher>> start(const KvEventsOptions& opts);
  ~KvEventPublisher();
  KvEventPublisher(const KvEventPublisher&) = delete;
  KvEventPublisher& operator=(const KvEventPublisher&) = delete;

  // Queues an event; never blocks on the network. A full queue drops it (counted) and asks for a
  // resync (take_resync).
  void publish(KvEvent e);
  // Queues events past the queue bound (a resync, bounded by the tree).
  void publish_unbounded(std::vector<KvEvent> events);
  // True once after events were dropped: the caller should resync().
  bool take_resync() { return resync_.exchange(false); }
  // Publishes what is queued and stops. Idempotent.
  void stop();
  KvEventCounters counters() const;

 private:
  explicit KvEventPublisher(const KvEventsOptions& opts);
  void run();

  KvEventsOptions opt_;
  struct Sockets;
  std::unique_ptr<Sockets> sock_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<KvEvent> queue_;  // guarded by mu_
  bool stopping_ = false;       // guarded by mu_
  std::atomic<bool> resync_{false};
  std::atomic<uint64_t> batches_{0}, events_{0}, dropped_{0}, replays_{0}, auth_denied_{0};
  std::thread thread_;
};

}  // namespace ragd::kvstore
