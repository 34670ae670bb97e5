// ReusePlan: one run's reuse state, carried from the planner's lookup to its publish; Installed:
// what an admission installed. Plain data, read and written by the planner and the run's reuse
// strategy (reuse_strategy.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/kvstore/kv_store.h"
#include "ragd/pipelines/executor.h"
#include "ragd/pipelines/kv_blend.h"

#include "blend_step.h"

namespace ragd::pipelines {

// One run's reuse state, carried from lookup to publish.
struct ReusePlan {
  ReuseMode mode = ReuseMode::kNone;
  std::string scope;                     // KV key scope (tenant + cache_salt, kvstore::kv_scope; "" = shared)
  // The scope the tree path is keyed under: `scope`, or "" when the head is shared (knowledge-tree
  // paths: their documents then carry `scope` in their doc keys, kvstore::scoped_doc_key).
  std::string tree_scope;
  std::vector<Hash128> docs;             // path node document keys
  std::vector<int> ends;                 // cumulative token end of each node
  std::shared_ptr<kvstore::LoadHandle> load;  // nodes [load_from, ...) coming up from DRAM / SSD / remote
  size_t load_from = 0;
  kvstore::Pin pin;                      // keeps the matched nodes while they load
  int hint_tokens = 0;                   // cached tokens seen at lookup (scheduler ordering)
  size_t installed_nodes = 0;            // nodes reused at the last admission
  bool published = false;
  // Approximate modes (cacheblend / epic).
  BlendParams blend;
  std::shared_ptr<kvstore::LoadHandle> chunk_load;  // chunk-cache hits coming up from DRAM / SSD
  std::vector<size_t> chunk_nodes;                  // path node of each chunk_load entry
  kvstore::Pin chunk_pin;
  bool approximate = false;  // the last admission placed blended KV
  BlendStats blended;        // what it did
  std::string note;          // why an approximate run served exact reuse instead ("" = it did not)
  std::string auto_note;     // reuse "auto": the mode it chose and that mode's measured fidelity
  // Deferred repair (the default): what the run's first prefill step computes besides the prompt's
  // rest (blend_step.h), and the first-seen documents (path nodes) whose chunk KV publish() computes.
  std::optional<PendingRepair> pending;
  std::vector<size_t> pending_chunks;

  // True when install() may run (no load, or the loads finished).
  bool ready() const { return (!load || load->done()) && (!chunk_load || chunk_load->done()); }
};

struct Installed {
  int tokens = 0;  // KV tokens now in the run's table
  kvstore::TierCounts from;  // where the reused ones came from (tokens per tier)
  int computed = 0;  // tokens computed during installation (chunks seen first, blend repairs)
};

}  // namespace ragd::pipelines
