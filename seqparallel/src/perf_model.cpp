#include "ragd/seqparallel/perf_model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include <fmt/format.h>
#include <simdjson.h>

#include "ragd/common/json_writer.h"
#include "ragd/engine/layer_hook.h"
#include "ragd/kernels/threads.h"

namespace ragd::seqparallel {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Replaces every layer's attention by zeros: what is left of a forward is the dense part.
class NoAttention final : public engine::LayerHook {
 public:
  Result<bool> on_attention(const engine::LayerAttention& att) override {
    const size_t n = static_cast<size_t>(att.rows) * att.shape.num_heads;
    std::memset(att.out, 0, sizeof(float) * n * att.shape.head_dim);
    std::fill(att.lse, att.lse + n, 0.0f);
    return true;
  }
};

std::vector<int32_t> tokens(int n, int vocab) {
  std::mt19937 g(5);
  std::vector<int32_t> t(n);
  for (auto& x : t) x = static_cast<int32_t>(g() % vocab);
  return t;
}

// Best of `reps` timings of fn.
template <typename F>
Result<double> best_time(int reps, F fn) {
  double best = INFINITY;
  for (int i = 0; i < reps; ++i) {
    const auto t = Clock::now();
    RAGD_RETURN_IF_ERROR(fn());
    best = std::min(best, since(t));
  }
  return best;
}

// Pairs/s of the attention of prefill steps over the same tokens, one per entry of `positions`
// (empty = contiguous): each step minus the same step with attention replaced by zeros. The
// variants are timed in alternation, best of three, so that load from elsewhere on the machine
// hits all of them alike rather than skewing one against the other.
Result<std::vector<double>> attention_rates(engine::Model& model, std::span<const int32_t> tokens,
                                            const std::vector<std::span<const int32_t>>& positions, double pairs) {
  NoAttention none;
  engine::KvPool& pool = model.kv_pool();
  engine::StepOutput out;
  std::vector<double> full(positions.size(), INFINITY), dense(positions.size(), INFINITY);
  for (int rep = 0; rep < 3; ++rep) {
    for (size_t v = 0; v < positions.size(); ++v) {
      engine::BlockTable t;
      engine::SeqStep s{&t, tokens, engine::SeqStep::Logits::kNone, positions[v]};
      for (bool attention : {true, false}) {
        t.release(pool);
        const auto t0 = Clock::now();
        Status st = attention ? model.forward({&s, 1}, &out) : model.forward_with_hook({&s, 1}, none, &out);
        const double dt = since(t0);
        if (!st.ok()) {
          t.release(pool);
          return st;
        }
        double& best = attention ? full[v] : dense[v];
        best = std::min(best, dt);
      }
      t.release(pool);
    }
  }
  std::vector<double> rates;
  for (size_t v = 0; v < positions.size(); ++v) rates.push_back(pairs / std::max(full[v] - dense[v], 1e-6));
  return rates;
}

}  // namespace

std::string KernelRates::describe() const {
  return fmt::format(
      "dense {:.0f} tokens/s, prefill attention {:.3g} pairs/s ({:.3g} over explicit positions), decode dense "
      "{:.3f} ms, KV read {:.2f} GB/s, link {:.2f} GB/s + {:.1f} us, {} thread(s)",
      dense_tokens_per_s, attn_pairs_per_s, masked_pairs_per_s, decode_dense_s * 1e3, kv_read_bytes_per_s / 1e9, link_bytes_per_s / 1e9,
      link_latency_s * 1e6, threads) +
      (fresh_bytes_per_s > 0 ? fmt::format(", first touch {:.2f} GB/s", fresh_bytes_per_s / 1e9) : std::string()) +
      (source.empty() ? "" : " (" + source + ")");
}

Result<KernelRates> parse_kernel_rates(std::string_view json) {
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto e = parser.parse(json.data(), json.size()).get(doc); e != simdjson::SUCCESS) {
    return Status::InvalidArgument(std::string("kernel rates: not JSON: ") + simdjson::error_message(e));
  }
  simdjson::dom::object obj;
  if (doc.get(obj) != simdjson::SUCCESS) return Status::InvalidArgument("kernel rates: expected a JSON object");
  KernelRates r;
  struct Field {
    const char* name;
    double* value;
    bool may_be_zero;
    bool seen = false;
  };
  Field fields[] = {{"dense_tokens_per_s", &r.dense_tokens_per_s, false},
                    {"attn_pairs_per_s", &r.attn_pairs_per_s, false},
                    {"masked_pairs_per_s", &r.masked_pairs_per_s, false},
                    {"decode_dense_s", &r.decode_dense_s, false},
                    {"kv_read_bytes_per_s", &r.kv_read_bytes_per_s, false},
                    {"link_bytes_per_s", &r.link_bytes_per_s, false},
                    {"link_latency_s", &r.link_latency_s, true}};
  for (auto [key, value] : obj) {
    if (key == "source") {
      std::string_view sv;
      if (value.get(sv) != simdjson::SUCCESS) return Status::InvalidArgument("kernel rates: 'source' must be a string");
      r.source = std::string(sv);
      continue;
    }
    if (key == "fresh_bytes_per_s") {
      double v = 0.0;
      if (value.get(v) != simdjson::SUCCESS || !std::isfinite(v) || v <= 0.0) {
        return Status::InvalidArgument("kernel rates: 'fresh_bytes_per_s' must be a positive number");
      }
      r.fresh_bytes_per_s = v;
      continue;
    }
    if (key == "threads") {
      int64_t t = 0;
      if (value.get(t) != simdjson::SUCCESS || t < 1 || t > 4096) {
        return Status::InvalidArgument("kernel rates: 'threads' must be an integer in [1, 4096]");
      }
      r.threads = static_cast<int>(t);
      continue;
    }
    Field* f = nullptr;
    for (Field& c : fields) {
      if (key == c.name) f = &c;
    }
    if (f == nullptr) return Status::InvalidArgument("kernel rates: unknown field '" + std::string(key) + "'");
    double v = 0.0;
    if (value.get(v) != simdjson::SUCCESS || !std::isfinite(v) || v < 0.0 || (v == 0.0 && !f->may_be_zero)) {
      return Status::InvalidArgument(std::string("kernel rates: '") + f->name + "' must be a " +
                                     (f->may_be_zero ? "non-negative" : "positive") + " number");
    }
    *f->value = v;
    f->seen = true;
  }
  for (const Field& f : fields) {
    if (!f.seen) return Status::InvalidArgument(std::string("kernel rates: missing '") + f.name + "'");
  }
  return r;
}

std::string kernel_rates_json(const KernelRates& r) {
  JsonWriter w;
  w.begin_object();
  w.key("dense_tokens_per_s").value(r.dense_tokens_per_s);
  w.key("attn_pairs_per_s").value(r.attn_pairs_per_s);
  w.key("masked_pairs_per_s").value(r.masked_pairs_per_s);
  w.key("decode_dense_s").value(r.decode_dense_s);
  w.key("kv_read_bytes_per_s").value(r.kv_read_bytes_per_s);
  w.key("link_bytes_per_s").value(r.link_bytes_per_s);
  w.key("link_latency_s").value(r.link_latency_s);
  w.key("threads").value(static_cast<int64_t>(r.threads));
  if (r.fresh_bytes_per_s > 0) w.key("fresh_bytes_per_s").value(r.fresh_bytes_per_s);
  if (!r.source.empty()) w.key("source").value(r.source);
  w.end_object();
  return w.take();
}

Result<KernelRates> calibrate(engine::Model& model, int attn_tokens, int decode_context) {
  const engine::ModelConfig& cfg = model.config();
  KernelRates r;
  r.threads = kernels::num_threads();
  NoAttention none;
  engine::KvPool& pool = model.kv_pool();
  // Dense part at a prefill chunk's size.
  const int chunk = 1024;
  auto toks = tokens(std::max({chunk, attn_tokens, decode_context}), cfg.vocab_size);
  engine::StepOutput out;
  RAGD_ASSIGN_OR_RETURN(double dense_s, best_time(3, [&]() -> Status {
    engine::BlockTable t;
    engine::SeqStep s{&t, std::span<const int32_t>(toks.data(), chunk), engine::SeqStep::Logits::kNone};
    Status st = model.forward_with_hook({&s, 1}, none, &out);
    t.release(pool);
    return st;
  }));
  r.dense_tokens_per_s = chunk / dense_s;
  // Prefill attention over a chunk of attn_tokens: contiguous (one worker's kernel), and over
  // explicit positions (what a ring worker's local and remote blocks use): a zigzag shard of 2
  // workers over 2·n positions, where every earlier shard position is visible.
  const int n = attn_tokens;
  std::vector<int32_t> pos(n);
  for (int i = 0; i < n; ++i) pos[i] = i < n / 2 ? i : n + i;
  RAGD_ASSIGN_OR_RETURN(std::vector<double> attn, attention_rates(model, std::span<const int32_t>(toks.data(), n),
                                                                  {{}, pos}, 0.5 * n * (n + 1.0)));
  r.attn_pairs_per_s = attn[0];
  r.masked_pairs_per_s = attn[1];
  // Decode: one token over decode_context tokens of KV, with and without attention.
  {
    engine::BlockTable t;
    engine::SeqStep s{&t, std::span<const int32_t>(toks.data(), decode_context), engine::SeqStep::Logits::kNone};
    RAGD_RETURN_IF_ERROR(model.forward({&s, 1}, &out));
    const int32_t pos = decode_context;
    const int32_t slot = decode_context;
    engine::SeqStep d{&t, std::span<const int32_t>(toks.data(), 1), engine::SeqStep::Logits::kNone,
                      std::span<const int32_t>(&pos, 1), std::span<const int32_t>(&slot, 1)};
    RAGD_ASSIGN_OR_RETURN(double full_s, best_time(5, [&]() -> Status { return model.forward({&d, 1}, &out); }));
    RAGD_ASSIGN_OR_RETURN(double dense_1, best_time(5, [&]() -> Status { return model.forward_with_hook({&d, 1}, none, &out); }));
    t.release(pool);
    r.decode_dense_s = dense_1;
    // The bytes the pool actually stores (bf16 / int8 KV read half / a quarter of f32's), as predict()
    // divides the stored bytes by this rate.
    const double kv_bytes = static_cast<double>(pool.layout().token_bytes()) * (decode_context + 1.0);
    r.kv_read_bytes_per_s = kv_bytes / std::max(full_s - dense_1, 1e-7);
  }
  // In-process link: one copy of a 64 MiB block.
  {
    std::vector<char> a(64u << 20, 1), b(64u << 20);
    RAGD_ASSIGN_OR_RETURN(double copy_s, best_time(3, [&]() -> Status {
      std::memcpy(b.data(), a.data(), a.size());
      return Status::OK();
    }));
    r.link_bytes_per_s = a.size() / copy_s;
    r.link_latency_s = 5e-6;  // a condition-variable hand-off between threads
    // The same copy into a buffer allocated for it (fresh pages, as a shrink's staging buffers and
    // receiving pool pages are): page faults and zeroing on top of the copy.
    RAGD_ASSIGN_OR_RETURN(double fresh_s, best_time(3, [&]() -> Status {
      std::unique_ptr<char[]> c(new char[a.size()]);
      std::memcpy(c.get(), a.data(), a.size());
      asm volatile("" : : "r"(c.get()) : "memory");  // the copy is observed: not elided with the buffer
      return Status::OK();
    }));
    r.fresh_bytes_per_s = a.size() / fresh_s;
  }
  return r;
}

Prediction predict(const engine::ModelConfig& cfg, const KernelRates& r, int64_t tokens, int workers,
                   double kv_bytes_per_token) {
  Prediction p;
  const double n = static_cast<double>(tokens), w = std::max(workers, 1);
  const double shard = n / w;
  const double pairs = 0.5 * n * (n + 1.0);
  const double dense_s = shard / r.dense_tokens_per_s;
  // One worker attends with the contiguous causal kernel; ring workers over explicit positions.
  const double attn_s = pairs / w / (w > 1 ? r.masked_pairs_per_s : r.attn_pairs_per_s);
  p.prefill_compute_s = dense_s + attn_s;
  if (w > 1) {
    // Per layer: W-1 steps; a step moves one shard's K/V and overlaps with one block's attention
    // (a zigzag shard's queries against one remote zigzag block: shard² pairs out of the shard's
    // share of N²/2, spread evenly over the W blocks it sees).
    const double block_bytes = shard * (kv_bytes_per_token + sizeof(int32_t));
    const double step_comm = block_bytes / r.link_bytes_per_s + r.link_latency_s;
    const double step_attn = attn_s / cfg.num_hidden_layers / w;
    p.prefill_exposed_comm_s = cfg.num_hidden_layers * (w - 1) * std::max(0.0, step_comm - step_attn);
  }
  p.prefill_s = p.prefill_compute_s + p.prefill_exposed_comm_s;
  p.kv_bytes_per_worker = shard * kv_bytes_per_token * cfg.num_hidden_layers;
  const double allgather_s = w > 1 ? cfg.num_hidden_layers * (std::ceil(std::log2(w)) * r.link_latency_s) : 0.0;
  p.decode_s = r.decode_dense_s + p.kv_bytes_per_worker / r.kv_read_bytes_per_s + allgather_s;
  // FLOPs: 2 per weight per token for the dense part, 4·head_dim per (pair, head) for attention.
  const double q_dim = cfg.q_dim(), kv_dim = cfg.kv_dim(), hs = cfg.hidden_size, im = cfg.intermediate_size;
  const double dense_per_token = 2.0 * cfg.num_hidden_layers * (hs * (q_dim + 2 * kv_dim) + q_dim * hs + 3 * hs * im);
  p.prefill_flops = n * dense_per_token + pairs * 4.0 * cfg.head_dim * cfg.num_attention_heads * cfg.num_hidden_layers;
  return p;
}

double predict_shrink_s(const engine::ModelConfig& cfg, const KernelRates& r, int64_t tokens, int from, int to) {
  if (to >= from || to < 1) return 0.0;
  const double shard = static_cast<double>(tokens) / from;
  const double rows = shard * 2.0 * cfg.num_hidden_layers * cfg.kv_dim() * sizeof(float);  // f32 K and V
  const double bytes = rows + shard * sizeof(int32_t);                                     // and positions
  const double shards = std::ceil(static_cast<double>(from - to) / to);
  // Each moved shard's rows land once in memory not touched before (the f32 staging buffer; the
  // receiver's pool pages were measured to add little more: counting them twice over-predicted a
  // 131k-token move 1.6x). 0 when the rates do not model first touch.
  const double fresh = r.fresh_bytes_per_s > 0 ? rows / r.fresh_bytes_per_s : 0.0;
  return rows / r.kv_read_bytes_per_s +
         shards * (bytes / r.link_bytes_per_s + 3 * r.link_latency_s + rows / r.kv_read_bytes_per_s + fresh);
}

}  // namespace ragd::seqparallel
