// KV blending (CacheBlend, EPIC): reusing each retrieved document's KV wherever it lands in a
// prompt, computed once on its own, and repairing the missing cross-attention by recomputing a few
// tokens.
//
// Chunk KV. A document's reusable KV is computed right after the pipeline's prompt head (BOS,
// system prompt, context header), at positions [head_len, head_len + n), not alone: with the head
// in place the model's attention sinks are where they are at serving time, so the only thing a
// placed chunk misses is attention to the documents before it. The head's content is part of the
// chunk key (kvstore::chunk_key in kvstore/keys.h, which builds every KV key), so every prompt with
// the same head shares the entry. K is stored post-RoPE at base position head_len and re-rotated by
// (start - head_len) when placed at `start` (RoPE is a rotation: exact up to fp32 rounding). A
// document placed right after the head sits at its computed position with its computed context:
// its KV is exact there.
//
// Repair. One sparse engine step over the placed documents with explicit slots: Q/K/V and attention
// only for chosen rows, against the sequence's whole KV, causal by position; chosen rows overwrite
// their slots and carry their hidden states to the next layer, the others keep the placed KV.
//   cacheblend  every row in layer 0; from layer 1 on the rows whose fresh K/V deviate most from
//               the placed K/V are kept (gradual filtering: 2r of the rows at layer 1, r from
//               layer 2 on; r = recompute_ratio); r = 1 is a full prefill of the region, r = 0
//               naive concatenation (no step);
//   epic        the first k tokens of every document not in place, in every layer (no deviation
//               pass); k = 0 is naive concatenation.
// The question and the generated tokens are computed in full afterwards by ordinary prefill.
//
// Interface: engine types and kvstore::HostKv (host K/V of a token range, the plain value kvstore
// trades with the engine pool); segments, headers and keys stay behind kvstore's own functions.
//
// Thread-safety: functions, on the thread that owns the model and its pool (scheduler thread).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/kvstore/engine_io.h"
#include "ragd/pipelines/executor.h"

namespace ragd::pipelines {

// One placed document of a prompt: tokens [start, start + len).
struct BlendDoc {
  int start = 0;
  int len = 0;
  bool in_place = false;  // at its computed position with its computed context: exact, no repair
};

struct BlendStats {
  int placed = 0;    // tokens of the documents not in place (the approximate part)
  int repaired = 0;  // tokens recomputed in the last layer (cacheblend) / every layer (epic)
  int selected_first = 0;  // cacheblend: rows kept at the first selection layer
  double ratio = 0;  // repaired / placed
  long row_layers = 0;  // rows computed, summed over layers (the step's cost in row-layers)
  // Loading controller (CacheBlend §5): the smallest ratio whose recompute time per layer matches
  // the per-layer load time of the chunks that came from DRAM / SSD, i.e. the recompute that a
  // layer-wise pipelined load would hide. Reported, not applied: ragd loads chunk KV before the
  // run is admitted, not layer by layer during the repair, so raising r would add compute without
  // hiding any load. 0 when nothing was loaded from a slower tier.
  double ratio_floor = 0;
  double chunk_ms = 0, place_ms = 0, repair_ms = 0;  // where the time went (Timings::blend_*)
};

// The KV of each of `docs` computed on its own after the head: `head` holds the head's KV in its
// first head_len slots (a fork is made per document; `head` is not changed). One batched step.
// Returns host KV per document with first_position = head_len. ResourceExhausted when the pool
// cannot hold the documents.
Result<std::vector<kvstore::HostKv>> compute_chunk_kv(engine::Model& model, const engine::BlockTable& head, int head_len,
                                                      std::span<const std::span<const int32_t>> docs);

// Appends kv (computed at kv.first_position) to the end of `table`, re-rotating K to the table's
// end position as it is stored (Model::append_shifted; kv is not changed). ResourceExhausted
// (table unchanged) when the pool is full.
Status place_chunk(engine::Model& model, const kvstore::KvData& kv, engine::BlockTable& table);
inline Status place_chunk(engine::Model& model, const kvstore::HostKv& kv, engine::BlockTable& table) {
  return place_chunk(model, kv.data(), table);
}

// The repair step over the placed `docs` of `table` (whose slots hold their placed KV); tokens:
// the whole prompt. Runs nothing for r = 0 / k = 0 or when every document is in place.
Result<BlendStats> repair(engine::Model& model, engine::BlockTable& table, std::span<const int32_t> tokens,
                          std::span<const BlendDoc> docs, ReuseMode mode, const BlendParams& params);

}  // namespace ragd::pipelines
