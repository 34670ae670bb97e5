// Dense layers: the one dispatch point for weight-times-activation products. Every batch size goes
// through the weight-streaming kernels of this CPU's instruction-set table (gemv_*.cpp), in the
// format the weights are stored in: decode reads each weight byte once per step; prefill passes
// over the weights once per 32 rows, each thread over its own slice of output features.
#include "ragd/kernels/gemm.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gemv.h"
#include "ragd/kernels/threads.h"

namespace ragd::kernels {

namespace {

// Rows of x per pass over the weights: 32 rows of x (up to 16 KiB per 128 columns of k) stay in L2
// while each group of weight rows streams past them once. 16- and 64-row passes measured slower.
// Against OpenBLAS sgemm on f32 copies of the same weights: bench_linear (docs/benchmarks.md).
constexpr int kRowsPerPass = 32;

// Output features per task of the streaming kernels (a multiple of kGroupRows).
constexpr int kRowsPerTask = 64;
static_assert(kRowsPerTask % kGroupRows == 0, "tasks start at whole row groups");

const detail::GemvTable& table_for(CpuLevel level) {
  switch (std::min(level, supported_cpu_level())) {
    case CpuLevel::kAvx512: return detail::gemv_avx512();
    case CpuLevel::kAvx2: return detail::gemv_avx2();
    default: return detail::gemv_generic();
  }
}

// Quantizes the rows of x for q8 weights (gemv.h) into per-thread buffers reused across calls.
detail::QuantizedRows quantize_rows(const float* x, int m, int k) {
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> corr;
  detail::QuantizedRows r;
  r.m = m;
  r.k = k;
  r.blocks = (k + kQ8Block - 1) / kQ8Block;
  r.kpad = r.blocks * kQ8Block;
  q.assign(static_cast<size_t>(m) * r.kpad, 0);
  d.resize(static_cast<size_t>(m) * r.blocks);
  corr.resize(static_cast<size_t>(m) * r.blocks);
  for (int row = 0; row < m; ++row) {
    const float* xr = x + static_cast<size_t>(row) * k;
    int8_t* qr = q.data() + static_cast<size_t>(row) * r.kpad;
    for (int b = 0; b < r.blocks; ++b) {
      const int i0 = b * kQ8Block, i1 = std::min(k, i0 + kQ8Block);
      float amax = 0.0f;
      for (int i = i0; i < i1; ++i) amax = std::max(amax, std::fabs(xr[i]));
      const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
      int32_t sum = 0;
      for (int i = i0; i < i1; ++i) {
        qr[i] = static_cast<int8_t>(std::lrintf(xr[i] * inv));
        sum += qr[i];
      }
      d[static_cast<size_t>(row) * r.blocks + b] = amax / 127.0f;
      corr[static_cast<size_t>(row) * r.blocks + b] = -128 * sum;
    }
  }
  r.q = q.data();
  r.d = d.data();
  r.corr = corr.data();
  return r;
}

// Rows [r0, r0 + m) of x (xq: the same rows quantized, q8 weights only) against the output
// features of tasks [t0, t1) (kRowsPerTask each).
void stream_tasks(const detail::GemvTable& t, const float* x, const detail::QuantizedRows* xq, int m, int k,
                  const WeightMatrix& w, const float* bias, float* y, bool accumulate, int t0, int t1) {
  detail::GemvArgs a;
  a.x = x;
  a.m = m;
  a.k = k;
  a.xq = xq;
  a.w = &w;
  a.bias = bias;
  a.y = y;
  a.n = w.rows;
  a.accumulate = accumulate;
  const detail::GemvFn fn = t.by_type[static_cast<int>(w.type)];
  for (int task = t0; task < t1; ++task) {
    const int n0 = task * kRowsPerTask;
    fn(a, n0, std::min(w.rows, n0 + kRowsPerTask));
  }
}

// Rows [r0, r0 + m) of quantized rows q.
detail::QuantizedRows quantized_slice(const detail::QuantizedRows& q, int r0, int m) {
  detail::QuantizedRows s = q;
  s.m = m;
  s.q += static_cast<size_t>(r0) * q.kpad;
  s.d += static_cast<size_t>(r0) * q.blocks;
  s.corr += static_cast<size_t>(r0) * q.blocks;
  return s;
}

}  // namespace

void linear_at(CpuLevel level, const float* x, int m, int k, const WeightMatrix& w, const float* bias, float* y,
               bool accumulate) {
  if (m <= 0 || w.rows <= 0) return;
  const detail::GemvTable& t = table_for(level);
  const int tasks = (w.rows + kRowsPerTask - 1) / kRowsPerTask;
  // q8: x quantized once, on this thread (its buffers are read, not written, by the team).
  detail::QuantizedRows xq;
  if (w.type == WeightType::kQ8) xq = quantize_rows(x, m, k);
  // One team call: each thread owns a contiguous range of output features (its slice of the
  // weights) and takes it through every pass of kRowsPerPass rows of x. The threads write disjoint
  // columns of y, so passes need no barrier between them, and a short call (a repair or question
  // step of tens of rows) pays one fork / join instead of one per pass.
  run_team(tasks > 1 ? 0 : 1, [&](int id, int nt) {
    const int t0 = static_cast<int>(static_cast<long>(tasks) * id / nt);
    const int t1 = static_cast<int>(static_cast<long>(tasks) * (id + 1) / nt);
    for (int r0 = 0; r0 < m && t0 < t1; r0 += kRowsPerPass) {
      const int mr = std::min(kRowsPerPass, m - r0);
      const detail::QuantizedRows slice = w.type == WeightType::kQ8 ? quantized_slice(xq, r0, mr) : xq;
      stream_tasks(t, x + static_cast<size_t>(r0) * k, w.type == WeightType::kQ8 ? &slice : nullptr, mr, k, w, bias,
                   y + static_cast<size_t>(r0) * w.rows, accumulate, t0, t1);
    }
  });
}

void linear(const float* x, int m, int k, const WeightMatrix& w, const float* bias, float* y, bool accumulate) {
  linear_at(cpu_level(), x, m, k, w, bias, y, accumulate);
}

void gemm(bool trans_a, bool trans_b, int m, int n, int k, float alpha, const float* a, int lda,
          const float* b, int ldb, float beta, float* c, int ldc) {
  if (m <= 0 || n <= 0) return;
  cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans,
              m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

}  // namespace ragd::kernels
