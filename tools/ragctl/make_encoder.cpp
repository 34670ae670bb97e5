#include "make_encoder.h"

#include <chrono>
#include <cstdio>

#include <fmt/format.h>

#include "ragd/engine/bert_model.h"
#include "ragd/engine/encoder_dir.h"

namespace ragd::tools {

bool is_encoder_preset(const std::string& name) {
  for (std::string_view n : engine::bert_preset_names())
    if (n == name) return true;
  return false;
}

Status make_encoder_model(const MakeEncoderArgs& a) {
  const auto t0 = std::chrono::steady_clock::now();
  engine::EncoderDirOptions o;
  RAGD_ASSIGN_OR_RETURN(o.config, engine::bert_preset_config(a.preset));
  if (a.layers > 0) o.config.num_hidden_layers = a.layers;
  if (a.reranker) o.config.architecture = "BertForSequenceClassification", o.config.num_labels = 1;
  o.seed = a.seed;
  o.pooling = a.pooling;
  o.max_seq_length = o.config.max_tokens();
  if (!a.dtype.empty()) {
    RAGD_ASSIGN_OR_RETURN(o.dtype, engine::parse_dtype(a.dtype));
  }
  const auto& c = o.config;
  const int64_t h = c.hidden_size, im = c.intermediate_size;
  const int64_t params = (c.vocab_size + c.max_position_embeddings + c.type_vocab_size + 2) * h +
                         c.num_hidden_layers * (4 * (h * h + h) + 2 * h * im + im + h + 4 * h) +
                         (a.reranker ? h * h + h + h + 1 : 0);
  if (a.dry_run) {
    std::printf("%s%.1fM parameters, pooling %s%s\n", c.to_json().c_str(), params / 1e6, a.pooling.c_str(),
                a.reranker ? " (reranker: no pooling)" : "");
    return Status::OK();
  }
  RAGD_RETURN_IF_ERROR(engine::write_random_encoder_dir(a.out, o));
  std::fprintf(stderr, "wrote %s: preset %s, %s, %.1fM parameters (%s), WordPiece tokenizer %d ids, %s, %.1f s\n",
               a.out.c_str(), a.preset.c_str(), c.architecture.c_str(), params / 1e6,
               std::string(engine::dtype_name(o.dtype)).c_str(), c.vocab_size,
               a.reranker ? "cross-encoder (1 label)" : fmt::format("pooling {} + normalize", a.pooling).c_str(),
               std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return Status::OK();
}

}  // namespace ragd::tools
