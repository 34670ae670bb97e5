#include <cmath>
#include <mutex>

#include "ragd/engine/model.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {

namespace {

class ModelEmbedder final : public Embedder {
 public:
  ModelEmbedder(std::unique_ptr<engine::Model> model, std::shared_ptr<const engine::Tokenizer> tok, int max_tokens)
      : model_(std::move(model)), tok_(std::move(tok)), max_tokens_(max_tokens) {
    dim_ = model_->config().hidden_size;
    identity_ = "model/" + model_->fingerprint().to_hex() + "/d=" + std::to_string(dim_) +
                "/max=" + std::to_string(max_tokens_);
  }
  std::string_view name() const override { return "model"; }
  std::string identity() const override { return identity_; }
  int dim() const override { return dim_; }

  Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    const size_t d = static_cast<size_t>(dim_);
    out->assign(texts.size() * d, 0.0f);
    std::vector<float> h;
    for (size_t t = 0; t < texts.size(); ++t) {
      std::vector<int32_t> ids = tok_->encode(texts[t], /*add_bos=*/true, /*parse_special=*/false);
      if (ids.size() > static_cast<size_t>(max_tokens_)) ids.resize(static_cast<size_t>(max_tokens_));
      if (ids.empty()) continue;
      {
        std::lock_guard<std::mutex> lk(mu_);  // Model is single-threaded
        RAGD_RETURN_IF_ERROR(model_->embed(ids, &h));
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

 private:
  mutable std::mutex mu_;
  std::unique_ptr<engine::Model> model_;  // guarded by mu_ (embed)
  std::shared_ptr<const engine::Tokenizer> tok_;
  int max_tokens_;
  int dim_ = 0;
  std::string identity_;
};

}  // namespace

Result<std::unique_ptr<Embedder>> make_model_embedder(std::unique_ptr<engine::Model> model,
                                                      std::shared_ptr<const engine::Tokenizer> tokenizer,
                                                      int max_tokens) {
  if (!model) return Status::InvalidArgument("model embedder: no model");
  if (!tokenizer) return Status::InvalidArgument("model embedder: needs a tokenizer");
  if (max_tokens < 1) return Status::InvalidArgument("model embedder: max_tokens must be >= 1");
  if (model->config().hidden_size <= 0) return Status::InvalidArgument("model embedder: model has hidden_size <= 0");
  return std::unique_ptr<Embedder>(new ModelEmbedder(std::move(model), std::move(tokenizer), max_tokens));
}

Result<std::unique_ptr<Embedder>> make_embedder(const EmbedderOptions& opts,
                                                std::shared_ptr<const engine::Tokenizer> tokenizer) {
  if (opts.name == "hashing" || opts.name.empty()) {
    HashingEmbedderOptions h;
    h.dim = opts.dim;
    return make_hashing_embedder(h);
  }
  if (opts.name == "encoder") return make_encoder_embedder(opts);
  if (opts.name == "model") {
    if (opts.model_dir.empty()) return Status::InvalidArgument("embedder 'model': no model directory given");
    if (is_encoder_model_dir(opts.model_dir)) return make_encoder_embedder(opts);
    if (!tokenizer) return Status::InvalidArgument("embedder 'model': needs a tokenizer");
    engine::ModelOptions mo;
    mo.kv_pool_bytes = 16ull << 20;
    RAGD_ASSIGN_OR_RETURN(auto model, engine::Model::load(opts.model_dir, mo));
    return make_model_embedder(std::move(model), std::move(tokenizer), opts.max_tokens);
  }
  return Status::InvalidArgument("unknown embedder '" + opts.name + "' (known: hashing, model, encoder)");
}

}  // namespace ragd::retrieval
