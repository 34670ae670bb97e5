#include "ragd/seqparallel/sharded_decode.h"

#include <chrono>
#include <string>

#include "ragd/kernels/lse_merge.h"

namespace ragd::seqparallel {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// KV slots a table can still take: its free pool blocks plus the rest of its last block.
int64_t free_slots(const engine::KvPool& pool, const engine::BlockTable& t) {
  const int64_t bs = pool.layout().block_size;
  return static_cast<int64_t>(pool.free_blocks()) * bs + static_cast<int64_t>(t.blocks().size()) * bs - t.num_tokens();
}

class DecodeHook final : public engine::LayerHook {
 public:
  DecodeHook(engine::Model& model, Communicator& comm, const engine::BlockTable& shard, KvSpill* spill, bool owner,
             int32_t position, StepTimes* t)
      : model_(model), comm_(comm), shard_(shard), spill_(spill), owner_(owner), position_(position), t_(t) {}

  Result<bool> on_attention(const engine::LayerAttention& att) override {
    const int nh = att.shape.num_heads, hd = att.shape.head_dim;
    const size_t q_dim = static_cast<size_t>(nh) * hd, part = q_dim + nh;
    const int p = comm_.size();
    mine_.resize(part);
    if (owner_) {
      // The step wrote the token into the shard: the engine's own attention sees it.
      RAGD_RETURN_IF_ERROR(att.local());
      std::copy(att.out, att.out + q_dim, mine_.begin());
      std::copy(att.lse, att.lse + nh, mine_.begin() + q_dim);
    } else {
      // The shard without the token (written into the scratch table instead).
      RAGD_RETURN_IF_ERROR(model_.attend(shard_, att.layer, std::span<const float>(att.q, q_dim),
                                         std::span<const int32_t>(&position_, 1), mine_.data(), mine_.data() + q_dim));
    }
    // The shard's older keys outside the pool, attended where they live.
    if (spill_ != nullptr) {
      RAGD_RETURN_IF_ERROR(spill_->attend(att.layer, att.q, 1, nh, &position_, att.scale, mine_.data(),
                                          mine_.data() + q_dim));
    }
    all_.resize(part * p);
    const auto w = Clock::now();
    Status st = comm_.allgather(mine_.data(), sizeof(float) * part, all_.data());
    t_->comm_wait_s += since(w);
    t_->bytes_sent += static_cast<int64_t>(sizeof(float) * part) * (p - 1);
    RAGD_RETURN_IF_ERROR(st);
    // Rank order on every rank: identical results everywhere.
    std::copy(all_.begin(), all_.begin() + q_dim, att.out);
    std::copy(all_.begin() + q_dim, all_.begin() + part, att.lse);
    for (int r = 1; r < p; ++r) {
      const float* o = all_.data() + part * r;
      kernels::merge_states(nh, hd, att.out, att.lse, o, o + q_dim, att.out, att.lse);
    }
    return true;
  }

 private:
  engine::Model& model_;
  Communicator& comm_;
  const engine::BlockTable& shard_;
  KvSpill* spill_;
  bool owner_;
  int32_t position_;
  StepTimes* t_;
  std::vector<float> mine_, all_;
};

}  // namespace

int decode_owner(std::span<const int64_t> room) {
  int owner = 0;
  for (int r = 1; r < static_cast<int>(room.size()); ++r) {
    if (room[r] > room[owner]) owner = r;
  }
  return owner;
}

ShardedDecoder::ShardedDecoder(engine::Model& model, Communicator& comm, engine::BlockTable* shard, KvSpill* spill)
    : model_(model), comm_(comm), shard_(shard), spill_(spill) {}

ShardedDecoder::~ShardedDecoder() { scratch_.release(model_.kv_pool()); }

Status ShardedDecoder::step(int32_t token, int32_t position, std::vector<float>* logits, StepTimes* times) {
  StepTimes local;
  StepTimes* t = times != nullptr ? times : &local;
  *t = StepTimes{};
  const auto t0 = Clock::now();
  if (shard_ == nullptr) return Status::InvalidArgument("sharded decode: no shard table");
  // Who stores the token: the most free slots, the lowest rank on ties (every rank sees the same).
  const int p = comm_.size();
  std::vector<int64_t> room(p);
  int64_t mine = free_slots(model_.kv_pool(), *shard_);
  // A rank that cannot rewrite its scratch slot cannot take part (a single worker owns every step).
  if (p > 1 && scratch_.num_tokens() == 0 && model_.kv_pool().free_blocks() == 0) mine = -1;
  Status st = comm_.allgather(&mine, sizeof(mine), room.data());
  if (!st.ok()) return st;
  owner_ = decode_owner(room);
  for (int r = 0; r < p; ++r) {
    if (room[r] < 0 || room[owner_] == 0) {
      return Status::ResourceExhausted("sharded decode: no KV slot left on " +
                                       (room[owner_] == 0 ? std::string("any rank") : "rank " + std::to_string(r)));
    }
  }
  const bool own = owner_ == comm_.rank();
  engine::SeqStep s;
  s.tokens = std::span<const int32_t>(&token, 1);
  s.positions = std::span<const int32_t>(&position, 1);
  const int32_t slot0 = 0;
  if (own) {
    s.table = shard_;
  } else {
    s.table = &scratch_;
    if (scratch_.num_tokens() == 1) s.slots = std::span<const int32_t>(&slot0, 1);  // rewrite, do not grow
  }
  s.logits = logits != nullptr ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone;
  DecodeHook hook(model_, comm_, *shard_, spill_, own, position, t);
  engine::StepOutput out;
  st = model_.forward_with_hook(std::span<engine::SeqStep>(&s, 1), hook, &out);
  if (!st.ok()) {
    comm_.abort(st.with_context("rank " + std::to_string(comm_.rank()) + " failed a sharded decode step"));
    return st;
  }
  if (logits != nullptr) logits->assign(out.logits.begin(), out.logits.end());
  t->seconds = since(t0);
  return Status::OK();
}

}  // namespace ragd::seqparallel
