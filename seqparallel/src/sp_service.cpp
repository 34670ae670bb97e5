#include "ragd/seqparallel/sp_service.h"

#include "ragd/seqparallel/sub_communicator.h"

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

namespace ragd::seqparallel {

namespace {

enum class Op : int32_t { kPrefill = 1, kDecode = 2, kRelease = 3, kShutdown = 4, kShrink = 5 };

struct Command {
  Op op = Op::kShutdown;
  int32_t value = 0;   // prefill: prompt length; decode: the token; shrink: the new degree
  int32_t chunk = 0;   // prefill: max_chunk_tokens of the sequence (rank 0's setting, so all ranks cut alike)
  int32_t degree = 0;  // prefill: ranks that hold the sequence (the first ones; only they get commands)
};

constexpr int kCommandTag = 7;

// Rank 0 to ranks 1 .. to - 1, point to point: an idle rank waits for it with wait_idle() rather
// than inside a collective (MPI's would spin a core for as long as the group is idle).
Status send(Communicator& comm, Command c, int to) {
  std::vector<Request> reqs;
  for (int r = 1; r < to; ++r) {
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

int64_t SpDriver::kv_blocks_per_worker(int64_t prompt_tokens, int64_t decode_tokens, int degree) const {
  SpSequence s;
  s.prompt_tokens = prompt_tokens;
  s.decode_tokens = decode_tokens;
  s.workers = degree > 0 ? std::min(degree, workers()) : workers();
  s.kind = kind_;
  s.max_chunk_tokens = max_chunk_.load();
  s.block_size = model_.kv_pool().layout().block_size;
  return seqparallel::kv_blocks_per_worker(s);
}

Status SpDriver::prefill(std::span<const int32_t> prompt, std::vector<float>* logits,
                         const ShardedSequence::Progress& progress, int degree) {
  if (comm_.rank() != 0) return Status::FailedPrecondition("SpDriver runs on rank 0");
  if (down_) return Status::FailedPrecondition("sequence-parallel group is shut down");
  if (seq_ != nullptr) RAGD_RETURN_IF_ERROR(release());
  if (prompt.empty() || prompt.size() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("sequence-parallel prefill: prompt of " + std::to_string(prompt.size()) + " tokens");
  }
  const int d = degree > 0 ? std::min(degree, workers()) : workers();
  RAGD_RETURN_IF_ERROR(send(comm_, {Op::kPrefill, static_cast<int32_t>(prompt.size()), max_chunk_.load(), d}, d));
  degree_ = d;
  sub_.reset();
  if (d < workers()) {
    RAGD_ASSIGN_OR_RETURN(sub_, make_sub_communicator(comm_, d));
  }
  Communicator& comm = sub_ != nullptr ? *sub_ : comm_;
  std::vector<int32_t> copy(prompt.begin(), prompt.end());
  RAGD_RETURN_IF_ERROR(comm.broadcast(copy.data(), sizeof(int32_t) * copy.size(), 0));
  seq_ = std::make_unique<ShardedSequence>(model_, comm, kind_, max_chunk_.load(), spill_);
  Status st = seq_->prefill(copy, logits, progress);
  if (st.code() == StatusCode::kCancelled) seq_.reset();  // every rank frees its shard likewise
  return st;
}

Status SpDriver::decode(int32_t token, std::vector<float>* logits) {
  if (down_ || seq_ == nullptr) return Status::FailedPrecondition("sequence-parallel decode without a sequence");
  RAGD_RETURN_IF_ERROR(send(comm_, {Op::kDecode, token}, degree_));
  return seq_->decode(token, logits);
}

Status SpDriver::shrink(int degree) {
  if (down_ || seq_ == nullptr) return Status::FailedPrecondition("sequence-parallel shrink without a sequence");
  if (degree < 1 || degree > degree_) {
    return Status::InvalidArgument("sequence-parallel shrink to " + std::to_string(degree) + " of " +
                                   std::to_string(degree_) + " ranks");
  }
  if (degree == degree_) return Status::OK();
  RAGD_RETURN_IF_ERROR(send(comm_, {Op::kShrink, degree}, degree_));
  RAGD_RETURN_IF_ERROR(seq_->shrink(degree));
  degree_ = degree;
  return Status::OK();
}

Status SpDriver::release() {
  if (down_ || seq_ == nullptr) return Status::OK();
  seq_.reset();
  return send(comm_, {Op::kRelease, 0}, degree_);
}

Status SpDriver::shutdown() {
  if (down_) return Status::OK();
  seq_.reset();
  down_ = true;
  return send(comm_, {Op::kShutdown, 0}, workers());
}

Status serve(engine::Model& model, Communicator& comm, PartitionKind kind, const SpillOptions& spill) {
  if (comm.rank() == 0) return Status::FailedPrecondition("serve() runs on ranks other than 0");
  std::unique_ptr<Communicator> sub;  // the sequence's ranks, when fewer than the group
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
        case Op::kPrefill: {
          seq.reset();
          sub.reset();
          if (c.degree > 0 && c.degree < comm.size()) {
            auto s = make_sub_communicator(comm, c.degree);
            if (!s.ok()) {
              st = s.status();
              break;
            }
            sub = std::move(s).value();
          }
          Communicator& group = sub != nullptr ? *sub : comm;
          prompt.assign(static_cast<size_t>(std::max(c.value, 0)), 0);
          st = group.broadcast(prompt.data(), sizeof(int32_t) * prompt.size(), 0);
          if (st.ok()) {
            seq = std::make_unique<ShardedSequence>(model, group, kind, std::max(c.chunk, 0), spill);
            st = seq->prefill(prompt, nullptr);
            if (st.code() == StatusCode::kCancelled) {  // rank 0 stopped it: free the shard, serve on
              seq.reset();
              st = Status::OK();
            }
          }
          break;
        }
        case Op::kDecode:
          st = seq != nullptr ? seq->decode(c.value, nullptr)
                              : Status::FailedPrecondition("sequence-parallel decode without a sequence");
          break;
        case Op::kShrink:
          if (seq == nullptr) {
            st = Status::FailedPrecondition("sequence-parallel shrink without a sequence");
            break;
          }
          st = seq->shrink(c.value);
          if (st.ok() && !seq->holds_kv()) seq.reset();  // this rank's part is over until the next sequence
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
