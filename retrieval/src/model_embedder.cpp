// The decoder ("model") embedder (embedder.h): a Llama-family checkpoint loaded by the engine, its
// final hidden states pooled as the checkpoint's sentence-transformers files say (mean when it has
// none), L2-normalised; and make_embedder, which picks the embedder by name.
#include <algorithm>
#include <cmath>
#include <mutex>

#include <fmt/format.h>

#include "ragd/common/hash.h"
#include "ragd/engine/model.h"
#include "ragd/engine/sentence_pooling.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {

namespace {

using engine::SentencePooling;

class ModelEmbedder final : public Embedder {
 public:
  ModelEmbedder(std::unique_ptr<engine::Model> model, std::shared_ptr<const engine::Tokenizer> tok,
                const ModelEmbedderOptions& o, int32_t eos)
      : model_(std::move(model)), tok_(std::move(tok)), o_(o), eos_(eos) {
    dim_ = model_->config().hidden_size;
    identity_ = "model/" + model_->fingerprint().to_hex() + "/d=" + std::to_string(dim_) +
                "/max=" + std::to_string(o_.max_tokens);
    // Corpora built before pooling and prefixes were options keep their identity (mean, none).
    if (o_.pooling != SentencePooling::kMean || eos_ >= 0 || !o_.query_prefix.empty() || !o_.document_prefix.empty()) {
      Hasher128 ph;
      ph.str(o_.query_prefix).str(o_.document_prefix);
      identity_ += fmt::format("/pool={}/eos={}/prefix={}", engine::sentence_pooling_name(o_.pooling), eos_ >= 0 ? 1 : 0,
                               o_.query_prefix.empty() && o_.document_prefix.empty() ? std::string("none")
                                                                                     : ph.digest().to_hex().substr(0, 16));
    }
  }
  std::string_view name() const override { return "model"; }
  std::string identity() const override { return identity_; }
  int dim() const override { return dim_; }

  Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    return run(texts, o_.document_prefix, out);
  }
  Status embed_queries(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    return run(texts, o_.query_prefix, out);
  }

 private:
  Status run(std::span<const std::string_view> texts, const std::string& prefix, std::vector<float>* out) const {
    const size_t d = static_cast<size_t>(dim_);
    out->assign(texts.size() * d, 0.0f);
    std::vector<float> h;
    std::string buf;
    const size_t keep = static_cast<size_t>(o_.max_tokens) - (eos_ >= 0 ? 1 : 0);
    for (size_t t = 0; t < texts.size(); ++t) {
      std::string_view text = texts[t];
      if (!prefix.empty()) {
        buf = prefix;
        buf.append(text);
        text = buf;
      }
      std::vector<int32_t> ids = tok_->encode(text, /*add_bos=*/true, /*parse_special=*/false);
      if (ids.size() > keep) ids.resize(keep);
      if (eos_ >= 0) ids.push_back(eos_);  // last-token pooling reads the state of the appended EOS
      if (ids.empty()) continue;
      {
        std::lock_guard<std::mutex> lk(mu_);  // Model is single-threaded
        RAGD_RETURN_IF_ERROR(model_->embed(ids, &h, o_.pooling));
      }
      if (h.size() != d)
        return Status::Internal("model embedder: embed() returned " + std::to_string(h.size()) +
                                " values, expected hidden_size " + std::to_string(d));
      double norm = 0;
      for (float v : h) norm += static_cast<double>(v) * v;
      float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
      float* row = out->data() + t * d;
      for (size_t k = 0; k < d; ++k) row[k] = h[k] * inv;
    }
    return Status::OK();
  }

  mutable std::mutex mu_;
  std::unique_ptr<engine::Model> model_;  // guarded by mu_ (embed)
  std::shared_ptr<const engine::Tokenizer> tok_;
  ModelEmbedderOptions o_;
  int32_t eos_ = -1;  // >= 0: appended to every input
  int dim_ = 0;
  std::string identity_;
};

}  // namespace

Result<std::unique_ptr<Embedder>> make_model_embedder(std::unique_ptr<engine::Model> model,
                                                      std::shared_ptr<const engine::Tokenizer> tokenizer,
                                                      const ModelEmbedderOptions& opts) {
  if (!model) return Status::InvalidArgument("model embedder: no model");
  if (!tokenizer) return Status::InvalidArgument("model embedder: needs a tokenizer");
  if (opts.max_tokens < 2) return Status::InvalidArgument("model embedder: max_tokens must be >= 2");
  if (model->config().hidden_size <= 0) return Status::InvalidArgument("model embedder: model has hidden_size <= 0");
  int32_t eos = -1;
  if (opts.pooling == SentencePooling::kLastToken) {
    const std::vector<int32_t> e = tokenizer->eos_ids();
    if (e.empty())
      return Status::InvalidArgument("model embedder: last-token pooling needs an end-of-text token, the tokenizer has none");
    eos = e.front();
  }
  return std::unique_ptr<Embedder>(new ModelEmbedder(std::move(model), std::move(tokenizer), opts, eos));
}

Result<std::unique_ptr<Embedder>> make_embedder(const EmbedderOptions& opts,
                                                std::shared_ptr<const engine::Tokenizer> tokenizer) {
  if (opts.name == "hashing" || opts.name.empty()) {
    HashingEmbedderOptions h;
    h.dim = opts.dim;
    return make_hashing_embedder(h);
  }
  if (opts.name == "encoder") return make_encoder_embedder(opts);
  if (opts.name == "termvec") return make_termvec_embedder(opts.model_dir);
  if (opts.name == "model") {
    if (opts.model_dir.empty()) return Status::InvalidArgument("embedder 'model': no model directory given");
    if (is_termvec_model_dir(opts.model_dir)) return make_termvec_embedder(opts.model_dir);
    if (is_encoder_model_dir(opts.model_dir)) return make_encoder_embedder(opts);
    if (!tokenizer) return Status::InvalidArgument("embedder 'model': needs a tokenizer");
    ModelEmbedderOptions mo;
    mo.max_tokens = opts.max_tokens;
    mo.query_prefix = opts.query_prefix;
    mo.document_prefix = opts.document_prefix;
    if (!opts.pooling.empty()) {
      auto p = engine::parse_sentence_pooling(opts.pooling);
      if (!p.ok()) return p.status().with_context("embedder");
      mo.pooling = *p;
    } else if (engine::has_sentence_pooling(opts.model_dir)) {
      RAGD_ASSIGN_OR_RETURN(engine::PoolingSpec spec, engine::read_sentence_pooling(opts.model_dir));
      mo.pooling = spec.pooling;
      if (spec.max_seq_length > 0) mo.max_tokens = std::min(mo.max_tokens, spec.max_seq_length);
    }
    engine::ModelOptions eo;
    eo.kv_pool_bytes = 16ull << 20;
    RAGD_ASSIGN_OR_RETURN(auto model, engine::Model::load(opts.model_dir, eo));
    return make_model_embedder(std::move(model), std::move(tokenizer), mo);
  }
  return Status::InvalidArgument("unknown embedder '" + opts.name + "' (known: hashing, termvec, model, encoder)");
}

}  // namespace ragd::retrieval
