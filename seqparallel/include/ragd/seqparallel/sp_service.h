// A standing sequence-parallel group behind a server: rank 0 (the server's engine thread) drives
// long sequences (prefill, optionally a shrink to fewer ranks for decode, decode steps, release); every other rank (a helper thread with its own model, or an MPI rank started by
// `mpirun -np N ragd`) runs serve(), which follows rank 0's commands until shutdown.
//
// Commands travel from rank 0 as a fixed-size message to every rank (then, for a prefill, the
// prompt's tokens as a broadcast), so the protocol is the same over every transport. A rank
// waiting for the next command polls and sleeps (wait_idle): an idle group costs no CPU. One sequence at a time: prefill, decode steps,
// release; then the next.
//
// Thread-safety: SpDriver is used by one thread (rank 0's), except kv_blocks_per_worker(), workers(),
// spills() and health(), which any thread may call; serve() runs on its rank's thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/engine/model.h"
#include "ragd/seqparallel/communicator.h"
#include "ragd/seqparallel/partition.h"
#include "ragd/seqparallel/sharded_sequence.h"

namespace ragd::seqparallel {

class SpDriver {
 public:
  // comm.rank() must be 0.
  SpDriver(engine::Model& model, Communicator& comm, PartitionKind kind = PartitionKind::kZigzag);
  ~SpDriver();  // releases a sequence still held (not the group: call shutdown())

  int workers() const { return comm_.size(); }
  // Prefill in ring steps of about this many tokens per rank (ShardedSequence); 0 = one step. Sent
  // to the other ranks with each prefill.
  void set_max_chunk_tokens(int n) { max_chunk_.store(n > 0 ? n : 0); }
  // Rank 0's spill (kv_spill.h): where its shard's older KV goes when its pool is full. Every other
  // rank has its own (serve()'s argument).
  void set_spill(const SpillOptions& o) { spill_ = o; }
  bool spills() const { return spill_.enabled(); }
  // KV blocks the fullest worker needs for a sequence of prompt_tokens + decode_tokens in this
  // group (kv_blocks_per_worker in sharded_sequence.h, with the group's partition and prefill chunk
  // and rank 0's block size: every worker's pool is built from the same options).
  // degree: as prefill's (0 = every rank).
  int64_t kv_blocks_per_worker(int64_t prompt_tokens, int64_t decode_tokens, int degree = 0) const;
  // Starts a sequence (releasing the previous one): ring prefill of the prompt; logits of its last
  // token. On an error the group is unusable (aborted) and every later call fails, except
  // Cancelled: `progress` returned false (ShardedSequence::prefill), every rank freed its shard,
  // and the group takes the next sequence.
  // degree: how many of the group's ranks (the first ones) hold this sequence; 0 = all. The others
  // stay idle until the next sequence (sub_communicator.h).
  Status prefill(std::span<const int32_t> prompt, std::vector<float>* logits,
                 const ShardedSequence::Progress& progress = {}, int degree = 0);
  // Ranks holding the current (or last) sequence.
  int degree() const { return degree_; }
  // After prefill, before decode: the sequence's KV moves to its first `degree` ranks and decode
  // runs on them (ShardedSequence::shrink); the others free their shard and wait for the next
  // sequence. degree() becomes `degree`. An error aborts the group.
  Status shrink(int degree);
  Status decode(int32_t token, std::vector<float>* logits);
  // Frees every rank's shard of the current sequence.
  Status release();
  // Ends every serve() loop. Idempotent.
  Status shutdown();
  const ShardedSequence* current() const { return seq_.get(); }
  PartitionKind kind() const { return kind_; }
  // OK while no rank has failed or given up (a dead MPI rank shows here before any call fails);
  // never blocks; any thread.
  Status health() const { return comm_.abort_status(); }

 private:
  engine::Model& model_;
  Communicator& comm_;
  PartitionKind kind_;
  std::atomic<int> max_chunk_{0};  // read by kv_blocks_per_worker on any thread
  SpillOptions spill_;
  int degree_ = 0;
  std::unique_ptr<Communicator> sub_;  // the first degree_ ranks, when fewer than all
  std::unique_ptr<ShardedSequence> seq_;
  bool down_ = false;
};

// Follows rank 0's commands on a rank > 0 until shutdown (OK) or a failure (its status; the group
// is aborted so rank 0 learns of it too).
// spill: this rank's (ShardedSequence).
Status serve(engine::Model& model, Communicator& comm, PartitionKind kind = PartitionKind::kZigzag,
             const SpillOptions& spill = {});

}  // namespace ragd::seqparallel
