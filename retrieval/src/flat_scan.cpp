#include "flat_scan.h"

#include <cblas.h>

#include <algorithm>
#include <vector>

#include <faiss/impl/IDSelector.h>
#include <faiss/utils/Heap.h>

namespace ragd::retrieval {

namespace {

constexpr size_t kBlockRows = 2048;  // stored rows scored per BLAS call (scores stay in L2)

}  // namespace

void flat_ip_topk(const float* xb, size_t nb, size_t d, const float* q, size_t nq, size_t k,
                  const faiss::IDSelector* sel, float* D, int64_t* I) {
  // Per query FAISS's own min-heap of its k best so far (utils/Heap.h: ties ordered by row), filled
  // as FAISS's scan fills it, so the selection and the order are FAISS's.
  using C = faiss::CMin<float, int64_t>;
  for (size_t qi = 0; qi < nq; ++qi) faiss::heap_heapify<C>(k, D + qi * k, I + qi * k);
  if (k == 0 || nq == 0 || nb == 0 || d == 0) return;
  std::vector<float> s(nq * std::min(nb, kBlockRows));
  for (size_t b0 = 0; b0 < nb; b0 += kBlockRows) {
    const size_t rows = std::min(kBlockRows, nb - b0);
    const float* xs = xb + b0 * d;
    if (nq == 1) {
      cblas_sgemv(CblasRowMajor, CblasNoTrans, static_cast<int>(rows), static_cast<int>(d), 1.0f, xs,
                  static_cast<int>(d), q, 1, 0.0f, s.data(), 1);
    } else {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(nq), static_cast<int>(rows),
                  static_cast<int>(d), 1.0f, q, static_cast<int>(d), xs, static_cast<int>(d), 0.0f, s.data(),
                  static_cast<int>(rows));
    }
    for (size_t qi = 0; qi < nq; ++qi) {
      float* dq = D + qi * k;
      int64_t* iq = I + qi * k;
      const float* sq = s.data() + qi * rows;
      for (size_t j = 0; j < rows; ++j) {
        if (!C::cmp(dq[0], sq[j])) continue;  // not above the k-th best so far
        const int64_t row = static_cast<int64_t>(b0 + j);
        if (sel != nullptr && !sel->is_member(row)) continue;
        faiss::heap_replace_top<C>(k, dq, iq, sq[j], row);
      }
    }
  }
  for (size_t qi = 0; qi < nq; ++qi) faiss::heap_reorder<C>(k, D + qi * k, I + qi * k);
}

}  // namespace ragd::retrieval
