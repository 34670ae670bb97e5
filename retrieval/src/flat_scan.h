// Exact inner-product top-k over vectors stored row by row (an IndexFlatIP's codes), scored by
// OpenBLAS (sgemv for one query, sgemm for several, over blocks of stored rows) instead of FAISS
// 1.7.3's one-query path: Debian's FAISS is built without its SIMD dispatch, so that path scores
// each pair with a scalar loop (about 3 ms for 130 vectors of 16,384 dims; BLAS is ~10× faster).
//
// Results match IndexFlatIP::search with the same selector: the rows are ranked in FAISS's own
// heap (faiss/utils/Heap.h), fed in the order FAISS's scan feeds it, so the k rows kept and their
// order (ties included) are FAISS's; rows the selector refuses are never candidates; missing
// entries are row -1 with score -FLT_MAX. Scores differ from FAISS's only by float summation
// order.
//
// Thread-safety: a pure function; OpenBLAS uses the calling thread's OpenMP thread count.
#pragma once

#include <cstddef>
#include <cstdint>

namespace faiss {
struct IDSelector;
}

namespace ragd::retrieval {

// xb: [nb, d] row-major; q: [nq, d]; D, I: [nq, k] outputs. sel may be null (every row).
void flat_ip_topk(const float* xb, size_t nb, size_t d, const float* q, size_t nq, size_t k,
                  const faiss::IDSelector* sel, float* D, int64_t* I);

}  // namespace ragd::retrieval
