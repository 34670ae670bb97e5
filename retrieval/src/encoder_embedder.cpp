// The encoder embedder (embedder.h): a BERT-family checkpoint (engine/bert_model.h) with its own
// WordPiece tokenizer, pooled as its sentence-transformers files say.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <simdjson.h>

#include "ragd/common/hash.h"
#include "ragd/common/text_file.h"
#include "ragd/engine/bert_model.h"
#include "ragd/engine/sentence_pooling.h"
#include "ragd/engine/wordpiece.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {

namespace {

namespace fs = std::filesystem;


using engine::PoolingSpec;

class EncoderEmbedder final : public Embedder {
 public:
  EncoderEmbedder(std::unique_ptr<engine::BertModel> model, std::unique_ptr<engine::WordPieceTokenizer> tok,
                  PoolingSpec spec, int max_len, const EmbedderOptions& o)
      : model_(std::move(model)), tok_(std::move(tok)), spec_(spec), max_len_(max_len), query_prefix_(o.query_prefix),
        document_prefix_(o.document_prefix), batch_(std::max(1, o.batch_size)) {
    // The prefixes enter the identity through their hash (they may be long sentences).
    Hasher128 ph;
    ph.str(query_prefix_).str(document_prefix_);
    identity_ = fmt::format("encoder/{}/d={}/pool={}/norm={}/max={}/prefix={}", model_->fingerprint().to_hex(),
                            dim(), engine::sentence_pooling_name(spec_.pooling), spec_.normalize ? 1 : 0, max_len_,
                            query_prefix_.empty() && document_prefix_.empty() ? std::string("none")
                                                                              : ph.digest().to_hex().substr(0, 16));
  }
  std::string_view name() const override { return "model"; }
  std::string identity() const override { return identity_; }
  int dim() const override { return model_->config().hidden_size; }

  Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    return run(texts, document_prefix_, out);
  }
  Status embed_queries(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    return run(texts, query_prefix_, out);
  }

 private:
  Status run(std::span<const std::string_view> texts, const std::string& prefix, std::vector<float>* out) const {
    const size_t d = static_cast<size_t>(dim());
    out->assign(texts.size() * d, 0.0f);
    std::vector<engine::EncoderInput> batch;
    std::vector<size_t> rows;  // output row of each batch entry
    std::vector<float> hidden;
    std::string buf;
    auto flush = [&]() -> Status {
      if (batch.empty()) return Status::OK();
      RAGD_RETURN_IF_ERROR(model_->forward(batch, &hidden));
      size_t off = 0;
      for (size_t b = 0; b < batch.size(); ++b) {
        const size_t n = batch[b].ids.size();
        float* row = out->data() + rows[b] * d;
        engine::pool_hidden_states(hidden.data() + off * d, static_cast<int>(n), static_cast<int>(d), spec_.pooling,
                                   row);
        // Rows are always L2-normalised (the Embedder contract: inner-product search); a checkpoint
        // without a Normalize module is recorded as norm=0 in the identity.
        double norm = 0;
        for (size_t k = 0; k < d; ++k) norm += static_cast<double>(row[k]) * row[k];
        const float inv = norm > 0 ? static_cast<float>(1.0 / std::max(std::sqrt(norm), 1e-12)) : 0.0f;
        for (size_t k = 0; k < d; ++k) row[k] *= inv;
        off += n;
      }
      batch.clear();
      rows.clear();
      return Status::OK();
    };
    for (size_t t = 0; t < texts.size(); ++t) {
      std::string_view text = texts[t];
      if (!prefix.empty()) {
        buf = prefix;
        buf.append(text);
        text = buf;
      }
      batch.push_back(tok_->encode_single(text, max_len_));
      rows.push_back(t);
      if (batch.size() >= static_cast<size_t>(batch_)) RAGD_RETURN_IF_ERROR(flush());
    }
    return flush();
  }

  std::unique_ptr<engine::BertModel> model_;  // immutable; forward() is thread-safe
  std::unique_ptr<engine::WordPieceTokenizer> tok_;
  PoolingSpec spec_;
  int max_len_;
  std::string query_prefix_, document_prefix_;
  int batch_;
  std::string identity_;
};

}  // namespace

bool is_encoder_model_dir(const std::string& dir) {
  auto text = read_text_file((fs::path(dir) / "config.json").string(), "config");
  return text.ok() && engine::BertConfig::is_encoder_config(*text);
}

Result<std::unique_ptr<Embedder>> make_encoder_embedder(const EmbedderOptions& opts) {
  if (opts.model_dir.empty()) return Status::InvalidArgument("encoder embedder: no model directory given");
  const fs::path dir(opts.model_dir);
  RAGD_ASSIGN_OR_RETURN(auto model, engine::BertModel::load(opts.model_dir));
  RAGD_ASSIGN_OR_RETURN(auto tok, engine::WordPieceTokenizer::from_file_wordpiece((dir / "tokenizer.json").string()));
  if (tok->vocab_size() > model->config().vocab_size)
    return Status::InvalidArgument(fmt::format("{}: tokenizer has {} ids, the model's vocab_size is {}",
                                               (dir / "tokenizer.json").string(), tok->vocab_size(),
                                               model->config().vocab_size));
  PoolingSpec spec;
  if (opts.pooling.empty()) {
    RAGD_ASSIGN_OR_RETURN(spec, engine::read_sentence_pooling(opts.model_dir));
  } else {
    auto pooling = engine::parse_sentence_pooling(opts.pooling);
    if (!pooling.ok()) return pooling.status().with_context("embedder");
    spec.pooling = *pooling;
  }
  int max_len = model->config().max_tokens();
  if (spec.max_seq_length > 0) max_len = std::min(max_len, spec.max_seq_length);
  if (opts.max_tokens > 0) max_len = std::min(max_len, opts.max_tokens);
  if (max_len <= tok->special_tokens_single())
    return Status::InvalidArgument(fmt::format("encoder embedder: max tokens {} leaves no room for text", max_len));
  return std::unique_ptr<Embedder>(new EncoderEmbedder(std::move(model), std::move(tok), spec, max_len, opts));
}

}  // namespace ragd::retrieval
