#include "ragd/retrieval/vector_index.h"

#include <fcntl.h>
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>
#include <shared_mutex>
#include <unordered_set>

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIDMap.h>
#include <faiss/IndexIVF.h>
#include <faiss/IndexIVFPQ.h>
#include <faiss/impl/IDSelector.h>
#include <faiss/impl/io.h>
#include <faiss/index_factory.h>
#include <faiss/index_io.h>

#include "durable_file.h"
#include "flat_scan.h"
#include "ragd/common/check.h"
#include "ragd/common/hash.h"
#include "ragd/common/log.h"

namespace ragd::retrieval {

namespace {

using idx_t = faiss::Index::idx_t;

enum class Kind : uint8_t { kFlat, kHNSW, kIVF };

struct ParsedSpec {
  Kind kind = Kind::kFlat;
  int nlist = 0;
  int hnsw_m = 0;
  int pq_m = 0;
};

// Parses a positive integer at s[pos...]; advances pos. Returns -1 when none.
long parse_int(const std::string& s, size_t* pos) {
  size_t b = *pos;
  long v = 0;
  while (*pos < s.size() && std::isdigit(static_cast<unsigned char>(s[*pos])) && v < 100000000) v = v * 10 + (s[(*pos)++] - '0');
  return *pos == b ? -1 : v;
}

Result<ParsedSpec> parse_spec(const std::string& spec, int dim) {
  auto bad = [&](const std::string& why) {
    return Status::InvalidArgument("index spec '" + spec + "': " + why +
                                   " (supported: Flat, HNSW<M>, IVF<n>,Flat, IVF<n>,PQ<m>)");
  };
  ParsedSpec p;
  if (spec == "Flat") return p;
  size_t pos = 0;
  if (spec.rfind("HNSW", 0) == 0) {
    pos = 4;
    long m = parse_int(spec, &pos);
    if (m < 4 || m > 256 || pos != spec.size()) return bad("HNSW needs M in [4, 256]");
    p.kind = Kind::kHNSW;
    p.hnsw_m = static_cast<int>(m);
    return p;
  }
  if (spec.rfind("IVF", 0) == 0) {
    pos = 3;
    long n = parse_int(spec, &pos);
    if (n < 1 || n > 1000000) return bad("IVF needs a list count in [1, 1000000]");
    if (pos >= spec.size() || spec[pos] != ',') return bad("expected ',' after IVF" + std::to_string(n));
    ++pos;
    p.kind = Kind::kIVF;
    p.nlist = static_cast<int>(n);
    std::string rest = spec.substr(pos);
    if (rest == "Flat") return p;
    if (rest.rfind("PQ", 0) == 0) {
      size_t q = 2;
      long m = parse_int(rest, &q);
      if (m < 1 || q != rest.size()) return bad("PQ needs a sub-quantizer count");
      if (dim % m != 0) return bad("dim " + std::to_string(dim) + " is not a multiple of PQ m=" + std::to_string(m));
      p.pq_m = static_cast<int>(m);
      return p;
    }
    return bad("unknown IVF code '" + rest + "'");
  }
  return bad("unknown index type");
}

std::unique_ptr<faiss::Index> make_exact(int dim) {
  auto* idmap = new faiss::IndexIDMap2(new faiss::IndexFlatIP(dim));
  idmap->own_fields = true;
  return std::unique_ptr<faiss::Index>(idmap);
}

std::unique_ptr<faiss::Index> make_hnsw(int dim, int m, int ef_construction, int ef_search) {
  auto* h = new faiss::IndexHNSWFlat(dim, m, faiss::METRIC_INNER_PRODUCT);
  h->hnsw.efConstruction = ef_construction;
  h->hnsw.efSearch = ef_search;
  auto* idmap = new faiss::IndexIDMap2(h);
  idmap->own_fields = true;
  return std::unique_ptr<faiss::Index>(idmap);
}

void cap_threads(int n) {
  if (n > 0) omp_set_num_threads(n);
}

// Little-endian framing helpers for the index file header.
void put_u64(std::string* b, uint64_t v) { b->append(reinterpret_cast<const char*>(&v), 8); }
void put_u32(std::string* b, uint32_t v) { b->append(reinterpret_cast<const char*>(&v), 4); }
void put_str(std::string* b, const std::string& s) {
  put_u64(b, s.size());
  b->append(s);
}
struct Cursor {
  const std::string& b;
  size_t pos = 0;
  bool ok = true;
  bool take(void* dst, size_t n) {
    if (!ok || b.size() - pos < n) return ok = false;
    std::memcpy(dst, b.data() + pos, n);
    pos += n;
    return true;
  }
  uint64_t u64() { uint64_t v = 0; take(&v, 8); return v; }
  uint32_t u32() { uint32_t v = 0; take(&v, 4); return v; }
  std::string str() {
    uint64_t n = u64();
    if (!ok || b.size() - pos < n) { ok = false; return {}; }
    std::string s = b.substr(pos, n);
    pos += n;
    return s;
  }
};

constexpr char kMagic[8] = {'R', 'A', 'G', 'D', 'V', 'I', 'X', '1'};
constexpr uint32_t kFormatVersion = 1;

}  // namespace

struct VectorIndex::Impl {
  VectorIndexOptions opts;
  ParsedSpec ps;
  mutable std::shared_mutex mu;
  std::unique_ptr<faiss::Index> index;      // guarded by mu
  bool staging = false;                     // guarded by mu; IVF not trained yet (index is exact)
  std::unordered_set<int64_t> live;         // guarded by mu
  std::unordered_set<int64_t> tombstones;   // guarded by mu; HNSW only

  size_t train_threshold() const {
    size_t t = static_cast<size_t>(ps.nlist) * static_cast<size_t>(std::max(1, opts.train_points_per_list));
    if (ps.pq_m > 0) t = std::max<size_t>(t, 256 * 16);  // PQ codebooks have 256 centroids each
    return std::max<size_t>(t, static_cast<size_t>(ps.nlist));
  }

  // Moves every staged vector into a freshly trained IVF index. Caller holds mu exclusively.
  void train_and_move() {
    auto* idmap = dynamic_cast<faiss::IndexIDMap2*>(index.get());
    auto* flat = dynamic_cast<faiss::IndexFlat*>(idmap->index);
    const size_t n = static_cast<size_t>(flat->ntotal);
    const size_t d = static_cast<size_t>(opts.dim);
    const float* xb = flat->get_xb();
    std::vector<size_t> order(n);
    std::iota(order.begin(), order.end(), 0);
    std::mt19937_64 rng(opts.seed);
    std::shuffle(order.begin(), order.end(), rng);
    size_t ns = std::min(n, opts.max_train_points);
    std::vector<float> sample(ns * d);
    for (size_t i = 0; i < ns; ++i) std::memcpy(&sample[i * d], xb + order[i] * d, d * sizeof(float));
    std::unique_ptr<faiss::Index> ivf(faiss::index_factory(opts.dim, opts.spec.c_str(), faiss::METRIC_INNER_PRODUCT));
    auto* iv = dynamic_cast<faiss::IndexIVF*>(ivf.get());
    RAGD_CHECK(iv != nullptr) << "index_factory(" << opts.spec << ") is not an IVF index";
    iv->cp.seed = static_cast<int>(opts.seed);
    // Polysemous training (simulated annealing over PQ codes) costs minutes and serves Hamming
    // filtering we do not use.
    if (auto* pq = dynamic_cast<faiss::IndexIVFPQ*>(iv)) pq->do_polysemous_training = false;
    iv->train(static_cast<idx_t>(ns), sample.data());
    iv->add_with_ids(static_cast<idx_t>(n), xb, idmap->id_map.data());
    log::retrieval()->info("trained {} on {} of {} vectors", opts.spec, ns, n);
    index = std::move(ivf);
    staging = false;
  }

  // Rebuilds the HNSW graph from live vectors, dropping tombstones. Caller holds mu exclusively.
  void compact_hnsw() {
    auto* idmap = dynamic_cast<faiss::IndexIDMap2*>(index.get());
    const size_t d = static_cast<size_t>(opts.dim);
    std::vector<idx_t> ids(live.begin(), live.end());
    std::sort(ids.begin(), ids.end());
    std::vector<float> xs(ids.size() * d);
    for (size_t i = 0; i < ids.size(); ++i) idmap->reconstruct(ids[i], &xs[i * d]);
    auto fresh = make_hnsw(opts.dim, ps.hnsw_m, opts.hnsw_ef_construction, opts.default_ef_search);
    if (!ids.empty()) fresh->add_with_ids(static_cast<idx_t>(ids.size()), xs.data(), ids.data());
    log::retrieval()->info("rebuilt {} without {} removed vectors ({} live)", opts.spec, tombstones.size(), ids.size());
    index = std::move(fresh);
    tombstones.clear();
  }

  bool needs_exclusive(const SearchParams& sp) const {
    return ps.kind == Kind::kHNSW && sp.ef_search > 0 && sp.ef_search != opts.default_ef_search;
  }
  faiss::HNSW* hnsw() const {
    auto* idmap = dynamic_cast<faiss::IndexIDMap2*>(index.get());
    auto* h = idmap ? dynamic_cast<faiss::IndexHNSW*>(idmap->index) : nullptr;
    return h ? &h->hnsw : nullptr;
  }

  // Caller holds mu (shared, or exclusive when needs_exclusive()).
  Result<std::vector<std::vector<Neighbor>>> search_locked(std::span<const float> queries, size_t n, int k,
                                                           const SearchParams& params) const {
    const Impl& m = *this;
    std::vector<std::vector<Neighbor>> out(n);
    if (m.live.empty() || n == 0) return out;
    cap_threads(m.opts.omp_threads);
    const idx_t want = std::min<idx_t>(k, static_cast<idx_t>(m.live.size()));
    const idx_t total = m.index->ntotal;
    idx_t kk = m.tombstones.empty() ? want : std::min<idx_t>(total, 2 * want + 16);
    if (params.filter && m.ps.kind == Kind::kHNSW && !m.staging) kk = std::min<idx_t>(total, std::max<idx_t>(kk, 2 * want + 16));
    std::vector<float> D;
    std::vector<idx_t> I;
    try {
      for (;;) {
        m.raw_search(n, queries.data(), kk, params, &D, &I);
        bool short_of = false;
        for (size_t q = 0; q < n; ++q) {
          out[q].clear();
          for (idx_t j = 0; j < kk && static_cast<idx_t>(out[q].size()) < want; ++j) {
            idx_t l = I[q * static_cast<size_t>(kk) + static_cast<size_t>(j)];
            if (l < 0 || m.tombstones.count(l)) continue;
            out[q].push_back({static_cast<uint64_t>(l), D[q * static_cast<size_t>(kk) + static_cast<size_t>(j)]});
          }
          if (static_cast<idx_t>(out[q].size()) < want) short_of = true;
        }
        // Tombstones and filters on a graph walk can leave a query short: widen and retry.
        const bool may_widen = !m.tombstones.empty() || (params.filter && m.ps.kind == Kind::kHNSW && !m.staging);
        if (!short_of || !may_widen || kk >= total) break;
        kk = std::min<idx_t>(total, kk * 4);
      }
    } catch (const std::exception& e) {
      return Status::Internal(std::string("vector index search: ") + e.what());
    }
    return out;
  }

  // Top-k for n queries from the current index, without tombstone filtering (the filter of `sp`
  // applies inside the scan). Caller holds mu.
  void raw_search(size_t n, const float* q, idx_t k, const SearchParams& sp, std::vector<float>* D,
                  std::vector<idx_t>* I) const {
    D->assign(n * static_cast<size_t>(k), 0.0f);
    I->assign(n * static_cast<size_t>(k), -1);
    if (ps.kind == Kind::kIVF && !staging) {
      // IVF stores the external ids itself.
      ExternalSelector sel(sp.filter);
      faiss::SearchParametersIVF p;
      p.nprobe = static_cast<size_t>(std::min(ps.nlist, sp.nprobe > 0 ? sp.nprobe : opts.default_nprobe));
      if (sp.filter) p.sel = &sel;
      index->search(static_cast<idx_t>(n), q, k, D->data(), I->data(), &p);
      return;
    }
    // Flat, staging and HNSW: an IndexIDMap2 over an index of internal ids (a flat one scanned by
    // flat_ip_topk, flat_scan.h). FAISS 1.7.3's
    // IndexIDMap refuses search parameters, so the inner index is searched (with a selector that
    // translates internal ids) and the answers are mapped to external ids here. FAISS 1.7.3 also
    // ignores SearchParametersHNSW::efSearch, so a non-default efSearch is set on the index by a
    // caller holding mu exclusively (see needs_exclusive); FAISS itself uses max(efSearch, k).
    auto* idmap = dynamic_cast<const faiss::IndexIDMap2*>(index.get());
    InternalSelector sel(sp.filter, &idmap->id_map);
    faiss::SearchParametersHNSW p;  // a SearchParameters that HNSW also accepts
    if (sp.filter) p.sel = &sel;
    if (faiss::HNSW* h = hnsw()) p.efSearch = h->efSearch;
    const auto* flat = dynamic_cast<const faiss::IndexFlat*>(idmap->index);
    if (flat != nullptr && flat->metric_type == faiss::METRIC_INNER_PRODUCT) {  // Flat, and IVF staging
      flat_ip_topk(flat->get_xb(), static_cast<size_t>(flat->ntotal), static_cast<size_t>(flat->d), q, n,
                   static_cast<size_t>(k), sp.filter ? &sel : nullptr, D->data(), I->data());
    } else {
      idmap->index->search(static_cast<idx_t>(n), q, k, D->data(), I->data(), sp.filter ? &p : nullptr);
    }
    for (auto& l : *I)
      if (l >= 0) l = idmap->id_map[static_cast<size_t>(l)];
  }

  struct ExternalSelector : faiss::IDSelector {
    explicit ExternalSelector(const IdFilter* f) : f(f) {}
    bool is_member(idx_t id) const override { return id >= 0 && f->allowed(static_cast<uint64_t>(id)); }
    const IdFilter* f;
  };
  struct InternalSelector : faiss::IDSelector {
    InternalSelector(const IdFilter* f, const std::vector<idx_t>* map) : f(f), map(map) {}
    bool is_member(idx_t i) const override {
      return i >= 0 && static_cast<size_t>(i) < map->size() && f->allowed(static_cast<uint64_t>((*map)[static_cast<size_t>(i)]));
    }
    const IdFilter* f;
    const std::vector<idx_t>* map;
  };
};

VectorIndex::VectorIndex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
VectorIndex::~VectorIndex() = default;

Result<std::unique_ptr<VectorIndex>> VectorIndex::create(const VectorIndexOptions& opts) {
  if (opts.dim < 1) return Status::InvalidArgument("vector index: dim must be >= 1");
  RAGD_ASSIGN_OR_RETURN(ParsedSpec ps, parse_spec(opts.spec, opts.dim));
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->ps = ps;
  try {
    if (ps.kind == Kind::kHNSW) {
      impl->index = make_hnsw(opts.dim, ps.hnsw_m, opts.hnsw_ef_construction, opts.default_ef_search);
    } else {
      impl->index = make_exact(opts.dim);
      impl->staging = ps.kind == Kind::kIVF;
      if (impl->staging) {
        // Fail now, not at training time, if FAISS rejects the spec.
        std::unique_ptr<faiss::Index> probe(faiss::index_factory(opts.dim, opts.spec.c_str(), faiss::METRIC_INNER_PRODUCT));
        if (!dynamic_cast<faiss::IndexIVF*>(probe.get()))
          return Status::InvalidArgument("index spec '" + opts.spec + "' did not make an IVF index");
      }
    }
  } catch (const std::exception& e) {
    return Status::InvalidArgument("index spec '" + opts.spec + "': " + e.what());
  }
  return std::unique_ptr<VectorIndex>(new VectorIndex(std::move(impl)));
}

Status VectorIndex::add(std::span<const uint64_t> ids, std::span<const float> vectors) {
  Impl& m = *impl_;
  const size_t d = static_cast<size_t>(m.opts.dim);
  if (vectors.size() != ids.size() * d)
    return Status::InvalidArgument("vector index add: " + std::to_string(vectors.size()) + " floats for " +
                                   std::to_string(ids.size()) + " ids of dim " + std::to_string(d));
  std::unique_lock lk(m.mu);
  cap_threads(m.opts.omp_threads);
  std::vector<idx_t> new_ids;
  std::vector<float> new_vecs;
  bool revive = false;
  std::unordered_set<int64_t> batch;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (ids[i] >= (1ull << 63)) return Status::InvalidArgument("vector index add: id " + std::to_string(ids[i]) + " >= 2^63");
    auto id = static_cast<int64_t>(ids[i]);
    if (m.live.count(id) || !batch.insert(id).second) continue;
    if (m.tombstones.count(id)) revive = true;
    new_ids.push_back(id);
    new_vecs.insert(new_vecs.end(), vectors.begin() + i * d, vectors.begin() + (i + 1) * d);
  }
  if (new_ids.empty()) return Status::OK();
  try {
    if (revive) m.compact_hnsw();
    m.index->add_with_ids(static_cast<idx_t>(new_ids.size()), new_vecs.data(), new_ids.data());
    m.live.insert(new_ids.begin(), new_ids.end());
    if (m.staging && m.live.size() >= m.train_threshold()) m.train_and_move();
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector index add: ") + e.what());
  }
  return Status::OK();
}

Result<size_t> VectorIndex::remove(std::span<const uint64_t> ids) {
  Impl& m = *impl_;
  std::unique_lock lk(m.mu);
  std::vector<idx_t> present;
  for (uint64_t u : ids) {
    auto id = static_cast<int64_t>(u);
    if (m.live.erase(id)) present.push_back(id);
  }
  if (present.empty()) return size_t{0};
  try {
    if (m.ps.kind == Kind::kHNSW) {
      m.tombstones.insert(present.begin(), present.end());
      if (m.tombstones.size() >= 64 && m.tombstones.size() * 4 > m.tombstones.size() + m.live.size()) m.compact_hnsw();
    } else {
      faiss::IDSelectorBatch sel(static_cast<idx_t>(present.size()), present.data());
      m.index->remove_ids(sel);
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector index remove: ") + e.what());
  }
  return present.size();
}

Result<std::vector<std::vector<Neighbor>>> VectorIndex::search(std::span<const float> queries, int k,
                                                               const SearchParams& params) const {
  const Impl& m = *impl_;
  const size_t d = static_cast<size_t>(m.opts.dim);
  if (k < 1) return Status::InvalidArgument("vector index search: k must be >= 1, got " + std::to_string(k));
  if (queries.size() % d != 0)
    return Status::InvalidArgument("vector index search: query length " + std::to_string(queries.size()) +
                                   " is not a multiple of dim " + std::to_string(d));
  const size_t n = queries.size() / d;
  if (!m.needs_exclusive(params)) {
    std::shared_lock lk(m.mu);
    return m.search_locked(queries, n, k, params);
  }
  std::unique_lock lk(m.mu);
  faiss::HNSW* h = m.hnsw();
  h->efSearch = params.ef_search;
  auto r = m.search_locked(queries, n, k, params);
  h->efSearch = m.opts.default_ef_search;
  return r;
}

Result<std::vector<std::vector<int64_t>>> VectorIndex::coarse_lists(std::span<const float> vectors, int n) const {
  const Impl& m = *impl_;
  const size_t d = static_cast<size_t>(m.opts.dim);
  if (vectors.size() % d != 0)
    return Status::InvalidArgument("coarse lists: vector length " + std::to_string(vectors.size()) +
                                   " is not a multiple of dim " + std::to_string(d));
  const size_t nv = vectors.size() / d;
  std::vector<std::vector<int64_t>> out(nv);
  std::shared_lock lk(m.mu);
  if (m.ps.kind != Kind::kIVF || m.staging || nv == 0) return out;
  auto* ivf = dynamic_cast<const faiss::IndexIVF*>(m.index.get());
  if (!ivf) return out;
  const idx_t np = std::min<idx_t>(static_cast<idx_t>(m.ps.nlist), n > 0 ? n : m.opts.default_nprobe);
  std::vector<float> D(nv * static_cast<size_t>(np));
  std::vector<idx_t> I(nv * static_cast<size_t>(np));
  try {
    cap_threads(m.opts.omp_threads);
    ivf->quantizer->search(static_cast<idx_t>(nv), vectors.data(), np, D.data(), I.data());
  } catch (const std::exception& e) {
    return Status::Internal(std::string("coarse lists: ") + e.what());
  }
  for (size_t i = 0; i < nv; ++i) out[i].assign(I.begin() + i * np, I.begin() + (i + 1) * np);
  return out;
}

Status VectorIndex::search_progressive(std::span<const float> query, int k, std::span<const int> stages,
                                       const StageCallback& on_stage, const IdFilter* filter) const {
  const Impl& m = *impl_;
  const size_t d = static_cast<size_t>(m.opts.dim);
  if (query.size() != d)
    return Status::InvalidArgument("progressive search: query has " + std::to_string(query.size()) +
                                   " floats, expected dim " + std::to_string(d));
  if (k < 1) return Status::InvalidArgument("progressive search: k must be >= 1");
  if (stages.empty()) return Status::InvalidArgument("progressive search: no stages");
  for (size_t i = 0; i < stages.size(); ++i)
    if (stages[i] < 1 || (i > 0 && stages[i] <= stages[i - 1]))
      return Status::InvalidArgument("progressive search: stages must be positive and increasing (stage " +
                                     std::to_string(i) + " = " + std::to_string(stages[i]) + ")");
  {
    std::shared_lock lk(m.mu);
    if (m.ps.kind == Kind::kIVF && !m.staging && !m.live.empty()) {
      cap_threads(m.opts.omp_threads);
      auto* ivf = dynamic_cast<const faiss::IndexIVF*>(m.index.get());
      const int max_np = std::min(stages.back(), m.ps.nlist);
      std::vector<float> cd(static_cast<size_t>(max_np));
      std::vector<idx_t> ci(static_cast<size_t>(max_np));
      std::vector<Neighbor> best;
      Impl::ExternalSelector sel(filter);
      try {
        ivf->quantizer->search(1, query.data(), max_np, cd.data(), ci.data());
        std::vector<float> D(static_cast<size_t>(k));
        std::vector<idx_t> I(static_cast<size_t>(k));
        int prev = 0;
        for (size_t s = 0; s < stages.size(); ++s) {
          int cur = std::min(stages[s], max_np);
          if (cur > prev) {
            faiss::SearchParametersIVF p;
            p.nprobe = static_cast<size_t>(cur - prev);
            if (filter) p.sel = &sel;
            std::fill(I.begin(), I.end(), -1);
            ivf->search_preassigned(1, query.data(), k, ci.data() + prev, cd.data() + prev, D.data(), I.data(),
                                    false, &p);
            for (int j = 0; j < k; ++j)
              if (I[static_cast<size_t>(j)] >= 0) best.push_back({static_cast<uint64_t>(I[static_cast<size_t>(j)]), D[static_cast<size_t>(j)]});
            std::sort(best.begin(), best.end(), [](const Neighbor& a, const Neighbor& b) {
              return a.score != b.score ? a.score > b.score : a.id < b.id;
            });
            if (best.size() > static_cast<size_t>(k)) best.resize(static_cast<size_t>(k));
            prev = cur;
          }
          if (!on_stage(s, cur, best)) break;
          if (cur == max_np && cur < stages[s]) break;  // every list scanned
        }
      } catch (const std::exception& e) {
        return Status::Internal(std::string("progressive search: ") + e.what());
      }
      return Status::OK();
    }
  }
  SearchParams all;
  all.filter = filter;
  RAGD_ASSIGN_OR_RETURN(auto res, search(query, k, all));
  on_stage(0, 0, res[0]);
  return Status::OK();
}

size_t VectorIndex::size() const {
  std::shared_lock lk(impl_->mu);
  return impl_->live.size();
}
bool VectorIndex::contains(uint64_t id) const {
  std::shared_lock lk(impl_->mu);
  return impl_->live.count(static_cast<int64_t>(id)) > 0;
}
bool VectorIndex::trained() const {
  std::shared_lock lk(impl_->mu);
  return !impl_->staging;
}
const std::string& VectorIndex::spec() const { return impl_->opts.spec; }
int VectorIndex::dim() const { return impl_->opts.dim; }
int VectorIndex::nlist() const { return impl_->ps.nlist; }

Status VectorIndex::save(const std::string& path, const FileInfo& info) const {
  const Impl& m = *impl_;
  std::string buf;
  buf.append(kMagic, 8);
  put_u32(&buf, kFormatVersion);
  {
    std::shared_lock lk(m.mu);
    put_u64(&buf, info.seq);
    put_str(&buf, info.embedder);
    put_str(&buf, m.opts.spec);
    put_u32(&buf, static_cast<uint32_t>(m.opts.dim));
    buf.push_back(m.staging ? 1 : 0);
    std::vector<int64_t> live(m.live.begin(), m.live.end()), tomb(m.tombstones.begin(), m.tombstones.end());
    std::sort(live.begin(), live.end());
    std::sort(tomb.begin(), tomb.end());
    put_u64(&buf, live.size());
    buf.append(reinterpret_cast<const char*>(live.data()), live.size() * 8);
    put_u64(&buf, tomb.size());
    buf.append(reinterpret_cast<const char*>(tomb.data()), tomb.size() * 8);
    faiss::VectorIOWriter w;
    try {
      faiss::write_index(m.index.get(), &w);
    } catch (const std::exception& e) {
      return Status::Internal(path + ": serialising the index: " + e.what());
    }
    put_u64(&buf, w.data.size());
    buf.append(reinterpret_cast<const char*>(w.data.data()), w.data.size());
  }
  put_u64(&buf, xxh3_64(buf.data(), buf.size()));
  return write_file_durably(path, buf);
}

Result<std::unique_ptr<VectorIndex>> VectorIndex::load(const std::string& path, const VectorIndexOptions& opts,
                                                       FileInfo* info) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound(path + ": cannot open");
  std::string buf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (buf.size() < 8 + 4 + 8 || std::memcmp(buf.data(), kMagic, 8) != 0)
    return Status::Corruption(path + ": not a ragd vector index file (bad magic)");
  uint64_t stored_sum;
  std::memcpy(&stored_sum, buf.data() + buf.size() - 8, 8);
  if (xxh3_64(buf.data(), buf.size() - 8) != stored_sum) return Status::Corruption(path + ": checksum mismatch");
  Cursor c{buf, 8};
  uint32_t version = c.u32();
  if (version != kFormatVersion)
    return Status::Corruption(path + ": format version " + std::to_string(version) + ", expected " +
                              std::to_string(kFormatVersion));
  FileInfo fi;
  fi.seq = c.u64();
  fi.embedder = c.str();
  std::string spec = c.str();
  uint32_t dim = c.u32();
  char staging = 0;
  c.take(&staging, 1);
  if (!c.ok) return Status::Corruption(path + ": truncated header");
  if (spec != opts.spec || static_cast<int>(dim) != opts.dim)
    return Status::FailedPrecondition(path + ": index is '" + spec + "' dim " + std::to_string(dim) +
                                      ", asked for '" + opts.spec + "' dim " + std::to_string(opts.dim));
  RAGD_ASSIGN_OR_RETURN(ParsedSpec ps, parse_spec(spec, static_cast<int>(dim)));
  auto impl = std::make_unique<Impl>();
  impl->opts = opts;
  impl->ps = ps;
  impl->staging = staging != 0;
  uint64_t nlive = c.u64();
  if (!c.ok || nlive > buf.size() / 8) return Status::Corruption(path + ": bad live id count");
  std::vector<int64_t> ids(nlive);
  c.take(ids.data(), nlive * 8);
  impl->live.insert(ids.begin(), ids.end());
  uint64_t ntomb = c.u64();
  if (!c.ok || ntomb > buf.size() / 8) return Status::Corruption(path + ": bad tombstone count");
  ids.assign(ntomb, 0);
  c.take(ids.data(), ntomb * 8);
  impl->tombstones.insert(ids.begin(), ids.end());
  uint64_t flen = c.u64();
  if (!c.ok || flen != buf.size() - 8 - c.pos) return Status::Corruption(path + ": bad FAISS payload length");
  faiss::VectorIOReader r;
  r.data.assign(reinterpret_cast<const uint8_t*>(buf.data() + c.pos), reinterpret_cast<const uint8_t*>(buf.data() + c.pos + flen));
  try {
    impl->index.reset(faiss::read_index(&r));
  } catch (const std::exception& e) {
    return Status::Corruption(path + ": FAISS payload: " + e.what());
  }
  bool shape_ok;
  if (impl->staging || ps.kind == Kind::kFlat)
    shape_ok = dynamic_cast<faiss::IndexIDMap2*>(impl->index.get()) != nullptr;
  else if (ps.kind == Kind::kHNSW)
    shape_ok = dynamic_cast<faiss::IndexIDMap2*>(impl->index.get()) != nullptr &&
               dynamic_cast<faiss::IndexHNSW*>(dynamic_cast<faiss::IndexIDMap2*>(impl->index.get())->index) != nullptr;
  else
    shape_ok = dynamic_cast<faiss::IndexIVF*>(impl->index.get()) != nullptr;
  if (!shape_ok || impl->index->d != static_cast<int>(dim))
    return Status::Corruption(path + ": FAISS index does not match spec '" + spec + "'");
  if (faiss::HNSW* h = impl->hnsw()) h->efSearch = opts.default_ef_search;
  if (static_cast<size_t>(impl->index->ntotal) != impl->live.size() + impl->tombstones.size())
    return Status::Corruption(path + ": index holds " + std::to_string(impl->index->ntotal) + " vectors, header lists " +
                              std::to_string(impl->live.size() + impl->tombstones.size()));
  if (info) *info = fi;
  return std::unique_ptr<VectorIndex>(new VectorIndex(std::move(impl)));
}

}  // namespace ragd::retrieval
