#include "ragd/seqparallel/sharded_sequence.h"

#include <algorithm>
#include <string>

#include "ragd/common/check.h"

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
    : model_(model), comm_(comm), kind_(kind), max_chunk_(max_chunk_tokens), spill_options_(spill) {}

Status ShardedSequence::make_room(int tokens) {
  Status st = spill_oldest(tokens);
  // The other ranks are in the step's collectives: they learn of the failure instead of waiting.
  if (!st.ok()) comm_.abort(st.with_context("rank " + std::to_string(comm_.rank()) + " could not spill its KV"));
  return st;
}

Status ShardedSequence::spill_oldest(int tokens) {
  engine::KvPool& pool = model_.kv_pool();
  // The decode scratch block of a rank that does not store a step's token.
  const int scratch = comm_.size() > 1 ? 1 : 0;
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
  const int p = comm_.size(), r = comm_.rank();
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
    RAGD_RETURN_IF_ERROR(ring_prefill(model_, comm_, rows, in, &shard_, &out, &t, spill_.get()));
    prefill_ += t;
    if (c + 1 < chunks) {
      // Rank 0 says whether to go on; every rank learns it in the same step.
      int32_t go = progress ? (progress(begin + len, n) ? 1 : 0) : 1;
      if (p > 1) RAGD_RETURN_IF_ERROR(comm_.broadcast(&go, sizeof go, 0));
      if (go == 0) return Status::Cancelled("sequence-parallel prefill stopped after " + std::to_string(begin + len) +
                                            " of " + std::to_string(n) + " tokens");
    }
  }
  length_ = static_cast<int64_t>(prompt.size());
  decoder_ = std::make_unique<ShardedDecoder>(model_, comm_, &shard_, spill_.get());
  // Every rank takes part in the broadcast, whether or not its caller wants the logits.
  std::vector<float> scratch;
  std::vector<float>& dst = logits != nullptr ? *logits : scratch;
  dst.resize(model_.config().vocab_size);
  if (r == holder) std::copy(out.logits.begin(), out.logits.end(), dst.begin());
  if (p > 1) RAGD_RETURN_IF_ERROR(comm_.broadcast(dst.data(), sizeof(float) * dst.size(), holder));
  return Status::OK();
}

Status ShardedSequence::decode(int32_t token, std::vector<float>* logits) {
  if (decoder_ == nullptr) return Status::FailedPrecondition("sharded sequence: decode before prefill");
  RAGD_RETURN_IF_ERROR(make_room(1));
  StepTimes t;
  RAGD_RETURN_IF_ERROR(decoder_->step(token, static_cast<int32_t>(length_), logits, &t));
  decode_ += t;
  ++length_;
  return Status::OK();
}

}  // namespace ragd::seqparallel
