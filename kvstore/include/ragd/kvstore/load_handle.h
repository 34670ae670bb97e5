// LoadHandle: progress of one asynchronous load (KvStore::load) of a list of segments, filled by
// the kvstore's I/O pool layer by layer.
//
// The scheduler polls it without blocking: layers_ready(i) says how many layers of node i are in
// host memory and verified (checksummed); segment(i) is readable for those layers (k(l), v(l)) and,
// once all layers are ready, k_all()/v_all() are exactly what engine::BlockTable::append takes.
// After done(), node_ok(i) says whether node i was delivered; a failed node (checksum mismatch,
// evicted, tier error) is a miss to recompute. For a tree path, nodes after the first failure are
// not loaded (their KV depends on the missing prefix).
//
// Thread-safety: every method is thread-safe. wait() blocks and is for tools and tests; the
// scheduler never calls it inside a step.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/kvstore/knowledge_tree.h"
#include "ragd/kvstore/segment.h"

namespace ragd::kvstore {

namespace detail {
struct StoreCore;
}
class KvStore;

// What a load tries in the remote tier after its local nodes (KvStore::load; remote_tier.h).
struct RemoteTail {
  // Path (chunks = false): `docs` is the whole document path of the lookup; the nodes for docs
  // [from, end) are fetched in order, each keyed under the one before (the first under the path
  // docs [0, from)), stopping at the first miss. Chunks: `docs` are chunk-cache document keys
  // (chunk_key()), each fetched on its own; `from` is unused.
  std::vector<Hash128> docs;
  size_t from = 0;
  std::string tenant;  // the scope, as given to lookup / match / lookup_chunks
  bool chunks = false;
  // Optional: the token ids of each fetched node (path: of docs[from + j]; chunks: of docs[j]), so
  // that a remote hit is announced in KV events like a node computed here.
  std::vector<std::vector<int32_t>> tokens;
  size_t size() const { return chunks ? docs.size() : (from < docs.size() ? docs.size() - from : 0); }
};

struct LoadOptions {
  // Called on an I/O thread each time a layer of node `node` becomes ready (must not block).
  std::function<void(size_t node, int layers_ready)> on_progress;
  // Called on an I/O thread once, when the load is finished (ok or not). Must not block.
  std::function<void()> on_done;
  // Path loads stop at the first failed node; independent loads (chunks) go on.
  bool independent = false;
  // Slots after the local nodes, filled from the remote tier (when the store has one and its
  // breaker is closed; failed at once otherwise). The handle has nodes + remote->size() slots.
  std::optional<RemoteTail> remote;
};

class LoadHandle {
 public:
  LoadHandle(size_t num_nodes, int num_layers);
  LoadHandle(const LoadHandle&) = delete;
  LoadHandle& operator=(const LoadHandle&) = delete;

  size_t size() const { return n_; }
  int num_layers() const { return num_layers_; }
  int layers_ready(size_t i) const { return layers_[i].load(std::memory_order_acquire); }
  bool node_ready(size_t i) const { return layers_ready(i) == num_layers_; }
  // Number of leading nodes that are fully ready.
  size_t nodes_ready() const;
  bool done() const { return done_.load(std::memory_order_acquire); }
  // After done(): node i was delivered intact.
  bool node_ok(size_t i) const;
  // After done(): number of leading nodes delivered intact.
  size_t prefix_ok() const;
  // After done(): OK, or the first failure (Corruption / IOError / NotFound / Unavailable).
  Status status() const;
  // Non-null once layers_ready(i) > 0. Only layers < layers_ready(i) may be read.
  SegmentRef segment(size_t i) const;
  // The tier node i was read from (valid once layers_ready(i) > 0).
  Tier source(size_t i) const { return static_cast<Tier>(source_[i].load(std::memory_order_acquire)); }

  // After done(): wall time from the handle's creation (the load's start) to its end, in ms.
  double elapsed_ms() const;

  void wait() const;
  bool wait_for(std::chrono::milliseconds d) const;

 private:
  friend struct detail::StoreCore;
  friend class KvStore;
  void publish_segment(size_t i, SegmentRef seg, Tier src);  // before the first layer
  void set_layers(size_t i, int layers);
  void fail(size_t i, const Status& st);
  void finish();

  const size_t n_;
  const int num_layers_;
  std::unique_ptr<std::atomic<int>[]> layers_;
  std::unique_ptr<std::atomic<uint8_t>[]> source_;
  std::vector<SegmentRef> segs_;  // slot i written once before layers_[i] > 0
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  std::vector<uint8_t> failed_;  // guarded by mu_
  Status status_;                // guarded by mu_
  const std::chrono::steady_clock::time_point t_start_ = std::chrono::steady_clock::now();
  double elapsed_ms_ = 0;        // guarded by mu_
  std::atomic<bool> done_{false};
  LoadOptions opts_;
};

}  // namespace ragd::kvstore
