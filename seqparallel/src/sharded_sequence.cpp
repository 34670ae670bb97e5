#include "ragd/seqparallel/sharded_sequence.h"

#include <algorithm>
#include <string>

#include "ragd/common/check.h"
#include "ragd/kernels/kv_dtype.h"
#include "ragd/seqparallel/sub_communicator.h"

namespace ragd::seqparallel {

namespace {

// Positions per ring step of the prefill: max_chunk tokens per rank, or the whole prompt.
int64_t prefill_span(int64_t prompt_tokens, int workers, int max_chunk) {
  return max_chunk > 0 ? static_cast<int64_t>(max_chunk) * workers : prompt_tokens;
}

}  // namespace

std::vector<int64_t> tokens_held_per_worker(const SpSequence& s) {
  RAGD_CHECK(s.workers >= 1 && s.prompt_tokens >= 0 && s.decode_tokens >= 0 && s.block_size >= 1)
      << "tokens_held_per_worker: prompt " << s.prompt_tokens << ", decode " << s.decode_tokens << ", workers "
      << s.workers << ", block_size " << s.block_size;
  const int p = s.workers;
  std::vector<int64_t> held(p, 0);
  const int64_t n = s.prompt_tokens, span = prefill_span(n, p, s.max_chunk_tokens);
  for (int64_t begin = 0; begin < n; begin += span) {
    const std::vector<int64_t> step = shard_sizes(std::min(span, n - begin), p, s.kind);
    for (int w = 0; w < p; ++w) held[w] += step[w];
  }
  // Decode: a worker's free slots are its pool's (equal everywhere, left out) less its tokens, less
  // the block of its scratch table once it has written a step it did not store (sharded_decode.h).
  std::vector<int64_t> room(p);
  std::vector<char> scratch(p, 0);
  for (int64_t i = 0; i < s.decode_tokens; ++i) {
    for (int w = 0; w < p; ++w) room[w] = -held[w] - (scratch[w] ? s.block_size : 0);
    const int owner = decode_owner(room);
    ++held[owner];
    for (int w = 0; w < p; ++w) scratch[w] |= w != owner;
  }
  return held;
}

int64_t kv_blocks_per_worker(const SpSequence& s) {
  int64_t most = 0;
  for (int64_t t : tokens_held_per_worker(s)) most = std::max(most, (t + s.block_size - 1) / s.block_size);
  return most + (s.workers > 1 && s.decode_tokens > 0 ? 1 : 0);
}

ShardedSequence::ShardedSequence(engine::Model& model, Communicator& comm, PartitionKind kind, int max_chunk_tokens,
                                 const SpillOptions& spill)
    : model_(model), comm_(&comm), kind_(kind), max_chunk_(max_chunk_tokens), spill_options_(spill) {}

Status ShardedSequence::make_room(int tokens) {
  Status st = spill_oldest(tokens);
  // The other ranks are in the step's collectives: they learn of the failure instead of waiting.
  if (!st.ok()) comm_->abort(st.with_context("rank " + std::to_string(comm_->rank()) + " could not spill its KV"));
  return st;
}

Status ShardedSequence::spill_oldest(int tokens) {
  engine::KvPool& pool = model_.kv_pool();
  // The decode scratch block of a rank that does not store a step's token.
  const int scratch = comm_->size() > 1 ? 1 : 0;
  const int need = shard_.blocks_needed(pool, tokens) + scratch;
  if (!spill_options_.enabled() || static_cast<int>(pool.free_blocks()) >= need) return Status::OK();
  // The oldest whole blocks: what the step lacks, and at least an eighth of the pool, so that spills
  // are few (each is one extent: one more read per layer) and each moves little at a time (the
  // pool's pages are given back after the copy: the process holds the moved KV twice only briefly).
  const int bs = pool.layout().block_size;
  const int lack = need - static_cast<int>(pool.free_blocks());
  const int blocks = std::min(shard_.num_tokens() / bs, std::max(lack, static_cast<int>(pool.num_blocks() / 8)));
  const int whole = blocks * bs;
  if (whole == 0) return Status::OK();  // nothing to move: the step reports the full pool
  if (spill_ == nullptr) {
    RAGD_ASSIGN_OR_RETURN(spill_, KvSpill::create(pool.layout(), spill_options_));
    if (after_shrink_) spill_->allow_any_order();
    if (decoder_ != nullptr) decoder_->set_spill(spill_.get());  // the first spill came in decode
  }
  RAGD_RETURN_IF_ERROR(spill_->append(pool, shard_, whole));
  // The tail (a partial block, or nothing) stays; its slots keep their positions.
  engine::BlockTable rest = whole < shard_.num_tokens() ? shard_.fork_range(pool, whole, shard_.num_tokens())
                                                        : engine::BlockTable{};
  // The moved blocks no one else holds go back to the free list and their pages to the kernel, so
  // the process holds the spilled KV once (the pool's pages come back as it refills).
  std::vector<int32_t> freed;
  for (int i = 0; i < whole / bs; ++i) {
    const int32_t b = shard_.blocks()[i];
    if (pool.refcount(b) == 1) freed.push_back(b);
  }
  shard_.release(pool);
  shard_ = std::move(rest);
  if (auto* host = dynamic_cast<engine::HostKvStorage*>(&pool.storage())) host->discard(freed);
  return Status::OK();
}

ShardedSequence::~ShardedSequence() {
  decoder_.reset();
  shard_.release(model_.kv_pool());
}

Status ShardedSequence::prefill(std::span<const int32_t> prompt, std::vector<float>* logits, const Progress& progress) {
  if (length_ > 0) return Status::FailedPrecondition("sharded sequence: already prefilled");
  if (prompt.empty()) return Status::InvalidArgument("sharded sequence: empty prompt");
  const int p = comm_->size(), r = comm_->rank();
  const int64_t n = static_cast<int64_t>(prompt.size());
  // Chunks are consecutive ranges of positions, each partitioned across the ranks like a whole
  // prompt (zigzag balances every chunk), so a chunk's queries find every earlier key already in
  // some rank's pool. One chunk when max_chunk_ is 0.
  const int64_t span = prefill_span(n, p, max_chunk_);
  const int64_t chunks = (n + span - 1) / span;
  std::vector<int64_t> rows(p, 0);  // tokens each rank holds after the chunk
  engine::StepOutput out;
  prefill_ = StepTimes{};
  int holder = 0;  // the rank holding the last position
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t begin = c * span, len = std::min(span, n - begin);
    RAGD_ASSIGN_OR_RETURN(std::vector<Shard> shards, partition(len, p, kind_));
    for (int w = 0; w < p; ++w) {
      rows[w] += shards[w].size();
      if (!shards[w].positions.empty() && shards[w].positions.back() == len - 1) holder = w;
    }
    std::vector<int32_t> tokens, positions;
    for (int32_t pos : shards[r].positions) {
      positions.push_back(static_cast<int32_t>(begin + pos));
      tokens.push_back(prompt[begin + pos]);
    }
    RAGD_RETURN_IF_ERROR(make_room(static_cast<int>(tokens.size())));
    ShardInput in;
    in.tokens = tokens;
    in.positions = positions;
    in.logits = r == holder && c == chunks - 1 ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone;
    StepTimes t;
    RAGD_RETURN_IF_ERROR(ring_prefill(model_, *comm_, rows, in, &shard_, &out, &t, spill_.get()));
    prefill_ += t;
    if (c + 1 < chunks) {
      // Rank 0 says whether to go on; every rank learns it in the same step.
      int32_t go = progress ? (progress(begin + len, n) ? 1 : 0) : 1;
      if (p > 1) RAGD_RETURN_IF_ERROR(comm_->broadcast(&go, sizeof go, 0));
      if (go == 0) return Status::Cancelled("sequence-parallel prefill stopped after " + std::to_string(begin + len) +
                                            " of " + std::to_string(n) + " tokens");
    }
  }
  length_ = static_cast<int64_t>(prompt.size());
  decoder_ = std::make_unique<ShardedDecoder>(model_, *comm_, &shard_, spill_.get());
  // Every rank takes part in the broadcast, whether or not its caller wants the logits.
  std::vector<float> scratch;
  std::vector<float>& dst = logits != nullptr ? *logits : scratch;
  dst.resize(model_.config().vocab_size);
  if (r == holder) std::copy(out.logits.begin(), out.logits.end(), dst.begin());
  if (p > 1) RAGD_RETURN_IF_ERROR(comm_->broadcast(dst.data(), sizeof(float) * dst.size(), holder));
  return Status::OK();
}

Status ShardedSequence::decode(int32_t token, std::vector<float>* logits) {
  if (retired_) return Status::FailedPrecondition("sharded sequence: this rank's KV moved away (shrink)");
  if (decoder_ == nullptr) return Status::FailedPrecondition("sharded sequence: decode before prefill");
  RAGD_RETURN_IF_ERROR(make_room(1));
  StepTimes t;
  RAGD_RETURN_IF_ERROR(decoder_->step(token, static_cast<int32_t>(length_), logits, &t));
  decode_ += t;
  ++length_;
  return Status::OK();
}

namespace {

constexpr int kShrinkTag = 811;  // every message of a shrink: count, positions, rows, in that order

}  // namespace

Status ShardedSequence::shrink(int degree) {
  if (decoder_ == nullptr || retired_) return Status::FailedPrecondition("sharded sequence: shrink before prefill");
  const int p = comm_->size(), r = comm_->rank();
  if (degree < 1 || degree > p) {
    return Status::InvalidArgument("sharded sequence: shrink to " + std::to_string(degree) + " of " +
                                   std::to_string(p) + " ranks");
  }
  if (degree == p) return Status::OK();
  engine::KvPool& pool = model_.kv_pool();
  const engine::KvLayout& L = pool.layout();
  const size_t row = L.token_floats();
  Status st;
  if (r >= degree) {
    // The whole shard as f32 rows, [layer][K: n rows | V: n rows], spilled tokens first.
    const int64_t spilled = spilled_tokens(), resident = shard_.num_tokens(), n = spilled + resident;
    std::vector<int32_t> pos(static_cast<size_t>(n));
    std::vector<float> kv(2 * static_cast<size_t>(L.num_layers) * n * row);
    auto k_at = [&](int l, int64_t t) { return &kv[(2 * static_cast<size_t>(l) * n + t) * row]; };
    auto v_at = [&](int l, int64_t t) { return &kv[((2 * static_cast<size_t>(l) + 1) * n + t) * row]; };
    for (int l = 0; l < L.num_layers && st.ok() && spill_ != nullptr; ++l) {
      int64_t off = 0;
      st = spill_->for_each_rows(l, [&](const KvSpill::Rows& rows) {
        kernels::kv_load_values(L.dtype, rows.n * row, L.head_dim, rows.k, rows.k_scale, k_at(l, off));
        kernels::kv_load_values(L.dtype, rows.n * row, L.head_dim, rows.v, rows.v_scale, v_at(l, off));
        if (l == 0) std::copy(rows.pos, rows.pos + rows.n, pos.begin() + off);
        off += rows.n;
        return Status::OK();
      });
    }
    for (int l = 0; l < L.num_layers && st.ok() && resident > 0; ++l)
      shard_.read(pool, l, 0, static_cast<int>(resident), k_at(l, spilled), v_at(l, spilled));
    for (int64_t i = 0; i < resident; ++i) pos[spilled + i] = shard_.position(static_cast<int>(i));
    const int to = r % degree;
    std::vector<Request> reqs;
    auto post = [&](const void* data, size_t bytes) {
      if (!st.ok() || bytes == 0) return;
      auto q = comm_->isend(to, kShrinkTag, data, bytes);
      if (q.ok()) reqs.push_back(std::move(q).value());
      else st = q.status();
    };
    post(&n, sizeof n);
    post(pos.data(), sizeof(int32_t) * pos.size());
    post(kv.data(), sizeof(float) * kv.size());
    Status waited = wait_all(reqs);
    if (st.ok()) st = waited;
    // Nothing of the sequence stays here.
    decoder_.reset();
    shard_.release(pool);
    spill_.reset();
    retired_ = true;
  } else {
    after_shrink_ = true;
    if (spill_ != nullptr) spill_->allow_any_order();
    for (int from = r + degree; from < p && st.ok(); from += degree) st = take_shard(from);
    if (st.ok()) {
      auto sub = make_sub_communicator(*comm_, degree);
      if (sub.ok()) {
        decoder_.reset();  // its scratch slot goes back to the pool
        sub_ = std::move(sub).value();
        comm_ = sub_.get();
        decoder_ = std::make_unique<ShardedDecoder>(model_, *comm_, &shard_, spill_.get());
      } else {
        st = sub.status();
      }
    }
  }
  if (!st.ok()) comm_->abort(st.with_context("rank " + std::to_string(r) + " failed to move its KV (shrink)"));
  return st;
}

Status ShardedSequence::take_shard(int from) {
  engine::KvPool& pool = model_.kv_pool();
  const engine::KvLayout& L = pool.layout();
  const size_t row = L.token_floats();
  int64_t n = 0;
  {
    RAGD_ASSIGN_OR_RETURN(Request q, comm_->irecv(from, kShrinkTag, &n, sizeof n));
    RAGD_RETURN_IF_ERROR(q->wait());
  }
  if (n <= 0) return Status::OK();
  std::vector<int32_t> pos(static_cast<size_t>(n));
  std::vector<float> kv(2 * static_cast<size_t>(L.num_layers) * n * row);
  {
    RAGD_ASSIGN_OR_RETURN(Request qp, comm_->irecv(from, kShrinkTag, pos.data(), sizeof(int32_t) * pos.size()));
    RAGD_RETURN_IF_ERROR(qp->wait());
    RAGD_ASSIGN_OR_RETURN(Request qk, comm_->irecv(from, kShrinkTag, kv.data(), sizeof(float) * kv.size()));
    RAGD_RETURN_IF_ERROR(qk->wait());
  }
  // In pieces of at most a quarter of the pool, each after make_room (which spills when it must).
  const int bs = L.block_size;
  const int64_t piece_max = std::max<int64_t>(bs, static_cast<int64_t>(pool.num_blocks() / 4) * bs);
  std::vector<float> k, v;
  for (int64_t done = 0; done < n;) {
    const int piece = static_cast<int>(std::min(piece_max, n - done));
    RAGD_RETURN_IF_ERROR(spill_oldest(piece));
    k.resize(static_cast<size_t>(L.num_layers) * piece * row);
    v.resize(k.size());
    for (int l = 0; l < L.num_layers; ++l) {
      const float* src_k = &kv[(2 * static_cast<size_t>(l) * n + done) * row];
      const float* src_v = &kv[((2 * static_cast<size_t>(l) + 1) * n + done) * row];
      std::copy(src_k, src_k + piece * row, &k[static_cast<size_t>(l) * piece * row]);
      std::copy(src_v, src_v + piece * row, &v[static_cast<size_t>(l) * piece * row]);
    }
    const int slot0 = shard_.num_tokens();
    if (!shard_.append(pool, piece, k.data(), v.data())) {
      return Status::ResourceExhausted("sharded sequence: rank " + std::to_string(comm_->rank()) + "'s KV pool cannot take " +
                                       std::to_string(n) + " tokens of rank " + std::to_string(from) +
                                       (spill_options_.enabled() ? "" : " (KV spill is off)"));
    }
    shard_.set_positions(slot0, std::span<const int32_t>(pos.data() + done, static_cast<size_t>(piece)));
    done += piece;
  }
  return Status::OK();
}

}  // namespace ragd::seqparallel
