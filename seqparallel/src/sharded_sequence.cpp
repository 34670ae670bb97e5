#include "ragd/seqparallel/sharded_sequence.h"

#include <algorithm>
#include <string>

namespace ragd::seqparallel {

ShardedSequence::ShardedSequence(engine::Model& model, Communicator& comm, PartitionKind kind, int max_chunk_tokens)
    : model_(model), comm_(comm), kind_(kind), max_chunk_(max_chunk_tokens) {}

ShardedSequence::~ShardedSequence() {
  decoder_.reset();
  shard_.release(model_.kv_pool());
}

Status ShardedSequence::prefill(std::span<const int32_t> prompt, std::vector<float>* logits) {
  if (length_ > 0) return Status::FailedPrecondition("sharded sequence: already prefilled");
  if (prompt.empty()) return Status::InvalidArgument("sharded sequence: empty prompt");
  const int p = comm_.size(), r = comm_.rank();
  const int64_t n = static_cast<int64_t>(prompt.size());
  // Chunks are consecutive ranges of positions, each partitioned across the ranks like a whole
  // prompt (zigzag balances every chunk), so a chunk's queries find every earlier key already in
  // some rank's pool. One chunk when max_chunk_ is 0.
  const int64_t span = max_chunk_ > 0 ? static_cast<int64_t>(max_chunk_) * p : n;
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
    ShardInput in;
    in.tokens = tokens;
    in.positions = positions;
    in.logits = r == holder && c == chunks - 1 ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone;
    StepTimes t;
    RAGD_RETURN_IF_ERROR(ring_prefill(model_, comm_, rows, in, &shard_, &out, &t));
    prefill_ += t;
  }
  length_ = static_cast<int64_t>(prompt.size());
  decoder_ = std::make_unique<ShardedDecoder>(model_, comm_, &shard_);
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
  StepTimes t;
  RAGD_RETURN_IF_ERROR(decoder_->step(token, static_cast<int32_t>(length_), logits, &t));
  decode_ += t;
  ++length_;
  return Status::OK();
}

}  // namespace ragd::seqparallel
