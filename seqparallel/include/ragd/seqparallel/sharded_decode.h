// Decoding a sequence whose KV is sharded across a sequence-parallel group (after ring_prefill),
// in the manner of LoongServe's elastic sequence parallelism: the KV never moves.
//
// Per step every rank runs the new token through the model (its projections and MLP are small
// next to attention over a long context, so they are replicated rather than shipped). Per layer
// each rank attends the token's query to the keys of its own shard (Model::attend), the partial
// (O, LSE) of all ranks are all-gathered and merged in rank order, and every rank continues with
// the same merged attention: all ranks compute identical hidden states and logits. The token's
// own K/V are stored on exactly one rank, the one with the most free KV slots (the lowest rank on
// ties); the others write it into a one-slot scratch table that is rewritten every step.
//
// Thread-safety: collective: every rank calls step() with the same token and position, in the
// same order, each on its own thread (threads transport) or process (MPI).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/engine/model.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/kv_spill.h"
#include "ragd/seqparallel/ring_attention.h"

namespace ragd::seqparallel {

// Which rank stores a decode step's token, given every rank's free KV slots (room[r]): the most
// room, the lowest rank on ties. The one rule, shared by ShardedDecoder and the KV share
// (tokens_held_per_worker, sharded_sequence.h). room must not be empty.
int decode_owner(std::span<const int64_t> room);

class ShardedDecoder {
 public:
  // shard: this rank's KV of the sequence in its pool (kept by the caller; grows on the rank that
  // stores a step's token). spill (may be null): its older KV outside the pool (kv_spill.h), kept by
  // the caller; the caller may replace *shard and append to the spill between steps.
  ShardedDecoder(engine::Model& model, Communicator& comm, engine::BlockTable* shard, KvSpill* spill = nullptr);
  ~ShardedDecoder();  // releases the scratch slot
  ShardedDecoder(const ShardedDecoder&) = delete;
  ShardedDecoder& operator=(const ShardedDecoder&) = delete;

  // One token at `position` (above every stored position of the sequence). logits: [vocab] of
  // the token, when non-null. Which rank stored the token's KV: last_owner().
  Status step(int32_t token, int32_t position, std::vector<float>* logits, StepTimes* times);
  int last_owner() const { return owner_; }
  void set_spill(KvSpill* spill) { spill_ = spill; }

 private:
  engine::Model& model_;
  Communicator& comm_;
  engine::BlockTable* shard_;
  KvSpill* spill_;
  engine::BlockTable scratch_;  // one slot, rewritten by every step this rank does not own
  int owner_ = -1;
};

}  // namespace ragd::seqparallel
