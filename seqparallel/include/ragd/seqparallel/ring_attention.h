// Sequence-parallel prefill by ring attention (Liu et al., "Ring Attention with Blockwise
// Transformers"; the zigzag split of partition.h for causal balance).
//
// Every rank of the group holds a shard of one prompt (its tokens and their positions) and runs
// the model's forward step over it with a LayerHook. Per layer:
//   1. the hook packs the shard's fresh post-RoPE K/V and positions into a block;
//   2. local attention of the shard's queries over its own KV (the engine's, masked by position),
//      while the first block travels;
//   3. P-1 ring steps: send the block in hand to rank+1, receive the next from rank-1; the block
//      received in the previous step is attended while the next one travels (double buffering);
//      every partial (O, LSE) is merged into the running one (kernels::merge_states);
//   4. the layer goes on with the merged attention: exactly the full-sequence attention, up to
//      floating-point summation order.
// Each shard's KV stays in its rank's pool at the shard's positions, ready for sharded decode.
// Chunked: a rank's table may already hold earlier chunks of its shard (positions below the new
// ones); its block then carries that KV too (read back from its pool), so every query sees every
// earlier key of every rank. Steps must go in position order over the whole group: no position
// left for a later step may lie below a position of this step (ShardedSequence cuts the prompt into
// consecutive ranges and partitions each). Activations are bounded by the chunk, at the cost of
// re-sending earlier chunks' KV: c chunks send about (c + 1) / 2 times the bytes of one step.
//
// Thread-safety: collective: every rank calls it once, with the same rows_per_rank, on its own
// thread (threads transport) or process (MPI), with its own model and table.
#pragma once

#include <cstdint>
#include <span>

#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/engine/model.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/kv_spill.h"

namespace ragd::seqparallel {

// Where one rank's time went in a collective step.
struct StepTimes {
  double seconds = 0.0;           // the whole call
  double comm_wait_s = 0.0;       // blocked waiting for transfers (not hidden behind compute) or slower peers
  double remote_attention_s = 0.0;  // attention over other ranks' blocks and the merges
  int64_t bytes_sent = 0;
  double compute_s() const { return seconds - comm_wait_s; }
  StepTimes& operator+=(const StepTimes& o);
};

// This rank's part of the prompt.
struct ShardInput {
  std::span<const int32_t> tokens;     // in position order
  std::span<const int32_t> positions;  // ascending, distinct; same length as tokens
  engine::SeqStep::Logits logits = engine::SeqStep::Logits::kNone;
};

// Runs the prefill; appends the new rows to `table`. rows_per_rank[r] = tokens rank r holds after
// the step (its earlier chunks, spilled or in its table, + this step's rows; 0 is allowed: that
// rank only relays blocks); every rank's earlier chunks must have gone through ring_prefill in the
// same steps. spill (may be null): this rank's earliest chunks, moved out of its pool (kv_spill.h);
// they are attended where they live and sent to the other ranks with the table's rows.
// out: logits as asked by in.logits (may be null with kNone).
// InvalidArgument on inconsistent inputs; a failing rank aborts the group (the others return the
// same error instead of waiting).
Status ring_prefill(engine::Model& model, Communicator& comm, std::span<const int64_t> rows_per_rank,
                    const ShardInput& in, engine::BlockTable* table, engine::StepOutput* out, StepTimes* times,
                    KvSpill* spill = nullptr);

}  // namespace ragd::seqparallel
