// Test fixtures for the runtime: tiny random Llama-family models held in an in-memory WeightStore,
// and an independent naive double-precision reference forward pass (its own matmul, RMSNorm, RoPE
// and attention loops; no engine or kernel code).
#pragma once

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"

namespace ragd::engine::testing {

enum class Variant { kLlama, kQwen2Bias, kTied, kLlama3Rope, kBf16, kLinearRope };

inline ModelConfig tiny_config(Variant v) {
  ModelConfig c;
  c.architecture = v == Variant::kQwen2Bias ? Architecture::kQwen2 : Architecture::kLlama;
  c.hidden_size = 64;
  c.intermediate_size = 96;
  c.num_hidden_layers = 2;
  c.num_attention_heads = 4;
  c.num_key_value_heads = 2;
  c.head_dim = 16;
  c.vocab_size = 97;
  c.max_position_embeddings = 4096;
  c.rms_norm_eps = 1e-5f;
  c.rope_theta = 10000.0f;
  c.attention_bias = v == Variant::kQwen2Bias;
  c.tie_word_embeddings = v == Variant::kTied || v == Variant::kQwen2Bias;
  if (v == Variant::kLlama3Rope) {
    // head_dim 16, theta 1e4: wavelengths 6.3 .. 19869; original 256 puts one frequency in each of
    // the unchanged / smoothed / scaled regimes.
    c.rope_scaling.type = RopeScaling::Type::kLlama3;
    c.rope_scaling.factor = 8.0f;
    c.rope_scaling.low_freq_factor = 1.0f;
    c.rope_scaling.high_freq_factor = 4.0f;
    c.rope_scaling.original_max_position_embeddings = 256;
  }
  if (v == Variant::kLinearRope) {
    c.rope_scaling.type = RopeScaling::Type::kLinear;
    c.rope_scaling.factor = 4.0f;
  }
  return c;
}

inline uint16_t to_bf16_bits(float f) {  // round to nearest even (test-local)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7FFF + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}

// Tensors as the engine sees them (f32 or bf16 bytes) plus the float values for the reference.
struct TinyWeights {
  std::map<std::string, OwnedTensor> tensors;
  std::map<std::string, std::vector<double>> values;  // exactly what the stored bytes decode to
};

inline TinyWeights tiny_weights(const ModelConfig& c, uint32_t seed, bool bf16) {
  TinyWeights w;
  std::mt19937 rng(seed);
  auto add = [&](const std::string& name, std::vector<int64_t> shape, float lo, float hi) {
    size_t n = 1;
    for (auto d : shape) n *= static_cast<size_t>(d);
    std::uniform_real_distribution<float> dist(lo, hi);
    OwnedTensor t;
    t.dtype = bf16 ? DType::kBF16 : DType::kF32;
    t.shape = shape;
    std::vector<double> vals(n);
    if (bf16) {
      t.bytes.resize(2 * n);
      for (size_t i = 0; i < n; ++i) {
        const uint16_t b = to_bf16_bits(dist(rng));
        std::memcpy(t.bytes.data() + 2 * i, &b, 2);
        const uint32_t u = static_cast<uint32_t>(b) << 16;
        float f;
        std::memcpy(&f, &u, 4);
        vals[i] = f;
      }
    } else {
      t.bytes.resize(4 * n);
      for (size_t i = 0; i < n; ++i) {
        const float f = dist(rng);
        std::memcpy(t.bytes.data() + 4 * i, &f, 4);
        vals[i] = f;
      }
    }
    w.tensors[name] = std::move(t);
    w.values[name] = std::move(vals);
  };
  const int64_t h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), im = c.intermediate_size, v = c.vocab_size;
  add("model.embed_tokens.weight", {v, h}, -1.0f, 1.0f);
  add("model.norm.weight", {h}, 0.8f, 1.2f);
  if (!c.tie_word_embeddings) add("lm_head.weight", {v, h}, -0.2f, 0.2f);
  for (int i = 0; i < c.num_hidden_layers; ++i) {
    const std::string p = "model.layers." + std::to_string(i) + ".";
    add(p + "input_layernorm.weight", {h}, 0.8f, 1.2f);
    add(p + "post_attention_layernorm.weight", {h}, 0.8f, 1.2f);
    add(p + "self_attn.q_proj.weight", {q, h}, -0.25f, 0.25f);
    add(p + "self_attn.k_proj.weight", {kv, h}, -0.25f, 0.25f);
    add(p + "self_attn.v_proj.weight", {kv, h}, -0.25f, 0.25f);
    add(p + "self_attn.o_proj.weight", {h, q}, -0.15f, 0.15f);
    if (c.attention_bias) {
      add(p + "self_attn.q_proj.bias", {q}, -0.5f, 0.5f);
      add(p + "self_attn.k_proj.bias", {kv}, -0.5f, 0.5f);
      add(p + "self_attn.v_proj.bias", {kv}, -0.5f, 0.5f);
    }
    add(p + "mlp.gate_proj.weight", {im, h}, -0.2f, 0.2f);
    add(p + "mlp.up_proj.weight", {im, h}, -0.2f, 0.2f);
    add(p + "mlp.down_proj.weight", {h, im}, -0.15f, 0.15f);
  }
  return w;
}


// Naive reference forward over a whole token sequence, in double.
class Reference {
 public:
  Reference(const ModelConfig& c, const TinyWeights& w) : c_(c), w_(w) {}

  // logits: [n, vocab] for every position; hidden: [n, hidden] final-normed states.
  void run(const std::vector<int32_t>& tokens, std::vector<std::vector<double>>* logits,
           std::vector<std::vector<double>>* hidden = nullptr) const {
    const int n = static_cast<int>(tokens.size()), h = c_.hidden_size, hd = c_.head_dim, nh = c_.num_attention_heads,
              nkv = c_.num_key_value_heads, im = c_.intermediate_size;
    const auto& emb = W("model.embed_tokens.weight");
    std::vector<std::vector<double>> x(n, std::vector<double>(h));
    for (int t = 0; t < n; ++t)
      for (int i = 0; i < h; ++i) x[t][i] = emb[static_cast<size_t>(tokens[t]) * h + i];
    const auto freqs = inv_freq();
    for (int l = 0; l < c_.num_hidden_layers; ++l) {
      const std::string p = "model.layers." + std::to_string(l) + ".";
      std::vector<std::vector<double>> q(n), k(n), v(n), att(n, std::vector<double>(nh * hd, 0.0));
      for (int t = 0; t < n; ++t) {
        auto hn = rmsnorm(x[t], W(p + "input_layernorm.weight"));
        q[t] = matvec(W(p + "self_attn.q_proj.weight"), hn, nh * hd);
        k[t] = matvec(W(p + "self_attn.k_proj.weight"), hn, nkv * hd);
        v[t] = matvec(W(p + "self_attn.v_proj.weight"), hn, nkv * hd);
        if (c_.attention_bias) {
          add_to(q[t], W(p + "self_attn.q_proj.bias"));
          add_to(k[t], W(p + "self_attn.k_proj.bias"));
          add_to(v[t], W(p + "self_attn.v_proj.bias"));
        }
        rope(q[t], nh, t, freqs);
        rope(k[t], nkv, t, freqs);
      }
      for (int t = 0; t < n; ++t) {
        for (int hh = 0; hh < nh; ++hh) {
          const int g = hh / (nh / nkv);
          std::vector<double> s(t + 1);
          double m = -std::numeric_limits<double>::infinity();
          for (int j = 0; j <= t; ++j) {
            double acc = 0.0;
            for (int d = 0; d < hd; ++d) acc += q[t][hh * hd + d] * k[j][g * hd + d];
            s[j] = acc / std::sqrt(static_cast<double>(hd));
            m = std::max(m, s[j]);
          }
          double sum = 0.0;
          for (auto& e : s) sum += (e = std::exp(e - m));
          for (int j = 0; j <= t; ++j)
            for (int d = 0; d < hd; ++d) att[t][hh * hd + d] += s[j] / sum * v[j][g * hd + d];
        }
      }
      for (int t = 0; t < n; ++t) {
        add_to(x[t], matvec(W(p + "self_attn.o_proj.weight"), att[t], h));
        auto hn = rmsnorm(x[t], W(p + "post_attention_layernorm.weight"));
        auto g = matvec(W(p + "mlp.gate_proj.weight"), hn, im);
        auto u = matvec(W(p + "mlp.up_proj.weight"), hn, im);
        for (int i = 0; i < im; ++i) g[i] = g[i] / (1.0 + std::exp(-g[i])) * u[i];
        add_to(x[t], matvec(W(p + "mlp.down_proj.weight"), g, h));
      }
    }
    const auto& head = c_.tie_word_embeddings ? emb : W("lm_head.weight");
    logits->assign(n, {});
    if (hidden) hidden->assign(n, {});
    for (int t = 0; t < n; ++t) {
      auto xn = rmsnorm(x[t], W("model.norm.weight"));
      (*logits)[t] = matvec(head, xn, c_.vocab_size);
      if (hidden) (*hidden)[t] = xn;
    }
  }

 private:
  const std::vector<double>& W(const std::string& name) const { return w_.values.at(name); }

  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<double>& w) const {
    double ss = 0.0;
    for (double e : x) ss += e * e;
    const double inv = 1.0 / std::sqrt(ss / x.size() + c_.rms_norm_eps);
    std::vector<double> y(x.size());
    for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * inv * w[i];
    return y;
  }
  static std::vector<double> matvec(const std::vector<double>& w, const std::vector<double>& x, int out) {
    std::vector<double> y(out, 0.0);
    for (int o = 0; o < out; ++o)
      for (size_t i = 0; i < x.size(); ++i) y[o] += w[o * x.size() + i] * x[i];
    return y;
  }
  static void add_to(std::vector<double>& a, const std::vector<double>& b) {
    for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  }
  std::vector<double> inv_freq() const {
    const int half = c_.head_dim / 2;
    std::vector<double> f(half);
    const RopeScaling& s = c_.rope_scaling;
    for (int i = 0; i < half; ++i) {
      double b = 1.0 / std::pow(static_cast<double>(c_.rope_theta), 2.0 * i / c_.head_dim);
      if (s.type == RopeScaling::Type::kLinear) b /= s.factor;
      if (s.type == RopeScaling::Type::kLlama3) {
        const double wl = 2 * std::numbers::pi / b, old = s.original_max_position_embeddings;
        if (wl > old / s.low_freq_factor) {
          b /= s.factor;
        } else if (wl >= old / s.high_freq_factor) {
          const double sm = (old / wl - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
          b = (1 - sm) * b / s.factor + sm * b;
        }
      }
      f[i] = b;
    }
    return f;
  }
  void rope(std::vector<double>& x, int heads, int pos, const std::vector<double>& f) const {
    const int hd = c_.head_dim, half = hd / 2;
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < half; ++i) {
        const double a = pos * f[i], x1 = x[h * hd + i], x2 = x[h * hd + half + i];
        x[h * hd + i] = x1 * std::cos(a) - x2 * std::sin(a);
        x[h * hd + half + i] = x2 * std::cos(a) + x1 * std::sin(a);
      }
    }
  }

  ModelConfig c_;
  const TinyWeights& w_;
};

}  // namespace ragd::engine::testing
