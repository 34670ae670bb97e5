#include "cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "ragd/kernels/cuda/attention.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/weight_matrix.h"

namespace ragd::engine {

namespace cu = kernels::cuda;
using GpuType = cu::DType;

namespace {

// One matrix (any host format) as row-major bf16 [rows, cols] on the device.
Result<cu::DeviceBuffer> upload_matrix(const PackedWeight& w, const cu::Stream& stream) {
  const kernels::WeightMatrix& m = w.view();
  const size_t cols = static_cast<size_t>(m.cols);
  RAGD_ASSIGN_OR_RETURN(cu::DeviceBuffer d, cu::DeviceBuffer::alloc(sizeof(uint16_t) * m.rows * cols));
  const int chunk = static_cast<int>(std::max<size_t>(1, (size_t{4} << 20) / cols));  // 4 Mi values per copy
  std::vector<float> f(static_cast<size_t>(chunk) * cols);
  RAGD_ASSIGN_OR_RETURN(cu::PinnedBuffer staging, cu::PinnedBuffer::alloc(sizeof(uint16_t) * chunk * cols));
  uint16_t* s = staging.as<uint16_t>();
  for (int r0 = 0; r0 < m.rows; r0 += chunk) {
    const int r1 = std::min(m.rows, r0 + chunk);
    kernels::weight_rows_to_f32(m, r0, r1, f.data());
    RAGD_RETURN_IF_ERROR(stream.sync());  // the staging buffer's previous copy is done
    const int64_t n = static_cast<int64_t>(r1 - r0) * static_cast<int64_t>(cols);
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; ++i) s[i] = cu::f32_to_bf16(f[i]);
    RAGD_RETURN_IF_ERROR(cu::copy_to_device(d.as<uint16_t>() + r0 * cols, s, static_cast<size_t>(n) * sizeof(uint16_t), stream.get()));
  }
  RAGD_RETURN_IF_ERROR(stream.sync());
  return Result<cu::DeviceBuffer>(std::move(d));
}

Result<cu::DeviceBuffer> upload_f32(const std::vector<float>& v, const cu::Stream& stream) {
  RAGD_ASSIGN_OR_RETURN(cu::DeviceBuffer d, cu::DeviceBuffer::alloc(sizeof(float) * v.size()));
  RAGD_RETURN_IF_ERROR(cu::copy_to_device(d.get(), v.data(), sizeof(float) * v.size(), stream.get()));
  RAGD_RETURN_IF_ERROR(stream.sync());
  return Result<cu::DeviceBuffer>(std::move(d));
}

// Grows `b` to at least `bytes` (contents are not kept).
Status ensure(cu::DeviceBuffer& b, size_t bytes) {
  if (b.bytes() >= bytes) return Status::OK();
  b = cu::DeviceBuffer();  // free first: the peak is the new size, not old + new
  RAGD_ASSIGN_OR_RETURN(b, cu::DeviceBuffer::alloc(bytes));
  return Status::OK();
}

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

// What one step needs on the device besides activations: built on the host, uploaded in one copy.
struct CudaStepMeta {
  // int32 offsets into the metadata array
  size_t tokens = 0, positions = 0, slots = 0, logit_rows = 0, row_src = 0, decode_rows = 0, kv_lens = 0,
         decode_tables = 0;
  std::vector<size_t> seq_table;  // per plan sequence: offset of its block table (multi-token sequences)
  std::vector<int> decode_seqs;   // plan sequences with one new token
  bool decode_rows_consecutive = true;  // their rows are r0, r0 + 1, ...
  int max_decode_blocks = 0;
  cu::DecodePlan decode_plan;
  std::vector<int32_t> host;  // the array itself
};

CudaBackend::CudaBackend(const ModelConfig& cfg, int device, std::shared_ptr<cu::Stream> stream,
                         cu::CublasHandle cublas)
    : cfg_(cfg),
      device_(device),
      name_("cuda:" + std::to_string(device)),
      stream_(std::move(stream)),
      cublas_(std::move(cublas)),
      num_sms_(cu::multiprocessor_count(device)),
      inv_freq_host_(rope_inv_freq(cfg)) {}

Result<std::unique_ptr<Backend>> make_cuda_backend(const ModelConfig& cfg, HostWeights weights,
                                                   const CudaBackendOptions& opts) {
  const int hd = cfg.head_dim, group = cfg.num_attention_heads / cfg.num_key_value_heads;
  if (hd != 32 && hd != 64 && hd != 128) {
    return Status::InvalidArgument("cuda backend: head_dim " + std::to_string(hd) +
                                   " is not built into the CUDA attention kernels (32, 64, 128)");
  }
  if (group != 1 && group != 2 && group != 3 && group != 4 && group != 8) {
    return Status::InvalidArgument("cuda backend: GQA group " + std::to_string(group) +
                                   " is not built into the CUDA decode kernel (1, 2, 3, 4, 8)");
  }
  std::string why;
  const int n = cu::device_count(&why);
  if (n == 0) return Status::FailedPrecondition("cuda backend: no usable CUDA device (" + why + ")");
  if (opts.device < 0 || opts.device >= n) {
    return Status::InvalidArgument("cuda backend: device cuda:" + std::to_string(opts.device) + " does not exist (" +
                                   std::to_string(n) + " visible)");
  }
  RAGD_RETURN_IF_ERROR(cu::set_device(opts.device));
  RAGD_ASSIGN_OR_RETURN(cu::Stream stream, cu::Stream::create());
  RAGD_ASSIGN_OR_RETURN(cu::CublasHandle cublas, cu::CublasHandle::create());
  auto b = std::make_unique<CudaBackend>(cfg, opts.device, std::make_shared<cu::Stream>(std::move(stream)),
                                         std::move(cublas));
  RAGD_RETURN_IF_ERROR(b->upload(std::move(weights)));
  return std::unique_ptr<Backend>(std::move(b));
}

Status CudaBackend::upload(HostWeights w) {
  const cu::Stream& s = *stream_;
  auto mat = [&](PackedWeight& pw, cu::DeviceBuffer* out) -> Status {
    RAGD_ASSIGN_OR_RETURN(*out, upload_matrix(pw, s));
    weight_bytes_ += out->bytes();
    pw = PackedWeight();  // the host copy is no longer needed
    return Status::OK();
  };
  auto vec = [&](std::vector<float>& v, cu::DeviceBuffer* out) -> Status {
    if (v.empty()) return Status::OK();
    RAGD_ASSIGN_OR_RETURN(*out, upload_f32(v, s));
    weight_bytes_ += out->bytes();
    std::vector<float>().swap(v);
    return Status::OK();
  };
  RAGD_RETURN_IF_ERROR(mat(w.embed, &embed_));
  if (!w.lm_head.empty()) RAGD_RETURN_IF_ERROR(mat(w.lm_head, &lm_head_));
  RAGD_RETURN_IF_ERROR(vec(w.final_norm, &final_norm_));
  layers_.resize(w.layers.size());
  for (size_t l = 0; l < w.layers.size(); ++l) {
    LayerWeights& hl = w.layers[l];
    DeviceLayer& dl = layers_[l];
    RAGD_RETURN_IF_ERROR(vec(hl.input_norm, &dl.input_norm));
    RAGD_RETURN_IF_ERROR(mat(hl.qkv, &dl.qkv));
    RAGD_RETURN_IF_ERROR(vec(hl.qkv_bias, &dl.qkv_bias));
    RAGD_RETURN_IF_ERROR(mat(hl.o, &dl.o));
    RAGD_RETURN_IF_ERROR(vec(hl.post_norm, &dl.post_norm));
    RAGD_RETURN_IF_ERROR(mat(hl.gate_up, &dl.gate_up));
    RAGD_RETURN_IF_ERROR(mat(hl.down, &dl.down));
  }
  RAGD_ASSIGN_OR_RETURN(inv_freq_, upload_f32(inv_freq_host_, s));
  RAGD_ASSIGN_OR_RETURN(gemm_ws_, cu::DeviceBuffer::alloc(cu::kGemmWorkspaceBytes));
  return Status::OK();
}

Result<std::unique_ptr<KvStorage>> CudaBackend::make_kv_storage(const KvLayout& layout, size_t num_blocks) {
  auto r = CudaKvStorage::create(layout, num_blocks, device_, stream_);
  if (!r.ok()) return r.status();
  return std::unique_ptr<KvStorage>(std::move(r).value());
}

void CudaBackend::rerotate_keys(float* k, size_t rows, int64_t delta) const {
  rerotate_host_keys(cfg_, inv_freq_host_.data(), k, rows, delta);
}

Status CudaBackend::attend(KvPool&, const BlockTable&, int, const float*, int, const int32_t*, float*, float*) {
  return Status::Unimplemented("cuda backend: Model::attend (sequence-parallel attention over a shard) runs on the "
                               "CPU backend in this build");
}

Status CudaBackend::reserve(int rows, int logit_rows) {
  if (rows > rows_cap_) {
    const size_t r = static_cast<size_t>(std::max(rows, 64));
    const size_t hs = cfg_.hidden_size, im = cfg_.intermediate_size, qd = cfg_.q_dim(),
                 qkv = qd + 2 * static_cast<size_t>(cfg_.kv_dim()), nh = cfg_.num_attention_heads;
    const size_t wide = std::max(hs, qd);
    RAGD_RETURN_IF_ERROR(ensure(x_, r * hs * sizeof(float)));
    RAGD_RETURN_IF_ERROR(ensure(hf_, r * wide * sizeof(float)));
    RAGD_RETURN_IF_ERROR(ensure(hb_, r * wide * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(ensure(qkv_, r * qkv * sizeof(float)));
    RAGD_RETURN_IF_ERROR(ensure(qkvb_, r * qkv * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(ensure(qb_, r * qd * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(ensure(qdec_, r * qd * sizeof(uint16_t)));
    // Rows [0, r) hold the multi-token sequences' outputs in step order, rows [r, 2r) the decode
    // outputs when their rows are not consecutive (gathered back into step order afterwards).
    RAGD_RETURN_IF_ERROR(ensure(attn_, 2 * r * qd * sizeof(float)));
    RAGD_RETURN_IF_ERROR(ensure(lse_, 2 * r * nh * sizeof(float)));
    RAGD_RETURN_IF_ERROR(ensure(gu_, r * 2 * im * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(ensure(act_, r * im * sizeof(uint16_t)));
    rows_cap_ = static_cast<int>(r);
  }
  if (logit_rows > logit_cap_) {
    RAGD_RETURN_IF_ERROR(ensure(logits_, static_cast<size_t>(logit_rows) * cfg_.vocab_size * sizeof(float)));
    logit_cap_ = logit_rows;
  }
  return Status::OK();
}

Status CudaBackend::forward(const StepPlan& plan, KvPool& pool, float* logits, float* hidden, LayerHook* hook) {
  if (hook != nullptr) {
    return Status::Unimplemented("cuda backend: layer hooks (CacheBlend / EPIC recompute, sequence-parallel "
                                 "attention) run on the CPU backend in this build");
  }
  const int total = plan.total_rows;
  if (total <= 0) return Status::OK();
  auto* kvs = dynamic_cast<CudaKvStorage*>(&pool.storage());
  if (kvs == nullptr) {
    return Status::FailedPrecondition("cuda backend: the KV pool's storage is on '" +
                                      std::string(pool.storage().device()) + "', not on " + name_);
  }
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    if (!plan.seqs[si].contiguous) {
      return Status::Unimplemented("cuda backend: batch[" + std::to_string(si) +
                                   "] has explicit positions or slots; such steps (partial reuse, sharded "
                                   "sequences) run on the CPU backend in this build");
    }
  }
  RAGD_RETURN_IF_ERROR(cu::set_device(device_));
  const int hs = cfg_.hidden_size, im = cfg_.intermediate_size, nh = cfg_.num_attention_heads,
            nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim, vocab = cfg_.vocab_size;
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const int bs = kvs->layout().block_size;
  const float eps = cfg_.rms_norm_eps;
  const int nl = logits != nullptr ? static_cast<int>(plan.logit_rows.size()) : 0;
  RAGD_RETURN_IF_ERROR(reserve(total, nl));

  // ---- step metadata ---------------------------------------------------------------------------
  CudaStepMeta m;
  m.seq_table.assign(plan.seqs.size(), 0);
  int max_decode_len = 0;
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    if (s.n == 1) {
      if (!m.decode_seqs.empty() && s.row0 != plan.seqs[m.decode_seqs.back()].row0 + 1) m.decode_rows_consecutive = false;
      m.decode_seqs.push_back(static_cast<int>(si));
      m.max_decode_blocks = std::max(m.max_decode_blocks, ceil_div(s.kv_len, bs));
      max_decode_len = std::max(max_decode_len, s.kv_len);
    }
  }
  const int nd = static_cast<int>(m.decode_seqs.size());
  auto& h = m.host;
  auto take = [&h](size_t n) {
    const size_t off = h.size();
    h.resize(off + n, 0);
    return off;
  };
  m.tokens = take(total);
  m.positions = take(total);
  m.slots = take(total);
  m.logit_rows = take(nl);
  m.row_src = take(total);
  m.decode_rows = take(nd);
  m.kv_lens = take(nd);
  m.decode_tables = take(static_cast<size_t>(nd) * m.max_decode_blocks);
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    const auto& blocks = s.table->blocks();
    for (int i = 0; i < s.n; ++i) {
      const int r = s.row0 + i, t = s.slot(i);
      h[m.tokens + r] = s.tokens[i];
      h[m.positions + r] = s.position(i);
      h[m.slots + r] = blocks[t / bs] * bs + t % bs;
      h[m.row_src + r] = r;
    }
    if (s.n > 1) {
      const int nb = ceil_div(s.kv_len, bs);
      m.seq_table[si] = take(nb);
      std::copy(blocks.begin(), blocks.begin() + nb, h.begin() + m.seq_table[si]);
    }
  }
  for (int i = 0; i < nl; ++i) h[m.logit_rows + i] = plan.logit_rows[i];
  for (int d = 0; d < nd; ++d) {
    const SeqPlan& s = plan.seqs[m.decode_seqs[d]];
    h[m.decode_rows + d] = s.row0;
    h[m.kv_lens + d] = s.kv_len;
    const int nb = ceil_div(s.kv_len, bs);
    std::copy(s.table->blocks().begin(), s.table->blocks().begin() + nb,
              h.begin() + m.decode_tables + static_cast<size_t>(d) * m.max_decode_blocks);
    if (!m.decode_rows_consecutive) h[m.row_src + s.row0] = rows_cap_ + d;
  }
  const size_t meta_bytes = h.size() * sizeof(int32_t);
  if (meta_host_.bytes() < meta_bytes) {
    meta_host_ = cu::PinnedBuffer();
    RAGD_ASSIGN_OR_RETURN(meta_host_, cu::PinnedBuffer::alloc(std::max(meta_bytes, size_t{1} << 16)));
  }
  RAGD_RETURN_IF_ERROR(ensure(meta_, std::max(meta_bytes, size_t{1} << 16)));
  std::copy(h.begin(), h.end(), meta_host_.as<int32_t>());
  RAGD_RETURN_IF_ERROR(cu::copy_to_device(meta_.get(), meta_host_.get(), meta_bytes, stream()));
  const int32_t* md = meta_.as<int32_t>();
  if (nd > 0) {
    cu::DecodeBatchBf16 probe;
    probe.batch = nd;
    probe.num_heads = nh;
    probe.head_dim = hd;
    m.decode_plan = cu::plan_attention_decode(nd, nkv, max_decode_len, num_sms_);
    RAGD_RETURN_IF_ERROR(ensure(decode_ws_, cu::attention_decode_workspace_bytes(probe, m.decode_plan)));
  }

  // ---- the layers --------------------------------------------------------------------------------
  float* x = x_.as<float>();
  float* hf = hf_.as<float>();
  uint16_t* hb = hb_.as<uint16_t>();
  float* qkv = qkv_.as<float>();
  uint16_t* qkvb = qkvb_.as<uint16_t>();
  uint16_t* gu = gu_.as<uint16_t>();
  uint16_t* act = act_.as<uint16_t>();
  void* ws = gemm_ws_.get();
  const size_t ws_bytes = gemm_ws_.bytes();
  auto linear = [&](const uint16_t* in, int rows, int k, const cu::DeviceBuffer& w, int n, void* out, GpuType dt,
                    bool acc) { return cu::linear_bf16(cublas_, stream(), in, rows, k, w.as<uint16_t>(), n, out, dt, acc, ws, ws_bytes); };

  RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kBf16, embed_.get(), vocab, hs, md + m.tokens, total, hb, nullptr, stream()));
  RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kBf16, hb, GpuType::kF32, x, static_cast<size_t>(total) * hs, stream()));
  for (int l = 0; l < cfg_.num_hidden_layers; ++l) {
    const DeviceLayer& w = layers_[l];
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, total, hs, hs, w.input_norm.get(), eps, hf, hs, stream()));
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, hf, GpuType::kBf16, hb, static_cast<size_t>(total) * hs, stream()));
    RAGD_RETURN_IF_ERROR(linear(hb, total, hs, w.qkv, qkv_dim, qkv, GpuType::kF32, false));
    if (w.qkv_bias.get() != nullptr) {
      RAGD_RETURN_IF_ERROR(cu::add_bias(GpuType::kF32, qkv, total, qkv_dim, qkv_dim, w.qkv_bias.as<float>(), stream()));
    }
    RAGD_RETURN_IF_ERROR(cu::rope_apply(GpuType::kF32, qkv, total, nh, hd, qkv_dim, md + m.positions, inv_freq_.as<float>(), stream()));
    RAGD_RETURN_IF_ERROR(cu::rope_apply(GpuType::kF32, qkv + q_dim, total, nkv, hd, qkv_dim, md + m.positions,
                                        inv_freq_.as<float>(), stream()));
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, qkv, GpuType::kBf16, qkvb, static_cast<size_t>(total) * qkv_dim, stream()));
    RAGD_RETURN_IF_ERROR(cu::kv_write(qkvb + q_dim, qkvb + q_dim + kv_dim, total, qkv_dim, nkv, hd, md + m.slots,
                                      kvs->k_layer(l), kvs->v_layer(l), stream()));
    RAGD_RETURN_IF_ERROR(cu::copy_rows_on_device(qb_.get(), sizeof(uint16_t) * q_dim, qkvb, sizeof(uint16_t) * qkv_dim,
                                                 sizeof(uint16_t) * q_dim, total, stream()));
    RAGD_RETURN_IF_ERROR(attention(plan, *kvs, l, m));
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, attn_rows(m), GpuType::kBf16, hb, static_cast<size_t>(total) * q_dim, stream()));
    RAGD_RETURN_IF_ERROR(linear(hb, total, q_dim, w.o, hs, x, GpuType::kF32, true));
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, total, hs, hs, w.post_norm.get(), eps, hf, hs, stream()));
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, hf, GpuType::kBf16, hb, static_cast<size_t>(total) * hs, stream()));
    RAGD_RETURN_IF_ERROR(linear(hb, total, hs, w.gate_up, 2 * im, gu, GpuType::kBf16, false));
    RAGD_RETURN_IF_ERROR(cu::swiglu(GpuType::kBf16, total, im, gu, 2 * im, gu + im, 2 * im, act, im, stream()));
    RAGD_RETURN_IF_ERROR(linear(act, total, im, w.down, hs, x, GpuType::kF32, true));
  }

  // ---- outputs -----------------------------------------------------------------------------------
  if (hidden != nullptr) {
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, total, hs, hs, final_norm_.get(), eps, hf, hs, stream()));
    RAGD_RETURN_IF_ERROR(cu::copy_to_host(hidden, hf, sizeof(float) * total * hs, stream()));
  }
  if (nl > 0) {
    const cu::DeviceBuffer& head = lm_head_.get() != nullptr ? lm_head_ : embed_;
    RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kF32, x, total, hs, md + m.logit_rows, nl, hf, nullptr, stream()));
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, hf, nl, hs, hs, final_norm_.get(), eps, hf, hs, stream()));
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, hf, GpuType::kBf16, hb, static_cast<size_t>(nl) * hs, stream()));
    RAGD_RETURN_IF_ERROR(linear(hb, nl, hs, head, vocab, logits_.get(), GpuType::kF32, false));
    RAGD_RETURN_IF_ERROR(cu::copy_to_host(logits, logits_.get(), sizeof(float) * nl * vocab, stream()));
  }
  return stream_->sync();
}

float* CudaBackend::attn_rows(const CudaStepMeta& m) {
  // Consecutive decode rows wrote their outputs in place; otherwise gather every row back into step
  // order (hf_ is free here: the next use rewrites it).
  if (m.decode_seqs.empty() || m.decode_rows_consecutive) return attn_.as<float>();
  return hf_.as<float>();
}

Status CudaBackend::attention(const StepPlan& plan, CudaKvStorage& kv, int layer, const CudaStepMeta& m) {
  const int nh = cfg_.num_attention_heads, nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim;
  const int q_dim = cfg_.q_dim();
  const int bs = kv.layout().block_size;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int32_t* md = meta_.as<int32_t>();
  const uint16_t* qb = qb_.as<uint16_t>();
  float* out = attn_.as<float>();
  float* lse = lse_.as<float>();
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    if (s.n <= 1) continue;
    cu::PagedKvBf16 view;
    view.k = kv.k_layer(layer);
    view.v = kv.v_layer(layer);
    view.block_table = md + m.seq_table[si];
    view.block_size = bs;
    view.num_kv_heads = nkv;
    view.head_dim = hd;
    view.kv_len = s.kv_len;
    RAGD_RETURN_IF_ERROR(cu::attention_prefill(qb + static_cast<size_t>(s.row0) * q_dim, s.n, nh, view, scale,
                                               /*causal=*/true, s.start, out + static_cast<size_t>(s.row0) * q_dim,
                                               GpuType::kF32, lse + static_cast<size_t>(s.row0) * nh, stream()));
  }
  const int nd = static_cast<int>(m.decode_seqs.size());
  if (nd == 0) return Status::OK();
  cu::DecodeBatchBf16 b;
  b.k = kv.k_layer(layer);
  b.v = kv.v_layer(layer);
  b.block_tables = md + m.decode_tables;
  b.kv_lens = md + m.kv_lens;
  b.batch = nd;
  b.max_blocks_per_seq = m.max_decode_blocks;
  b.block_size = bs;
  b.num_heads = nh;
  b.num_kv_heads = nkv;
  b.head_dim = hd;
  const int total = plan.total_rows;
  if (m.decode_rows_consecutive) {
    const size_t r0 = plan.seqs[m.decode_seqs[0]].row0;
    b.q = qb + r0 * q_dim;
    return cu::attention_decode(b, scale, m.decode_plan, decode_ws_.get(), decode_ws_.bytes(), out + r0 * q_dim,
                                lse + r0 * nh, stream());
  }
  // Scattered decode rows: gather their queries, decode into rows [cap, cap + nd) of the output, then
  // gather all rows back into step order (row_src) for the o_proj GEMM.
  RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kBf16, qb, total, q_dim, md + m.decode_rows, nd, qdec_.get(),
                                            nullptr, stream()));
  b.q = qdec_.as<uint16_t>();
  const size_t cap = static_cast<size_t>(rows_cap_);
  RAGD_RETURN_IF_ERROR(cu::attention_decode(b, scale, m.decode_plan, decode_ws_.get(), decode_ws_.bytes(),
                                            out + cap * q_dim, lse + cap * nh, stream()));
  return cu::embedding_gather(GpuType::kF32, out, static_cast<int>(cap) + nd, q_dim, md + m.row_src, total,
                              hf_.as<float>(), nullptr, stream());
}

}  // namespace ragd::engine
