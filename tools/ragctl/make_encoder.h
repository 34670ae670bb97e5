// `ragctl make-model --preset bge-small|bge-base|bert-tiny`: random-weight BERT-family encoders
// (sentence-transformers embedding layout, or a cross-encoder reranker with --reranker).
#pragma once

#include <cstdint>
#include <string>

#include "ragd/common/status.h"

namespace ragd::tools {

struct MakeEncoderArgs {
  std::string preset;        // bert-tiny | bge-small | bge-base
  std::string out;
  uint64_t seed = 0;
  std::string dtype;         // "" = f32
  std::string pooling = "cls";  // cls | mean | lasttoken (embedding models)
  bool reranker = false;     // BertForSequenceClassification with one label (a cross-encoder)
  bool dry_run = false;
  int layers = 0;            // overrides of the preset's shape (0 = the preset's)
};

bool is_encoder_preset(const std::string& name);
Status make_encoder_model(const MakeEncoderArgs& a);

}  // namespace ragd::tools
