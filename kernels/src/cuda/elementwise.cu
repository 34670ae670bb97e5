// RMSNorm, RoPE (+ re-rotation), SwiGLU, embedding gather, dtype conversion, bias, LSE merge, argmax
// and paged KV writes on the GPU.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "cuda_util.cuh"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/lse_merge.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/cuda/sampling.h"

namespace ragd::kernels::cuda {
namespace {

using detail::from_f32;
using detail::to_f32;

constexpr int kRowThreads = 256;

// ---- RMSNorm: one block per row ----------------------------------------------------------------
template <typename T, typename OutT>
__global__ void rmsnorm_kernel(const T* __restrict__ x, int dim, int x_stride, const T* __restrict__ w,
                               float eps, OutT* y, int y_stride) {
  const int row = blockIdx.x;
  const T* xr = x + static_cast<size_t>(row) * x_stride;
  float ss = 0.0f;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    const float v = to_f32(xr[i]);
    ss += v * v;
  }
  __shared__ float part[kRowThreads / 32];
  const float inv = rsqrtf(detail::block_sum<kRowThreads>(ss, part) / static_cast<float>(dim) + eps);
  OutT* yr = y + static_cast<size_t>(row) * y_stride;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = from_f32<OutT>(to_f32(xr[i]) * inv * to_f32(w[i]));
}

// ---- RoPE: one thread per rotated pair; angle in double like the CPU kernel ----------------------
template <typename T, bool kDelta>
__global__ void rope_kernel(T* x, int rows, int heads, int head_dim, int row_stride,
                            const int32_t* __restrict__ positions, int64_t delta,
                            const float* __restrict__ inv_freq) {
  const int half = head_dim / 2;
  const int64_t total = static_cast<int64_t>(rows) * heads * half;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int i = static_cast<int>(t % half);
    const int64_t rh = t / half;
    const int h = static_cast<int>(rh % heads);
    const int r = static_cast<int>(rh / heads);
    const double p = kDelta ? static_cast<double>(delta) : static_cast<double>(positions[r]);
    double s, c;
    sincos(p * static_cast<double>(inv_freq[i]), &s, &c);
    const float cs = static_cast<float>(c);
    const float sn = static_cast<float>(s);
    T* a = x + static_cast<size_t>(r) * row_stride + static_cast<size_t>(h) * head_dim;
    const float x1 = to_f32(a[i]);
    const float x2 = to_f32(a[i + half]);
    a[i] = from_f32<T>(x1 * cs - x2 * sn);
    a[i + half] = from_f32<T>(x2 * cs + x1 * sn);
  }
}

// ---- SwiGLU --------------------------------------------------------------------------------------
template <typename T>
__global__ void swiglu_kernel(int rows, int dim, const T* gate, int gs, const T* up, int us, T* y, int ys) {
  const int64_t total = static_cast<int64_t>(rows) * dim;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(t / dim);
    const int i = static_cast<int>(t % dim);
    const float g = to_f32(gate[static_cast<size_t>(r) * gs + i]);
    const float u = to_f32(up[static_cast<size_t>(r) * us + i]);
    y[static_cast<size_t>(r) * ys + i] = from_f32<T>(g / (1.0f + expf(-g)) * u);
  }
}

// ---- embedding gather: one block per token -------------------------------------------------------
template <typename T>
__global__ void embedding_kernel(const T* __restrict__ table, int vocab, int hidden, const int32_t* __restrict__ ids,
                                 T* out, int* bad_ids) {
  const int row = blockIdx.x;
  const int id = ids[row];
  T* o = out + static_cast<size_t>(row) * hidden;
  if (id < 0 || id >= vocab) {
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = from_f32<T>(0.0f);
    if (threadIdx.x == 0 && bad_ids) atomicAdd(bad_ids, 1);
    return;
  }
  const T* src = table + static_cast<size_t>(id) * hidden;
  for (int i = threadIdx.x; i < hidden; i += blockDim.x) o[i] = src[i];
}

// ---- LSE merge: one block of head_dim threads (grid-stride) per row -----------------------------
__global__ void merge_kernel(int head_dim, const float* o_a, const float* lse_a, const float* o_b,
                             const float* lse_b, float* o_out, float* lse_out) {
  const int row = blockIdx.x;
  const float la = lse_a[row];
  const float lb = lse_b[row];
  const float m = fmaxf(la, lb);
  float wa = 0.0f, wb = 0.0f, l = -INFINITY;
  if (m != -INFINITY) {
    const float ea = expf(la - m);
    const float eb = expf(lb - m);
    l = m + logf(ea + eb);
    wa = expf(la - l);
    wb = expf(lb - l);
  }
  const size_t base = static_cast<size_t>(row) * head_dim;
  for (int i = threadIdx.x; i < head_dim; i += blockDim.x) {
    const float a = wa != 0.0f ? wa * o_a[base + i] : 0.0f;
    const float b = wb != 0.0f ? wb * o_b[base + i] : 0.0f;
    o_out[base + i] = a + b;
  }
  __syncthreads();  // every thread read lse_a / lse_b before they may be overwritten (aliasing)
  if (threadIdx.x == 0) lse_out[row] = l;
}

// ---- argmax: one block per row ---------------------------------------------------------------------
__device__ __forceinline__ bool better(float v, int i, float bv, int bi) {
  if (isnan(v)) return false;
  if (bi < 0 || isnan(bv)) return true;
  return v > bv || (v == bv && i < bi);
}

__global__ void argmax_kernel(const float* __restrict__ logits, int vocab, int stride, int32_t* out, float* logprob) {
  const float* r = logits + static_cast<size_t>(blockIdx.x) * stride;
  float bv = NAN;
  int bi = -1;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = r[i];
    if (better(v, i, bv, bi)) {
      bv = v;
      bi = i;
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
    const int oi = __shfl_xor_sync(0xffffffffu, bi, o);
    if (oi >= 0 && better(ov, oi, bv, bi)) {
      bv = ov;
      bi = oi;
    }
  }
  __shared__ float sv[kRowThreads / 32];
  __shared__ int si[kRowThreads / 32];
  if ((threadIdx.x & 31) == 0) {
    sv[threadIdx.x >> 5] = bv;
    si[threadIdx.x >> 5] = bi;
  }
  __syncthreads();
  __shared__ float s_best;
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRowThreads / 32; ++w) {
      if (si[w] >= 0 && better(sv[w], si[w], bv, bi)) {
        bv = sv[w];
        bi = si[w];
      }
    }
    out[blockIdx.x] = bi < 0 ? 0 : bi;
    s_best = bi < 0 ? NAN : bv;
  }
  if (logprob == nullptr) return;  // uniform across the block
  // log-probability of the argmax: −log Σ e^(v − max) (NaNs skipped, as the host's greedy_pick).
  __syncthreads();
  const float best = s_best;
  float sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += blockDim.x) {
    const float v = r[i];
    if (!isnan(v)) sum += expf(v - best);
  }
  __shared__ float part[kRowThreads / 32];
  sum = detail::block_sum<kRowThreads>(sum, part);
  if (threadIdx.x == 0) logprob[blockIdx.x] = isnan(best) ? NAN : -logf(sum);
}

// ---- paged KV write: one block per token -------------------------------------------------------
__global__ void kv_write_kernel(const uint16_t* __restrict__ k_new, const uint16_t* __restrict__ v_new, int src_stride,
                                int row_elems, const int32_t* __restrict__ slots, uint16_t* k_pool, uint16_t* v_pool) {
  const int r = blockIdx.x;
  const int slot = slots[r];
  if (slot < 0) return;
  const uint16_t* ks = k_new + static_cast<size_t>(r) * src_stride;
  const uint16_t* vs = v_new + static_cast<size_t>(r) * src_stride;
  uint16_t* kd = k_pool + static_cast<size_t>(slot) * row_elems;
  uint16_t* vd = v_pool + static_cast<size_t>(slot) * row_elems;
  for (int i = threadIdx.x; i < row_elems; i += blockDim.x) {
    kd[i] = ks[i];
    vd[i] = vs[i];
  }
}

// ---- RoPE + bf16 + KV write of one layer's QKV rows: one thread per rotated pair or V element ---
__global__ void rope_store_qkv_kernel(const float* __restrict__ qkv, int n, int qkv_stride, int nh, int nkv, int hd,
                                      const int32_t* __restrict__ positions, const float* __restrict__ inv_freq,
                                      __nv_bfloat16* __restrict__ q_out, const int32_t* __restrict__ slots,
                                      __nv_bfloat16* k_pool, __nv_bfloat16* v_pool) {
  detail::allow_dependents();
  detail::wait_for_prerequisites();  // qkv is the previous kernel's output
  const int half = hd / 2;
  const int pairs = (nh + nkv) * half;  // rotated (i, i + half) pairs of Q and K heads
  const int per_row = pairs + nkv * hd;
  const int64_t total = static_cast<int64_t>(n) * per_row;
  const int kv_elems = nkv * hd;
  for (int64_t t = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; t < total;
       t += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(t / per_row);
    const int j = static_cast<int>(t % per_row);
    const float* row = qkv + static_cast<size_t>(r) * qkv_stride;
    const int slot = slots[r];
    if (j >= pairs) {  // a V element: converted and stored
      const int e = j - pairs;
      if (slot >= 0) v_pool[static_cast<size_t>(slot) * kv_elems + e] = __float2bfloat16_rn(row[(nh + nkv) * hd + e]);
      continue;
    }
    const int h = j / half, i = j % half;  // head h of Q (h < nh) or K (h - nh)
    double sn, cs;
    sincos(static_cast<double>(positions[r]) * static_cast<double>(inv_freq[i]), &sn, &cs);
    const float c = static_cast<float>(cs), s = static_cast<float>(sn);
    const float x1 = row[h * hd + i], x2 = row[h * hd + i + half];
    const __nv_bfloat16 y1 = __float2bfloat16_rn(x1 * c - x2 * s), y2 = __float2bfloat16_rn(x2 * c + x1 * s);
    if (h < nh) {
      __nv_bfloat16* q = q_out + static_cast<size_t>(r) * nh * hd + static_cast<size_t>(h) * hd;
      q[i] = y1;
      q[i + half] = y2;
    } else if (slot >= 0) {
      __nv_bfloat16* k = k_pool + static_cast<size_t>(slot) * kv_elems + static_cast<size_t>(h - nh) * hd;
      k[i] = y1;
      k[i + half] = y2;
    }
  }
}

// ---- dtype conversion and bias: grid-stride loops ---------------------------------------------
template <typename Ti, typename To>
__global__ void convert_kernel(const Ti* __restrict__ x, To* __restrict__ y, size_t n) {
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    y[i] = from_f32<To>(to_f32(x[i]));
  }
}

template <typename T>
__global__ void add_bias_kernel(T* x, int rows, int dim, int stride, const float* __restrict__ bias) {
  const size_t total = static_cast<size_t>(rows) * dim;
  for (size_t i = blockIdx.x * static_cast<size_t>(blockDim.x) + threadIdx.x; i < total;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    const size_t r = i / dim, c = i % dim;
    T& v = x[r * stride + c];
    v = from_f32<T>(to_f32(v) + bias[c]);
  }
}

int grid_for(int64_t total, int threads) {
  const int64_t b = (total + threads - 1) / threads;
  return static_cast<int>(b < 65535 * 16 ? (b < 1 ? 1 : b) : 65535 * 16);
}

Status check_dtype(DType d, const char* op) {
  if (d == DType::kF32 || d == DType::kBf16) return Status::OK();
  return Status::InvalidArgument(std::string(op) + ": unsupported dtype " + std::to_string(static_cast<int>(d)));
}

Status rope_common(const char* op, DType dtype, void* x, int rows, int heads, int head_dim, int row_stride,
                   const int32_t* positions, bool is_delta, int64_t delta, const float* inv_freq, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(dtype, op));
  if (rows < 0 || heads <= 0 || head_dim <= 0 || head_dim % 2 != 0) {
    return Status::InvalidArgument(std::string(op) + ": bad shape (rows=" + std::to_string(rows) + " heads=" +
                                   std::to_string(heads) + " head_dim=" + std::to_string(head_dim) +
                                   "; head_dim must be even)");
  }
  if (row_stride < heads * head_dim) {
    return Status::InvalidArgument(std::string(op) + ": row_stride " + std::to_string(row_stride) +
                                   " < heads · head_dim " + std::to_string(heads * head_dim));
  }
  if (rows == 0) return Status::OK();
  if (!x || !inv_freq || (!is_delta && !positions)) return Status::InvalidArgument(std::string(op) + ": null pointer");
  const int64_t total = static_cast<int64_t>(rows) * heads * (head_dim / 2);
  const int grid = grid_for(total, 256);
  auto s = detail::as_stream(stream);
  if (dtype == DType::kF32) {
    if (is_delta) {
      rope_kernel<float, true><<<grid, 256, 0, s>>>(static_cast<float*>(x), rows, heads, head_dim, row_stride,
                                                    nullptr, delta, inv_freq);
    } else {
      rope_kernel<float, false><<<grid, 256, 0, s>>>(static_cast<float*>(x), rows, heads, head_dim, row_stride,
                                                     positions, 0, inv_freq);
    }
  } else {
    if (is_delta) {
      rope_kernel<__nv_bfloat16, true><<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16*>(x), rows, heads, head_dim,
                                                            row_stride, nullptr, delta, inv_freq);
    } else {
      rope_kernel<__nv_bfloat16, false><<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16*>(x), rows, heads, head_dim,
                                                             row_stride, positions, 0, inv_freq);
    }
  }
  return detail::launch_status(op);
}

}  // namespace

Status rmsnorm(DType dtype, const void* x, int rows, int dim, int x_stride, const void* w, float eps, void* y,
               int y_stride, void* stream) {
  return rmsnorm(dtype, x, rows, dim, x_stride, w, eps, dtype, y, y_stride, stream);
}

Status rmsnorm(DType dtype, const void* x, int rows, int dim, int x_stride, const void* w, float eps, DType out_dtype,
               void* y, int y_stride, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(dtype, "rmsnorm"));
  RAGD_RETURN_IF_ERROR(check_dtype(out_dtype, "rmsnorm"));
  if (rows < 0 || dim <= 0 || x_stride < dim || y_stride < dim) {
    return Status::InvalidArgument("rmsnorm: bad shape (rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                                   " x_stride=" + std::to_string(x_stride) + " y_stride=" + std::to_string(y_stride) + ")");
  }
  if (rows == 0) return Status::OK();
  if (!x || !w || !y) return Status::InvalidArgument("rmsnorm: null pointer");
  if (dtype != out_dtype && x == y) return Status::InvalidArgument("rmsnorm: y aliases x with another dtype");
  auto s = detail::as_stream(stream);
  using bf16 = __nv_bfloat16;
  const bool in32 = dtype == DType::kF32, out32 = out_dtype == DType::kF32;
  if (in32 && out32) {
    rmsnorm_kernel<float, float><<<rows, kRowThreads, 0, s>>>(static_cast<const float*>(x), dim, x_stride,
                                                              static_cast<const float*>(w), eps, static_cast<float*>(y), y_stride);
  } else if (in32) {
    rmsnorm_kernel<float, bf16><<<rows, kRowThreads, 0, s>>>(static_cast<const float*>(x), dim, x_stride,
                                                             static_cast<const float*>(w), eps, static_cast<bf16*>(y), y_stride);
  } else if (out32) {
    rmsnorm_kernel<bf16, float><<<rows, kRowThreads, 0, s>>>(static_cast<const bf16*>(x), dim, x_stride,
                                                             static_cast<const bf16*>(w), eps, static_cast<float*>(y), y_stride);
  } else {
    rmsnorm_kernel<bf16, bf16><<<rows, kRowThreads, 0, s>>>(static_cast<const bf16*>(x), dim, x_stride,
                                                            static_cast<const bf16*>(w), eps, static_cast<bf16*>(y), y_stride);
  }
  return detail::launch_status("rmsnorm");
}

Status rope_apply(DType dtype, void* x, int rows, int heads, int head_dim, int row_stride, const int32_t* positions,
                  const float* inv_freq, void* stream) {
  return rope_common("rope_apply", dtype, x, rows, heads, head_dim, row_stride, positions, false, 0, inv_freq, stream);
}

Status rope_rerotate(DType dtype, void* x, int rows, int heads, int head_dim, int row_stride, int64_t delta,
                     const float* inv_freq, void* stream) {
  return rope_common("rope_rerotate", dtype, x, rows, heads, head_dim, row_stride, nullptr, true, delta, inv_freq,
                     stream);
}

Status swiglu(DType dtype, int rows, int dim, const void* gate, int gate_stride, const void* up, int up_stride,
              void* y, int y_stride, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(dtype, "swiglu"));
  if (rows < 0 || dim <= 0 || gate_stride < dim || up_stride < dim || y_stride < dim) {
    return Status::InvalidArgument("swiglu: bad shape (rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                                   "; strides must be >= dim)");
  }
  if (rows == 0) return Status::OK();
  if (!gate || !up || !y) return Status::InvalidArgument("swiglu: null pointer");
  const int grid = grid_for(static_cast<int64_t>(rows) * dim, 256);
  auto s = detail::as_stream(stream);
  if (dtype == DType::kF32) {
    swiglu_kernel<float><<<grid, 256, 0, s>>>(rows, dim, static_cast<const float*>(gate), gate_stride,
                                              static_cast<const float*>(up), up_stride, static_cast<float*>(y), y_stride);
  } else {
    swiglu_kernel<__nv_bfloat16><<<grid, 256, 0, s>>>(
        rows, dim, static_cast<const __nv_bfloat16*>(gate), gate_stride, static_cast<const __nv_bfloat16*>(up),
        up_stride, static_cast<__nv_bfloat16*>(y), y_stride);
  }
  return detail::launch_status("swiglu");
}

Status embedding_gather(DType dtype, const void* table, int vocab, int hidden, const int32_t* ids, int n, void* out,
                        int* bad_ids, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(dtype, "embedding_gather"));
  if (vocab <= 0 || hidden <= 0 || n < 0) {
    return Status::InvalidArgument("embedding_gather: bad shape (vocab=" + std::to_string(vocab) + " hidden=" +
                                   std::to_string(hidden) + " n=" + std::to_string(n) + ")");
  }
  if (n == 0) return Status::OK();
  if (!table || !ids || !out) return Status::InvalidArgument("embedding_gather: null pointer");
  auto s = detail::as_stream(stream);
  if (dtype == DType::kF32) {
    embedding_kernel<float><<<n, kRowThreads, 0, s>>>(static_cast<const float*>(table), vocab, hidden, ids,
                                                      static_cast<float*>(out), bad_ids);
  } else {
    embedding_kernel<__nv_bfloat16><<<n, kRowThreads, 0, s>>>(static_cast<const __nv_bfloat16*>(table), vocab, hidden,
                                                              ids, static_cast<__nv_bfloat16*>(out), bad_ids);
  }
  return detail::launch_status("embedding_gather");
}

Status convert(DType from, const void* x, DType to, void* y, size_t n, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(from, "convert"));
  RAGD_RETURN_IF_ERROR(check_dtype(to, "convert"));
  if (n == 0) return Status::OK();
  if (!x || !y) return Status::InvalidArgument("convert: null pointer");
  auto s = detail::as_stream(stream);
  const int grid = grid_for(static_cast<int64_t>(n), 256);
  using B = __nv_bfloat16;
  if (from == DType::kF32 && to == DType::kBf16) {
    convert_kernel<float, B><<<grid, 256, 0, s>>>(static_cast<const float*>(x), static_cast<B*>(y), n);
  } else if (from == DType::kBf16 && to == DType::kF32) {
    convert_kernel<B, float><<<grid, 256, 0, s>>>(static_cast<const B*>(x), static_cast<float*>(y), n);
  } else {
    const size_t bytes = n * (from == DType::kF32 ? 4 : 2);
    return detail::cuda_status(cudaMemcpyAsync(y, x, bytes, cudaMemcpyDeviceToDevice, s), "convert");
  }
  return detail::launch_status("convert");
}

Status add_bias(DType dtype, void* x, int rows, int dim, int stride, const float* bias, void* stream) {
  RAGD_RETURN_IF_ERROR(check_dtype(dtype, "add_bias"));
  if (rows < 0 || dim <= 0 || stride < dim) {
    return Status::InvalidArgument("add_bias: bad shape (rows=" + std::to_string(rows) + " dim=" + std::to_string(dim) +
                                   " stride=" + std::to_string(stride) + ")");
  }
  if (rows == 0) return Status::OK();
  if (!x || !bias) return Status::InvalidArgument("add_bias: null pointer");
  auto s = detail::as_stream(stream);
  const int grid = grid_for(static_cast<int64_t>(rows) * dim, 256);
  if (dtype == DType::kF32) {
    add_bias_kernel<float><<<grid, 256, 0, s>>>(static_cast<float*>(x), rows, dim, stride, bias);
  } else {
    add_bias_kernel<__nv_bfloat16><<<grid, 256, 0, s>>>(static_cast<__nv_bfloat16*>(x), rows, dim, stride, bias);
  }
  return detail::launch_status("add_bias");
}

Status merge_states(int rows, int head_dim, const float* o_a, const float* lse_a, const float* o_b, const float* lse_b,
                    float* o_out, float* lse_out, void* stream) {
  if (rows < 0 || head_dim <= 0) {
    return Status::InvalidArgument("merge_states: bad shape (rows=" + std::to_string(rows) + " head_dim=" +
                                   std::to_string(head_dim) + ")");
  }
  if (rows == 0) return Status::OK();
  if (!o_a || !lse_a || !o_b || !lse_b || !o_out || !lse_out) return Status::InvalidArgument("merge_states: null pointer");
  const int threads = head_dim >= 128 ? 128 : (head_dim + 31) / 32 * 32;
  merge_kernel<<<rows, threads, 0, detail::as_stream(stream)>>>(head_dim, o_a, lse_a, o_b, lse_b, o_out, lse_out);
  return detail::launch_status("merge_states");
}

Status argmax_rows(const float* logits, int rows, int vocab, int stride, int32_t* out, float* logprob, void* stream) {
  if (rows < 0 || vocab <= 0 || stride < vocab) {
    return Status::InvalidArgument("argmax_rows: bad shape (rows=" + std::to_string(rows) + " vocab=" +
                                   std::to_string(vocab) + " stride=" + std::to_string(stride) + ")");
  }
  if (rows == 0) return Status::OK();
  if (!logits || !out) return Status::InvalidArgument("argmax_rows: null pointer");
  argmax_kernel<<<rows, kRowThreads, 0, detail::as_stream(stream)>>>(logits, vocab, stride, out, logprob);
  return detail::launch_status("argmax_rows");
}

Status kv_write(const uint16_t* k_new, const uint16_t* v_new, int n, int src_stride, int num_kv_heads, int head_dim,
                const int32_t* slots, uint16_t* k_pool, uint16_t* v_pool, void* stream) {
  if (n < 0 || num_kv_heads <= 0 || head_dim <= 0 || src_stride < num_kv_heads * head_dim) {
    return Status::InvalidArgument("kv_write: bad shape (n=" + std::to_string(n) + " num_kv_heads=" +
                                   std::to_string(num_kv_heads) + " head_dim=" + std::to_string(head_dim) +
                                   " src_stride=" + std::to_string(src_stride) + "; src_stride must be >= num_kv_heads · head_dim)");
  }
  if (n == 0) return Status::OK();
  if (!k_new || !v_new || !slots || !k_pool || !v_pool) return Status::InvalidArgument("kv_write: null pointer");
  kv_write_kernel<<<n, 256, 0, detail::as_stream(stream)>>>(k_new, v_new, src_stride, num_kv_heads * head_dim, slots,
                                                             k_pool, v_pool);
  return detail::launch_status("kv_write");
}

Status rope_store_qkv(const float* qkv, int n, int qkv_stride, int num_heads, int num_kv_heads, int head_dim,
                      const int32_t* positions, const float* inv_freq, uint16_t* q_out, const int32_t* slots,
                      uint16_t* k_pool, uint16_t* v_pool, void* stream) {
  if (n < 0 || num_heads <= 0 || num_kv_heads <= 0 || head_dim <= 0 || head_dim % 2 != 0 ||
      qkv_stride < (num_heads + 2 * num_kv_heads) * head_dim) {
    return Status::InvalidArgument("rope_store_qkv: bad shape (n=" + std::to_string(n) + " heads=" +
                                   std::to_string(num_heads) + "/" + std::to_string(num_kv_heads) + " head_dim=" +
                                   std::to_string(head_dim) + " qkv_stride=" + std::to_string(qkv_stride) +
                                   "; head_dim must be even, qkv_stride >= (heads + 2 kv heads) · head_dim)");
  }
  if (n == 0) return Status::OK();
  if (!qkv || !positions || !inv_freq || !q_out || !slots || !k_pool || !v_pool) {
    return Status::InvalidArgument("rope_store_qkv: null pointer");
  }
  const int64_t total = static_cast<int64_t>(n) * ((num_heads + num_kv_heads) * (head_dim / 2) + num_kv_heads * head_dim);
  using bf16 = __nv_bfloat16;
  const cudaError_t e = detail::launch_kernel(
      detail::pdl_enabled(), rope_store_qkv_kernel, dim3(grid_for(total, 256)), dim3(256), 0,
      detail::as_stream(stream), qkv, n, qkv_stride, num_heads, num_kv_heads, head_dim, positions, inv_freq,
      reinterpret_cast<bf16*>(q_out), slots, reinterpret_cast<bf16*>(k_pool), reinterpret_cast<bf16*>(v_pool));
  return detail::cuda_status(e, "rope_store_qkv");
}

}  // namespace ragd::kernels::cuda
