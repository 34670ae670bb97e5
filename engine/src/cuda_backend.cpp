#include "cuda_backend.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "ragd/kernels/cuda/attention.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/gemv.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/cuda/sampling.h"
#include "ragd/common/log.h"
#include "ragd/kernels/weight_matrix.h"

namespace ragd::engine {

namespace cu = kernels::cuda;
using GpuType = cu::DType;

namespace {

// The kernel choices the measurement switches make (a captured graph holds one of them).
int kernel_variant() {
  return (cu::switch_off("RAGD_CUDA_GEMV") ? 1 : 0) | (cu::switch_off("RAGD_CUDA_FUSED") ? 2 : 0) |
         (cu::switch_on("RAGD_CUDA_PDL") ? 4 : 0);
}

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

// Smallest metadata buffers: a step's few hundred ints never reallocate them.
constexpr size_t kMinMetaBytes = size_t{1} << 16;
// Decode steps pad their block tables to a multiple of this many blocks (a graph per 512 tokens of
// KV length at block size 16); at most kMaxDecodeGraphs captured shapes are kept.
constexpr int kDecodeBlockQuantum = 32;
constexpr size_t kMaxDecodeGraphs = 32;

int ceil_div(int a, int b) { return (a + b - 1) / b; }

}  // namespace

// What one step needs on the device besides activations: built on the host from the active rows,
// uploaded in one copy (again after a hook narrows the rows). Offsets are int32 indices into it.
struct CudaStepMeta {
  static constexpr size_t kNone = static_cast<size_t>(-1);
  size_t tokens = 0, positions = 0, slots = 0, row_src = 0, decode_rows = 0, kv_lens = 0, decode_tables = 0;
  std::vector<size_t> seq_table;   // per plan sequence: its block table (sequences that are not decodes)
  std::vector<size_t> seq_keypos;  // per plan sequence: its key positions, kNone when slot j holds position j
  std::vector<int> decode_seqs;    // contiguous one-token runs, attended by the split-KV decode kernel
  bool decode_rows_consecutive = true;  // their rows are r0, r0 + 1, ...
  int max_decode_blocks = 0;
  cu::DecodePlan decode_plan;
  bool attn_replaced = false;  // a hook's attention output is in attn_, in row order
  std::vector<int32_t> host;
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

Result<std::unique_ptr<Backend>> create_cuda_backend(const ModelConfig& cfg, HostWeights weights,
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

Status CudaBackend::attend(KvPool& pool, const BlockTable& table, int layer, const float* q, int n_q,
                           const int32_t* q_pos, float* out, float* lse) {
  RAGD_ASSIGN_OR_RETURN(CudaKvStorage * kvs, device_storage(pool));
  if (n_q <= 0) return Status::OK();
  RAGD_RETURN_IF_ERROR(cu::set_device(device_));
  RAGD_RETURN_IF_ERROR(reserve(n_q, 0));
  kvs->wait_layer(layer);
  const int nh = cfg_.num_attention_heads, q_dim = cfg_.q_dim(), bs = kvs->layout().block_size;
  const int kv_len = table.num_tokens();
  // q_pos, the table's blocks and, when they are not the slots, its positions.
  std::vector<int32_t> h(q_pos, q_pos + n_q);
  const size_t blocks_at = h.size();
  const int nb = ceil_div(kv_len, bs);
  h.insert(h.end(), table.blocks().begin(), table.blocks().begin() + nb);
  const size_t keypos_at = h.size();
  if (!table.positions_are_slots()) h.insert(h.end(), table.positions().begin(), table.positions().begin() + kv_len);
  RAGD_RETURN_IF_ERROR(stream_->sync());  // the pinned staging is free
  RAGD_RETURN_IF_ERROR(meta_host_.reserve(std::max(h.size() * sizeof(int32_t), kMinMetaBytes)));
  RAGD_RETURN_IF_ERROR(meta_.reserve(std::max(h.size() * sizeof(int32_t), kMinMetaBytes)));
  std::copy(h.begin(), h.end(), meta_host_.as<int32_t>());
  RAGD_RETURN_IF_ERROR(cu::copy_to_device(meta_.get(), meta_host_.get(), h.size() * sizeof(int32_t), stream()));
  const int32_t* md = meta_.as<int32_t>();
  RAGD_RETURN_IF_ERROR(cu::copy_to_device(hf_.get(), q, sizeof(float) * n_q * q_dim, stream()));
  RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, hf_.get(), GpuType::kBf16, qb_.get(), static_cast<size_t>(n_q) * q_dim, stream()));
  cu::PagedKvBf16 view;
  view.k = kvs->k_layer(layer);
  view.v = kvs->v_layer(layer);
  view.block_table = md + blocks_at;
  view.block_size = bs;
  view.num_kv_heads = cfg_.num_key_value_heads;
  view.head_dim = cfg_.head_dim;
  view.kv_len = kv_len;
  view.key_pos = table.positions_are_slots() ? nullptr : md + keypos_at;
  const float scale = 1.0f / std::sqrt(static_cast<float>(cfg_.head_dim));
  RAGD_RETURN_IF_ERROR(cu::attention_prefill_positions(qb_.as<uint16_t>(), n_q, nh, view, scale, md, attn_.get(),
                                                       GpuType::kF32, lse_.as<float>(), stream()));
  RAGD_RETURN_IF_ERROR(cu::copy_to_host(out, attn_.get(), sizeof(float) * n_q * q_dim, stream()));
  RAGD_RETURN_IF_ERROR(cu::copy_to_host(lse, lse_.get(), sizeof(float) * n_q * nh, stream()));
  return stream_->sync();
}

Result<CudaKvStorage*> CudaBackend::device_storage(KvPool& pool) const {
  auto* kvs = dynamic_cast<CudaKvStorage*>(&pool.storage());
  if (kvs == nullptr) {
    return Status::FailedPrecondition("cuda backend: the KV pool's storage is on '" +
                                      std::string(pool.storage().device()) + "', not on " + name_);
  }
  return kvs;
}

Status CudaBackend::reserve(int rows, int logit_rows) {
  if (rows > rows_cap_) {
    const size_t r = static_cast<size_t>(std::max(rows, 64));
    const size_t hs = cfg_.hidden_size, im = cfg_.intermediate_size, qd = cfg_.q_dim(),
                 qkv = qd + 2 * static_cast<size_t>(cfg_.kv_dim()), nh = cfg_.num_attention_heads;
    const size_t wide = std::max(hs, qd);
    RAGD_RETURN_IF_ERROR(x_.reserve(r * hs * sizeof(float)));
    RAGD_RETURN_IF_ERROR(hf_.reserve(r * wide * sizeof(float)));
    RAGD_RETURN_IF_ERROR(hb_.reserve(r * wide * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(qkv_.reserve(r * qkv * sizeof(float)));
    RAGD_RETURN_IF_ERROR(qkvb_.reserve(r * qkv * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(qb_.reserve(r * qd * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(qdec_.reserve(r * qd * sizeof(uint16_t)));
    // Rows [0, r) hold the multi-token sequences' outputs in row order, rows [r, 2r) the decode
    // outputs when their rows are not consecutive (gathered back into row order afterwards).
    RAGD_RETURN_IF_ERROR(attn_.reserve(2 * r * qd * sizeof(float)));
    RAGD_RETURN_IF_ERROR(lse_.reserve(2 * r * nh * sizeof(float)));
    RAGD_RETURN_IF_ERROR(lse_rows_.reserve(r * nh * sizeof(float)));
    RAGD_RETURN_IF_ERROR(gu_.reserve(r * 2 * im * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(act_.reserve(r * im * sizeof(uint16_t)));
    RAGD_RETURN_IF_ERROR(keep_.reserve(r * sizeof(int32_t)));
    rows_cap_ = static_cast<int>(r);
  }
  if (logit_rows > logit_cap_) {
    RAGD_RETURN_IF_ERROR(logits_.reserve(static_cast<size_t>(logit_rows) * cfg_.vocab_size * sizeof(float)));
    logit_cap_ = logit_rows;
  }
  return Status::OK();
}

Status CudaBackend::upload_meta(const StepPlan& plan, int rows, int bs, CudaStepMeta* mp) {
  CudaStepMeta& m = *mp;
  const size_t ns = plan.seqs.size();
  m.seq_table.assign(ns, CudaStepMeta::kNone);
  m.seq_keypos.assign(ns, CudaStepMeta::kNone);
  m.decode_seqs.clear();
  m.decode_rows_consecutive = true;
  m.max_decode_blocks = 0;
  int max_decode_len = 0;
  for (size_t si = 0; si < ns; ++si) {
    const SeqRun& run = runs_[si];
    if (!(run.contiguous && run.n == 1)) continue;
    if (!m.decode_seqs.empty() && run.row0 != runs_[m.decode_seqs.back()].row0 + 1) m.decode_rows_consecutive = false;
    m.decode_seqs.push_back(static_cast<int>(si));
    m.max_decode_blocks = std::max(m.max_decode_blocks, ceil_div(plan.seqs[si].kv_len, bs));
    max_decode_len = std::max(max_decode_len, plan.seqs[si].kv_len);
  }
  const int nd = static_cast<int>(m.decode_seqs.size());
  if (nd > 0 && nd == rows) {
    // A pure decode step: tables padded to a bucket, so the kernel arguments (and the split plan)
    // stay the same while the sequences grow — the step can replay a captured graph.
    m.max_decode_blocks = ceil_div(m.max_decode_blocks, kDecodeBlockQuantum) * kDecodeBlockQuantum;
    max_decode_len = m.max_decode_blocks * bs;
  }
  auto& h = m.host;
  h.clear();
  auto take = [&h](size_t n) {
    const size_t off = h.size();
    h.resize(off + n, 0);
    return off;
  };
  m.tokens = take(rows);
  m.positions = take(rows);
  m.slots = take(rows);
  m.row_src = take(rows);
  m.decode_rows = take(nd);
  m.kv_lens = take(nd);
  m.decode_tables = take(static_cast<size_t>(nd) * m.max_decode_blocks);
  for (int r = 0; r < rows; ++r) {
    h[m.tokens + r] = tok_[r];
    h[m.positions + r] = pos_[r];
    h[m.slots + r] = slot_[r];
    h[m.row_src + r] = r;
  }
  for (size_t si = 0; si < ns; ++si) {
    const SeqRun& run = runs_[si];
    const SeqPlan& s = plan.seqs[si];
    if (run.n == 0 || (run.contiguous && run.n == 1)) continue;
    const int nb = ceil_div(s.kv_len, bs);
    m.seq_table[si] = take(nb);
    std::copy(s.table->blocks().begin(), s.table->blocks().begin() + nb, h.begin() + m.seq_table[si]);
    if (!run.contiguous && !s.key_pos.empty()) {
      m.seq_keypos[si] = take(s.key_pos.size());
      std::copy(s.key_pos.begin(), s.key_pos.end(), h.begin() + m.seq_keypos[si]);
    }
  }
  for (int d = 0; d < nd; ++d) {
    const SeqPlan& s = plan.seqs[m.decode_seqs[d]];
    const int row = runs_[m.decode_seqs[d]].row0;
    h[m.decode_rows + d] = row;
    h[m.kv_lens + d] = s.kv_len;
    const int nb = ceil_div(s.kv_len, bs);
    std::copy(s.table->blocks().begin(), s.table->blocks().begin() + nb,
              h.begin() + m.decode_tables + static_cast<size_t>(d) * m.max_decode_blocks);
    if (!m.decode_rows_consecutive) h[m.row_src + row] = rows_cap_ + d;
  }
  const size_t bytes = h.size() * sizeof(int32_t);
  RAGD_RETURN_IF_ERROR(stream_->sync());  // the pinned staging's last copy is done
  RAGD_RETURN_IF_ERROR(meta_host_.reserve(std::max(bytes, kMinMetaBytes)));
  RAGD_RETURN_IF_ERROR(meta_.reserve(std::max(bytes, kMinMetaBytes)));
  std::copy(h.begin(), h.end(), meta_host_.as<int32_t>());
  RAGD_RETURN_IF_ERROR(cu::copy_to_device(meta_.get(), meta_host_.get(), bytes, stream()));
  if (nd > 0) {
    cu::DecodeBatchBf16 probe;
    probe.batch = nd;
    probe.num_heads = cfg_.num_attention_heads;
    probe.head_dim = cfg_.head_dim;
    m.decode_plan = cu::plan_attention_decode(nd, cfg_.num_key_value_heads, max_decode_len, num_sms_);
    RAGD_RETURN_IF_ERROR(decode_ws_.reserve(cu::attention_decode_workspace_bytes(probe, m.decode_plan)));
  }
  return Status::OK();
}

Status CudaBackend::compact(const std::vector<int>& keep, int* rows) {
  const int n_old = *rows;
  RAGD_RETURN_IF_ERROR(check_kept_rows(keep, n_old));
  const int k = static_cast<int>(keep.size());
  const int hs = cfg_.hidden_size, qkv_dim = cfg_.q_dim() + 2 * cfg_.kv_dim();
  // Device: gather the kept rows of the residual and of this layer's bf16 Q/K/V.
  if (k > 0) {
    std::vector<int32_t> ids(keep.begin(), keep.end());
    RAGD_RETURN_IF_ERROR(cu::copy_to_device(keep_.get(), ids.data(), sizeof(int32_t) * k, stream()));
    RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kF32, x_.get(), n_old, hs, keep_.as<int32_t>(), k, hf_.get(),
                                              nullptr, stream()));
    RAGD_RETURN_IF_ERROR(cu::copy_on_device(x_.get(), hf_.get(), sizeof(float) * k * hs, stream()));
    // qkv_ (f32, free until the next layer's projection) holds the gathered bf16 rows meanwhile.
    RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kBf16, qkvb_.get(), n_old, qkv_dim, keep_.as<int32_t>(), k,
                                              qkv_.get(), nullptr, stream()));
    RAGD_RETURN_IF_ERROR(cu::copy_on_device(qkvb_.get(), qkv_.get(), sizeof(uint16_t) * k * qkv_dim, stream()));
    RAGD_RETURN_IF_ERROR(stream_->sync());  // ids lives on this frame
  }
  // Host: the per-row arrays and the hook's f32 Q/K/V view.
  float* hq = qkv_host_.as<float>();
  for (int i = 0; i < k; ++i) {
    const int src = keep[i];
    if (i == src) continue;  // i < src: moving forward never overwrites a row still to be read
    pos_[i] = pos_[src];
    slot_[i] = slot_[src];
    tok_[i] = tok_[src];
    step_row_[i] = step_row_[src];
    row_info_[i] = row_info_[src];
    std::copy(hq + static_cast<size_t>(src) * qkv_dim, hq + static_cast<size_t>(src + 1) * qkv_dim,
              hq + static_cast<size_t>(i) * qkv_dim);
  }
  *rows = k;
  narrow_runs(std::span<const StepRow>(row_info_.data(), k), &runs_);
  return Status::OK();
}

Status CudaBackend::forward(const StepPlan& plan, KvPool& pool, float* logits, SampleResult* picks, float* hidden,
                            LayerHook* hook) {
  const int total = plan.total_rows;
  if (total <= 0) return Status::OK();
  RAGD_ASSIGN_OR_RETURN(CudaKvStorage * kvs, device_storage(pool));
  RAGD_RETURN_IF_ERROR(cu::set_device(device_));
  const int hs = cfg_.hidden_size, im = cfg_.intermediate_size, nh = cfg_.num_attention_heads,
            nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim, vocab = cfg_.vocab_size;
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const int bs = kvs->layout().block_size;
  const float eps = cfg_.rms_norm_eps;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int nl = logits != nullptr ? static_cast<int>(plan.logit_rows.size()) : 0;
  const int np = picks != nullptr ? static_cast<int>(plan.pick_rows.size()) : 0;
  RAGD_RETURN_IF_ERROR(reserve(total, nl + np));

  // ---- the active rows (all of them until a hook narrows them) ------------------------------------
  for (auto* v : {&pos_, &slot_, &tok_}) v->resize(std::max(v->size(), static_cast<size_t>(total)));
  if (step_row_.size() < static_cast<size_t>(total)) step_row_.resize(total);
  if (row_info_.size() < static_cast<size_t>(total)) row_info_.resize(total);
  runs_.assign(plan.seqs.size(), SeqRun{});
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    runs_[si] = {s.row0, s.n, s.contiguous};
    const auto& blocks = s.table->blocks();
    for (int i = 0; i < s.n; ++i) {
      const int r = s.row0 + i, t = s.slot(i);
      tok_[r] = s.tokens[i];
      pos_[r] = s.position(i);
      slot_[r] = blocks[t / bs] * bs + t % bs;
      step_row_[r] = r;
      row_info_[r] = {static_cast<int>(si), i, pos_[r], t};
    }
  }
  CudaStepMeta m;
  RAGD_RETURN_IF_ERROR(upload_meta(plan, total, bs, &m));
  if (hook != nullptr) {
    RAGD_RETURN_IF_ERROR(qkv_host_.reserve(sizeof(float) * total * qkv_dim));
    RAGD_RETURN_IF_ERROR(attn_host_.reserve(sizeof(float) * total * (q_dim + nh)));
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
  const LayerShape shape{nh, nkv, hd};

  int rows = total;
  bool narrowed = false;
  // Fused decode kernels (cu::gemv_bf16's prologue / epilogue forms for one-row steps, one launch
  // for RoPE + bf16 + KV write): with no hook, which reads Q/K/V between those steps.
  // RAGD_CUDA_FUSED=0 keeps the unfused chain (a measurement switch, read at every step).
  const bool fuse = hook == nullptr && !cu::switch_off("RAGD_CUDA_FUSED");
  // The tail of a layer's QKV projection, launch by launch: RoPE on the f32 rows, a hook's look at
  // Q/K/V (it may change them, or drop rows: `rows` shrinks, to 0 when none is left), bf16, the KV
  // write and the bf16 queries.
  auto qkv_tail = [&](int l, float* hq) -> Status {
    const int32_t* md = meta_.as<int32_t>();
    // Q's and K's heads are adjacent in a QKV row: one launch rotates both.
    RAGD_RETURN_IF_ERROR(cu::rope_apply(GpuType::kF32, qkv, rows, nh + nkv, hd, qkv_dim, md + m.positions,
                                        inv_freq_.as<float>(), stream()));
    RowSelection keep;
    if (hook != nullptr) {
      // The hook's view is host memory: Q/K/V go there and come back (it may change them).
      const size_t bytes = sizeof(float) * rows * qkv_dim;
      RAGD_RETURN_IF_ERROR(cu::copy_to_host(hq, qkv, bytes, stream()));
      RAGD_RETURN_IF_ERROR(stream_->sync());
      const LayerQkv view = qkv_view(l, std::span<const StepRow>(row_info_.data(), rows), shape, hq, qkv_dim);
      RAGD_RETURN_IF_ERROR(hook->on_qkv(view, &keep));
      RAGD_RETURN_IF_ERROR(cu::copy_to_device(qkv, hq, bytes, stream()));
    }
    RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, qkv, GpuType::kBf16, qkvb, static_cast<size_t>(rows) * qkv_dim, stream()));
    RAGD_RETURN_IF_ERROR(cu::kv_write(qkvb + q_dim, qkvb + q_dim + kv_dim, rows, qkv_dim, nkv, hd, md + m.slots,
                                      kvs->k_layer(l), kvs->v_layer(l), stream()));
    if (keep.narrowed) {
      RAGD_RETURN_IF_ERROR(compact(keep.rows, &rows));
      narrowed = true;
      if (rows == 0) return Status::OK();
      RAGD_RETURN_IF_ERROR(upload_meta(plan, rows, bs, &m));
    }
    RAGD_RETURN_IF_ERROR(cu::copy_rows_on_device(qb_.get(), sizeof(uint16_t) * q_dim, qkvb, sizeof(uint16_t) * qkv_dim,
                                                 sizeof(uint16_t) * q_dim, rows, stream()));
    return Status::OK();
  };
  auto layers = [&]() -> Status {
    {
      const int32_t* md = meta_.as<int32_t>();
      RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kBf16, embed_.get(), vocab, hs, md + m.tokens, total, hb, nullptr, stream()));
      RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kBf16, hb, GpuType::kF32, x, static_cast<size_t>(total) * hs, stream()));
    }
    for (int l = 0; l < cfg_.num_hidden_layers && rows > 0; ++l) {
      const DeviceLayer& w = layers_[l];
      kvs->wait_layer(l);  // KV of this layer still coming up from the host (a segment upload)
      const int32_t* md = meta_.as<int32_t>();
      const cu::GemvArgs qkv_args{.input = cu::GemvInput::kRmsNormF32, .x = x, .norm_w = w.input_norm.as<float>(),
                                  .eps = eps, .k = hs, .w = w.qkv.as<uint16_t>(), .n = qkv_dim, .y = qkv};
      if (fuse && rows == 1 && cu::gemv_fusable(qkv_args)) {
        RAGD_RETURN_IF_ERROR(cu::gemv_bf16(qkv_args, stream()));
      } else {
        RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, rows, hs, hs, w.input_norm.get(), eps, GpuType::kBf16, hb, hs, stream()));
        RAGD_RETURN_IF_ERROR(linear(hb, rows, hs, w.qkv, qkv_dim, qkv, GpuType::kF32, false));
      }
      if (w.qkv_bias.get() != nullptr) {
        RAGD_RETURN_IF_ERROR(cu::add_bias(GpuType::kF32, qkv, rows, qkv_dim, qkv_dim, w.qkv_bias.as<float>(), stream()));
      }
      float* hq = qkv_host_.as<float>();
      if (fuse) {  // RoPE, bf16 queries and the KV write in one launch
        RAGD_RETURN_IF_ERROR(cu::rope_store_qkv(qkv, rows, qkv_dim, nh, nkv, hd, md + m.positions, inv_freq_.as<float>(),
                                                qb_.as<uint16_t>(), md + m.slots, kvs->k_layer(l), kvs->v_layer(l),
                                                stream()));
      } else {
        RAGD_RETURN_IF_ERROR(qkv_tail(l, hq));
        if (rows == 0) break;
      }
      m.attn_replaced = false;
      if (hook != nullptr) {
        float* ho = attn_host_.as<float>();
        float* hl = ho + static_cast<size_t>(rows) * q_dim;
        auto local = [&]() -> Status {
          RAGD_RETURN_IF_ERROR(attention(plan, *kvs, l, rows, m));
          RAGD_RETURN_IF_ERROR(cu::copy_to_host(ho, attn_rows(m), sizeof(float) * rows * q_dim, stream()));
          RAGD_RETURN_IF_ERROR(cu::copy_to_host(hl, lse_rows(m), sizeof(float) * rows * nh, stream()));
          return stream_->sync();
        };
        const LayerAttention att = attention_view(l, std::span<const StepRow>(row_info_.data(), rows), shape, scale, hq,
                                                  qkv_dim, ho, hl, local);
        RAGD_ASSIGN_OR_RETURN(m.attn_replaced, hook->on_attention(att));
        if (m.attn_replaced) RAGD_RETURN_IF_ERROR(cu::copy_to_device(attn_.get(), ho, sizeof(float) * rows * q_dim, stream()));
      }
      if (!m.attn_replaced) RAGD_RETURN_IF_ERROR(attention(plan, *kvs, l, rows, m));
      const cu::GemvArgs o_args{.input = cu::GemvInput::kF32, .x = attn_rows(m), .k = q_dim, .w = w.o.as<uint16_t>(),
                                .n = hs, .y = x, .accumulate = true};
      if (fuse && rows == 1 && cu::gemv_fusable(o_args)) {
        RAGD_RETURN_IF_ERROR(cu::gemv_bf16(o_args, stream()));
      } else {
        RAGD_RETURN_IF_ERROR(cu::convert(GpuType::kF32, attn_rows(m), GpuType::kBf16, hb, static_cast<size_t>(rows) * q_dim, stream()));
        RAGD_RETURN_IF_ERROR(linear(hb, rows, q_dim, w.o, hs, x, GpuType::kF32, true));
      }
      const cu::GemvArgs mlp_args{.input = cu::GemvInput::kRmsNormF32, .x = x, .norm_w = w.post_norm.as<float>(),
                                  .eps = eps, .k = hs, .w = w.gate_up.as<uint16_t>(), .n = 2 * im,
                                  .output = cu::GemvOutput::kSwiGlu, .y = act};
      if (fuse && rows == 1 && cu::gemv_fusable(mlp_args)) {
        RAGD_RETURN_IF_ERROR(cu::gemv_bf16(mlp_args, stream()));
      } else {
        RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, rows, hs, hs, w.post_norm.get(), eps, GpuType::kBf16, hb, hs, stream()));
        RAGD_RETURN_IF_ERROR(linear(hb, rows, hs, w.gate_up, 2 * im, gu, GpuType::kBf16, false));
        RAGD_RETURN_IF_ERROR(cu::swiglu(GpuType::kBf16, rows, im, gu, 2 * im, gu + im, 2 * im, act, im, stream()));
      }
      RAGD_RETURN_IF_ERROR(linear(act, rows, im, w.down, hs, x, GpuType::kF32, true));
    }
    return Status::OK();
  };
  const bool decode_step = hook == nullptr && !m.decode_seqs.empty() &&
                           static_cast<int>(m.decode_seqs.size()) == total && m.decode_rows_consecutive;
  if (decode_step && !cu::switch_off("RAGD_CUDA_GRAPHS")) {
    RAGD_RETURN_IF_ERROR(run_decode_graph(m, total, *kvs, layers));
  } else {
    RAGD_RETURN_IF_ERROR(layers());
  }

  // ---- outputs -----------------------------------------------------------------------------------
  if (hidden != nullptr) {
    if (narrowed) return Status::InvalidArgument("cuda backend: hidden states of every row were asked for, but a layer hook dropped rows");
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, x, rows, hs, hs, final_norm_.get(), eps, hf, hs, stream()));
    RAGD_RETURN_IF_ERROR(cu::copy_to_host(hidden, hf, sizeof(float) * rows * hs, stream()));
  }
  // The logit rows, then the pick rows, through one head GEMM; the logit rows come back whole, the
  // pick rows as their greedy picks (8 bytes a row instead of vocab floats).
  std::vector<int32_t> pick_tok(np);
  std::vector<float> pick_lp(np);
  if (nl + np > 0) {
    RAGD_ASSIGN_OR_RETURN(const std::vector<int> active,
                          logit_active_rows(plan, narrowed, std::span<const int>(step_row_.data(), rows), total));
    std::vector<int32_t> ids(active.begin(), active.begin() + nl);
    ids.insert(ids.end(), active.begin() + static_cast<std::ptrdiff_t>(plan.logit_rows.size()), active.end());
    const int nt = nl + np;
    RAGD_RETURN_IF_ERROR(keep_.reserve(sizeof(int32_t) * std::max(nt, rows_cap_)));
    RAGD_RETURN_IF_ERROR(cu::copy_to_device(keep_.get(), ids.data(), sizeof(int32_t) * nt, stream()));
    const cu::DeviceBuffer& head = lm_head_.get() != nullptr ? lm_head_ : embed_;
    RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kF32, x, rows, hs, keep_.as<int32_t>(), nt, hf, nullptr, stream()));
    RAGD_RETURN_IF_ERROR(cu::rmsnorm(GpuType::kF32, hf, nt, hs, hs, final_norm_.get(), eps, GpuType::kBf16, hb, hs, stream()));
    RAGD_RETURN_IF_ERROR(linear(hb, nt, hs, head, vocab, logits_.get(), GpuType::kF32, false));
    if (nl > 0) RAGD_RETURN_IF_ERROR(cu::copy_to_host(logits, logits_.get(), sizeof(float) * nl * vocab, stream()));
    if (np > 0) {
      RAGD_RETURN_IF_ERROR(picks_.reserve(sizeof(int32_t) * np + sizeof(float) * np));
      auto* tok = picks_.as<int32_t>();
      auto* lp = reinterpret_cast<float*>(tok + np);
      const float* rows_p = logits_.as<float>() + static_cast<size_t>(nl) * vocab;
      RAGD_RETURN_IF_ERROR(cu::argmax_rows(rows_p, np, vocab, vocab, tok, lp, stream()));
      RAGD_RETURN_IF_ERROR(cu::copy_to_host(pick_tok.data(), tok, sizeof(int32_t) * np, stream()));
      RAGD_RETURN_IF_ERROR(cu::copy_to_host(pick_lp.data(), lp, sizeof(float) * np, stream()));
    }
  }
  RAGD_RETURN_IF_ERROR(stream_->sync());
  for (int k = 0; k < np; ++k) picks[k] = SampleResult{pick_tok[k], pick_lp[k]};
  return Status::OK();
}

Status CudaBackend::run_decode_graph(const CudaStepMeta& m, int rows, const CudaKvStorage& kv,
                                     const std::function<Status()>& layers) {
  kv.wait_uploads();  // outside any capture: a graph cannot wait for the copy stream's events
  DecodeGraphKey key;
  key.rows = rows;
  key.variant = kernel_variant();
  key.max_blocks = m.max_decode_blocks;
  key.splits = m.decode_plan.num_splits;
  key.keys_per_split = m.decode_plan.keys_per_split;
  key.buffers = {x_.get(),   hf_.get(),  hb_.get(),   qkv_.get(),        qkvb_.get(),    qb_.get(),      attn_.get(),
                 lse_.get(), gu_.get(),  act_.get(),  meta_.get(),       decode_ws_.get(), gemm_ws_.get(), &kv};
  auto it = std::find_if(graphs_.begin(), graphs_.end(), [&](const DecodeGraph& g) { return g.key == key; });
  if (it == graphs_.end()) {  // first sighting: remember the shape, run without a graph
    if (graphs_.size() >= kMaxDecodeGraphs) {
      graphs_.erase(std::min_element(graphs_.begin(), graphs_.end(),
                                     [](const DecodeGraph& a, const DecodeGraph& b) { return a.last_use < b.last_use; }));
    }
    graphs_.push_back(DecodeGraph{key, cu::Graph(), ++graph_clock_, false});
    return layers();
  }
  it->last_use = ++graph_clock_;
  if (it->failed) return layers();
  if (it->graph.nodes() == 0) {
    auto g = cu::Graph::capture(stream(), layers);
    if (!g.ok()) {
      log::engine()->warn("cuda backend: decode step of {} rows not captured as a graph ({}); it runs without one",
                          rows, g.status().to_string());
      it->failed = true;
      return layers();
    }
    it->graph = std::move(*g);
  }
  return it->graph.launch(stream());
}

float* CudaBackend::attn_rows(const CudaStepMeta& m) {
  // In place unless decode rows were scattered (then gathered into hf_, free until the next use
  // rewrites it) ; a hook's replacement is in attn_.
  if (m.attn_replaced || m.decode_seqs.empty() || m.decode_rows_consecutive) return attn_.as<float>();
  return hf_.as<float>();
}

float* CudaBackend::lse_rows(const CudaStepMeta& m) {
  if (m.decode_seqs.empty() || m.decode_rows_consecutive) return lse_.as<float>();
  return lse_rows_.as<float>();
}

Status CudaBackend::attention(const StepPlan& plan, CudaKvStorage& kv, int layer, int rows, const CudaStepMeta& m) {
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
    const SeqRun& run = runs_[si];
    if (run.n == 0 || (run.contiguous && run.n == 1)) continue;
    cu::PagedKvBf16 view;
    view.k = kv.k_layer(layer);
    view.v = kv.v_layer(layer);
    view.block_table = md + m.seq_table[si];
    view.block_size = bs;
    view.num_kv_heads = nkv;
    view.head_dim = hd;
    view.kv_len = s.kv_len;
    const size_t r0 = run.row0;
    if (run.contiguous) {  // the fast path: causal with one offset
      RAGD_RETURN_IF_ERROR(cu::attention_prefill(qb + r0 * q_dim, run.n, nh, view, scale, /*causal=*/true, s.start,
                                                 out + r0 * q_dim, GpuType::kF32, lse + r0 * nh, stream()));
    } else {
      view.key_pos = m.seq_keypos[si] == CudaStepMeta::kNone ? nullptr : md + m.seq_keypos[si];
      RAGD_RETURN_IF_ERROR(cu::attention_prefill_positions(qb + r0 * q_dim, run.n, nh, view, scale,
                                                           md + m.positions + r0, out + r0 * q_dim, GpuType::kF32,
                                                           lse + r0 * nh, stream()));
    }
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
  if (m.decode_rows_consecutive) {
    const size_t r0 = runs_[m.decode_seqs[0]].row0;
    b.q = qb + r0 * q_dim;
    return cu::attention_decode(b, scale, m.decode_plan, decode_ws_.get(), decode_ws_.bytes(), out + r0 * q_dim,
                                lse + r0 * nh, stream());
  }
  // Scattered decode rows: gather their queries, decode into rows [cap, cap + nd) of the outputs,
  // then gather every row back into row order (row_src) for the o_proj GEMM (and a hook's LSE).
  RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kBf16, qb, rows, q_dim, md + m.decode_rows, nd, qdec_.get(),
                                            nullptr, stream()));
  b.q = qdec_.as<uint16_t>();
  const size_t cap = static_cast<size_t>(rows_cap_);
  RAGD_RETURN_IF_ERROR(cu::attention_decode(b, scale, m.decode_plan, decode_ws_.get(), decode_ws_.bytes(),
                                            out + cap * q_dim, lse + cap * nh, stream()));
  RAGD_RETURN_IF_ERROR(cu::embedding_gather(GpuType::kF32, out, static_cast<int>(cap) + nd, q_dim, md + m.row_src,
                                            rows, hf_.as<float>(), nullptr, stream()));
  return cu::embedding_gather(GpuType::kF32, lse, static_cast<int>(cap) + nd, nh, md + m.row_src, rows,
                              lse_rows_.as<float>(), nullptr, stream());
}

}  // namespace ragd::engine
