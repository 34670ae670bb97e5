#include "cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "layer_loop.h"
#include "ragd/kernels/activation.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/norm.h"
#include "ragd/kernels/rope.h"
#include "ragd/kernels/threads.h"

static_assert(ragd::engine::kNoPosition == ragd::kernels::kNoPosition, "one hole marker for engine and kernels");

namespace ragd::engine {

namespace {

template <typename T>
void grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
}

}  // namespace

CpuBackend::CpuBackend(const ModelConfig& cfg, std::shared_ptr<const HostWeights> weights, const CpuBackendOptions& opts)
    : cfg_(cfg), w_(std::move(weights)), threads_(opts.num_threads) {
  kernels::set_num_threads(opts.num_threads);
  weight_bytes_ = w_->bytes();
  inv_freq_ = rope_inv_freq(cfg_);
}

Result<std::unique_ptr<Backend>> make_cpu_backend(const ModelConfig& cfg, HostWeights weights,
                                                  const CpuBackendOptions& opts) {
  return std::unique_ptr<Backend>(
      new CpuBackend(cfg, std::make_shared<const HostWeights>(std::move(weights)), opts));
}

Result<std::unique_ptr<Backend>> CpuBackend::share(int num_threads) const {
  CpuBackendOptions opts;
  opts.num_threads = num_threads;
  return std::unique_ptr<Backend>(new CpuBackend(cfg_, w_, opts));
}

void CpuBackend::rerotate_keys(float* k, size_t rows, int64_t delta) const {
  rerotate_host_keys(cfg_, inv_freq_.data(), k, rows, delta);
}

void CpuBackend::write_rerotated(KvStorage& st, std::span<const int32_t> blocks, int t0, int n, const float* k,
                                 const float* v, int64_t delta) const {
  // Runs on the stepping thread (the pool's owner); the layers go to the kernels' team
  // (kernels/threads.h), and a kernel called from a layer's task runs on that task's thread.
  // HostKvStorage writes of different layers touch disjoint memory.
  const KvLayout& L = st.layout();
  const size_t per_layer = static_cast<size_t>(n) * L.token_floats();
  for_each_layer(L.num_layers, per_layer, [&](int l) {
    thread_local std::vector<float> rotated;
    rotated.assign(k + l * per_layer, k + (l + 1) * per_layer);
    rerotate_host_keys(cfg_, inv_freq_.data(), rotated.data(), static_cast<size_t>(n), delta);
    st.write_tokens(l, blocks, t0, n, rotated.data(), v + l * per_layer);
  });
}

Status CpuBackend::attend(KvPool& pool, const BlockTable& table, int layer, const float* q, int n_q,
                          const int32_t* q_pos, float* out, float* lse) {
  RAGD_ASSIGN_OR_RETURN(HostKvStorage * kvs, host_storage(pool));
  const int nh = cfg_.num_attention_heads;
  // Explicit key positions cost a check per key; when every query is at or after every key (a
  // decode step over a shard whose slots are out of position order, as after a shrink), none is
  // masked and the plain path gives the same result. A hole is kNoPosition, above any query.
  const int32_t* key_pos = table.positions_are_slots() ? nullptr : table.positions().data();
  if (key_pos != nullptr) {
    const int32_t min_q = *std::min_element(q_pos, q_pos + n_q);
    const std::span<const int32_t> kp = table.positions();
    if (*std::max_element(kp.begin(), kp.end()) <= min_q) key_pos = nullptr;
  }
  const kernels::PagedKv kv = paged_view(*kvs, layer, table.blocks().data(), table.num_tokens(), key_pos);
  const size_t q_dim = cfg_.q_dim();
  if (n_q <= 8) {  // a few decoding queries: the split-K decode kernel keeps every thread busy
    std::vector<kernels::DecodeItem> items(n_q);
    for (int i = 0; i < n_q; ++i) items[i] = {q + i * q_dim, kv, out + i * q_dim, lse + static_cast<size_t>(i) * nh, q_pos[i]};
    return kernels::attention_decode(items, nh, softmax_scale(), 0);
  }
  return kernels::attention_prefill_positions(q, n_q, nh, kv, softmax_scale(), q_pos, out, lse);
}

Result<HostKvStorage*> CpuBackend::host_storage(KvPool& pool) {
  auto* kvs = dynamic_cast<HostKvStorage*>(&pool.storage());
  if (kvs == nullptr) {
    return Status::FailedPrecondition("cpu backend: the KV pool's storage is on '" +
                                      std::string(pool.storage().device()) + "', not in host memory");
  }
  return kvs;
}

kernels::PagedKv CpuBackend::paged_view(HostKvStorage& kvs, int layer, const int32_t* blocks, int kv_len,
                                        const int32_t* key_pos) const {
  kernels::PagedKv kv;
  kv.k = kvs.k_layer(layer);
  kv.v = kvs.v_layer(layer);
  kv.dtype = kvs.layout().dtype;
  kv.k_scale = kvs.k_scale(layer);
  kv.v_scale = kvs.v_scale(layer);
  kv.block_table = blocks;
  kv.block_size = kvs.layout().block_size;
  kv.num_kv_heads = cfg_.num_key_value_heads;
  kv.head_dim = cfg_.head_dim;
  kv.kv_len = kv_len;
  kv.key_pos = key_pos;
  return kv;
}

Result<std::unique_ptr<KvStorage>> CpuBackend::make_kv_storage(const KvLayout& layout, size_t num_blocks) {
  auto r = HostKvStorage::create(layout, num_blocks);
  if (!r.ok()) return r.status();
  return std::unique_ptr<KvStorage>(std::move(r).value());
}

void CpuBackend::write_kv(const StepPlan& plan, HostKvStorage& kv, int layer, int rows) {
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim();
  const size_t stride = static_cast<size_t>(q_dim) + 2 * kv_dim;
  const int bs = kv.layout().block_size;
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const auto& blocks = plan.seqs[si].table->blocks();
    const SeqRun& run = runs_[si];
    for (int r = run.row0; r < run.row0 + run.n;) {
      // A run of rows whose slots follow each other inside one block is one store.
      const int t = slot_[r];
      int n = 1;
      while (r + n < run.row0 + run.n && slot_[r + n] == t + n && (t + n) % bs != 0) ++n;
      const float* row = qkv_.data() + static_cast<size_t>(r) * stride;
      kv.store(layer, blocks[t / bs], t % bs, n, row + q_dim, row + q_dim + kv_dim, stride);
      r += n;
    }
  }
}

Status CpuBackend::attention(const StepPlan& plan, HostKvStorage& kvs, int layer) {
  const int nh = cfg_.num_attention_heads;
  const size_t q_dim = cfg_.q_dim();
  const float scale = softmax_scale();
  auto view = [&](const SeqPlan& s) {
    return paged_view(kvs, layer, s.table->blocks().data(), s.kv_len, s.key_pos.empty() ? nullptr : s.key_pos.data());
  };
  std::vector<kernels::DecodeItem> decodes;
  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    const SeqRun& run = runs_[si];
    if (run.n == 0) continue;
    const float* q = q_.data() + run.row0 * q_dim;
    float* o = attn_.data() + run.row0 * q_dim;
    float* l = lse_.data() + static_cast<size_t>(run.row0) * nh;
    if (run.n == 1) {
      kernels::DecodeItem it{q, view(s), o, l};
      if (!run.contiguous) it.q_pos = pos_[run.row0];
      decodes.push_back(it);
    } else if (run.contiguous) {  // the fast path: causal with one offset
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill(q, run.n, nh, view(s), scale, true, s.start, o, l));
    } else {
      RAGD_RETURN_IF_ERROR(
          kernels::attention_prefill_positions(q, run.n, nh, view(s), scale, pos_.data() + run.row0, o, l));
    }
  }
  if (!decodes.empty()) RAGD_RETURN_IF_ERROR(kernels::attention_decode(decodes, nh, scale, 0));
  return Status::OK();
}

Status CpuBackend::compact(const std::vector<int>& keep, int* rows) {
  RAGD_RETURN_IF_ERROR(check_kept_rows(keep, *rows));
  const int hs = cfg_.hidden_size, qkv_dim = cfg_.q_dim() + 2 * cfg_.kv_dim();
  for (size_t i = 0; i < keep.size(); ++i) {
    const int dst = static_cast<int>(i), src = keep[i];
    if (dst == src) continue;  // dst < src: moving forward never overwrites a row still to be read
    std::memcpy(x_.data() + static_cast<size_t>(dst) * hs, x_.data() + static_cast<size_t>(src) * hs,
                sizeof(float) * hs);
    std::memcpy(qkv_.data() + static_cast<size_t>(dst) * qkv_dim, qkv_.data() + static_cast<size_t>(src) * qkv_dim,
                sizeof(float) * qkv_dim);
    pos_[dst] = pos_[src];
    slot_[dst] = slot_[src];
    step_row_[dst] = step_row_[src];
    row_info_[dst] = row_info_[src];
  }
  *rows = static_cast<int>(keep.size());
  narrow_runs(std::span<const StepRow>(row_info_.data(), *rows), &runs_);
  return Status::OK();
}

Status CpuBackend::forward(const StepPlan& plan, KvPool& pool, float* logits, SampleResult* picks, float* hidden,
                           LayerHook* hook) {
  const int total = plan.total_rows;
  if (total <= 0) return Status::OK();
  // The thread count is per thread in OpenMP: the thread that steps (the executor's, not the one
  // that loaded the model) takes the configured count here.
  if (threads_ > 0 && kernels::num_threads() != threads_) kernels::set_num_threads(threads_);
  RAGD_ASSIGN_OR_RETURN(HostKvStorage * kvs, host_storage(pool));
  const int hs = cfg_.hidden_size, im = cfg_.intermediate_size, nh = cfg_.num_attention_heads,
            nkv = cfg_.num_key_value_heads, hd = cfg_.head_dim;
  const int q_dim = cfg_.q_dim(), kv_dim = cfg_.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const float eps = cfg_.rms_norm_eps;
  grow(x_, static_cast<size_t>(total) * hs);
  grow(h_, static_cast<size_t>(total) * hs);
  grow(qkv_, static_cast<size_t>(total) * qkv_dim);
  grow(q_, static_cast<size_t>(total) * q_dim);
  grow(attn_, static_cast<size_t>(total) * q_dim);
  grow(lse_, static_cast<size_t>(total) * nh);
  grow(gu_, static_cast<size_t>(total) * 2 * im);
  grow(act_, static_cast<size_t>(total) * im);
  grow(pos_, static_cast<size_t>(total));
  grow(slot_, static_cast<size_t>(total));
  grow(step_row_, static_cast<size_t>(total));
  if (hook != nullptr) grow(row_info_, static_cast<size_t>(total));
  runs_.assign(plan.seqs.size(), SeqRun{});

  for (size_t si = 0; si < plan.seqs.size(); ++si) {
    const SeqPlan& s = plan.seqs[si];
    runs_[si] = {s.row0, s.n, s.contiguous};
    for (int i = 0; i < s.n; ++i) {
      const int r = s.row0 + i;
      kernels::weight_rows_to_f32(w_->embed.view(), s.tokens[i], s.tokens[i] + 1, x_.data() + static_cast<size_t>(r) * hs);
      pos_[r] = s.position(i);
      slot_[r] = s.slot(i);
      step_row_[r] = r;
      if (hook != nullptr) row_info_[r] = {static_cast<int>(si), i, pos_[r], slot_[r]};
    }
  }

  const LayerShape shape{nh, nkv, hd};
  const float scale = softmax_scale();
  int rows = total;
  bool narrowed = false;
  grow(rope_cs_, static_cast<size_t>(total) * (hd / 2));
  grow(rope_sn_, static_cast<size_t>(total) * (hd / 2));
  int rope_rows = -1;  // rows the table holds; -1 = stale
  for (int l = 0; l < cfg_.num_hidden_layers && rows > 0; ++l) {
    const LayerWeights& w = w_->layers[l];
    kernels::rmsnorm(x_.data(), rows, hs, hs, w.input_norm.data(), eps, h_.data(), hs);
    kernels::linear(h_.data(), rows, hs, w.qkv.view(), w.qkv_bias.empty() ? nullptr : w.qkv_bias.data(),
                    qkv_.data());
    if (rope_rows != rows) {  // once per step, again after a compaction
      kernels::rope_table(rows, hd, pos_.data(), inv_freq_.data(), rope_cs_.data(), rope_sn_.data());
      rope_rows = rows;
    }
    kernels::rope_apply_table(qkv_.data(), rows, nh, hd, qkv_dim, rope_cs_.data(), rope_sn_.data());
    kernels::rope_apply_table(qkv_.data() + q_dim, rows, nkv, hd, qkv_dim, rope_cs_.data(), rope_sn_.data());
    RowSelection keep;
    if (hook != nullptr) {
      const LayerQkv view = qkv_view(l, std::span<const StepRow>(row_info_.data(), rows), shape, qkv_.data(), qkv_dim);
      RAGD_RETURN_IF_ERROR(hook->on_qkv(view, &keep));
    }
    write_kv(plan, *kvs, l, rows);
    if (keep.narrowed) {
      RAGD_RETURN_IF_ERROR(compact(keep.rows, &rows));
      narrowed = true;
      rope_rows = -1;  // the rows' positions moved
      if (rows == 0) break;
    }
    for (int r = 0; r < rows; ++r) {
      std::memcpy(q_.data() + static_cast<size_t>(r) * q_dim, qkv_.data() + static_cast<size_t>(r) * qkv_dim,
                  sizeof(float) * q_dim);
    }
    bool replaced = false;
    if (hook != nullptr) {
      const LayerAttention att = attention_view(l, std::span<const StepRow>(row_info_.data(), rows), shape, scale,
                                                q_.data(), q_dim, attn_.data(), lse_.data(),
                                                [&] { return attention(plan, *kvs, l); });
      RAGD_ASSIGN_OR_RETURN(replaced, hook->on_attention(att));
    }
    if (!replaced) RAGD_RETURN_IF_ERROR(attention(plan, *kvs, l));
    kernels::linear(attn_.data(), rows, q_dim, w.o.view(), nullptr, x_.data(), /*accumulate=*/true);
    kernels::rmsnorm(x_.data(), rows, hs, hs, w.post_norm.data(), eps, h_.data(), hs);
    kernels::linear(h_.data(), rows, hs, w.gate_up.view(), nullptr, gu_.data());
    kernels::swiglu(rows, im, gu_.data(), 2 * im, gu_.data() + im, 2 * im, act_.data(), im);
    kernels::linear(act_.data(), rows, im, w.down.view(), nullptr, x_.data(), /*accumulate=*/true);
  }

  const kernels::WeightMatrix& head = w_->lm_head.empty() ? w_->embed.view() : w_->lm_head.view();
  if (hidden != nullptr) {
    if (narrowed) return Status::InvalidArgument("cpu backend: hidden states of every row were asked for, but a layer hook dropped rows");
    kernels::rmsnorm(x_.data(), rows, hs, hs, w_->final_norm.data(), eps, hidden, hs);
  }
  const int nl = logits != nullptr ? static_cast<int>(plan.logit_rows.size()) : 0;
  const int np = picks != nullptr ? static_cast<int>(plan.pick_rows.size()) : 0;
  if (nl + np > 0) {
    RAGD_ASSIGN_OR_RETURN(const std::vector<int> active,
                          logit_active_rows(plan, narrowed, std::span<const int>(step_row_.data(), rows), total));
    // The logit rows, then the pick rows (active holds both in that order); picks reduce their own
    // rows here, where the logits are.
    auto head_rows = [&](int first, int count, float* out) {
      for (int i = 0; i < count; ++i) {
        const float* src = x_.data() + static_cast<size_t>(active[first + i]) * hs;
        kernels::rmsnorm(src, 1, hs, hs, w_->final_norm.data(), eps, h_.data() + static_cast<size_t>(i) * hs, hs);
      }
      kernels::linear(h_.data(), count, hs, head, nullptr, out);
    };
    if (nl > 0) head_rows(0, nl, logits);
    if (np > 0) {
      const size_t vocab = static_cast<size_t>(cfg_.vocab_size);
      grow(pick_logits_, static_cast<size_t>(np) * vocab);
      head_rows(static_cast<int>(plan.logit_rows.size()), np, pick_logits_.data());
      for (int i = 0; i < np; ++i) picks[i] = greedy_pick({pick_logits_.data() + i * vocab, vocab});
    }
  }
  return Status::OK();
}

}  // namespace ragd::engine
