// One long sequence served by a sequence-parallel group: partition the prompt, ring-attention
// prefill, sharded decode. The unit a caller (ragd's scheduler, ragctl, benchmarks) drives.
//
// Thread-safety: collective, like ring_prefill and ShardedDecoder: every rank holds its own
// ShardedSequence (its model, its communicator) and calls the same methods in the same order.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/engine/model.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/kv_spill.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/ring_attention.h"
#include "ragd/seqparallel/sharded_decode.h"

namespace ragd::seqparallel {

// The shape of one sequence a ShardedSequence serves, for sizing KV before it runs.
struct SpSequence {
  int64_t prompt_tokens = 0;  // prefilled by ring attention, partitioned across the workers
  int64_t decode_tokens = 0;  // appended by decode() (each stored on one worker)
  int workers = 1;
  PartitionKind kind = PartitionKind::kZigzag;
  int max_chunk_tokens = 0;   // as the constructor's; 0 = one prefill step
  int block_size = 16;        // tokens per KV block of every worker's pool
};

// KV tokens each worker's shard holds once the sequence is prefilled and decoded: the prompt in
// ring steps of max_chunk_tokens · workers positions, each partitioned (shard_sizes), then every
// decode token on the worker decode_owner() picks from the free slots. Exact when every worker's
// pool starts with the same number of free blocks and nothing else changes them during the run
// (an idle group); a worker with less room than the others stores fewer decode tokens. This is
// the sequence-parallel KV share: the one formula for what a worker holds. O(chunks · workers +
// decode_tokens · workers). Aborts (RAGD_CHECK) on negative counts, workers < 1 or block_size < 1.
std::vector<int64_t> tokens_held_per_worker(const SpSequence& s);

// KV blocks the fullest worker needs for the sequence: its tokens' blocks, plus the block of the
// one-slot scratch table every worker writes the decode steps it does not store into.
int64_t kv_blocks_per_worker(const SpSequence& s);

class ShardedSequence {
 public:
  // max_chunk_tokens > 0: the prefill runs in ring steps over consecutive ranges of
  // max_chunk_tokens · ranks positions, each partitioned like a whole prompt (about max_chunk_tokens
  // per rank per step: activations bounded by the chunk; ring_attention.h for the traffic); 0: one step.
  // spill enabled: when this rank's pool cannot take the next chunk (or decode token), the shard's
  // oldest whole blocks (what the step lacks, at least an eighth of the pool) move out of the pool
  // to the spill's tiers (kv_spill.h) and are attended there. Off: a full pool fails the step
  // (ResourceExhausted).
  ShardedSequence(engine::Model& model, Communicator& comm, PartitionKind kind = PartitionKind::kZigzag,
                  int max_chunk_tokens = 0, const SpillOptions& spill = {});
  ~ShardedSequence();  // releases this rank's shard
  ShardedSequence(const ShardedSequence&) = delete;
  ShardedSequence& operator=(const ShardedSequence&) = delete;

  // After each prefill step on rank 0: the prompt tokens done and in all; false stops the prefill.
  using Progress = std::function<bool(int64_t done, int64_t total)>;

  // The whole prompt (identical on every rank; each takes its shard). logits: [vocab] of the
  // prompt's last token, on every rank, when non-null. FailedPrecondition after a prefill.
  // progress (rank 0's; the others pass none): when it returns false, every rank stops after the
  // same step and returns Cancelled (the group stays usable; the shard is freed with this object).
  Status prefill(std::span<const int32_t> prompt, std::vector<float>* logits, const Progress& progress = {});
  // Appends one token at position length(). logits: [vocab] of it, on every rank, when non-null.
  // After shrink(), called by the ranks that still hold the sequence only.
  Status decode(int32_t token, std::vector<float>* logits);
  // Between prefill and decode (LoongServe's scale-down): the KV of ranks [degree, size()) moves to
  // ranks [0, degree) — rank r's whole shard, pooled and spilled, to rank r % degree — and the
  // decode steps that follow run on the first `degree` ranks only, over a sub-communicator of
  // them (sub_communicator.h). Collective over every rank of the group. Afterwards ranks >= degree
  // hold nothing of the sequence (holds_kv() false; decode fails with FailedPrecondition), and a
  // receiver's shard holds its own and the received tokens at their positions (attention needs no
  // order among keys once every query is a later decode step). A receiver whose pool lacks room
  // spills its oldest slots first (spill on) or fails with ResourceExhausted, aborting the group.
  // KV travels as f32 rows, converted from and to the pool's storage type (bf16: exact; int8:
  // re-quantized from its dequantized values, exact up to the scale's rounding). The sender holds
  // its shard in f32 once while it sends. FailedPrecondition before prefill, InvalidArgument
  // unless 1 <= degree <= size(); degree == size() changes nothing.
  Status shrink(int degree);
  // This rank holds KV of the sequence (false after shrink() moved it away).
  bool holds_kv() const { return !retired_; }
  // Ranks that take part in decode: size() until shrink().
  int decode_degree() const { return comm_->size(); }

  int64_t length() const { return length_; }
  // This rank's KV in its pool (the shard's newest tokens when some have spilled).
  const engine::BlockTable& shard() const { return shard_; }
  // This rank's tokens: in its pool and spilled.
  int64_t shard_tokens() const { return shard_.num_tokens() + spilled_tokens(); }
  int64_t spilled_tokens() const { return spill_ != nullptr ? spill_->tokens() : 0; }
  // The spill's tiers and read statistics (zeros when nothing spilled).
  SpillStats spill_stats() const { return spill_ != nullptr ? spill_->stats() : SpillStats{}; }
  const StepTimes& prefill_times() const { return prefill_; }  // summed over chunks
  const StepTimes& decode_times() const { return decode_; }  // summed over decode steps

 private:
  engine::Model& model_;
  Communicator* comm_;  // the group's, or after shrink() sub_
  std::unique_ptr<Communicator> sub_;  // the first decode_degree() ranks, after shrink()
  PartitionKind kind_;
  int max_chunk_ = 0;
  // Before a step that appends `tokens` to the shard: with spilling on and too few free blocks,
  // moves the shard's oldest whole blocks to the spill (spill_oldest); a failure aborts the group.
  Status make_room(int tokens);
  Status spill_oldest(int tokens);

  engine::BlockTable shard_;
  SpillOptions spill_options_;
  std::unique_ptr<KvSpill> spill_;
  std::unique_ptr<ShardedDecoder> decoder_;
  // Receives one sender's shard (shrink) and appends it to this rank's in pieces the pool can take.
  Status take_shard(int from);
  int64_t length_ = 0;
  bool retired_ = false;      // this rank's KV moved away by shrink()
  bool after_shrink_ = false; // spills from now on take slots in any position order
  StepTimes prefill_, decode_;
};

}  // namespace ragd::seqparallel
