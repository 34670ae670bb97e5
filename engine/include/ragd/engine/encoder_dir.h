// Random-weight encoder checkpoints on disk, laid out as Hugging Face / sentence-transformers
// publish them, for `ragctl make-model --preset bge-small` and tests:
//   config.json, model.safetensors, tokenizer.json (WordPiece built from the built-in English sample,
//   wordpiece.h), tokenizer_config.json, and for embedding models modules.json,
//   1_Pooling/config.json, 2_Normalize/ (when normalize), sentence_bert_config.json.
// Thread-safety: pure function (writes only under `dir`).
#pragma once

#include <cstdint>
#include <string>

#include "ragd/common/status.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/safetensors.h"

namespace ragd::engine {

struct EncoderDirOptions {
  BertConfig config;               // cfg.num_labels > 0 and a *ForSequenceClassification architecture: a reranker
  uint64_t seed = 0;               // weight RNG seed
  DType dtype = DType::kF32;       // stored weight type
  std::string pooling = "cls";     // 1_Pooling: "cls" | "mean" | "lasttoken"
  bool normalize = true;           // writes 2_Normalize (L2-normalised embeddings)
  int max_seq_length = 512;        // sentence_bert_config.json (tokens, specials included)
};

Status write_random_encoder_dir(const std::string& dir, const EncoderDirOptions& opts);

}  // namespace ragd::engine
