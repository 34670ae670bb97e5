// Cross-encoder reranking: a BERT-family sequence-classification checkpoint
// (BertForSequenceClassification, engine/bert_model.h) scores (query, passage) pairs, tokenized as
// [CLS] query [SEP] passage [SEP] with token types 0 / 1 and cut to the model's length (the
// passage loses tokens first; wordpiece.h). The score is the first logit (bge-reranker: one label).
// Thread-safety: immutable after load; score() is safe from any thread.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::engine {
class BertModel;
class WordPieceTokenizer;
}  // namespace ragd::engine

namespace ragd::retrieval {

struct CrossEncoderOptions {
  int max_tokens = 0;   // tokens per pair, specials included; 0 (default) = the model's limit
  int batch_size = 32;  // pairs per forward pass; default 32
};

class CrossEncoderReranker {
 public:
  // Errors name the file (config.json without a classification head, missing tensors, tokenizer.json).
  static Result<std::unique_ptr<CrossEncoderReranker>> load(const std::string& dir, const CrossEncoderOptions& opts = {});
  ~CrossEncoderReranker();

  // scores: one per passage, in input order (higher = more relevant).
  Status score(std::string_view query, std::span<const std::string_view> passages, std::vector<float>* scores) const;
  // "cross-encoder/<fingerprint>/max=512"
  std::string identity() const { return identity_; }
  int max_tokens() const { return max_tokens_; }

 private:
  CrossEncoderReranker() = default;
  std::unique_ptr<engine::BertModel> model_;
  std::unique_ptr<engine::WordPieceTokenizer> tok_;
  int max_tokens_ = 0;
  int batch_ = 32;
  std::string identity_;
};

}  // namespace ragd::retrieval
