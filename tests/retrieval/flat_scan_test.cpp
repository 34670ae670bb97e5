// flat_ip_topk against FAISS's own IndexFlatIP search (the path it replaces): the same rows in the
// same order, ties included, with and without a selector, across block boundaries.
#include "flat_scan.h"

#include <gtest/gtest.h>

#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include <faiss/IndexFlat.h>
#include <faiss/impl/IDSelector.h>

namespace ragd::retrieval {
namespace {

struct OddRows : faiss::IDSelector {
  bool is_member(faiss::Index::idx_t i) const override { return i % 2 == 1 || i % 7 == 0; }
};

// Small integer entries: every score is an exact float sum, so the order (ties included) must match
// FAISS exactly whatever the summation order.
void check(size_t nb, size_t d, size_t nq, size_t k, bool filter, int range, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> val(-range, range);
  std::vector<float> xb(nb * d), q(nq * d);
  for (float& x : xb) x = static_cast<float>(val(rng));
  for (float& x : q) x = static_cast<float>(val(rng));
  faiss::IndexFlatIP ref(static_cast<faiss::Index::idx_t>(d));
  ref.add(static_cast<faiss::Index::idx_t>(nb), xb.data());
  OddRows sel;
  faiss::SearchParameters p;
  p.sel = &sel;
  std::vector<float> d_ref(nq * k), d_got(nq * k);
  std::vector<faiss::Index::idx_t> i_ref(nq * k);
  std::vector<int64_t> i_got(nq * k);
  // FAISS 1.7.3 takes the BLAS path itself from 20 queries on (and then breaks ties its own way):
  // one query at a time is the reference.
  for (size_t qi = 0; qi < nq; ++qi)
    ref.search(1, q.data() + qi * d, static_cast<faiss::Index::idx_t>(k), d_ref.data() + qi * k, i_ref.data() + qi * k,
               filter ? &p : nullptr);
  flat_ip_topk(xb.data(), nb, d, q.data(), nq, k, filter ? &sel : nullptr, d_got.data(), i_got.data());
  for (size_t i = 0; i < nq * k; ++i) {
    ASSERT_EQ(i_got[i], i_ref[i]) << "nb=" << nb << " d=" << d << " nq=" << nq << " k=" << k << " filter=" << filter
                                  << " entry " << i;
    if (i_ref[i] >= 0) ASSERT_EQ(d_got[i], d_ref[i]) << "entry " << i;
    else ASSERT_EQ(d_got[i], -FLT_MAX);
  }
}

TEST(FlatScan, MatchesFaissIncludingTies) {
  check(/*nb=*/3001, /*d=*/37, /*nq=*/1, /*k=*/10, false, 2, 1);   // many ties, crosses a block
  check(3001, 37, 1, 10, true, 2, 2);
  check(4099, 16, 5, 25, false, 1, 3);                                // several queries (sgemm)
  check(4099, 16, 5, 25, true, 1, 4);
  check(7, 3, 2, 20, true, 3, 5);                                     // fewer allowed rows than k
  check(130, 1024, 1, 8, false, 1, 6);
}

TEST(FlatScan, RealValuedScoresCloseToFaiss) {
  std::mt19937 rng(11);
  std::normal_distribution<float> g;
  const size_t nb = 2500, d = 301, k = 12;
  std::vector<float> xb(nb * d), q(d);
  for (float& x : xb) x = g(rng);
  for (float& x : q) x = g(rng);
  faiss::IndexFlatIP ref(static_cast<faiss::Index::idx_t>(d));
  ref.add(static_cast<faiss::Index::idx_t>(nb), xb.data());
  std::vector<float> d_ref(k), d_got(k);
  std::vector<faiss::Index::idx_t> i_ref(k);
  std::vector<int64_t> i_got(k);
  ref.search(1, q.data(), static_cast<faiss::Index::idx_t>(k), d_ref.data(), i_ref.data());
  flat_ip_topk(xb.data(), nb, d, q.data(), 1, k, nullptr, d_got.data(), i_got.data());
  for (size_t i = 0; i < k; ++i) {
    EXPECT_EQ(i_got[i], i_ref[i]);  // gaps between these scores are far above float rounding
    EXPECT_NEAR(d_got[i], d_ref[i], 1e-3f * std::max(1.0f, std::fabs(d_ref[i])));
  }
}

}  // namespace
}  // namespace ragd::retrieval
