#include "ragd/seqparallel/sp_service.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace ragd::seqparallel {

namespace {

enum class Op : int32_t { kPrefill = 1, kDecode = 2, kRelease = 3, kShutdown = 4 };

struct Command {
  Op op = Op::kShutdown;
  int32_t value = 0;  // prefill: prompt length; decode: the token
  int32_t chunk = 0;  // prefill: max_chunk_tokens of the sequence (rank 0's setting, so all ranks cut alike)
};

constexpr int kCommandTag = 7;

// Rank 0 to every other rank, point to point: an idle rank waits for it with wait_idle() rather
// than inside a collective (MPI's would spin a core for as long as the group is idle).
Status send(Communicator& comm, Command c) {
  std::vector<Request> reqs;
  for (int r = 1; r < comm.size(); ++r) {
    RAGD_ASSIGN_OR_RETURN(Request q, comm.isend(r, kCommandTag, &c, sizeof c));
    reqs.push_back(std::move(q));
  }
  return wait_all(reqs);
}

}  // namespace

SpDriver::SpDriver(engine::Model& model, Communicator& comm, PartitionKind kind)
    : model_(model), comm_(comm), kind_(kind) {}

SpDriver::~SpDriver() {
  if (!down_ && seq_ != nullptr) (void)release();
}

int64_t SpDriver::kv_blocks_per_worker(int64_t prompt_tokens, int64_t decode_tokens) const {
  SpSequence s;
  s.prompt_tokens = prompt_tokens;
  s.decode_tokens = decode_tokens;
  s.workers = workers();
  s.kind = kind_;
  s.max_chunk_tokens = max_chunk_;
  s.block_size = model_.kv_pool().layout().block_size;
  return seqparallel::kv_blocks_per_worker(s);
}

Status SpDriver::prefill(std::span<const int32_t> prompt, std::vector<float>* logits,
                         const ShardedSequence::Progress& progress) {
  if (comm_.rank() != 0) return Status::FailedPrecondition("SpDriver runs on rank 0");
  if (down_) return Status::FailedPrecondition("sequence-parallel group is shut down");
  if (seq_ != nullptr) RAGD_RETURN_IF_ERROR(release());
  if (prompt.empty() || prompt.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("sequence-parallel prefill: prompt of " + std::to_string(prompt.size()) + " tokens");
  }
  RAGD_RETURN_IF_ERROR(send(comm_, {Op::kPrefill, static_cast<int32_t>(prompt.size()), max_chunk_}));
  std::vector<int32_t> copy(prompt.begin(), prompt.end());
  RAGD_RETURN_IF_ERROR(comm_.broadcast(copy.data(), sizeof(int32_t) * copy.size(), 0));
  seq_ = std::make_unique<ShardedSequence>(model_, comm_, kind_, max_chunk_, spill_);
  Status st = seq_->prefill(copy, logits, progress);
  if (st.code() == StatusCode::kCancelled) seq_.reset();  // every rank frees its shard likewise
  return st;
}

Status SpDriver::decode(int32_t token, std::vector<float>* logits) {
  if (down_ || seq_ == nullptr) return Status::FailedPrecondition("sequence-parallel decode without a sequence");
  RAGD_RETURN_IF_ERROR(send(comm_, {Op::kDecode, token}));
  return seq_->decode(token, logits);
}

Status SpDriver::release() {
  if (down_ || seq_ == nullptr) return Status::OK();
  seq_.reset();
  return send(comm_, {Op::kRelease, 0});
}

Status SpDriver::shutdown() {
  if (down_) return Status::OK();
  seq_.reset();
  down_ = true;
  return send(comm_, {Op::kShutdown, 0});
}

Status serve(engine::Model& model, Communicator& comm, PartitionKind kind, const SpillOptions& spill) {
  if (comm.rank() == 0) return Status::FailedPrecondition("serve() runs on ranks other than 0");
  std::unique_ptr<ShardedSequence> seq;
  std::vector<int32_t> prompt;
  for (;;) {
    Command c;
    Status st;
    {
      auto q = comm.irecv(0, kCommandTag, &c, sizeof c);
      st = q.ok() ? wait_idle(**q) : q.status();
    }
    if (st.ok()) {
      switch (c.op) {
        case Op::kPrefill:
          seq.reset();
          prompt.assign(static_cast<size_t>(std::max(c.value, 0)), 0);
          st = comm.broadcast(prompt.data(), sizeof(int32_t) * prompt.size(), 0);
          if (st.ok()) {
            seq = std::make_unique<ShardedSequence>(model, comm, kind, std::max(c.chunk, 0), spill);
            st = seq->prefill(prompt, nullptr);
            if (st.code() == StatusCode::kCancelled) {  // rank 0 stopped it: free the shard, serve on
              seq.reset();
              st = Status::OK();
            }
          }
          break;
        case Op::kDecode:
          st = seq != nullptr ? seq->decode(c.value, nullptr)
                              : Status::FailedPrecondition("sequence-parallel decode without a sequence");
          break;
        case Op::kRelease:
          seq.reset();
          break;
        case Op::kShutdown:
          return Status::OK();
        default:
          st = Status::InvalidArgument("sequence-parallel service: unknown command " + std::to_string(static_cast<int>(c.op)));
      }
    }
    if (!st.ok()) {
      comm.abort(st.with_context("sequence-parallel rank " + std::to_string(comm.rank())));
      return st;
    }
  }
}

}  // namespace ragd::seqparallel
