#include "ragd/seqparallel/sharded_sequence.h"

#include <string>

namespace ragd::seqparallel {

ShardedSequence::ShardedSequence(engine::Model& model, Communicator& comm, PartitionKind kind)
    : model_(model), comm_(comm), kind_(kind) {}

ShardedSequence::~ShardedSequence() {
  decoder_.reset();
  shard_.release(model_.kv_pool());
}

Status ShardedSequence::prefill(std::span<const int32_t> prompt, std::vector<float>* logits) {
  if (length_ > 0) return Status::FailedPrecondition("sharded sequence: already prefilled");
  if (prompt.empty()) return Status::InvalidArgument("sharded sequence: empty prompt");
  const int p = comm_.size(), r = comm_.rank();
  RAGD_ASSIGN_OR_RETURN(std::vector<Shard> shards, partition(static_cast<int64_t>(prompt.size()), p, kind_));
  std::vector<int64_t> rows(p);
  int holder = 0;  // the rank holding the last position
  const int32_t last = static_cast<int32_t>(prompt.size()) - 1;
  for (int w = 0; w < p; ++w) {
    rows[w] = shards[w].size();
    if (!shards[w].positions.empty() && shards[w].positions.back() == last) holder = w;
  }
  std::vector<int32_t> tokens;
  tokens.reserve(shards[r].positions.size());
  for (int32_t pos : shards[r].positions) tokens.push_back(prompt[pos]);
  ShardInput in;
  in.tokens = tokens;
  in.positions = shards[r].positions;
  in.logits = r == holder ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone;
  engine::StepOutput out;
  RAGD_RETURN_IF_ERROR(ring_prefill(model_, comm_, rows, in, &shard_, &out, &prefill_));
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
