// Corpus: the retrieval facade. Owns a data directory shared by the daemon, `ragctl ingest --data`
// and `ragctl search --data`:
//
//   <data>/LOCK          flock held by the one writer (pid inside); a second writer fails clearly
//   <data>/docstore/     RocksDB: documents, chunks (text, token ids, offsets, vector), manifest
//   <data>/index.faiss   vector index (VectorIndex file: FAISS payload + embedder, spec, seq)
//   <data>/lexical/      lexical index (Xapian, BM25 over title + chunk text; lexical_index.h),
//                        committed after every change (and with index.faiss), recording the store seq it covers
//
// Ingest: each document is validated, hashed (title + text), compared with the stored version
// (unchanged = no-op; changed = its chunks are replaced), chunked, embedded (title + chunk text),
// and the whole call is written as one synced RocksDB batch with a log entry of chunk ids
// added/removed. ingest()
// returns only after that batch is durable. The vector index is updated in memory and saved
// atomically every `index_save_every_chunks` changed chunks / `index_save_interval_s` seconds and
// at close; on open, log entries newer than the saved index's sequence number are replayed (and a
// missing, corrupt or inconsistent index is rebuilt from the stored vectors).
//
// Tenants: every document belongs to one tenant or is shared (Document::tenant ""). Each owner has
// its own id space; the owner is stored with the document, in the same batch (see doc_store.h).
// Every search takes a ReadScope, with no default, and filters inside the vector search (an
// IdFilter over chunk owners) and inside the lexical match (owner terms, a boolean filter), so a tenant's top-k is the k best of its own and the shared chunks;
// fetch_hits() drops any hit the scope does not see. A store written before
// tenants existed reads as all-shared. A document record that cannot be read (checksum, format,
// owner) makes open() fail: ownership never fails open.
//
// The corpus records its embedder identity and index spec; opening it with a different embedder
// (or dimension) or index spec is refused, so queries and documents always share an embedder.
//
// Replicas (CorpusOptions::secondary_of): a corpus opened as a replica reads another process's
// data directory, read-only: the document store as a RocksDB secondary instance (scratch files in
// the replica's own directory, <data>/docstore-secondary), caught up every `catch_up_ms` by a
// background thread, which also follows the vector index: it replays the store's log of chunk ids
// added and removed into its own copy, and loads the primary's index file whenever the primary
// publishes a new one (save() renames a complete file into place; its header names the store
// sequence number it covers, the generation). A loaded index is swapped in under the owner lock:
// searches in flight finish on the old one. One document's records (its metadata, chunks, token
// ids, vectors, log entry) are one RocksDB batch, and the replica reads whole batches; a search
// hit whose chunk or document record is not visible is dropped, so a replica never returns part
// of a document. Every write on a replica fails with FailedPrecondition (kReplicaReadOnly).
//
// Snapshots (Corpus::snapshot): a RocksDB checkpoint of the store plus the published index, which
// a daemon or `ragctl search` opens like the original; taken beside a running writer, too.
//
// Thread-safety: internally synchronised. search()/get_*() run concurrently with each other and
// with ingest(); ingest()/remove_document()/save_index() are serialised among themselves.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/retrieval/chunker.h"
#include "ragd/retrieval/document.h"
#include "ragd/retrieval/embedder.h"
#include "ragd/retrieval/metadata_filter.h"
#include "ragd/retrieval/reader.h"
#include "ragd/retrieval/vector_index.h"

namespace ragd::engine {
class Tokenizer;
}

namespace ragd::retrieval {

struct CorpusOptions {
  ChunkerOptions chunker;      // chunk_tokens default 256, overlap 0
  // Embedder; name "" = the one the corpus was built with ("hashing" for a new corpus); "auto" =
  // the same, but a new corpus gets term vectors (model_dir, else default_termvec_dir(); hashing
  // when there are none).
  EmbedderOptions embedder = [] {
    EmbedderOptions e;
    e.name.clear();
    return e;
  }();
  // FAISS factory string; "" = the corpus's own ("Flat" for a new corpus).
  std::string index_spec;
  VectorIndexOptions index;    // search defaults, training, omp_threads (spec/dim are set here)
  bool read_only = false;      // readers take no lock and never write (safe beside a writer)
  uint64_t index_save_every_chunks = 50000;  // save index.faiss after this many chunk changes
  double index_save_interval_s = 120.0;       // ... or this long after the last save (seconds)
  size_t embed_batch = 64;     // texts per embedder call
  // Replica: the primary's data directory, followed read-only (see above); the directory given to
  // open() is the replica's own scratch. "" = off (default).
  std::string secondary_of;
  int catch_up_ms = 1000;      // replica: how often it reads the primary's new writes (ms); default 1000
  // Searches without a mode of their own: hybrid (lexical + dense, fused), lexical or dense.
  // auto: by the embedder — hybrid with a semantic one (an encoder or the model), lexical with
  // the hashing embedder, whose vectors are hashed words: a weaker lexical signal than BM25 that
  // only lowered every fused ranking measured (docs/benchmarks.md, retrieval quality).
  RetrievalMode mode = RetrievalMode::kAuto;
  HybridOptions hybrid;
  DocumentEvidence evidence;  // lexical and hybrid search (retrieval_mode.h)
  // Keep the lexical (BM25) index. Off: a dense-only corpus — ingest about half the work, no
  // lexical or hybrid search and no metadata filters (both answer FailedPrecondition); a lexical
  // index left in the directory is brought up to date when a later open turns it back on.
  bool lexical_index = true;
};

// The message of every write refused by a replica.
inline constexpr const char* kReplicaReadOnly = "this replica serves the corpus read-only; ingest on the primary";

struct SnapshotInfo {
  uint64_t documents = 0, chunks = 0;
  uint64_t seq = 0;        // store sequence number of the copy
  uint64_t index_seq = 0;  // sequence number the copied index file covers; 0 = no index file (rebuilt at open)
  bool beside_writer = false;  // taken while another process held the data directory
};

struct IngestSummary {
  size_t ingested = 0;   // new documents
  size_t unchanged = 0;  // same id, same content: nothing written
  size_t replaced = 0;   // same id, new content: chunks replaced
  size_t rejected = 0;   // invalid documents (see `problems`)
  uint64_t chunks_added = 0;
  uint64_t chunks_removed = 0;
  uint64_t bytes = 0;    // text bytes of ingested + replaced documents
  uint64_t seq = 0;      // store sequence number after this call (0 when nothing was written)
  std::vector<SkippedInput> problems;  // {document id or "#index", reason}
};

// Whose documents a read sees. Made only by its named constructors, so that every search says
// whose it is: a tenant sees its own documents and the shared ones; shared_only() sees the shared
// ones; everything() sees every document (operators and offline tools such as `ragctl search`,
// never a serving path: a request's scope is always a tenant's).
class ReadScope {
 public:
  static ReadScope tenant(std::string name) { return ReadScope(std::move(name)); }  // "" = shared_only()
  static ReadScope shared_only() { return ReadScope(std::string()); }
  static ReadScope everything() { return ReadScope(std::nullopt); }
  // Whether a document owned by `owner` ("" = shared) is visible.
  bool sees(std::string_view owner) const { return !tenant_ || owner.empty() || owner == *tenant_; }
  bool is_everything() const { return !tenant_.has_value(); }
  // The tenant; "" for shared_only(); empty for everything() (check is_everything() first).
  const std::string& tenant_name() const {
    static const std::string kNone;
    return tenant_ ? *tenant_ : kNone;
  }

 private:
  explicit ReadScope(std::optional<std::string> t) : tenant_(std::move(t)) {}
  std::optional<std::string> tenant_;
};

struct DocumentInfo {
  std::string id, source, title;
  std::string url, format;   // as ingested (Document::url, ::format)
  uint32_t page = 0;         // PDF page documents: the 1-based page; 0 = none
  std::vector<std::pair<std::string, std::string>> metadata;  // key, minified JSON value
  std::string tenant;        // owner; "" = shared
  std::string content_hash;  // 32 hex digits
  uint64_t bytes = 0;
  uint64_t seq = 0;
  std::vector<uint64_t> chunk_ids;
};

struct Hit {
  float score = 0;
  std::string tenant;  // owner of the document; "" = shared (the KV scope of its chunks)
  std::string source;  // the document's source (path or the id given at ingest)
  std::string title;
  std::string url;     // the document's citation fields (Document::url, ::format, ::page)
  std::string format;
  uint32_t page = 0;
  std::vector<std::pair<std::string, std::string>> metadata;  // the document's, key -> JSON value
  Chunk chunk;         // id, doc id (as its owner named it), offsets, section path, text, token ids
  std::vector<float> vector;  // the chunk's stored embedding (the index scores it by inner product)
};

struct CorpusStats {
  uint64_t documents = 0;
  uint64_t chunks = 0;
  uint64_t vectors = 0;  // live vectors in the index
  uint64_t seq = 0;      // last durable store sequence number
  uint64_t index_saved_seq = 0;
  std::string embedder;  // identity
  std::string index_spec;
  int dim = 0;
  bool index_trained = true;
};

// Document evidence (retrieval_mode.h) on hits best first: each document's first (best) hit — a
// document is a tenant and document id — scores its own plus opts.weight times the sum of the best
// opts.chunks scores of the document's other hits; the other hits keep their scores (the page
// rises without its further passages crowding other pages out of a prompt); re-sorted best first,
// ties in their old order. Pure.
void apply_document_evidence(const DocumentEvidence& opts, std::vector<Hit>* hits);

// Reciprocal rank fusion of a dense and a lexical ranking (best first): every chunk scores the sum
// over the lists of weight / (rrf_k + rank), ranks from 1, the first opts.candidates of each; best
// first, ties in order of first appearance (dense before lexical); at most 2k kept. Pure.
std::vector<Neighbor> fuse_reciprocal_rank(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                           const HybridOptions& opts, int k);
// Weighted fusion (retrieval_mode.h) of a dense ranking (cosines) and a lexical one (BM25 scores,
// positive), both best first, the first opts.candidates of each; best first, ties in order of
// first appearance (dense before lexical); at most 2k kept. Pure.
std::vector<Neighbor> fuse_weighted(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                    const HybridOptions& opts, int k);
// The fusion opts.fusion names.
std::vector<Neighbor> fuse_hybrid(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                  const HybridOptions& opts, int k);

class Corpus {
 public:
  // The mode of searches that name none (CorpusOptions::mode, or the embedder's default).
  RetrievalMode default_mode() const;
  // Whether a search in `mode` ranks by a score whose ratio to the first hit's means the same
  // across queries: BM25 (lexical) and the weighted fusion of normalised BM25 and cosine (hybrid
  // with HybridFusion::kWeighted); not cosines alone nor reciprocal ranks. The pipelines' cut of
  // weak passages ([retriever] min_score_ratio) applies to those. kAuto resolves first.
  bool ranks_by_ratio_score(RetrievalMode mode) const;
  // The mode a search asking `asked` runs in: `asked`, or default_mode() for kAuto.
  RetrievalMode resolve_mode(RetrievalMode asked) const { return asked != RetrievalMode::kAuto ? asked : default_mode(); }
  // `tokenizer` is needed to ingest (chunking) and by the "model" embedder; may be null for a
  // read-only corpus with the hashing embedder.
  static Result<std::unique_ptr<Corpus>> open(const std::string& data_dir, const CorpusOptions& opts,
                                              std::shared_ptr<const engine::Tokenizer> tokenizer);
  // Saves the index when it changed (errors are logged).
  ~Corpus();
  Corpus(const Corpus&) = delete;
  Corpus& operator=(const Corpus&) = delete;

  // Durable on return. Invalid documents are reported in the summary, not as an error; an error
  // Status means nothing of this call was written (storage failure, read-only corpus, no
  // tokenizer; PermissionDenied when a tenant's document names the id of a shared document:
  // shared documents are read-only to tenants).
  Result<IngestSummary> ingest(std::span<const Document> docs);
  // The shared document `id`.
  Result<std::optional<DocumentInfo>> get_document(const std::string& id) const;
  // `tenant`'s own document `id`, else the shared one ("" = shared only).
  Result<std::optional<DocumentInfo>> get_document(const std::string& id, const std::string& tenant) const;
  // Removes the shared document `id`, its chunks and vectors; false when it did not exist.
  Result<bool> remove_document(const std::string& id);
  // Removes `tenant`'s own document ("" = a shared one); false when it has none of that id;
  // PermissionDenied when the id names only a shared document and `tenant` is not "".
  Result<bool> remove_document(const std::string& id, const std::string& tenant);

  Result<std::vector<Hit>> search(std::string_view query, int k, const ReadScope& scope,
                                  const SearchParams& params = {}) const;
  // Several queries in one index search (one FAISS call): the hits of each, in order.
  Result<std::vector<std::vector<Hit>>> search_batch(std::span<const std::string> queries, int k,
                                                     const ReadScope& scope, const SearchParams& params = {}) const;
  // Progressive search (see VectorIndex::search_progressive): `on_stage(stage, nprobe, hits)`
  // gets the top-k neighbour ids after each stage, filtered by `scope`; an index that is not IVF
  // (or not trained yet) has a single stage, reported with nprobe 0. fetch_hits() turns a
  // stage's neighbours into hits.
  Status search_progressive(std::string_view query, int k, std::span<const int> nprobe_stages,
                            const ReadScope& scope, const VectorIndex::StageCallback& on_stage) const;
  // The hits of `neighbors` that `scope` sees (others are dropped: a neighbour list is not trusted
  // to come from a search of the same scope), in order.
  Result<std::vector<Hit>> fetch_hits(std::span<const Neighbor> neighbors, const ReadScope& scope) const;
  // The query's embedding, as search() computes it (InvalidArgument for an empty or non-UTF-8
  // query). With Hit::vector and coarse_lists(), a caller can score chunks as the index does:
  // iterative RAG's speculation cache.
  Result<std::vector<float>> embed_query(std::string_view query) const;
  // For each lexical term (lexical_terms.h), the share of the chunks `scope` sees that hold it, in
  // [0, 1] (how common a word is in what this tenant searches; another tenant's chunks never
  // count). FailedPrecondition when the corpus keeps no lexical index.
  Result<std::vector<double>> term_shares(std::span<const std::string> terms, const ReadScope& scope) const;
  // VectorIndex::coarse_lists of the corpus index.
  Result<std::vector<std::vector<int64_t>>> coarse_lists(std::span<const float> vectors, int n) const;
  // Chunks by id; nullopt for ids that do not exist.
  Result<std::vector<std::optional<Chunk>>> get_chunks(std::span<const uint64_t> ids) const;
  // Calls fn for every document (key order) until it returns false.
  Status for_each_document(const std::function<bool(const DocumentInfo&)>& fn) const;

  // Writes index.faiss now (atomic) and drops the replay log it covers.
  Status save_index();
  // Rebuilds both indexes from the document store (the vector index from the stored embeddings,
  // the lexical index from the stored chunks) and saves them: after an upgrade, or when either is
  // suspect. Writers only; searches meanwhile may miss chunks of the lexical index.
  Status reindex();
  // Full cross-check: every document's chunks exist and point back to it, every chunk belongs to
  // a document that lists it, both indexes hold exactly the stored chunk ids, counters match.
  Status check_consistency() const;

  CorpusStats stats() const;
  const Embedder& embedder() const;

  // Whether this corpus is a replica (opened with secondary_of).
  bool is_replica() const;
  // Replica: reads the primary's writes and published index now (the background thread does this
  // every catch_up_ms). OK and a no-op otherwise.
  Status catch_up();

  // Writes a consistent copy of the corpus in `data_dir` into `out_dir` (new, or an empty
  // directory; AlreadyExists otherwise): a RocksDB checkpoint of the document store (hard links
  // where possible) and the published vector index file. Works beside a running writer (through a
  // secondary instance). The KV cache's SSD tier is not copied. Opening `out_dir` as a corpus
  // gives the same search results as `data_dir` had at the copy.
  static Result<SnapshotInfo> snapshot(const std::string& data_dir, const std::string& out_dir);

  struct Impl;

 private:
  explicit Corpus(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ragd::retrieval
