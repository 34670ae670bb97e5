// How a checkpoint directory says its embeddings are pooled, in sentence-transformers' files:
//   modules.json                 the module list: Transformer, then Pooling (its path names the
//                                pooling directory), optionally Normalize; any other module
//                                (Dense, ...) is refused, naming it;
//   <pooling dir>/config.json    exactly one of pooling_mode_cls_token / _mean_tokens / _lasttoken
//                                (max, sqrt-len and weighted means are refused, naming the flag);
//   sentence_bert_config.json    max_seq_length (optional).
// Read by the encoder and decoder embedders (retrieval/embedder.h) and by `ragctl convert-gguf`.
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "ragd/common/status.h"

namespace ragd::engine {

enum class SentencePooling : uint8_t { kCls, kMean, kLastToken };
std::string_view sentence_pooling_name(SentencePooling p);  // "cls" | "mean" | "lasttoken"
// The names above; InvalidArgument listing them otherwise.
Result<SentencePooling> parse_sentence_pooling(std::string_view name);

// One input's embedding from its final hidden states `hidden` ([rows, dim], rows >= 1): the first
// row (kCls), the last (kLastToken) or the mean of all (kMean, summed in double). Not normalised.
void pool_hidden_states(const float* hidden, int rows, int dim, SentencePooling pooling, float* out);

struct PoolingSpec {
  SentencePooling pooling = SentencePooling::kCls;
  bool normalize = true;   // a Normalize module follows the pooling
  int max_seq_length = 0;  // tokens; 0: not given
};

// Reads the files above under `dir`. NotFound names modules.json when it is missing (a plain HF
// checkpoint has none); InvalidArgument names the file and the problem.
Result<PoolingSpec> read_sentence_pooling(const std::string& dir);

// Writes the files above for `spec` (modules.json, 1_Pooling/config.json, 2_Normalize/ when
// normalize, sentence_bert_config.json when max_seq_length > 0) into the existing `dir`.
Status write_sentence_pooling(const std::string& dir, int hidden_size, const PoolingSpec& spec);

// True when dir/modules.json exists.
bool has_sentence_pooling(const std::string& dir);

}  // namespace ragd::engine
