// LowerTiers: where document-path KV lives when it is not in the engine's pool (DRAM, SSD).
// For the part of a path the HBM cache missed, the executor asks which nodes are cached and loads
// them (exact KV of each node's tokens at the node's positions); it offers every newly computed
// node. A path is a list of token segments: [system prefix][doc 1]...[doc n]; node i's key
// commits to the scope and every token of segments 0..i (kvstore key chain).
// Thread-safety: implementations are thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"

namespace ragd::pipelines {

enum class TierHit : uint8_t { kHbm, kDram, kSsd };

struct LoadedNode {
  TierHit tier = TierHit::kDram;
  int num_tokens = 0;
  int first_position = 0;
  const float* k = nullptr;  // [num_layers][num_tokens, kv_heads, head_dim] f32
  const float* v = nullptr;
  std::shared_ptr<const void> keep;  // owns k / v
};

using PathSegments = std::span<const std::vector<int32_t>>;

class LowerTiers {
 public:
  virtual ~LowerTiers() = default;
  // How many leading nodes of the path are cached (any tier).
  virtual int match(PathSegments path) = 0;
  // Finds and loads the longest cached prefix of the path into host memory (blocking: called on a
  // retrieval thread, never on the scheduler thread). Stops at a miss or a checksum failure.
  virtual std::vector<LoadedNode> load(PathSegments path) = 0;
  // Offers node `depth` of the path, computed at first_position.
  // k/v: [num_layers][num_tokens, kv_heads, head_dim].
  virtual void insert(PathSegments path, int depth, int first_position, int num_tokens, const float* k,
                      const float* v) = 0;
  virtual std::string stats_json() const = 0;  // JSON object text
  virtual void flush() = 0;                    // durable metadata (at stop)
};

}  // namespace ragd::pipelines
