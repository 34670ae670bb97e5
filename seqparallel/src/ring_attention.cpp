#include "ragd/seqparallel/ring_attention.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/lse_merge.h"

namespace ragd::seqparallel {

StepTimes& StepTimes::operator+=(const StepTimes& o) {
  seconds += o.seconds;
  comm_wait_s += o.comm_wait_s;
  remote_attention_s += o.remote_attention_s;
  bytes_sent += o.bytes_sent;
  return *this;
}

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int kRingTag = 1;

// A block on the wire: K [n, kv_dim] f32, V [n, kv_dim] f32, positions [n] int32.
size_t block_bytes(int64_t n, int kv_dim) {
  return static_cast<size_t>(n) * (2 * sizeof(float) * kv_dim + sizeof(int32_t));
}

// One layer's ring: P-1 steps. At step s (1-based) rank r sends the block that originated at rank
// r-s+1 (its own at s = 1) to r+1 and receives the one of rank r-s from r-1. The block received at
// step s-1 is attended while step s is in flight; the last one after the loop.
class Ring {
 public:
  Ring(Communicator& comm, std::span<const int64_t> rows, int kv_dim, StepTimes* t)
      : comm_(comm), rows_(rows.begin(), rows.end()), kv_dim_(kv_dim), t_(t) {
    int64_t most = 0;
    for (int64_t n : rows_) most = std::max(most, n);
    for (auto& b : buf_) b.resize(block_bytes(most, kv_dim));
  }

  // attend(block, n): attention of this rank's queries over a remote block of n rows. first():
  // the local work, run while the first block travels.
  Status pass(const unsigned char* own, const std::function<Status(const unsigned char*, int64_t)>& attend,
              const std::function<Status()>& first) {
    const int p = comm_.size(), r = comm_.rank();
    if (p == 1) return first();
    const int next = (r + 1) % p, prev = (r + p - 1) % p;
    const unsigned char* hand = own;  // the block sent this step
    int64_t hand_rows = rows_[r];
    bool hand_remote = false;
    int cur = 0;
    for (int s = 1; s < p; ++s) {
      const int origin = ((r - s) % p + p) % p;
      const int64_t in_rows = rows_[origin];
      Request reqs[2];
      RAGD_ASSIGN_OR_RETURN(reqs[0], comm_.irecv(prev, kRingTag, buf_[cur].data(), block_bytes(in_rows, kv_dim_)));
      RAGD_ASSIGN_OR_RETURN(reqs[1], comm_.isend(next, kRingTag, hand, block_bytes(hand_rows, kv_dim_)));
      t_->bytes_sent += static_cast<int64_t>(block_bytes(hand_rows, kv_dim_));
      if (hand_remote) {
        RAGD_RETURN_IF_ERROR(timed_attend(attend, hand, hand_rows));
      } else {
        RAGD_RETURN_IF_ERROR(first());
      }
      const auto w = Clock::now();
      Status st = wait_all(reqs);
      t_->comm_wait_s += since(w);
      RAGD_RETURN_IF_ERROR(st);
      hand = buf_[cur].data();
      hand_rows = in_rows;
      hand_remote = true;
      cur ^= 1;
    }
    return timed_attend(attend, hand, hand_rows);
  }

 private:
  Status timed_attend(const std::function<Status(const unsigned char*, int64_t)>& attend, const unsigned char* b,
                      int64_t n) {
    if (n == 0) return Status::OK();
    const auto t = Clock::now();
    Status st = attend(b, n);
    t_->remote_attention_s += since(t);
    return st;
  }

  Communicator& comm_;
  std::vector<int64_t> rows_;
  int kv_dim_;
  StepTimes* t_;
  std::vector<unsigned char> buf_[2];
};

class RingHook final : public engine::LayerHook {
 public:
  RingHook(Communicator& comm, std::span<const int64_t> rows, int kv_dim, StepTimes* t)
      : ring_(comm, rows, kv_dim, t), kv_dim_(kv_dim) {}

  Status on_qkv(const engine::LayerQkv& v, engine::RowSelection*) override {
    const size_t n = static_cast<size_t>(v.rows), row = static_cast<size_t>(kv_dim_);
    own_.resize(block_bytes(v.rows, kv_dim_));
    auto* k = reinterpret_cast<float*>(own_.data());
    float* vv = k + n * row;
    auto* pos = reinterpret_cast<int32_t*>(vv + n * row);
    for (size_t i = 0; i < n; ++i) {
      std::memcpy(k + i * row, v.k + i * v.row_stride, sizeof(float) * row);
      std::memcpy(vv + i * row, v.v + i * v.row_stride, sizeof(float) * row);
      pos[i] = v.row_info[i].position;
    }
    return Status::OK();
  }

  Result<bool> on_attention(const engine::LayerAttention& att) override {
    const int nh = att.shape.num_heads, hd = att.shape.head_dim;
    const size_t rows = static_cast<size_t>(att.rows);
    q_pos_.resize(rows);
    for (size_t i = 0; i < rows; ++i) q_pos_[i] = att.row_info[i].position;
    const int32_t last_q = rows > 0 ? q_pos_[rows - 1] : -1;  // rows are in position order
    o_.resize(rows * nh * hd);
    lse_.resize(rows * nh);
    const int32_t zero_block = 0;
    auto attend = [&](const unsigned char* b, int64_t n) -> Status {
      const auto* k = reinterpret_cast<const float*>(b);
      const float* v = k + static_cast<size_t>(n) * kv_dim_;
      const auto* pos = reinterpret_cast<const int32_t*>(v + static_cast<size_t>(n) * kv_dim_);
      if (pos[0] > last_q) return Status::OK();  // every key is in every query's future
      kernels::PagedKv kv;
      kv.k = k;
      kv.v = v;
      kv.block_table = &zero_block;
      kv.block_size = static_cast<int>(n);
      kv.num_kv_heads = att.shape.num_kv_heads;
      kv.head_dim = hd;
      kv.kv_len = static_cast<int>(n);
      kv.key_pos = pos;
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill_positions(att.q, att.rows, nh, kv, att.scale, q_pos_.data(),
                                                                o_.data(), lse_.data()));
      kernels::merge_states(att.rows * nh, hd, att.out, att.lse, o_.data(), lse_.data(), att.out, att.lse);
      return Status::OK();
    };
    RAGD_RETURN_IF_ERROR(ring_.pass(own_.data(), attend, att.local));
    return true;
  }

  // A rank without tokens still relays every layer's blocks.
  Status relay(int layers) {
    for (int l = 0; l < layers; ++l) {
      RAGD_RETURN_IF_ERROR(ring_.pass(
          nullptr, [](const unsigned char*, int64_t) { return Status::OK(); }, [] { return Status::OK(); }));
    }
    return Status::OK();
  }

 private:
  Ring ring_;
  int kv_dim_;
  std::vector<unsigned char> own_;
  std::vector<int32_t> q_pos_;
  std::vector<float> o_, lse_;
};

Status check_inputs(const engine::Model& model, const Communicator& comm, std::span<const int64_t> rows,
                    const ShardInput& in, const engine::BlockTable* table) {
  if (table == nullptr) return Status::InvalidArgument("ring_prefill: table is null");
  if (table->num_tokens() != 0) {
    return Status::InvalidArgument("ring_prefill: the shard's table must be empty, it holds " +
                                   std::to_string(table->num_tokens()) + " tokens");
  }
  if (static_cast<int>(rows.size()) != comm.size()) {
    return Status::InvalidArgument("ring_prefill: " + std::to_string(rows.size()) + " shard sizes for a group of " +
                                   std::to_string(comm.size()));
  }
  if (static_cast<int64_t>(in.tokens.size()) != rows[comm.rank()] || in.positions.size() != in.tokens.size()) {
    return Status::InvalidArgument("ring_prefill: rank " + std::to_string(comm.rank()) + " has " +
                                   std::to_string(in.tokens.size()) + " tokens and " +
                                   std::to_string(in.positions.size()) + " positions, its shard size is " +
                                   std::to_string(rows[comm.rank()]));
  }
  for (size_t i = 1; i < in.positions.size(); ++i) {
    if (in.positions[i] <= in.positions[i - 1]) {
      return Status::InvalidArgument("ring_prefill: positions must ascend; entry " + std::to_string(i) + " is " +
                                     std::to_string(in.positions[i]) + " after " + std::to_string(in.positions[i - 1]));
    }
  }
  return Status::OK();
}

}  // namespace

Status ring_prefill(engine::Model& model, Communicator& comm, std::span<const int64_t> rows_per_rank,
                    const ShardInput& in, engine::BlockTable* table, engine::StepOutput* out, StepTimes* times) {
  StepTimes local;
  StepTimes* t = times != nullptr ? times : &local;
  *t = StepTimes{};
  const auto t0 = Clock::now();
  Status st = check_inputs(model, comm, rows_per_rank, in, table);
  if (st.ok()) {
    const engine::ModelConfig& cfg = model.config();
    RingHook hook(comm, rows_per_rank, cfg.kv_dim(), t);
    if (in.tokens.empty()) {
      st = hook.relay(cfg.num_hidden_layers);
      if (out != nullptr) *out = engine::StepOutput{};
    } else {
      engine::SeqStep step;
      step.table = table;
      step.tokens = in.tokens;
      step.positions = in.positions;
      step.logits = in.logits;
      engine::StepOutput scratch;
      st = model.forward_with_hook(std::span<engine::SeqStep>(&step, 1), hook, out != nullptr ? out : &scratch);
    }
  }
  if (!st.ok()) comm.abort(st.with_context("rank " + std::to_string(comm.rank()) + " failed its prefill"));
  t->seconds = since(t0);
  return st;
}

}  // namespace ragd::seqparallel
