#include "ragd/retrieval/vector_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <set>

#include "test_util.h"

namespace ragd::retrieval {
namespace {

// Clustered unit vectors (a mixture of Gaussians), like real embeddings; seeded.
std::vector<float> clustered(size_t n, int dim, int clusters, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> g(0.0f, 1.0f);
  std::vector<float> centers(static_cast<size_t>(clusters * dim));
  for (auto& c : centers) c = g(rng);
  std::vector<float> x(n * static_cast<size_t>(dim));
  for (size_t i = 0; i < n; ++i) {
    size_t c = rng() % static_cast<size_t>(clusters);
    double norm = 0;
    for (int j = 0; j < dim; ++j) {
      float v = centers[c * static_cast<size_t>(dim) + static_cast<size_t>(j)] + 0.6f * g(rng);
      x[i * static_cast<size_t>(dim) + static_cast<size_t>(j)] = v;
      norm += static_cast<double>(v) * v;
    }
    for (int j = 0; j < dim; ++j) x[i * static_cast<size_t>(dim) + static_cast<size_t>(j)] /= static_cast<float>(std::sqrt(norm));
  }
  return x;
}

// Exact top-k by double-precision inner product (the naive reference).
std::vector<uint64_t> brute_topk(const std::vector<float>& xb, const std::vector<uint64_t>& ids, const float* q,
                                 int dim, int k) {
  std::vector<std::pair<double, uint64_t>> s;
  for (size_t i = 0; i < ids.size(); ++i) {
    double d = 0;
    for (int j = 0; j < dim; ++j) d += static_cast<double>(xb[i * static_cast<size_t>(dim) + static_cast<size_t>(j)]) * q[j];
    s.push_back({d, ids[i]});
  }
  std::partial_sort(s.begin(), s.begin() + k, s.end(), [](auto& a, auto& b) { return a.first > b.first; });
  std::vector<uint64_t> out;
  for (int i = 0; i < k; ++i) out.push_back(s[static_cast<size_t>(i)].second);
  return out;
}

double recall(const std::vector<std::vector<Neighbor>>& got, const std::vector<std::vector<uint64_t>>& truth) {
  size_t hit = 0, total = 0;
  for (size_t q = 0; q < got.size(); ++q) {
    std::set<uint64_t> t(truth[q].begin(), truth[q].end());
    for (const auto& n : got[q]) hit += t.count(n.id);
    total += truth[q].size();
  }
  return static_cast<double>(hit) / static_cast<double>(total);
}

struct Data {
  static constexpr int kDim = 64;
  std::vector<float> xb, xq;
  std::vector<uint64_t> ids;
  std::vector<std::vector<uint64_t>> truth;
  Data(size_t n, size_t nq) {
    // Base and query vectors from the same mixture (queries are held out, not in the index).
    std::vector<float> all = clustered(n + nq, kDim, 50, 42);
    xb.assign(all.begin(), all.begin() + static_cast<long>(n * kDim));
    xq.assign(all.begin() + static_cast<long>(n * kDim), all.end());
    for (size_t i = 0; i < n; ++i) ids.push_back(1000 + 7 * i);  // sparse, stable ids
    for (size_t q = 0; q < nq; ++q) truth.push_back(brute_topk(xb, ids, &xq[q * kDim], kDim, 10));
  }
};

std::unique_ptr<VectorIndex> build(const std::string& spec, const Data& d) {
  VectorIndexOptions o;
  o.spec = spec;
  o.dim = Data::kDim;
  auto idx = VectorIndex::create(o);
  EXPECT_TRUE(idx.ok()) << idx.status().to_string();
  EXPECT_TRUE((*idx)->add(d.ids, d.xb).ok());
  return std::move(idx).value();
}

TEST(VectorIndex, RecallAt10AgainstExactAtDefaultParams) {
  Data d(7001, 129);
  for (const char* spec : {"Flat", "IVF64,Flat", "HNSW32"}) {
    auto idx = build(spec, d);
    EXPECT_TRUE(idx->trained()) << spec;
    EXPECT_EQ(idx->size(), d.ids.size());
    auto res = idx->search(d.xq, 10);
    ASSERT_TRUE(res.ok()) << res.status().to_string();
    double r = recall(*res, d.truth);
    std::printf("recall@10 %-10s %.4f\n", spec, r);
    if (std::string(spec) == "Flat") EXPECT_GE(r, 0.999) << spec;
    else EXPECT_GE(r, 0.95) << spec;
  }
}

TEST(VectorIndex, PerQuerySearchParamsTradeRecall) {
  Data d(7001, 129);
  auto ivf = build("IVF64,Flat", d);
  SearchParams narrow, wide;
  narrow.nprobe = 1;
  wide.nprobe = 64;
  double r_narrow = recall(*ivf->search(d.xq, 10, narrow), d.truth);
  double r_wide = recall(*ivf->search(d.xq, 10, wide), d.truth);
  EXPECT_LT(r_narrow, r_wide);
  EXPECT_GE(r_wide, 0.999);  // every list scanned: exact
  auto hnsw = build("HNSW16", d);
  narrow = {};
  wide = {};
  narrow.ef_search = 10;
  wide.ef_search = 400;
  double h_narrow = recall(*hnsw->search(d.xq, 10, narrow), d.truth);
  double h_wide = recall(*hnsw->search(d.xq, 10, wide), d.truth);
  std::printf("HNSW16 recall@10 ef=10 %.4f ef=400 %.4f\n", h_narrow, h_wide);
  EXPECT_LE(h_narrow, h_wide);
  EXPECT_GE(h_wide, 0.98);
}

TEST(VectorIndex, IvfPqTrainsAndFindsNeighbours) {
  Data d(4501, 33);  // PQ trains once 16 * 256 vectors are held
  auto idx = build("IVF16,PQ8", d);
  EXPECT_TRUE(idx->trained());
  auto res = idx->search(d.xq, 10);
  ASSERT_TRUE(res.ok());
  double r = recall(*res, d.truth);
  std::printf("recall@10 IVF16,PQ8 %.4f\n", r);
  EXPECT_GE(r, 0.3);  // 8-byte codes of 64 floats: lossy, far above chance (10/4501)
}

TEST(VectorIndex, IvfStagesExactlyUntilTrained) {
  Data d(7001, 17);
  VectorIndexOptions o;
  o.spec = "IVF64,Flat";
  o.dim = Data::kDim;
  auto idx = std::move(VectorIndex::create(o)).value();
  // 64 lists * 30 points = 1920 needed; add 1000 first.
  std::vector<uint64_t> ids(d.ids.begin(), d.ids.begin() + 1000);
  std::vector<float> xs(d.xb.begin(), d.xb.begin() + 1000 * Data::kDim);
  ASSERT_TRUE(idx->add(ids, xs).ok());
  EXPECT_FALSE(idx->trained());
  auto res = idx->search(std::span<const float>(d.xq.data(), Data::kDim), 10);
  ASSERT_TRUE(res.ok());
  auto truth = brute_topk(xs, ids, d.xq.data(), Data::kDim, 10);
  ASSERT_EQ((*res)[0].size(), 10u);
  for (int i = 0; i < 10; ++i) EXPECT_EQ((*res)[0][static_cast<size_t>(i)].id, truth[static_cast<size_t>(i)]);
  ids.assign(d.ids.begin() + 1000, d.ids.begin() + 2000);
  xs.assign(d.xb.begin() + 1000 * Data::kDim, d.xb.begin() + 2000 * Data::kDim);
  ASSERT_TRUE(idx->add(ids, xs).ok());
  EXPECT_TRUE(idx->trained());
  EXPECT_EQ(idx->size(), 2000u);
}

TEST(VectorIndex, RemoveAndReAddForEveryType) {
  Data d(3001, 9);
  for (const char* spec : {"Flat", "IVF16,Flat", "HNSW16"}) {
    SCOPED_TRACE(spec);
    auto idx = build(spec, d);
    // Remove every third id, in two calls (HNSW: tombstones, then a rebuild past 25 %).
    std::vector<uint64_t> gone;
    for (size_t i = 0; i < d.ids.size(); i += 3) gone.push_back(d.ids[i]);
    std::vector<uint64_t> first(gone.begin(), gone.begin() + 100), rest(gone.begin() + 100, gone.end());
    auto r1 = idx->remove(first);
    ASSERT_TRUE(r1.ok());
    EXPECT_EQ(*r1, 100u);
    auto r2 = idx->remove(rest);
    EXPECT_EQ(*r2, rest.size());
    EXPECT_EQ(*idx->remove(first), 0u);  // already gone
    EXPECT_EQ(idx->size(), d.ids.size() - gone.size());
    std::set<uint64_t> gone_set(gone.begin(), gone.end());
    SearchParams sp;
    sp.nprobe = 16;
    auto res = idx->search(d.xq, 20, sp);
    ASSERT_TRUE(res.ok());
    for (const auto& list : *res) {
      EXPECT_EQ(list.size(), 20u);
      for (const auto& n : list) EXPECT_FALSE(gone_set.count(n.id)) << n.id;
    }
    // Re-adding a removed id makes it findable again: query with its own vector.
    size_t pos = 0;
    std::vector<float> v(d.xb.begin(), d.xb.begin() + Data::kDim);
    ASSERT_TRUE(idx->add(std::span<const uint64_t>(&d.ids[pos], 1), v).ok());
    auto again = idx->search(v, 1, sp);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ((*again)[0][0].id, d.ids[pos]);
    // Adding an id that is present is a no-op.
    ASSERT_TRUE(idx->add(std::span<const uint64_t>(&d.ids[pos], 1), v).ok());
    EXPECT_EQ(idx->size(), d.ids.size() - gone.size() + 1);
  }
}

TEST(VectorIndex, ProgressiveStagesMatchPlainSearchAndImprove) {
  Data d(7001, 33);
  auto idx = build("IVF64,Flat", d);
  const int stages[] = {1, 2, 4, 8, 16, 64};
  for (size_t q = 0; q < 33; ++q) {
    std::span<const float> query(&d.xq[q * Data::kDim], Data::kDim);
    float prev_kth = -2.0f;
    size_t calls = 0;
    Status st = idx->search_progressive(query, 10, stages, [&](size_t s, int nprobe, const std::vector<Neighbor>& hits) {
      ++calls;
      EXPECT_EQ(nprobe, stages[s]);
      SearchParams sp;
      sp.nprobe = nprobe;
      auto plain = idx->search(query, 10, sp);
      EXPECT_EQ(hits.size(), (*plain)[0].size());
      for (size_t i = 0; i < hits.size() && i < (*plain)[0].size(); ++i) EXPECT_EQ(hits[i].id, (*plain)[0][i].id);
      if (!hits.empty()) {
        EXPECT_GE(hits.back().score, prev_kth);  // the k-th best only gets better
        prev_kth = hits.back().score;
      }
      return true;
    });
    ASSERT_TRUE(st.ok()) << st.to_string();
    EXPECT_EQ(calls, 6u);
  }
  // Every list scanned: exact.
  std::vector<Neighbor> last;
  ASSERT_TRUE(idx->search_progressive(std::span<const float>(d.xq.data(), Data::kDim), 10, stages,
                                      [&](size_t, int, const std::vector<Neighbor>& h) { last = h; return true; }).ok());
  for (int i = 0; i < 10; ++i) EXPECT_EQ(last[static_cast<size_t>(i)].id, d.truth[0][static_cast<size_t>(i)]);
  // Stopping early.
  size_t calls = 0;
  ASSERT_TRUE(idx->search_progressive(std::span<const float>(d.xq.data(), Data::kDim), 10, stages,
                                      [&](size_t, int, const std::vector<Neighbor>&) { return ++calls < 2; }).ok());
  EXPECT_EQ(calls, 2u);
}

TEST(VectorIndex, ProgressiveRejectsDecreasingStages) {
  Data d(101, 1);
  auto idx = build("Flat", d);
  const int stages[] = {4, 2};
  Status st = idx->search_progressive(std::span<const float>(d.xq.data(), Data::kDim), 5, stages,
                                      [](size_t, int, const std::vector<Neighbor>&) { return true; });
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("increasing"), std::string::npos);
}

TEST(VectorIndex, SaveLoadRoundTripForEveryType) {
  Data d(3001, 9);
  testing::TempDir tmp;
  for (const char* spec : {"Flat", "IVF16,Flat", "HNSW16", "IVF16,PQ8"}) {
    SCOPED_TRACE(spec);
    auto idx = build(spec, d);
    std::vector<uint64_t> gone(d.ids.begin(), d.ids.begin() + 50);
    ASSERT_TRUE(idx->remove(gone).ok());
    std::string path = tmp / "idx.faiss";
    ASSERT_TRUE(idx->save(path, {77, "emb-x"}).ok());
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    VectorIndexOptions o;
    o.spec = spec;
    o.dim = Data::kDim;
    VectorIndex::FileInfo fi;
    auto loaded = VectorIndex::load(path, o, &fi);
    ASSERT_TRUE(loaded.ok()) << loaded.status().to_string();
    EXPECT_EQ(fi.seq, 77u);
    EXPECT_EQ(fi.embedder, "emb-x");
    EXPECT_EQ((*loaded)->size(), idx->size());
    auto a = idx->search(d.xq, 10);
    auto b = (*loaded)->search(d.xq, 10);
    for (size_t q = 0; q < a->size(); ++q)
      for (size_t i = 0; i < (*a)[q].size(); ++i) EXPECT_EQ((*a)[q][i].id, (*b)[q][i].id);
  }
}

TEST(VectorIndex, LoadRejectsCorruptFile) {
  Data d(501, 1);
  testing::TempDir tmp;
  auto idx = build("Flat", d);
  std::string path = tmp / "idx.faiss";
  ASSERT_TRUE(idx->save(path, {1, "e"}).ok());
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(200);
    char c;
    f.read(&c, 1);
    c = static_cast<char>(c ^ 0x5a);
    f.seekp(200);
    f.write(&c, 1);
  }
  VectorIndexOptions o;
  o.spec = "Flat";
  o.dim = Data::kDim;
  auto loaded = VectorIndex::load(path, o, nullptr);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.status().code(), StatusCode::kCorruption);
  EXPECT_NE(loaded.status().message().find("checksum"), std::string::npos);
}

TEST(VectorIndex, LoadRejectsOtherSpec) {
  Data d(101, 1);
  testing::TempDir tmp;
  auto idx = build("Flat", d);
  ASSERT_TRUE(idx->save(tmp / "i", {1, "e"}).ok());
  VectorIndexOptions o;
  o.spec = "HNSW32";
  o.dim = Data::kDim;
  auto loaded = VectorIndex::load(tmp / "i", o, nullptr);
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("'Flat'"), std::string::npos);
  EXPECT_NE(loaded.status().message().find("'HNSW32'"), std::string::npos);
}

TEST(VectorIndex, RejectsBadSpecs) {
  for (const char* spec : {"IVF,Flat", "HNSW2", "IVF16,PQ7", "LSH", "IVF16;Flat", "IVF16,SQ9"}) {
    VectorIndexOptions o;
    o.spec = spec;
    o.dim = 64;
    auto idx = VectorIndex::create(o);
    ASSERT_FALSE(idx.ok()) << spec;
    EXPECT_NE(idx.status().message().find(std::string("'") + spec + "'"), std::string::npos) << idx.status().message();
  }
}

TEST(VectorIndex, RejectsWrongVectorLength) {
  VectorIndexOptions o;
  o.dim = 64;
  auto idx = std::move(VectorIndex::create(o)).value();
  std::vector<uint64_t> ids = {1, 2};
  std::vector<float> v(127, 0.1f);
  Status st = idx->add(ids, v);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("127 floats for 2 ids of dim 64"), std::string::npos);
  auto s = idx->search(v, 3);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.status().message().find("not a multiple of dim"), std::string::npos);
}

}  // namespace
}  // namespace ragd::retrieval

namespace ragd::retrieval {
namespace {

// Admits ids whose tenant (id / 7 % tenants) is `tenant`, or the shared ones (tenant 0).
class ModFilter final : public IdFilter {
 public:
  ModFilter(uint64_t tenants, uint64_t tenant) : tenants_(tenants), tenant_(tenant) {}
  bool allowed(uint64_t id) const override {
    uint64_t t = (id / 7) % tenants_;
    return t == 0 || t == tenant_;
  }

 private:
  uint64_t tenants_, tenant_;
};

// Filtering happens inside the search: k results come back whenever k ids are allowed, and they
// are the best allowed ones (exactly for Flat and for IVF scanning every list; recall for the
// approximate settings), against a brute-force reference over the allowed ids only.
TEST(VectorIndexFilter, TopKStaysKAgainstBruteForce) {
  Data d(7001, 33);
  const uint64_t kTenants = 10;
  for (uint64_t tenant : {uint64_t{3}, uint64_t{7}}) {
    ModFilter f(kTenants, tenant);
    std::vector<float> xa;
    std::vector<uint64_t> ia;
    for (size_t i = 0; i < d.ids.size(); ++i) {
      if (!f.allowed(d.ids[i])) continue;
      ia.push_back(d.ids[i]);
      xa.insert(xa.end(), d.xb.begin() + static_cast<long>(i * Data::kDim),
                d.xb.begin() + static_cast<long>((i + 1) * Data::kDim));
    }
    ASSERT_GT(ia.size(), 1000u);
    ASSERT_LT(ia.size(), d.ids.size() / 3);  // about 20 %: a selective filter
    std::vector<std::vector<uint64_t>> truth;
    for (size_t q = 0; q < 33; ++q) truth.push_back(brute_topk(xa, ia, &d.xq[q * Data::kDim], Data::kDim, 10));
    for (const char* spec : {"Flat", "IVF64,Flat", "HNSW32"}) {
      auto idx = build(spec, d);
      SearchParams p;
      p.filter = &f;
      if (std::string(spec) == "IVF64,Flat") p.nprobe = 64;  // every list: exact
      auto res = idx->search(d.xq, 10, p);
      ASSERT_TRUE(res.ok()) << res.status().to_string();
      for (const auto& hits : *res) {
        ASSERT_EQ(hits.size(), 10u) << spec;
        for (const auto& h : hits) EXPECT_TRUE(f.allowed(h.id)) << spec << " returned id " << h.id;
      }
      double r = recall(*res, truth);
      std::printf("filtered recall@10 %-10s tenant %llu %.4f\n", spec, static_cast<unsigned long long>(tenant), r);
      if (std::string(spec) == "HNSW32") EXPECT_GE(r, 0.9) << spec;
      else EXPECT_GE(r, 0.999) << spec;
    }
  }
}

TEST(VectorIndexFilter, StagingIvfAndTombstonesAndProgressive) {
  Data d(301, 9);  // below IVF64's training threshold: the staging (exact) index answers
  ModFilter f(4, 1);
  auto ivf = build("IVF64,Flat", d);
  ASSERT_FALSE(ivf->trained());
  SearchParams p;
  p.filter = &f;
  auto res = ivf->search(d.xq, 5, p);
  ASSERT_TRUE(res.ok());
  for (const auto& hits : *res) {
    ASSERT_EQ(hits.size(), 5u);
    for (const auto& h : hits) EXPECT_TRUE(f.allowed(h.id));
  }
  // HNSW with removed (tombstoned) ids and a filter: still k allowed, live ids.
  Data big(3001, 5);
  auto hnsw = build("HNSW16", big);
  std::vector<uint64_t> gone(big.ids.begin(), big.ids.begin() + 400);
  ASSERT_TRUE(hnsw->remove(gone).ok());
  std::set<uint64_t> removed(gone.begin(), gone.end());
  auto hr = hnsw->search(big.xq, 10, p);
  ASSERT_TRUE(hr.ok());
  for (const auto& hits : *hr) {
    ASSERT_EQ(hits.size(), 10u);
    for (const auto& h : hits) {
      EXPECT_TRUE(f.allowed(h.id));
      EXPECT_FALSE(removed.count(h.id));
    }
  }
  // Progressive IVF search honours the filter at every stage.
  Data mid(7001, 3);
  auto trained = build("IVF64,Flat", mid);
  const int stages[] = {1, 4, 64};
  Status st = trained->search_progressive(
      std::span<const float>(mid.xq.data(), Data::kDim), 10, stages,
      [&](size_t, int, const std::vector<Neighbor>& hits) {
        for (const auto& h : hits) EXPECT_TRUE(f.allowed(h.id));
        return true;
      },
      &f);
  EXPECT_TRUE(st.ok()) << st.to_string();
}

}  // namespace
}  // namespace ragd::retrieval
