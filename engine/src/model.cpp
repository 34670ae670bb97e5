// Model: batch validation, all-or-nothing KV reservation and bookkeeping around a Backend.
#include "ragd/engine/model.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <unordered_set>

#include "backend.h"
#include "ragd/common/log.h"
#include "ragd/common/process.h"
#include "ragd/kernels/cpu_features.h"

namespace ragd::engine {

namespace {

class ModelImpl final : public Model {
 public:
  ModelImpl(ModelConfig cfg, Hash128 fingerprint, std::unique_ptr<KvPool> pool, std::unique_ptr<Backend> backend,
            ModelLoadInfo info)
      : cfg_(std::move(cfg)),
        fingerprint_(fingerprint),
        pool_(std::move(pool)),
        backend_(std::move(backend)),
        info_(std::move(info)) {}

  const ModelConfig& config() const override { return cfg_; }
  Hash128 fingerprint() const override { return fingerprint_; }
  KvPool& kv_pool() override { return *pool_; }
  std::string_view device() const override { return backend_->device(); }
  const ModelLoadInfo& load_info() const override { return info_; }

  Status forward(std::span<SeqStep> batch, StepOutput* out) override { return run(batch, nullptr, out); }
  Status forward_with_hook(std::span<SeqStep> batch, LayerHook& hook, StepOutput* out) override {
    return run(batch, &hook, out);
  }
  Status rerotate_keys(float* k, size_t rows, int64_t delta) const override {
    backend_->rerotate_keys(k, rows, delta);
    return Status::OK();
  }
  Status append_shifted(BlockTable& table, int n, const float* k, const float* v, int64_t delta) override {
    if (n < 0) return Status::InvalidArgument("append_shifted: n = " + std::to_string(n));
    const bool ok = table.append_with(*pool_, n, [&](KvStorage& st, std::span<const int32_t> blocks, int t0) {
      if (delta == 0) st.write_tokens_all_layers(blocks, t0, n, k, v);
      else backend_->write_rerotated(st, blocks, t0, n, k, v, delta);
    });
    if (!ok) return Status::ResourceExhausted("append_shifted: KV pool has no room for " + std::to_string(n) + " more tokens");
    return Status::OK();
  }
  Status attend(const BlockTable& table, int layer, std::span<const float> q, std::span<const int32_t> q_pos,
                float* out, float* lse) override;
  Status embed(std::span<const int32_t> tokens, std::vector<float>* out, SentencePooling pooling) override;
  Result<std::unique_ptr<Model>> sibling(size_t kv_pool_bytes, int num_threads) const override {
    const KvLayout& layout = pool_->layout();
    const size_t num_blocks = kv_pool_bytes / layout.block_bytes();
    if (num_blocks == 0)
      return Status::InvalidArgument("Model::sibling: kv_pool_bytes " + std::to_string(kv_pool_bytes) +
                                     " is smaller than one KV block (" + std::to_string(layout.block_bytes()) + " bytes)");
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<Backend> backend, backend_->share(num_threads));
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<KvStorage> storage, backend->make_kv_storage(layout, num_blocks));
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, KvPool::create(std::move(storage)));
    // The same weights and KV layout: the same fingerprint (its KV is interchangeable).
    return std::unique_ptr<Model>(new ModelImpl(cfg_, fingerprint_, std::move(pool), std::move(backend), info_));
  }

 private:
  Status check_tokens(std::span<const int32_t> tokens, size_t index) const;
  // Validates one SeqStep's placement and fills p's slots / positions / kv_len / key_pos.
  Status place(const SeqStep& s, size_t index, SeqPlan* p) const;
  Status run(std::span<SeqStep> batch, LayerHook* hook, StepOutput* out);

  ModelConfig cfg_;
  Hash128 fingerprint_;
  std::unique_ptr<KvPool> pool_;
  std::unique_ptr<Backend> backend_;
  ModelLoadInfo info_;
  std::vector<float> hidden_;  // embed() scratch
};

Status ModelImpl::check_tokens(std::span<const int32_t> tokens, size_t index) const {
  if (tokens.empty()) return Status::InvalidArgument("forward: batch[" + std::to_string(index) + "] has no tokens");
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] < 0 || tokens[i] >= cfg_.vocab_size) {
      return Status::InvalidArgument("forward: batch[" + std::to_string(index) + "] token " + std::to_string(i) +
                                     " has id " + std::to_string(tokens[i]) + ", outside the vocabulary [0, " +
                                     std::to_string(cfg_.vocab_size) + ")");
    }
  }
  return Status::OK();
}

Status ModelImpl::place(const SeqStep& s, size_t index, SeqPlan* p) const {
  const std::string where = "forward: batch[" + std::to_string(index) + "]";
  const int n = p->n;
  const BlockTable& t = *s.table;
  p->start = t.num_tokens();
  if (!s.positions.empty() && static_cast<int>(s.positions.size()) != n) {
    return Status::InvalidArgument(where + " has " + std::to_string(s.positions.size()) + " positions for " +
                                   std::to_string(n) + " tokens");
  }
  if (!s.slots.empty() && static_cast<int>(s.slots.size()) != n) {
    return Status::InvalidArgument(where + " has " + std::to_string(s.slots.size()) + " slots for " +
                                   std::to_string(n) + " tokens");
  }
  if (s.positions.empty() && s.slots.empty() && t.positions_are_slots()) {  // the fast path
    p->contiguous = true;
    p->kv_len = p->start + n;
    return Status::OK();
  }
  p->slots.resize(n);
  for (int i = 0; i < n; ++i) p->slots[i] = s.slots.empty() ? p->start + i : s.slots[i];
  if (s.positions.empty()) {
    p->positions = p->slots;
  } else {
    p->positions.assign(s.positions.begin(), s.positions.end());
  }
  // No table can hold more slots than the pool has; checked before any per-slot array is sized.
  const int64_t max_slots = static_cast<int64_t>(pool_->num_blocks()) * pool_->layout().block_size;
  for (int i = 0; i < n; ++i) {
    if (p->slots[i] < 0 || p->slots[i] >= max_slots) {
      return Status::InvalidArgument(where + " slot " + std::to_string(i) + " is " + std::to_string(p->slots[i]) +
                                     ", outside the KV pool's [0, " + std::to_string(max_slots) + ")");
    }
    if (p->positions[i] < 0 || p->positions[i] >= kNoPosition) {
      return Status::InvalidArgument(where + " position " + std::to_string(i) + " is " +
                                     std::to_string(p->positions[i]) + ", outside [0, 2^31 - 1)");
    }
  }
  std::vector<int32_t> sorted(p->slots);
  std::sort(sorted.begin(), sorted.end());
  if (auto dup = std::adjacent_find(sorted.begin(), sorted.end()); dup != sorted.end()) {
    return Status::InvalidArgument(where + " writes slot " + std::to_string(*dup) + " twice");
  }
  const int max_slot = sorted.back();
  p->kv_len = std::max(p->start, max_slot + 1);
  bool identity = t.positions_are_slots();
  int appended = 0;
  for (int i = 0; i < n; ++i) {
    identity = identity && p->positions[i] == p->slots[i];
    appended += p->slots[i] >= p->start ? 1 : 0;
  }
  identity = identity && appended == p->kv_len - p->start;  // no holes
  bool append = identity && appended == n;
  for (int i = 0; append && i < n; ++i) append = p->slots[i] == p->start + i;
  if (append) {  // explicit placement that is a plain append: take the fast path
    p->contiguous = true;
    p->slots.clear();
    p->positions.clear();
    return Status::OK();
  }
  p->contiguous = false;
  if (!identity) {
    p->key_pos.resize(p->kv_len);
    for (int j = 0; j < p->kv_len; ++j) p->key_pos[j] = j < p->start ? t.position(j) : kNoPosition;
    for (int i = 0; i < n; ++i) p->key_pos[p->slots[i]] = p->positions[i];
  }
  return Status::OK();
}

Status ModelImpl::run(std::span<SeqStep> batch, LayerHook* hook, StepOutput* out) {
  if (out == nullptr) return Status::InvalidArgument("forward: out is null");
  StepPlan plan;
  plan.seqs.resize(batch.size());
  std::unordered_set<const BlockTable*> seen;
  size_t blocks_needed = 0;
  int rows = 0;
  for (size_t i = 0; i < batch.size(); ++i) {
    const SeqStep& s = batch[i];
    if (s.table == nullptr) return Status::InvalidArgument("forward: batch[" + std::to_string(i) + "] has no block table");
    if (!seen.insert(s.table).second) {
      return Status::InvalidArgument("forward: batch[" + std::to_string(i) + "] repeats a block table of an earlier entry");
    }
    RAGD_RETURN_IF_ERROR(check_tokens(s.tokens, i));
    SeqPlan& p = plan.seqs[i];
    p.table = s.table;
    p.tokens = s.tokens.data();
    p.n = static_cast<int>(s.tokens.size());
    p.row0 = rows;
    p.logits = s.logits;
    RAGD_RETURN_IF_ERROR(place(s, i, &p));
    blocks_needed += static_cast<size_t>(p.contiguous ? s.table->blocks_needed(*pool_, p.n)
                                                      : s.table->blocks_needed(*pool_, p.slots));
    rows += p.n;
  }
  plan.total_rows = rows;
  if (blocks_needed > pool_->free_blocks()) {
    return Status::ResourceExhausted("forward: KV pool full: the step needs " + std::to_string(blocks_needed) +
                                     " blocks, " + std::to_string(pool_->free_blocks()) + " of " +
                                     std::to_string(pool_->num_blocks()) + " are free");
  }
  for (const SeqPlan& p : plan.seqs) {
    // Cannot fail: the whole batch's need was checked against the free list above.
    const bool ok = p.contiguous ? p.table->reserve(*pool_, p.n) : p.table->reserve_slots(*pool_, p.slots);
    if (!ok) return Status::Internal("forward: KV reservation failed after the check");
  }
  out->vocab_size = cfg_.vocab_size;
  out->row_begin.assign(batch.size(), 0);
  std::vector<size_t> pick_of;  // the SeqStep of each pick row
  for (size_t i = 0; i < plan.seqs.size(); ++i) {
    const SeqPlan& p = plan.seqs[i];
    out->row_begin[i] = static_cast<int>(plan.logit_rows.size());
    if (p.logits == SeqStep::Logits::kLast) {
      plan.logit_rows.push_back(p.row0 + p.n - 1);
    } else if (p.logits == SeqStep::Logits::kAll) {
      for (int r = 0; r < p.n; ++r) plan.logit_rows.push_back(p.row0 + r);
    } else if (p.logits == SeqStep::Logits::kGreedy) {
      plan.pick_rows.push_back(p.row0 + p.n - 1);
      pick_of.push_back(i);
    }
  }
  out->logits.resize(plan.logit_rows.size() * static_cast<size_t>(cfg_.vocab_size));
  std::vector<SampleResult> picks(plan.pick_rows.size());
  RAGD_RETURN_IF_ERROR(backend_->forward(plan, *pool_, out->logits.data(), picks.data(), nullptr, hook));
  out->picks.assign(batch.size(), SampleResult{});
  for (size_t k = 0; k < picks.size(); ++k) out->picks[pick_of[k]] = picks[k];
  for (const SeqPlan& p : plan.seqs) {
    if (p.contiguous) {
      p.table->commit(p.n);
    } else {
      p.table->commit_slots(p.slots, p.positions);
    }
  }
  return Status::OK();
}

Status ModelImpl::attend(const BlockTable& table, int layer, std::span<const float> q, std::span<const int32_t> q_pos,
                         float* out, float* lse) {
  if (layer < 0 || layer >= cfg_.num_hidden_layers) {
    return Status::InvalidArgument("attend: layer " + std::to_string(layer) + " is outside [0, " +
                                   std::to_string(cfg_.num_hidden_layers) + ")");
  }
  const size_t n_q = q_pos.size();
  if (q.size() != n_q * static_cast<size_t>(cfg_.q_dim())) {
    return Status::InvalidArgument("attend: " + std::to_string(q.size()) + " query floats for " + std::to_string(n_q) +
                                   " positions of " + std::to_string(cfg_.q_dim()) + " floats each");
  }
  if (out == nullptr || lse == nullptr) return Status::InvalidArgument("attend: out and lse must be set");
  for (size_t i = 0; i < n_q; ++i) {
    if (q_pos[i] < 0 || q_pos[i] >= kNoPosition) {
      return Status::InvalidArgument("attend: query " + std::to_string(i) + " has position " + std::to_string(q_pos[i]));
    }
  }
  if (n_q == 0) return Status::OK();
  for (int32_t b : table.blocks()) {
    if (b < 0 || static_cast<size_t>(b) >= pool_->num_blocks()) {
      return Status::InvalidArgument("attend: the table holds block " + std::to_string(b) + ", not a block of this model's pool");
    }
  }
  return backend_->attend(*pool_, table, layer, q.data(), static_cast<int>(n_q), q_pos.data(), out, lse);
}

Status ModelImpl::embed(std::span<const int32_t> tokens, std::vector<float>* out, SentencePooling pooling) {
  if (out == nullptr) return Status::InvalidArgument("embed: out is null");
  RAGD_RETURN_IF_ERROR(check_tokens(tokens, 0).with_context("embed"));
  BlockTable table;
  const int n = static_cast<int>(tokens.size());
  if (!table.reserve(*pool_, n)) {
    return Status::ResourceExhausted("embed: KV pool cannot hold " + std::to_string(n) + " tokens (" +
                                     std::to_string(pool_->free_blocks()) + " free blocks)");
  }
  StepPlan plan;
  SeqPlan& p = plan.seqs.emplace_back();
  p.table = &table;
  p.tokens = tokens.data();
  p.n = n;
  p.logits = SeqStep::Logits::kNone;
  p.kv_len = n;
  plan.total_rows = n;
  const int hs = cfg_.hidden_size;
  hidden_.resize(static_cast<size_t>(n) * hs);
  Status st = backend_->forward(plan, *pool_, nullptr, nullptr, hidden_.data(), nullptr);
  table.release(*pool_);
  RAGD_RETURN_IF_ERROR(st);
  out->resize(static_cast<size_t>(hs));
  pool_hidden_states(hidden_.data(), n, hs, pooling, out->data());
  return Status::OK();
}

// "cpu" → -1; "cuda" / "cuda:N" → N (Unimplemented in a build without CUDA); anything else
// InvalidArgument (parse_device_spec).
Result<int> parse_device(const std::string& device) {
  auto spec = parse_device_spec(device);
  if (!spec.ok()) return spec.status().with_context("ModelOptions");
  if (spec->kind == DeviceKind::kCpu) return -1;
#if RAGD_HAVE_CUDA
  return spec->index;
#else
  return Status::Unimplemented("ModelOptions.device '" + device +
                               "': this build has no CUDA backend (built without nvcc); use \"cpu\"");
#endif
}

}  // namespace

KvLayout kv_layout(const ModelConfig& cfg, const ModelOptions& opts) {
  KvLayout layout;
  layout.num_layers = cfg.num_hidden_layers;
  layout.num_kv_heads = cfg.num_key_value_heads;
  layout.head_dim = cfg.head_dim;
  layout.block_size = opts.kv_block_size;
  layout.dtype = opts.kv_dtype;
  return layout;
}

Result<std::unique_ptr<Model>> Model::create(const ModelConfig& cfg, std::unique_ptr<WeightStore> weights,
                                             const ModelOptions& opts) {
  RAGD_ASSIGN_OR_RETURN(const int cuda_device, parse_device(opts.device));
  RAGD_RETURN_IF_ERROR(cfg.validate());
  if (weights == nullptr) return Status::InvalidArgument("Model::create: no weight store");
  if (opts.kv_block_size <= 0) {
    return Status::InvalidArgument("ModelOptions.kv_block_size must be positive, got " + std::to_string(opts.kv_block_size));
  }
  const auto t0 = std::chrono::steady_clock::now();
  KvLayout layout = kv_layout(cfg, opts);
  if (cuda_device >= 0) {
    // The GPU keeps KV as bf16 (cuda_kv_storage.h); f32 is the default ask and becomes bf16.
    if (layout.dtype == kernels::KvDtype::kInt8) {
      return Status::InvalidArgument("ModelOptions.kv_dtype 'int8' is CPU-only; the CUDA backend stores KV as bf16");
    }
    layout.dtype = kernels::KvDtype::kBF16;
  }
  const size_t block_bytes = layout.block_bytes();
  const size_t num_blocks = opts.kv_pool_bytes / block_bytes;
  if (num_blocks == 0) {
    return Status::InvalidArgument("ModelOptions.kv_pool_bytes " + std::to_string(opts.kv_pool_bytes) +
                                   " is smaller than one KV block (" + std::to_string(block_bytes) + " bytes)");
  }
  Hasher128 fp;
  fp.str("ragd-model-v1").h128(cfg.shape_hash()).h128(weights->checksum());
  WeightFormat format = opts.weights;
  if (cuda_device >= 0) {
    // The GPU keeps every matrix as bf16 (cuda_backend.h).
    if (format != WeightFormat::kAuto && format != WeightFormat::kBF16) {
      return Status::InvalidArgument("ModelOptions.weights '" + std::string(weight_format_name(format)) +
                                     "' is CPU-only; the CUDA backend keeps weights as bf16 (use auto or bf16)");
    }
    format = WeightFormat::kBF16;
  }
  RAGD_ASSIGN_OR_RETURN(HostWeights host, load_host_weights(cfg, *weights, format));
  weights.reset();  // weights now live in the backend
  // KV computed from weights of other values than the checkpoint's (q8, or rounded to 16 bits) is
  // not interchangeable with the checkpoint's KV: it gets its own fingerprint.
  if (!host.exact()) fp.str("weights").str(kernels::weight_type_name(host.type));
  // Likewise KV computed over rounded or quantized KV (every later token attended to it).
  if (layout.dtype != kernels::KvDtype::kF32) fp.str("kv").str(kernels::kv_dtype_name(layout.dtype));
  const kernels::WeightType weight_type = host.type;
  std::unique_ptr<Backend> backend;
  if (cuda_device >= 0) {
#if RAGD_HAVE_CUDA
    CudaBackendOptions co;
    co.device = cuda_device;
    RAGD_ASSIGN_OR_RETURN(backend, make_cuda_backend(cfg, std::move(host), co));
#endif
  } else {
    CpuBackendOptions bo;
    bo.num_threads = opts.num_threads;
    RAGD_ASSIGN_OR_RETURN(backend, make_cpu_backend(cfg, std::move(host), bo));
  }
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<KvStorage> storage, backend->make_kv_storage(layout, num_blocks));
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<KvPool> pool, KvPool::create(std::move(storage)));
  ModelLoadInfo info;
  info.weights = std::string(kernels::weight_type_name(weight_type));
  info.kernels = cuda_device >= 0 ? std::string(backend->device()) + " (CUDA kernels, cuBLAS)" : kernels::cpu_summary();
  info.kv_dtype = std::string(kernels::kv_dtype_name(layout.dtype));
  info.weight_bytes = backend->weight_bytes();
  info.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  info.resident_bytes = resident_bytes();
  log::engine()->info("model {} loaded on {}: {} layers, hidden {}, {:.1f} MiB {} weights (kernels {}), KV pool {} "
                      "blocks x {} tokens ({:.1f} MiB, {} KV), {:.2f} s, resident {:.1f} MiB",
                      architecture_name(cfg.architecture), backend->device(), cfg.num_hidden_layers, cfg.hidden_size,
                      info.weight_bytes / 1048576.0, info.weights, info.kernels, num_blocks, layout.block_size,
                      pool->bytes() / 1048576.0, info.kv_dtype, info.seconds, info.resident_bytes / 1048576.0);
  return std::unique_ptr<Model>(new ModelImpl(cfg, fp.digest(), std::move(pool), std::move(backend), std::move(info)));
}

Result<std::unique_ptr<Model>> Model::load(const std::string& dir, const ModelOptions& opts) {
  RAGD_RETURN_IF_ERROR(parse_device(opts.device).status());
  RAGD_ASSIGN_OR_RETURN(ModelConfig cfg, ModelConfig::from_json_file(dir + "/config.json"));
  RAGD_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> weights, WeightStore::open_dir(dir));
  return create(cfg, std::move(weights), opts);
}

}  // namespace ragd::engine
