#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "ragd/engine/bert_model.h"
#include "ragd/engine/wordpiece.h"
#include "ragd/retrieval/reranker.h"

namespace ragd::retrieval {

CrossEncoderReranker::~CrossEncoderReranker() = default;

Result<std::unique_ptr<CrossEncoderReranker>> CrossEncoderReranker::load(const std::string& dir,
                                                                         const CrossEncoderOptions& opts) {
  RAGD_ASSIGN_OR_RETURN(auto model, engine::BertModel::load(dir));
  if (!model->config().is_classifier())
    return Status::InvalidArgument(fmt::format(
        "{}: architecture '{}' has no sequence-classification head (a cross-encoder is *ForSequenceClassification)",
        (std::filesystem::path(dir) / "config.json").string(), model->config().architecture));
  const std::string tok_path = (std::filesystem::path(dir) / "tokenizer.json").string();
  RAGD_ASSIGN_OR_RETURN(auto tok, engine::WordPieceTokenizer::from_file_wordpiece(tok_path));
  if (tok->vocab_size() > model->config().vocab_size)
    return Status::InvalidArgument(fmt::format("{}: tokenizer has {} ids, the model's vocab_size is {}", tok_path,
                                               tok->vocab_size(), model->config().vocab_size));
  std::unique_ptr<CrossEncoderReranker> r(new CrossEncoderReranker());
  r->max_tokens_ = model->config().max_tokens();
  if (opts.max_tokens > 0) r->max_tokens_ = std::min(r->max_tokens_, opts.max_tokens);
  if (r->max_tokens_ <= tok->special_tokens_pair() + 1)
    return Status::InvalidArgument(fmt::format("cross-encoder: max tokens {} leaves no room for text", r->max_tokens_));
  r->batch_ = std::max(1, opts.batch_size);
  r->identity_ = fmt::format("cross-encoder/{}/max={}", model->fingerprint().to_hex(), r->max_tokens_);
  r->model_ = std::move(model);
  r->tok_ = std::move(tok);
  return r;
}

Status CrossEncoderReranker::score(std::string_view query, std::span<const std::string_view> passages,
                                   std::vector<float>* scores) const {
  scores->assign(passages.size(), 0.0f);
  const int labels = model_->config().num_labels;
  std::vector<engine::EncoderInput> batch;
  std::vector<float> logits;
  for (size_t b = 0; b < passages.size(); b += static_cast<size_t>(batch_)) {
    const size_t e = std::min(passages.size(), b + static_cast<size_t>(batch_));
    batch.clear();
    for (size_t i = b; i < e; ++i) batch.push_back(tok_->encode_pair(query, passages[i], max_tokens_));
    RAGD_RETURN_IF_ERROR(model_->classify(batch, &logits));
    for (size_t i = b; i < e; ++i) (*scores)[i] = logits[(i - b) * static_cast<size_t>(labels)];
  }
  return Status::OK();
}

}  // namespace ragd::retrieval
