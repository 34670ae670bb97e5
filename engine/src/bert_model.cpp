// BertModel (bert_model.h): config parsing, weight loading, the packed encoder forward pass.
#include "ragd/engine/bert_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>
#include <simdjson.h>

#include "ragd/kernels/attention.h"
#include "ragd/kernels/encoder_ops.h"
#include "ragd/kernels/gemm.h"

namespace ragd::engine {

namespace {

bool known_architecture(std::string_view a) {
  return a == "BertModel" || a == "BertForMaskedLM" || a == "BertForPreTraining" ||
         a == "BertForSequenceClassification" || a == "XLMRobertaModel" || a == "RobertaModel";
}

}  // namespace

// ---- config -----------------------------------------------------------------------------------

bool BertConfig::is_encoder_config(std::string_view json) {
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (p.parse(json.data(), json.size()).get(doc) != simdjson::SUCCESS) return false;
  std::string_view s;
  if (doc["architectures"].at(0).get_string().get(s) == simdjson::SUCCESS)
    return s.starts_with("Bert") || s.starts_with("XLMRoberta") || s.starts_with("Roberta");
  if (doc["model_type"].get_string().get(s) == simdjson::SUCCESS)
    return s == "bert" || s == "xlm-roberta" || s == "roberta";
  return false;
}

Result<BertConfig> BertConfig::from_json(std::string_view json, std::string_view src) {
  auto bad = [&](std::string_view what) { return Status::InvalidArgument(fmt::format("{}: {}", src, what)); };
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  if (auto err = p.parse(json.data(), json.size()).get(doc); err)
    return bad(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  BertConfig c;
  std::string_view s;
  if (doc["model_type"].get_string().get(s) == simdjson::SUCCESS) c.model_type = std::string(s);
  if (c.model_type != "bert" && c.model_type != "xlm-roberta" && c.model_type != "roberta")
    return bad(fmt::format("model_type '{}' is not a BERT-family encoder (bert, xlm-roberta, roberta)", c.model_type));
  if (doc["architectures"].at(0).get_string().get(s) == simdjson::SUCCESS) {
    c.architecture = std::string(s);
  } else {
    c.architecture = c.model_type == "bert" ? "BertModel" : c.model_type == "roberta" ? "RobertaModel" : "XLMRobertaModel";
  }
  if (!known_architecture(c.architecture))
    return bad(fmt::format("architecture '{}' is not supported (BertModel, BertForMaskedLM, BertForPreTraining, "
                           "BertForSequenceClassification, XLMRobertaModel, RobertaModel)",
                           c.architecture));
  auto get_int = [&](const char* name, int* out, bool required) -> Status {
    int64_t v = 0;
    if (doc[name].get_int64().get(v) != simdjson::SUCCESS) {
      if (required) return bad(fmt::format("field '{}' is missing or not an integer", name));
      return Status::OK();
    }
    if (v < 0 || v > (1 << 30)) return bad(fmt::format("field '{}' = {} is out of range", name, v));
    *out = static_cast<int>(v);
    return Status::OK();
  };
  RAGD_RETURN_IF_ERROR(get_int("vocab_size", &c.vocab_size, true));
  RAGD_RETURN_IF_ERROR(get_int("hidden_size", &c.hidden_size, true));
  RAGD_RETURN_IF_ERROR(get_int("num_hidden_layers", &c.num_hidden_layers, true));
  RAGD_RETURN_IF_ERROR(get_int("num_attention_heads", &c.num_attention_heads, true));
  RAGD_RETURN_IF_ERROR(get_int("intermediate_size", &c.intermediate_size, true));
  RAGD_RETURN_IF_ERROR(get_int("max_position_embeddings", &c.max_position_embeddings, true));
  RAGD_RETURN_IF_ERROR(get_int("type_vocab_size", &c.type_vocab_size, false));
  RAGD_RETURN_IF_ERROR(get_int("pad_token_id", &c.pad_token_id, false));
  double eps = 0;
  if (doc["layer_norm_eps"].get_double().get(eps) == simdjson::SUCCESS) c.layer_norm_eps = static_cast<float>(eps);
  if (doc["hidden_act"].get_string().get(s) == simdjson::SUCCESS) c.hidden_act = std::string(s);
  if (c.is_classifier()) {
    simdjson::dom::object labels;
    int64_t n = 0;
    if (doc["num_labels"].get_int64().get(n) == simdjson::SUCCESS) {
      c.num_labels = static_cast<int>(n);
    } else if (doc["id2label"].get_object().get(labels) == simdjson::SUCCESS) {
      c.num_labels = static_cast<int>(labels.size());
    } else {
      c.num_labels = 2;  // transformers' default
    }
  }
  if (Status st = c.validate(); !st.ok()) return bad(st.message());
  return c;
}

Result<BertConfig> BertConfig::from_json_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(fmt::format("{}: cannot open config file", path));
  std::stringstream ss;
  ss << in.rdbuf();
  return from_json(ss.str(), path);
}

Status BertConfig::validate() const {
  auto positive = [](const char* name, int v) -> Status {
    if (v <= 0) return Status::InvalidArgument(fmt::format("field '{}' must be a positive integer", name));
    return Status::OK();
  };
  RAGD_RETURN_IF_ERROR(positive("vocab_size", vocab_size));
  RAGD_RETURN_IF_ERROR(positive("hidden_size", hidden_size));
  RAGD_RETURN_IF_ERROR(positive("num_hidden_layers", num_hidden_layers));
  RAGD_RETURN_IF_ERROR(positive("num_attention_heads", num_attention_heads));
  RAGD_RETURN_IF_ERROR(positive("intermediate_size", intermediate_size));
  RAGD_RETURN_IF_ERROR(positive("max_position_embeddings", max_position_embeddings));
  RAGD_RETURN_IF_ERROR(positive("type_vocab_size", type_vocab_size));
  if (hidden_size % num_attention_heads != 0)
    return Status::InvalidArgument(fmt::format("hidden_size {} is not a multiple of num_attention_heads {}", hidden_size,
                                               num_attention_heads));
  if (hidden_act != "gelu" && hidden_act != "gelu_new" && hidden_act != "gelu_pytorch_tanh")
    return Status::InvalidArgument(
        fmt::format("hidden_act '{}' is not supported (gelu, gelu_new, gelu_pytorch_tanh)", hidden_act));
  if (!(layer_norm_eps > 0)) return Status::InvalidArgument("layer_norm_eps must be positive");
  if (max_tokens() <= 0) return Status::InvalidArgument("max_position_embeddings leaves no room for tokens");
  if (is_classifier() && num_labels <= 0) return Status::InvalidArgument("num_labels must be positive");
  return Status::OK();
}

std::string BertConfig::to_json() const {
  std::string out = fmt::format(
      "{{\n  \"architectures\": [\"{}\"],\n  \"model_type\": \"{}\",\n  \"vocab_size\": {},\n  \"hidden_size\": {},\n"
      "  \"num_hidden_layers\": {},\n  \"num_attention_heads\": {},\n  \"intermediate_size\": {},\n"
      "  \"max_position_embeddings\": {},\n  \"type_vocab_size\": {},\n  \"layer_norm_eps\": {:g},\n"
      "  \"hidden_act\": \"{}\",\n  \"pad_token_id\": {},\n  \"position_embedding_type\": \"absolute\",\n"
      "  \"torch_dtype\": \"float32\"",
      architecture, model_type, vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
      max_position_embeddings, type_vocab_size, layer_norm_eps, hidden_act, pad_token_id);
  if (is_classifier()) {
    out += fmt::format(",\n  \"num_labels\": {},\n  \"id2label\": {{", num_labels);
    for (int i = 0; i < num_labels; ++i) out += fmt::format("{}\"{}\": \"LABEL_{}\"", i ? ", " : "", i, i);
    out += "}";
  }
  return out + "\n}\n";
}

Hash128 BertConfig::shape_hash() const {
  Hasher128 h;
  h.str("ragd.bert_config.v1").str(architecture).str(model_type).str(hidden_act);
  for (int v : {vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size,
                max_position_embeddings, type_vocab_size, pad_token_id, num_labels})
    h.u64(static_cast<uint64_t>(static_cast<int64_t>(v)));
  h.u64(std::bit_cast<uint32_t>(layer_norm_eps));
  return h.digest();
}

std::vector<std::string_view> bert_preset_names() { return {"bert-tiny", "bge-small", "bge-base"}; }

Result<BertConfig> bert_preset_config(std::string_view name) {
  BertConfig c;
  c.vocab_size = 30522, c.max_position_embeddings = 512, c.num_hidden_layers = 12, c.num_attention_heads = 12;
  if (name == "bert-tiny") {
    c.vocab_size = 4096, c.max_position_embeddings = 128, c.num_hidden_layers = 2, c.num_attention_heads = 4;
    c.hidden_size = 64, c.intermediate_size = 256;
  } else if (name == "bge-small") {
    c.hidden_size = 384, c.intermediate_size = 1536;
  } else if (name == "bge-base") {
    c.hidden_size = 768, c.intermediate_size = 3072;
  } else {
    return Status::InvalidArgument(fmt::format("unknown encoder preset '{}' (bert-tiny, bge-small, bge-base)", name));
  }
  return c;
}

// ---- weights ----------------------------------------------------------------------------------

struct BertLayer {
  std::vector<float> wq, bq, wk, bk, wv, bv, wo, bo, ln1_w, ln1_b, w1, b1, w2, b2, ln2_w, ln2_b;
};

struct BertModel::Impl {
  BertConfig cfg;
  Hash128 fingerprint;
  std::vector<float> word, pos, type, ln_w, ln_b;
  std::vector<BertLayer> layers;
  std::vector<float> pool_w, pool_b, cls_w, cls_b;  // classification head (cfg.num_labels > 0)
  kernels::GeluKind gelu = kernels::GeluKind::kErf;
};

namespace {

class Loader {
 public:
  Loader(const WeightStore& w, std::string_view src) : w_(w), src_(src) {
    for (const char* p : {"", "bert.", "roberta."})
      if (w_.contains(std::string(p) + "embeddings.word_embeddings.weight")) {
        prefix_ = p;
        break;
      }
  }
  // Reads `name` (prefixed when `prefixed`) as f32, checking its shape.
  Status get(const std::string& name, std::vector<int64_t> shape, std::vector<float>* out, bool prefixed = true) {
    const std::string full = (prefixed ? prefix_ : std::string()) + name;
    if (!w_.contains(full)) {
      return Status::InvalidArgument(fmt::format("{}: tensor '{}' is missing{}", src_, full,
                                                 prefixed && prefix_.empty() ? " (also looked for 'bert.' / 'roberta.' names)" : ""));
    }
    RAGD_ASSIGN_OR_RETURN(TensorView t, w_.get(full));
    if (t.shape != shape) {
      auto dims = [](const std::vector<int64_t>& s) {
        std::string o = "[";
        for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
        return o + "]";
      };
      return Status::InvalidArgument(fmt::format("{}: tensor '{}' has shape {}, config.json implies {}", src_, full,
                                                 dims(t.shape), dims(shape)));
    }
    out->resize(static_cast<size_t>(t.numel()));
    t.to_f32(out->data());
    return Status::OK();
  }

 private:
  const WeightStore& w_;
  std::string src_;
  std::string prefix_;
};

}  // namespace

BertModel::BertModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BertModel::~BertModel() = default;
const BertConfig& BertModel::config() const { return impl_->cfg; }
Hash128 BertModel::fingerprint() const { return impl_->fingerprint; }

Result<std::unique_ptr<BertModel>> BertModel::create(const BertConfig& cfg, const WeightStore& weights,
                                                     std::string_view source) {
  if (Status st = cfg.validate(); !st.ok()) return Status::InvalidArgument(fmt::format("{}: {}", source, st.message()));
  auto m = std::make_unique<Impl>();
  m->cfg = cfg;
  m->gelu = cfg.hidden_act == "gelu" ? kernels::GeluKind::kErf : kernels::GeluKind::kTanh;
  Loader ld(weights, source);
  const int64_t h = cfg.hidden_size, im = cfg.intermediate_size;
  RAGD_RETURN_IF_ERROR(ld.get("embeddings.word_embeddings.weight", {cfg.vocab_size, h}, &m->word));
  RAGD_RETURN_IF_ERROR(ld.get("embeddings.position_embeddings.weight", {cfg.max_position_embeddings, h}, &m->pos));
  RAGD_RETURN_IF_ERROR(ld.get("embeddings.token_type_embeddings.weight", {cfg.type_vocab_size, h}, &m->type));
  RAGD_RETURN_IF_ERROR(ld.get("embeddings.LayerNorm.weight", {h}, &m->ln_w));
  RAGD_RETURN_IF_ERROR(ld.get("embeddings.LayerNorm.bias", {h}, &m->ln_b));
  m->layers.resize(static_cast<size_t>(cfg.num_hidden_layers));
  for (int i = 0; i < cfg.num_hidden_layers; ++i) {
    BertLayer& L = m->layers[i];
    const std::string p = fmt::format("encoder.layer.{}.", i);
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.query.weight", {h, h}, &L.wq));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.query.bias", {h}, &L.bq));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.key.weight", {h, h}, &L.wk));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.key.bias", {h}, &L.bk));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.value.weight", {h, h}, &L.wv));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.self.value.bias", {h}, &L.bv));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.output.dense.weight", {h, h}, &L.wo));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.output.dense.bias", {h}, &L.bo));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.output.LayerNorm.weight", {h}, &L.ln1_w));
    RAGD_RETURN_IF_ERROR(ld.get(p + "attention.output.LayerNorm.bias", {h}, &L.ln1_b));
    RAGD_RETURN_IF_ERROR(ld.get(p + "intermediate.dense.weight", {im, h}, &L.w1));
    RAGD_RETURN_IF_ERROR(ld.get(p + "intermediate.dense.bias", {im}, &L.b1));
    RAGD_RETURN_IF_ERROR(ld.get(p + "output.dense.weight", {h, im}, &L.w2));
    RAGD_RETURN_IF_ERROR(ld.get(p + "output.dense.bias", {h}, &L.b2));
    RAGD_RETURN_IF_ERROR(ld.get(p + "output.LayerNorm.weight", {h}, &L.ln2_w));
    RAGD_RETURN_IF_ERROR(ld.get(p + "output.LayerNorm.bias", {h}, &L.ln2_b));
  }
  if (cfg.is_classifier()) {
    if (cfg.model_type != "bert")
      return Status::InvalidArgument(fmt::format("{}: sequence classification is supported for BERT heads only", source));
    RAGD_RETURN_IF_ERROR(ld.get("pooler.dense.weight", {h, h}, &m->pool_w));
    RAGD_RETURN_IF_ERROR(ld.get("pooler.dense.bias", {h}, &m->pool_b));
    RAGD_RETURN_IF_ERROR(ld.get("classifier.weight", {cfg.num_labels, h}, &m->cls_w, false));
    RAGD_RETURN_IF_ERROR(ld.get("classifier.bias", {cfg.num_labels}, &m->cls_b, false));
  }
  Hasher128 fh;
  const Hash128 sh = cfg.shape_hash(), wh = weights.checksum();
  fh.str("ragd.bert_fingerprint.v1").u64(sh.hi).u64(sh.lo).u64(wh.hi).u64(wh.lo);
  m->fingerprint = fh.digest();
  return std::unique_ptr<BertModel>(new BertModel(std::move(m)));
}

Result<std::unique_ptr<BertModel>> BertModel::load(const std::string& dir) {
  const std::string cfg_path = (std::filesystem::path(dir) / "config.json").string();
  RAGD_ASSIGN_OR_RETURN(BertConfig cfg, BertConfig::from_json_file(cfg_path));
  RAGD_ASSIGN_OR_RETURN(auto store, WeightStore::open_dir(dir));
  const std::filesystem::path single = std::filesystem::path(dir) / "model.safetensors";
  const std::string src = std::filesystem::exists(single) ? single.string() : dir + " (safetensors shards)";
  return create(cfg, *store, src);
}

// ---- forward ----------------------------------------------------------------------------------

namespace {

// y[m, n] = x[m, k] · wᵀ + b (w: [n, k]); with accumulate, y += (y holds a residual).
void dense(const float* x, int m, int k, const std::vector<float>& w, const std::vector<float>& b, int n, float* y,
           bool accumulate) {
  kernels::gemm(false, true, m, n, k, 1.0f, x, k, w.data(), k, accumulate ? 1.0f : 0.0f, y, n);
  kernels::add_bias(m, n, b.data(), y, n);
}

}  // namespace

Status BertModel::forward(std::span<const EncoderInput> inputs, std::vector<float>* hidden) const {
  const Impl& m = *impl_;
  const BertConfig& c = m.cfg;
  const int h = c.hidden_size, nh = c.num_attention_heads, hd = c.head_dim(), im = c.intermediate_size;
  size_t total = 0;
  for (size_t s = 0; s < inputs.size(); ++s) {
    const auto& in = inputs[s];
    if (in.ids.empty()) return Status::InvalidArgument(fmt::format("encoder input {} is empty", s));
    if (in.type_ids.size() != in.ids.size())
      return Status::InvalidArgument(fmt::format("encoder input {}: {} type ids for {} ids", s, in.type_ids.size(),
                                                 in.ids.size()));
    if (in.ids.size() > static_cast<size_t>(c.max_tokens()))
      return Status::InvalidArgument(fmt::format("encoder input {} has {} tokens, more than the model's {}", s,
                                                 in.ids.size(), c.max_tokens()));
    for (size_t j = 0; j < in.ids.size(); ++j) {
      if (in.ids[j] < 0 || in.ids[j] >= c.vocab_size)
        return Status::InvalidArgument(fmt::format("encoder input {}: token id {} outside the vocabulary ({})", s,
                                                   in.ids[j], c.vocab_size));
      if (in.type_ids[j] < 0 || in.type_ids[j] >= c.type_vocab_size)
        return Status::InvalidArgument(fmt::format("encoder input {}: token type {} outside type_vocab_size {}", s,
                                                   in.type_ids[j], c.type_vocab_size));
    }
    total += in.ids.size();
  }
  const int T = static_cast<int>(total);
  hidden->assign(total * h, 0.0f);
  if (T == 0) return Status::OK();
  float* x = hidden->data();
  // Embeddings.
  {
    size_t row = 0;
    const int off = c.position_offset();
    for (const auto& in : inputs)
      for (size_t j = 0; j < in.ids.size(); ++j, ++row) {
        float* xr = x + row * h;
        const float* we = m.word.data() + static_cast<size_t>(in.ids[j]) * h;
        const float* pe = m.pos.data() + static_cast<size_t>(off + static_cast<int>(j)) * h;
        const float* te = m.type.data() + static_cast<size_t>(in.type_ids[j]) * h;
        for (int d = 0; d < h; ++d) xr[d] = we[d] + pe[d] + te[d];
      }
    kernels::layer_norm(x, T, h, h, m.ln_w.data(), m.ln_b.data(), c.layer_norm_eps, x, h);
  }
  std::vector<float> q(total * h), k(total * h), v(total * h), ctx(total * h), a(total * h), inter(total * im);
  size_t max_len = 0;
  for (const auto& in : inputs) max_len = std::max(max_len, in.ids.size());
  std::vector<float> lse(max_len * nh);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t block0 = 0;
  for (const BertLayer& L : m.layers) {
    dense(x, T, h, L.wq, L.bq, h, q.data(), false);
    dense(x, T, h, L.wk, L.bk, h, k.data(), false);
    dense(x, T, h, L.wv, L.bv, h, v.data(), false);
    size_t off = 0;
    for (const auto& in : inputs) {
      const int n = static_cast<int>(in.ids.size());
      kernels::PagedKv kv;
      kv.k = k.data() + off * h;
      kv.v = v.data() + off * h;
      kv.block_table = &block0;
      kv.block_size = n;  // the sequence is one block: [1, n, heads, head_dim]
      kv.num_kv_heads = nh;
      kv.head_dim = hd;
      kv.kv_len = n;
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill(q.data() + off * h, n, nh, kv, scale, /*causal=*/false, 0,
                                                      ctx.data() + off * h, lse.data()));
      off += static_cast<size_t>(n);
    }
    std::copy(x, x + total * h, a.begin());
    dense(ctx.data(), T, h, L.wo, L.bo, h, a.data(), /*accumulate=*/true);
    kernels::layer_norm(a.data(), T, h, h, L.ln1_w.data(), L.ln1_b.data(), c.layer_norm_eps, a.data(), h);
    kernels::gemm(false, true, T, im, h, 1.0f, a.data(), h, L.w1.data(), h, 0.0f, inter.data(), im);
    kernels::bias_gelu(T, im, L.b1.data(), inter.data(), im, m.gelu);
    std::copy(a.begin(), a.end(), x);
    dense(inter.data(), T, im, L.w2, L.b2, h, x, /*accumulate=*/true);
    kernels::layer_norm(x, T, h, h, L.ln2_w.data(), L.ln2_b.data(), c.layer_norm_eps, x, h);
  }
  return Status::OK();
}

Status BertModel::classify(std::span<const EncoderInput> inputs, std::vector<float>* logits) const {
  const Impl& m = *impl_;
  const BertConfig& c = m.cfg;
  if (!c.is_classifier()) return Status::FailedPrecondition("encoder has no sequence-classification head");
  std::vector<float> hid;
  RAGD_RETURN_IF_ERROR(forward(inputs, &hid));
  const int h = c.hidden_size, n = static_cast<int>(inputs.size());
  std::vector<float> cls(static_cast<size_t>(n) * h), pooled(static_cast<size_t>(n) * h);
  size_t row = 0;
  for (int s = 0; s < n; ++s) {
    std::copy_n(hid.data() + row * h, h, cls.data() + static_cast<size_t>(s) * h);
    row += inputs[s].ids.size();
  }
  dense(cls.data(), n, h, m.pool_w, m.pool_b, h, pooled.data(), false);
  for (float& p : pooled) p = std::tanh(p);
  logits->assign(static_cast<size_t>(n) * c.num_labels, 0.0f);
  dense(pooled.data(), n, h, m.cls_w, m.cls_b, c.num_labels, logits->data(), false);
  return Status::OK();
}

// ---- random weights ---------------------------------------------------------------------------

std::map<std::string, OwnedTensor> random_bert_tensors(const BertConfig& c, uint64_t seed) {
  std::map<std::string, OwnedTensor> w;
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float half, float offset) {
    size_t n = 1;
    for (auto d : shape) n *= static_cast<size_t>(d);
    OwnedTensor t;
    t.shape = std::move(shape);
    t.bytes.resize(n * sizeof(float));
    auto* p = reinterpret_cast<float*>(t.bytes.data());
    uint64_t s = (xxh3_64(name.data(), name.size()) ^ (seed * 0xD1B54A32D192ED03ULL)) | 1;
    for (size_t i = 0; i < n; ++i) {
      s ^= s << 13, s ^= s >> 7, s ^= s << 17;
      const float u = static_cast<float>(s >> 40) / static_cast<float>(1 << 24) - 0.5f;  // [-0.5, 0.5)
      p[i] = offset + 2.0f * half * u;
    }
    w.emplace(name, std::move(t));
  };
  auto proj = [](int64_t fan_in) { return std::sqrt(3.0f / static_cast<float>(fan_in)); };  // std 1/sqrt(fan_in)
  const float unit = std::sqrt(3.0f);  // std 1
  const int64_t h = c.hidden_size, im = c.intermediate_size;
  add("embeddings.word_embeddings.weight", {c.vocab_size, h}, unit, 0.0f);
  add("embeddings.position_embeddings.weight", {c.max_position_embeddings, h}, unit, 0.0f);
  add("embeddings.token_type_embeddings.weight", {c.type_vocab_size, h}, unit, 0.0f);
  add("embeddings.LayerNorm.weight", {h}, 0.05f, 1.0f);
  add("embeddings.LayerNorm.bias", {h}, 0.02f, 0.0f);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "encoder.layer." + std::to_string(i) + ".";
    for (const char* n : {"attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"}) {
      add(p + n + ".weight", {h, h}, proj(h), 0.0f);
      add(p + n + ".bias", {h}, 0.02f, 0.0f);
    }
    add(p + "intermediate.dense.weight", {im, h}, proj(h), 0.0f);
    add(p + "intermediate.dense.bias", {im}, 0.02f, 0.0f);
    add(p + "output.dense.weight", {h, im}, proj(im), 0.0f);
    add(p + "output.dense.bias", {h}, 0.02f, 0.0f);
    for (const char* n : {"attention.output.LayerNorm", "output.LayerNorm"}) {
      add(p + n + ".weight", {h}, 0.05f, 1.0f);
      add(p + n + ".bias", {h}, 0.02f, 0.0f);
    }
  }
  if (c.num_labels > 0) {
    add("pooler.dense.weight", {h, h}, proj(h), 0.0f);
    add("pooler.dense.bias", {h}, 0.02f, 0.0f);
    add("classifier.weight", {c.num_labels, h}, proj(h), 0.0f);
    add("classifier.bias", {c.num_labels}, 0.02f, 0.0f);
  }
  return w;
}

}  // namespace ragd::engine
