#include "ragd/seqparallel/ring_attention.h"

#include <chrono>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/kv_dtype.h"
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

// A block on the wire, in the KV pool's storage type (so a remote key is exactly what its owner's
// pool holds, and bf16 / int8 pools send a half / about a quarter of the f32 bytes):
//   K [n, kv_heads, head_dim], V [n, kv_heads, head_dim] of `dtype`;
//   int8 only: K scales [n, kv_heads], V scales [n, kv_heads] f32;
//   positions [n] int32.
struct BlockFormat {
  kernels::KvDtype dtype = kernels::KvDtype::kF32;
  int kv_heads = 0;
  int head_dim = 0;

  size_t values(int64_t n) const { return static_cast<size_t>(n) * kv_heads * head_dim; }
  size_t scales(int64_t n) const { return kernels::kv_dtype_scaled(dtype) ? static_cast<size_t>(n) * kv_heads : 0; }
  // K (or V) bytes, rounded up to 8 so that the f32 scales and int32 positions after them stay aligned.
  size_t value_bytes(int64_t n) const { return (values(n) * kernels::kv_dtype_bytes(dtype) + 7) / 8 * 8; }
  size_t bytes(int64_t n) const {
    return 2 * value_bytes(n) + 2 * sizeof(float) * scales(n) + sizeof(int32_t) * static_cast<size_t>(n);
  }
  // The parts of a block of n rows at b.
  struct Parts {
    unsigned char* k;
    unsigned char* v;
    float* k_scale;
    float* v_scale;
    int32_t* pos;
  };
  Parts parts(unsigned char* b, int64_t n) const {
    Parts p;
    p.k = b;
    p.v = b + value_bytes(n);
    p.k_scale = reinterpret_cast<float*>(p.v + value_bytes(n));
    p.v_scale = p.k_scale + scales(n);
    p.pos = reinterpret_cast<int32_t*>(p.v_scale + scales(n));
    return p;
  }
};

// One layer's ring: P-1 steps. At step s (1-based) rank r sends the block that originated at rank
// r-s+1 (its own at s = 1) to r+1 and receives the one of rank r-s from r-1. The block received at
// step s-1 is attended while step s is in flight; the last one after the loop.
class Ring {
 public:
  Ring(Communicator& comm, std::span<const int64_t> rows, const BlockFormat& fmt, StepTimes* t)
      : comm_(comm), rows_(rows.begin(), rows.end()), fmt_(fmt), t_(t) {
    // Receive buffers for the largest block, left uninitialised (every byte used is received
    // first, and untouched pages cost no memory); none on one worker, where nothing travels.
    if (comm.size() == 1) return;
    int64_t most = 0;
    for (int64_t n : rows_) most = std::max(most, n);
    for (auto& b : buf_) b.reset(new unsigned char[fmt_.bytes(most)]);
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
      RAGD_ASSIGN_OR_RETURN(reqs[0], comm_.irecv(prev, kRingTag, buf_[cur].get(), fmt_.bytes(in_rows)));
      RAGD_ASSIGN_OR_RETURN(reqs[1], comm_.isend(next, kRingTag, hand, fmt_.bytes(hand_rows)));
      t_->bytes_sent += static_cast<int64_t>(fmt_.bytes(hand_rows));
      if (hand_remote) {
        RAGD_RETURN_IF_ERROR(timed_attend(attend, hand, hand_rows));
      } else {
        RAGD_RETURN_IF_ERROR(first());
      }
      const auto w = Clock::now();
      Status st = wait_all(reqs);
      t_->comm_wait_s += since(w);
      RAGD_RETURN_IF_ERROR(st);
      hand = buf_[cur].get();
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
  BlockFormat fmt_;
  StepTimes* t_;
  std::unique_ptr<unsigned char[]> buf_[2];
};

// The block a rank sends for one layer: the KV its table already holds (earlier chunks of its
// shard, read back from the pool) followed by this step's fresh rows.
class RingHook final : public engine::LayerHook {
 public:
  RingHook(Communicator& comm, std::span<const int64_t> rows, const BlockFormat& fmt, StepTimes* t,
           engine::KvPool& pool, const engine::BlockTable& prior, KvSpill* spill)
      : ring_(comm, rows, fmt, t), fmt_(fmt), pool_(pool), prior_(prior), spill_(spill), single_(comm.size() == 1) {}

  Status on_qkv(const engine::LayerQkv& v, engine::RowSelection*) override {
    if (single_) return Status::OK();  // nothing travels
    return pack(v.layer, v.rows, v.k, v.v, v.row_stride, v.row_info);
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
      const BlockFormat::Parts p = fmt_.parts(const_cast<unsigned char*>(b), n);
      if (p.pos[0] > last_q) return Status::OK();  // every key is in every query's future
      kernels::PagedKv kv;
      kv.k = p.k;
      kv.v = p.v;
      kv.dtype = fmt_.dtype;
      if (kernels::kv_dtype_scaled(fmt_.dtype)) {
        kv.k_scale = p.k_scale;
        kv.v_scale = p.v_scale;
      }
      kv.block_table = &zero_block;
      kv.block_size = static_cast<int>(n);
      kv.num_kv_heads = att.shape.num_kv_heads;
      kv.head_dim = hd;
      kv.kv_len = static_cast<int>(n);
      kv.key_pos = p.pos;
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill_positions(att.q, att.rows, nh, kv, att.scale, q_pos_.data(),
                                                                o_.data(), lse_.data()));
      kernels::merge_states(att.rows * nh, hd, att.out, att.lse, o_.data(), lse_.data(), att.out, att.lse);
      return Status::OK();
    };
    // This rank's own keys: the pool's (the engine's attention), then the spilled ones.
    auto local = [&]() -> Status {
      RAGD_RETURN_IF_ERROR(att.local());
      if (spill_ == nullptr) return Status::OK();
      return spill_->attend(att.layer, att.q, att.rows, nh, q_pos_.data(), att.scale, att.out, att.lse);
    };
    RAGD_RETURN_IF_ERROR(ring_.pass(own_.data(), attend, local));
    return true;
  }

  // A rank without new tokens still sends its earlier KV (if any) and relays every layer's blocks.
  Status relay(int layers) {
    for (int l = 0; l < layers; ++l) {
      RAGD_RETURN_IF_ERROR(pack(l, 0, nullptr, nullptr, 0, {}));
      RAGD_RETURN_IF_ERROR(ring_.pass(
          own_.data(), [](const unsigned char*, int64_t) { return Status::OK(); }, [] { return Status::OK(); }));
    }
    return Status::OK();
  }

 private:
  // own_ = [spilled rows | prior rows of `layer` | n fresh rows], stored as the pool stores them
  // (the engine writes the same fresh rows into this rank's pool; prior rows are read back from it,
  // and a re-store of a read-back bf16 / int8 row gives the stored values again; spilled rows are
  // the pool's bytes as they were).
  Status pack(int layer, int n, const float* k, const float* v, size_t stride, std::span<const engine::StepRow> info) {
    const int64_t spilled = spill_ != nullptr ? spill_->tokens() : 0;
    const int64_t m = spilled + prior_.num_tokens();
    own_.resize(fmt_.bytes(m + n));
    const BlockFormat::Parts p = fmt_.parts(own_.data(), m + n);
    const size_t vb = kernels::kv_dtype_bytes(fmt_.dtype), row = static_cast<size_t>(fmt_.kv_heads) * fmt_.head_dim;
    const bool scaled = kernels::kv_dtype_scaled(fmt_.dtype);
    if (spilled > 0) {
      int64_t at = 0;
      RAGD_RETURN_IF_ERROR(spill_->for_each_rows(layer, [&](const KvSpill::Rows& r) {
        std::memcpy(p.k + at * row * vb, r.k, r.n * row * vb);
        std::memcpy(p.v + at * row * vb, r.v, r.n * row * vb);
        if (scaled) {
          std::memcpy(p.k_scale + at * fmt_.kv_heads, r.k_scale, sizeof(float) * r.n * fmt_.kv_heads);
          std::memcpy(p.v_scale + at * fmt_.kv_heads, r.v_scale, sizeof(float) * r.n * fmt_.kv_heads);
        }
        std::memcpy(p.pos + at, r.pos, sizeof(int32_t) * r.n);
        at += r.n;
        return Status::OK();
      }));
    }
    if (const int mt = prior_.num_tokens(); mt > 0) {
      const BlockFormat::Parts q{p.k + spilled * row * vb, p.v + spilled * row * vb,
                                 scaled ? p.k_scale + spilled * fmt_.kv_heads : nullptr,
                                 scaled ? p.v_scale + spilled * fmt_.kv_heads : nullptr, p.pos + spilled};
      store_prior(layer, mt, q);
    }
    if (n > 0) {
      const size_t off_s = scaled ? static_cast<size_t>(m) * fmt_.kv_heads : 0;
      kernels::kv_store_rows(fmt_.dtype, n, fmt_.kv_heads, fmt_.head_dim, k, stride, p.k + m * row * vb,
                             scaled ? p.k_scale + off_s : nullptr);
      kernels::kv_store_rows(fmt_.dtype, n, fmt_.kv_heads, fmt_.head_dim, v, stride, p.v + m * row * vb,
                             scaled ? p.v_scale + off_s : nullptr);
      for (int i = 0; i < n; ++i) p.pos[m + i] = info[i].position;
    }
    return Status::OK();
  }

  // The table's m rows of `layer` into the parts at p.
  void store_prior(int layer, int m, const BlockFormat::Parts& p) {
    const size_t row = static_cast<size_t>(fmt_.kv_heads) * fmt_.head_dim;
    prior_k_.resize(static_cast<size_t>(m) * row);
    prior_v_.resize(static_cast<size_t>(m) * row);
    prior_.read(pool_, layer, 0, m, prior_k_.data(), prior_v_.data());
    kernels::kv_store_rows(fmt_.dtype, m, fmt_.kv_heads, fmt_.head_dim, prior_k_.data(), row, p.k, p.k_scale);
    kernels::kv_store_rows(fmt_.dtype, m, fmt_.kv_heads, fmt_.head_dim, prior_v_.data(), row, p.v, p.v_scale);
    for (int i = 0; i < m; ++i) p.pos[i] = prior_.position(i);
  }

  Ring ring_;
  BlockFormat fmt_;
  engine::KvPool& pool_;
  const engine::BlockTable& prior_;  // this rank's shard before the step (read in pack())
  KvSpill* spill_;                   // this rank's older KV, outside the pool (may be null)
  const bool single_;
  std::vector<float> prior_k_, prior_v_;
  std::vector<unsigned char> own_;
  std::vector<int32_t> q_pos_;
  std::vector<float> o_, lse_;
};

Status check_inputs(const engine::Model& model, const Communicator& comm, std::span<const int64_t> rows,
                    const ShardInput& in, const engine::BlockTable* table, const KvSpill* spill) {
  if (table == nullptr) return Status::InvalidArgument("ring_prefill: table is null");
  if (static_cast<int>(rows.size()) != comm.size()) {
    return Status::InvalidArgument("ring_prefill: " + std::to_string(rows.size()) + " shard sizes for a group of " +
                                   std::to_string(comm.size()));
  }
  const int64_t spilled = spill != nullptr ? spill->tokens() : 0;
  const int64_t prior = table->num_tokens() + spilled;
  if (static_cast<int64_t>(in.tokens.size()) + prior != rows[comm.rank()] || in.positions.size() != in.tokens.size()) {
    return Status::InvalidArgument("ring_prefill: rank " + std::to_string(comm.rank()) + " holds " +
                                   std::to_string(prior) + " tokens and gets " + std::to_string(in.tokens.size()) +
                                   " tokens and " + std::to_string(in.positions.size()) +
                                   " positions, its shard size after the step is " + std::to_string(rows[comm.rank()]));
  }
  const int32_t last = table->num_tokens() > 0 ? table->position(table->num_tokens() - 1)
                                              : (spilled > 0 ? spill->max_position() : -1);
  if (prior > 0 && !in.positions.empty() && in.positions.front() <= last) {
    return Status::InvalidArgument("ring_prefill: positions must ascend past the shard's earlier tokens; the first is " +
                                   std::to_string(in.positions.front()) + ", the shard ends at " + std::to_string(last));
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
                    const ShardInput& in, engine::BlockTable* table, engine::StepOutput* out, StepTimes* times,
                    KvSpill* spill) {
  StepTimes local;
  StepTimes* t = times != nullptr ? times : &local;
  *t = StepTimes{};
  const auto t0 = Clock::now();
  Status st = check_inputs(model, comm, rows_per_rank, in, table, spill);
  if (st.ok()) {
    const engine::ModelConfig& cfg = model.config();
    const BlockFormat fmt{model.kv_pool().layout().dtype, cfg.num_key_value_heads, cfg.head_dim};
    RingHook hook(comm, rows_per_rank, fmt, t, model.kv_pool(), *table, spill);
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
