// VectorIndex: a FAISS index chosen by factory string, inner product over L2-normalised vectors,
// keyed by stable 64-bit ids.
//
//   "Flat"          exact search (IndexIDMap2 over IndexFlatIP)
//   "HNSW<M>"       graph search (IndexIDMap2 over IndexHNSWFlat); removal marks tombstones that
//                   searches filter out, and the graph is rebuilt once they pass 25 %
//   "IVF<n>,Flat"   inverted lists, exact codes
//   "IVF<n>,PQ<m>"  inverted lists, product-quantised codes (dim % m == 0)
//
// IVF types need training: until `train_points_per_list * n` vectors have been added they are held
// in an exact staging index (searches stay exact); then the quantizer is trained on a sample of at
// most `max_train_points` of them and every vector moves to the IVF index.
//
// Progressive search (IVF): the query is assigned to its max-nprobe nearest lists once, the lists
// are scanned stage by stage (e.g. nprobe 1, 2, 4, 8...), and the running top-k is reported after
// each stage; later stages only scan the new lists. Other types report one stage.
//
// Files: save() writes `path.tmp`, fsyncs it, renames it over `path` and fsyncs the directory, so
// `path` is always a complete index. The file carries a header (format version, the sequence
// number the caller says it covers, the embedder identity, spec, dim, live ids, tombstones) and a
// checksum over everything; load() refuses a file whose checksum or header does not match.
//
// Thread-safety: internally synchronised. search() calls run concurrently with each other;
// add()/remove() take an exclusive lock. FAISS's OpenMP threads are capped per call at
// `omp_threads` (set on the calling thread).
#pragma once

#include <optional>

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/retrieval_mode.h"

namespace ragd::retrieval {

struct MetadataFilter;  // metadata_filter.h

struct VectorIndexOptions {
  std::string spec = "Flat";       // factory string, see above; default "Flat"
  int dim = 384;                   // vector dimension; default 384
  int default_nprobe = 32;         // IVF lists scanned when a query does not say; default 32
  int default_ef_search = 128;     // HNSW candidate list when a query does not say; default 128
  int hnsw_ef_construction = 40;   // HNSW build-time candidate list; default 40
  int train_points_per_list = 30;  // IVF: vectors per list needed before training; default 30
  size_t max_train_points = 100000;  // IVF: training sample cap; default 100k
  int omp_threads = 1;             // FAISS OpenMP threads per call; 0 = OpenMP default; default 1
  uint64_t seed = 1234;            // training sample / k-means seed
};

// Search-time id filter. Only ids for which allowed() is true are candidates: the test runs inside
// the FAISS scan (an IDSelector), so a search returns k neighbours whenever k allowed ids are
// reachable (all of them for Flat; the scanned lists for IVF; the graph walk for HNSW).
// Thread-safety: allowed() is called concurrently from FAISS's threads; it must not block.
class IdFilter {
 public:
  virtual ~IdFilter() = default;
  virtual bool allowed(uint64_t id) const = 0;
};

struct SearchParams {
  // Corpus searches: lexical, dense or hybrid; auto = the corpus's default (Corpus::default_mode).
  // The vector index itself ignores it.
  RetrievalMode mode = RetrievalMode::kAuto;
  int nprobe = 0;     // IVF lists to scan; 0 = index default
  int ef_search = 0;  // HNSW candidate list size; 0 = index default (raised to k when smaller)
  const IdFilter* filter = nullptr;  // not owned; nullptr = every id
  // Corpus searches: only chunks of documents that satisfy it, inside both searches
  // (metadata_filter.h); not owned; nullptr or empty = no filter. The vector index ignores it.
  const MetadataFilter* metadata = nullptr;
};

struct Neighbor {
  uint64_t id = 0;
  float score = 0;  // inner product; higher is closer
};

class VectorIndex {
 public:
  // InvalidArgument naming the spec when it is not one of the supported forms.
  static Result<std::unique_ptr<VectorIndex>> create(const VectorIndexOptions& opts);

  struct FileInfo {
    uint64_t seq = 0;        // caller-defined: the last store sequence number this index covers
    std::string embedder;    // identity of the embedder that made the vectors
  };
  // Loads a file written by save(). The spec and dim in `opts` must match the file's
  // (FailedPrecondition naming both otherwise); search defaults and threads come from `opts`.
  static Result<std::unique_ptr<VectorIndex>> load(const std::string& path, const VectorIndexOptions& opts,
                                                   FileInfo* info);
  Status save(const std::string& path, const FileInfo& info) const;

  ~VectorIndex();

  // vectors: [ids.size(), dim]. Ids already present are skipped (idempotent replay). ids must be
  // < 2^63.
  Status add(std::span<const uint64_t> ids, std::span<const float> vectors);
  // Ids not present are ignored. Returns how many were removed.
  Result<size_t> remove(std::span<const uint64_t> ids);

  // queries: [n, dim]. Returns n lists of at most k neighbours, best first.
  Result<std::vector<std::vector<Neighbor>>> search(std::span<const float> queries, int k,
                                                    const SearchParams& params = {}) const;

  // One query [dim]. `on_stage(stage, nprobe, hits)` is called after each stage with the top-k so
  // far (called under the index's shared lock: keep it short); returning false stops early.
  // Stages must be increasing and positive; they are capped at the number of lists.
  using StageCallback = std::function<bool(size_t stage, int nprobe, const std::vector<Neighbor>& hits)>;
  Status search_progressive(std::span<const float> query, int k, std::span<const int> nprobe_stages,
                            const StageCallback& on_stage, const IdFilter* filter = nullptr) const;

  // The coarse lists a search would look at: for each vector, its `n` nearest IVF lists (n as a
  // search's nprobe: 0 = the default, at most nlist), in probe order; a stored vector's own list
  // is its first (n = 1). Empty for every vector of a Flat or HNSW index and of an IVF index still
  // staging, where every vector is a candidate of every search. Lets a caller reproduce which of
  // some known vectors a search can return (iterative RAG's speculation cache).
  Result<std::vector<std::vector<int64_t>>> coarse_lists(std::span<const float> vectors, int n) const;

  size_t size() const;        // live vectors
  bool contains(uint64_t id) const;
  bool trained() const;       // false while an IVF index is still staging
  const std::string& spec() const;
  int dim() const;
  int nlist() const;          // IVF lists, 0 for other types

  struct Impl;

 private:
  explicit VectorIndex(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::retrieval
