#include "ragd/retrieval/corpus.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "doc_store.h"
#include "lexical_index.h"
#include "durable_file.h"
#include "ragd/common/echo.h"
#include "ragd/common/hash.h"
#include "ragd/common/log.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/text_util.h"

namespace fs = std::filesystem;

namespace ragd::retrieval {

namespace {

using Clock = std::chrono::steady_clock;

// Exclusive advisory lock on <data>/LOCK holding the writer's pid.
class LockFile {
 public:
  static Result<std::unique_ptr<LockFile>> acquire(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::IOError(path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      char buf[32] = {0};
      ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "unknown";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      return Status::Unavailable(path + ": data directory is in use by another writer (pid " + pid +
                                 "); stop it, or use --url to send documents to the running daemon");
    }
    std::string me = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, me.data(), me.size(), 0) < 0) {
      // The lock itself is what matters; the pid is informational.
    }
    return std::unique_ptr<LockFile>(new LockFile(fd));
  }
  ~LockFile() { ::close(fd_); }

 private:
  explicit LockFile(int fd) : fd_(fd) {}
  int fd_;
};

std::string tokenizer_fingerprint(const engine::Tokenizer& tok) {
  Hasher128 h;
  h.u64(static_cast<uint64_t>(tok.vocab_size()));
  for (int32_t i = 0; i < tok.vocab_size(); ++i) h.str(tok.token_bytes(i));
  return h.digest().to_hex();
}

DocumentInfo to_info(const StoredDocument& d) {
  std::string tenant, id;
  if (!split_document_key(d.id, &tenant, &id)) id = d.id;
  DocumentInfo info;
  info.id = std::move(id);
  info.source = d.source;
  info.title = d.title;
  info.url = d.url;
  info.format = d.format;
  info.page = d.page;
  info.metadata = d.metadata;
  info.tenant = d.tenant;
  info.content_hash = d.content_hash.to_hex();
  info.bytes = d.bytes;
  info.seq = d.seq;
  info.chunk_ids = d.chunk_ids;
  return info;
}

// The filter fields of a document (metadata_filter.h): its metadata's canonical values and the
// file-derived format, page and path.
std::vector<std::pair<std::string, std::string>> filter_fields(const StoredDocument& d) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [k, v] : d.metadata)
    for (auto& c : canonical_metadata_values(v)) out.emplace_back(k, std::move(c));
  if (!d.format.empty()) out.emplace_back("format", canonical_string(d.format));
  if (d.page > 0) out.emplace_back("page", canonical_number(d.page));
  if (!d.source.empty()) out.emplace_back("path", canonical_string(d.source));
  return out;
}

// Admits the chunks that pass `inner` (when set) and are in the sorted `allowed`.
class AllowListFilter final : public IdFilter {
 public:
  AllowListFilter(const IdFilter* inner, const std::vector<uint64_t>& allowed) : inner_(inner), allowed_(allowed) {}
  bool allowed(uint64_t id) const override {
    return (!inner_ || inner_->allowed(id)) && std::binary_search(allowed_.begin(), allowed_.end(), id);
  }

 private:
  const IdFilter* inner_;
  const std::vector<uint64_t>& allowed_;
};

// The heading a chunk's lexical entry carries: its own section's (the deepest of the path). The
// ancestors are chapter-wide words ("Basic Shell Features") shared by every chunk below them: the
// whole path lowered the PDF set's hit@5 by 0.036 and the deepest heading alone left both sets
// within two questions of no heading at all (docs/benchmarks.md, retrieval quality).
std::string lexical_heading(const std::vector<std::string>& path) { return path.empty() ? std::string() : path.back(); }

// A chunk's section path as one line: the headings joined by " / ".
std::string section_line(const std::vector<std::string>& path) {
  std::string out;
  for (const auto& h : path) {
    if (!out.empty()) out += " / ";
    out += h;
  }
  return out;
}

// Identity of a published index file: save() renames a new file into place, so a new generation
// is a new inode (or, on a reused inode, a new mtime / size).
struct FileId {
  uint64_t dev = 0, ino = 0, size = 0;
  int64_t mtime_ns = 0;
  bool exists = false;
  bool operator==(const FileId&) const = default;
};

FileId file_id(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return {};
  return FileId{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino), static_cast<uint64_t>(st.st_size),
                static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec, true};
}

// Owner codes of chunks: 0 = unknown (never visible to a tenant), 1 = shared, 2+ = a tenant.
constexpr uint32_t kNoOwner = 0, kShared = 1;

// Admits the chunks of one tenant (code) and the shared ones. Reads `owners` under the caller's
// shared lock.
class OwnerFilter final : public IdFilter {
 public:
  OwnerFilter(const std::vector<uint32_t>& owners, uint32_t tenant) : owners_(owners), tenant_(tenant) {}
  bool allowed(uint64_t id) const override {
    if (id >= owners_.size()) return false;
    const uint32_t c = owners_[id];
    return c == kShared || (tenant_ != kNoOwner && c == tenant_);
  }

 private:
  const std::vector<uint32_t>& owners_;
  uint32_t tenant_;
};

// Adds a batch's fresh chunks to the lexical index on its own thread while the ingest thread
// embeds and stores the batch; help() lets the ingest thread, done with its part, take slices of
// what is left, so both cores generate terms (LexicalIndex::add makes documents outside its lock).
// Unless keep() is called (the batch is durable), the destructor waits for the thread and takes
// the chunks out again. Thread-safety: help(), wait() and keep() from the owning thread only.
class LexicalWriter {
 public:
  LexicalWriter(LexicalIndex& index, std::span<const LexicalDoc> docs)
      : index_(index), docs_(docs), thread_([this] { work(); }) {}
  LexicalWriter(const LexicalWriter&) = delete;
  LexicalWriter& operator=(const LexicalWriter&) = delete;
  ~LexicalWriter() {
    (void)wait();
    if (kept_) return;
    std::vector<uint64_t> ids;
    ids.reserve(docs_.size());
    for (const LexicalDoc& d : docs_) ids.push_back(d.chunk_id);
    (void)index_.remove(ids);
  }
  void keep() { kept_ = true; }
  // Adds slices of the chunks not yet taken, on the calling thread.
  void help() { work(); }
  // Waits until every chunk is added; the first failure, if any.
  Status wait() {
    if (thread_.joinable()) thread_.join();
    std::lock_guard l(mu_);
    return status_;
  }

 private:
  static constexpr size_t kSlice = 32;  // chunks per take: small enough that both threads end together

  void work() {
    for (;;) {
      const size_t b = next_.fetch_add(kSlice);
      if (b >= docs_.size()) return;
      Status st = index_.add(docs_.subspan(b, std::min(kSlice, docs_.size() - b)));
      if (!st.ok()) {
        std::lock_guard l(mu_);
        if (status_.ok()) status_ = std::move(st);
        next_.store(docs_.size());  // the batch fails: stop taking slices
        return;
      }
    }
  }

  LexicalIndex& index_;
  std::span<const LexicalDoc> docs_;
  std::atomic<size_t> next_{0};
  std::mutex mu_;
  Status status_ = Status::OK();  // guarded by mu_
  bool kept_ = false;
  std::thread thread_;  // last: started once the members above exist
};

}  // namespace

struct Corpus::Impl {
  std::string dir;  // this corpus's directory (a replica's scratch)
  std::string src;  // where the store and index live: dir, or the primary's for a replica
  bool replica = false;
  CorpusOptions opts;
  std::shared_ptr<const engine::Tokenizer> tokenizer;
  std::unique_ptr<LockFile> lock;
  std::unique_ptr<DocStore> store;
  std::unique_ptr<Embedder> embedder;
  // Swapped (replica: a newly published index) only under owner_mu held exclusively; readers
  // hold owner_mu shared, or take a reference with current_index().
  std::shared_ptr<VectorIndex> index;
  // BM25 over the chunks (lexical_index.h): <dir>/lexical, a replica's in its own directory; in
  // memory for a read-only corpus whose on-disk copy lags the store. Follows the store like the
  // vector index and is committed with it (save_locked), before the log is pruned.
  std::unique_ptr<LexicalIndex> lexical;
  bool lexical_on_disk = false;
  uint64_t lexical_seq = 0;  // the store seq the lexical index reflects; guarded by write_mu
  std::optional<Chunker> chunker;
  std::string tokenizer_fp;  // "" when no tokenizer

  // Chunk owners for search-time filtering. Updated before vectors enter the index and after they
  // leave it, so that every indexed id has its owner.
  mutable std::shared_mutex owner_mu;
  std::vector<uint32_t> chunk_owner;                       // guarded by owner_mu; by chunk id
  std::unordered_map<std::string, uint32_t> tenant_codes;  // guarded by owner_mu; "" -> kShared

  std::mutex write_mu;                 // serialises ingest / remove / save
  uint64_t index_saved_seq = 0;        // guarded by write_mu
  uint64_t changes_since_save = 0;     // guarded by write_mu
  Clock::time_point last_save = Clock::now();  // guarded by write_mu

  // Replica state, guarded by write_mu (catch_up_locked() runs under it).
  uint64_t applied_seq = 0;  // the store sequence number the index reflects
  FileId index_file;         // the last index file examined
  int log_gaps = 0;          // consecutive rounds that found the log pruned past applied_seq
  std::thread catcher;       // replica: calls catch_up every catch_up_ms
  std::mutex stop_mu;
  std::condition_variable stop_cv;
  bool stopping = false;     // guarded by stop_mu

  std::string index_path() const { return src + "/index.faiss"; }
  std::string lexical_path() const { return dir + "/lexical"; }

  // The lexical entries of stored chunks (owner and title from their documents).
  Status lexical_add(const std::vector<std::optional<StoredChunk>>& chunks) {
    struct DocFields {
      std::string title;
      std::vector<std::pair<std::string, std::string>> fields;
    };
    std::unordered_map<std::string, DocFields> titles;  // document key -> title, filter fields
    std::vector<std::string> owners, sections;
    std::vector<LexicalDoc> docs;
    owners.reserve(chunks.size());
    sections.reserve(chunks.size());
    for (const auto& c : chunks) {
      if (!c) continue;
      std::string tenant, id;
      if (!split_document_key(c->chunk.doc_id, &tenant, &id))
        return Status::Corruption("docstore: chunk " + std::to_string(c->chunk.id) + ": malformed document key");
      auto it = titles.find(c->chunk.doc_id);
      if (it == titles.end()) {
        RAGD_ASSIGN_OR_RETURN(auto d, store->get_document(c->chunk.doc_id));
        DocFields f;
        if (d) f = {d->title, filter_fields(*d)};
        it = titles.emplace(c->chunk.doc_id, std::move(f)).first;
      }
      owners.push_back(std::move(tenant));
      sections.push_back(lexical_heading(c->chunk.section));
      docs.push_back({c->chunk.id, owners.back(), it->second.title, sections.back(), c->chunk.text, it->second.fields});
    }
    return lexical->add(docs);
  }

  // Every stored chunk into an empty lexical index.
  Status lexical_rebuild() {
    RAGD_RETURN_IF_ERROR(lexical->clear());
    std::vector<std::optional<StoredChunk>> batch;
    Status st = Status::OK();
    RAGD_RETURN_IF_ERROR(store->for_each_chunk([&](const StoredChunk& c) {
      batch.emplace_back(c);
      if (batch.size() >= 4096) {
        st = lexical_add(batch);
        batch.clear();
      }
      return st.ok();
    }));
    RAGD_RETURN_IF_ERROR(st);
    RAGD_RETURN_IF_ERROR(lexical_add(batch));
    log::retrieval()->info("rebuilt the lexical index from {} stored chunks", store->num_chunks());
    return Status::OK();
  }

  // Brings the lexical index to the store's sequence number: the log after its commit when the
  // log still holds it, else a rebuild. Commits when it lives on disk and is writable.
  Status lexical_catch_up(uint64_t from_seq, bool may_adopt = true) {
    bool rebuild = from_seq > store->seq();
    std::vector<LogEntry> entries;
    if (!rebuild && from_seq < store->seq()) {
      RAGD_ASSIGN_OR_RETURN(entries, store->log_after(from_seq));
      rebuild = entries.empty() || entries.front().seq != from_seq + 1;
    }
    const bool fresh = from_seq == 0 && lexical->size() == 0 && store->seq() > 0;
    if ((rebuild || fresh) && replica && may_adopt) {
      // A new replica, or one the primary's log has left behind, takes the primary's committed
      // index (its tombstones, so its BM25 statistics: a replay leaves out the chunks removed since
      // and a rebuild every removed chunk) and replays what follows it.
      Status st = lexical->adopt_committed(src + "/lexical");
      if (st.ok() && lexical->committed_seq() <= store->seq()) {
        log::retrieval()->info("replica: took the primary's lexical index of seq {}", lexical->committed_seq());
        return lexical_catch_up(lexical->committed_seq(), false);
      }
      if (st.ok()) rebuild = true;  // the copy covers more than this replica's store has read
      if (!st.ok() && st.code() != StatusCode::kNotFound) log::retrieval()->warn("replica: {}; building the lexical index here", st.to_string());
    }
    if (!rebuild) {
      for (const auto& e : entries) {
        RAGD_RETURN_IF_ERROR(lexical->remove(e.removed));
        RAGD_ASSIGN_OR_RETURN(auto chunks, store->get_chunks(e.added));
        RAGD_RETURN_IF_ERROR(lexical_add(chunks));
      }
    }
    if (rebuild) RAGD_RETURN_IF_ERROR(lexical_rebuild());
    if (lexical_on_disk && (rebuild || from_seq != store->seq())) RAGD_RETURN_IF_ERROR(lexical->commit(store->seq()));
    lexical_seq = store->seq();
    return Status::OK();
  }

  Status open_lexical() {
    if (opts.read_only && !replica) {
      // Beside a writer: its committed index when that covers the store, else one in memory.
      auto ro = LexicalIndex::open_read_only(lexical_path());
      if (ro.ok() && (*ro)->committed_seq() == store->seq() && (*ro)->format_current()) {
        lexical = std::move(ro).value();
        return Status::OK();
      }
      RAGD_ASSIGN_OR_RETURN(lexical, LexicalIndex::open_memory());
      return lexical_rebuild();
    }
    RAGD_ASSIGN_OR_RETURN(lexical, LexicalIndex::open(lexical_path()));
    lexical_on_disk = true;
    const bool current = lexical->format_current();
    if (!current || lexical->compaction_due()) {
      // Written by an older term scheme (its terms would not match this build's queries), or a
      // quarter of it is tombstones of removed chunks (skewing BM25's statistics).
      log::retrieval()->info("{}: {}; rebuilding it from the document store", lexical_path(),
                             current ? "lexical index holds many removed chunks" : "lexical index written by an older term scheme");
      lexical.reset();
      std::error_code ec;
      fs::remove_all(lexical_path(), ec);
      if (ec) return Status::IOError("removing " + lexical_path() + ": " + ec.message());
      RAGD_ASSIGN_OR_RETURN(lexical, LexicalIndex::open(lexical_path()));
      RAGD_RETURN_IF_ERROR(lexical_rebuild());
      RAGD_RETURN_IF_ERROR(lexical->commit(store->seq()));
      lexical_seq = store->seq();
      return Status::OK();
    }
    const uint64_t from = lexical->committed_seq();
    if (from == 0 && lexical->size() == 0 && store->num_chunks() > 0)
      log::retrieval()->info("{}: no lexical index yet; building it from the document store", lexical_path());
    return lexical_catch_up(from);
  }

  std::shared_ptr<VectorIndex> current_index() const {
    std::shared_lock lk(owner_mu);
    return index;
  }
  Status read_only_error() const {
    if (replica) return Status::FailedPrecondition(std::string(kReplicaReadOnly) + " (" + src + ")");
    return Status::FailedPrecondition(dir + ": corpus opened read-only");
  }

  // Caller holds owner_mu exclusively.
  uint32_t code_of_locked(const std::string& tenant) {
    if (tenant.empty()) return kShared;
    auto [it, fresh] = tenant_codes.emplace(tenant, static_cast<uint32_t>(tenant_codes.size() + 2));
    return it->second;
  }
  void set_owner(const std::vector<uint64_t>& ids, const std::string& tenant) {
    std::unique_lock lk(owner_mu);
    const uint32_t code = code_of_locked(tenant);
    for (uint64_t id : ids) {
      if (id >= chunk_owner.size()) chunk_owner.resize(std::max<size_t>(id + 1, chunk_owner.size() * 2), kNoOwner);
      chunk_owner[id] = code;
    }
  }
  void clear_owner(const std::vector<uint64_t>& ids) {
    std::unique_lock lk(owner_mu);
    for (uint64_t id : ids)
      if (id < chunk_owner.size()) chunk_owner[id] = kNoOwner;
  }
  // Reads every document record: the owner of every chunk. A record that cannot be read fails
  // the open (fail closed).
  Status load_owners() {
    Status st = store->for_each_document([&](const StoredDocument& d) {
      set_owner(d.chunk_ids, d.tenant);
      return true;
    });
    if (!st.ok())
      return Status::Corruption("document ownership cannot be read (" + st.message() +
                                "); refusing to serve a store whose owners are unknown. Restore the data directory "
                                "from a backup, or re-ingest into a new one");
    return Status::OK();
  }
  // The filter of a scope; nullopt = no filter. Caller holds owner_mu shared while it is used.
  std::optional<OwnerFilter> filter_for(const ReadScope& scope) const {
    if (scope.is_everything()) return std::nullopt;
    uint32_t code = kNoOwner;
    const std::string& t = scope.tenant_name();
    if (auto it = tenant_codes.find(t); !t.empty() && it != tenant_codes.end()) code = it->second;
    return OwnerFilter(chunk_owner, code);
  }

  // A new index of every stored chunk's vector.
  Result<std::shared_ptr<VectorIndex>> index_from_store() const {
    const VectorIndexOptions& io = opts.index;
    RAGD_ASSIGN_OR_RETURN(std::shared_ptr<VectorIndex> index, VectorIndex::create(io));
    std::vector<uint64_t> ids;
    std::vector<float> vecs;
    Status st = Status::OK();
    auto flush = [&]() {
      if (ids.empty()) return;
      if (st.ok()) st = index->add(ids, vecs);
      ids.clear();
      vecs.clear();
    };
    RAGD_RETURN_IF_ERROR(store->for_each_chunk([&](const StoredChunk& c) {
      if (c.vector.size() != static_cast<size_t>(io.dim)) {
        st = Status::Corruption("docstore: chunk " + std::to_string(c.chunk.id) + " has a vector of " +
                                std::to_string(c.vector.size()) + " floats, corpus dim is " + std::to_string(io.dim));
        return false;
      }
      ids.push_back(c.chunk.id);
      vecs.insert(vecs.end(), c.vector.begin(), c.vector.end());
      if (ids.size() >= 4096) flush();
      return st.ok();
    }));
    flush();
    RAGD_RETURN_IF_ERROR(st);
    return index;
  }

  Status rebuild_index() {
    RAGD_ASSIGN_OR_RETURN(index, index_from_store());
    index_saved_seq = 0;
    changes_since_save = store->num_chunks() + 1;  // force a save
    if (index->size() > 0)
      log::retrieval()->info("rebuilt vector index {} from {} stored chunks", opts.index.spec, index->size());
    return Status::OK();
  }

  Status replay_log(uint64_t after) {
    RAGD_ASSIGN_OR_RETURN(auto entries, store->log_after(after));
    size_t added = 0, removed = 0;
    for (const auto& e : entries) {
      RAGD_ASSIGN_OR_RETURN(size_t r, index->remove(e.removed));
      removed += r;
      RAGD_ASSIGN_OR_RETURN(auto chunks, store->get_chunks(e.added));
      std::vector<uint64_t> ids;
      std::vector<float> vecs;
      for (auto& c : chunks) {
        if (!c) continue;  // removed by a later entry
        ids.push_back(c->chunk.id);
        vecs.insert(vecs.end(), c->vector.begin(), c->vector.end());
      }
      RAGD_RETURN_IF_ERROR(index->add(ids, vecs));
      added += ids.size();
      changes_since_save += e.added.size() + e.removed.size();
    }
    if (!entries.empty())
      log::retrieval()->info("replayed {} store batches after index seq {}: +{} -{} vectors", entries.size(), after,
                             added, removed);
    return Status::OK();
  }

  // Commits the lexical index after a change (caller holds the ingest mutex). On Xapian 1.4's
  // writable glass database, once it has seen a deletion, a search filtered by a boolean term with
  // a long posting list (the owner "XO") misses every document added since the last commit, while
  // committed documents stay visible (reproduced with python3-xapian): a tenant's search would not
  // find a replaced or new document until the next commit. So every change is committed before it
  // is acknowledged; the entries the writer thread adds before the store write are invisible to
  // such searches until then, which is what an unacknowledged batch should be anyway. A failed
  // commit is logged: the store is the truth, and the next open replays its log.
  void commit_lexical_locked() {
    if (!lexical || !lexical_on_disk) return;
    Status st = lexical->commit(lexical_seq);
    if (!st.ok()) log::retrieval()->error("committing the lexical index: {}", st.to_string());
  }

  Status save_locked() {
    if (opts.read_only) return Status::OK();
    VectorIndex::FileInfo fi{store->seq(), embedder->identity()};
    RAGD_RETURN_IF_ERROR(index->save(index_path(), fi));
    if (lexical && lexical_on_disk) RAGD_RETURN_IF_ERROR(lexical->commit(fi.seq));
    index_saved_seq = fi.seq;
    changes_since_save = 0;
    last_save = Clock::now();
    return store->prune_log(fi.seq);
  }

  Status maybe_save_locked() {
    double since = std::chrono::duration<double>(Clock::now() - last_save).count();
    if (changes_since_save >= opts.index_save_every_chunks ||
        (changes_since_save > 0 && since >= opts.index_save_interval_s))
      return save_locked();
    return Status::OK();
  }

  Result<std::vector<Hit>> hits_for(std::span<const Neighbor> nb, const ReadScope& scope) const {
    std::vector<uint64_t> ids;
    for (const auto& n : nb) ids.push_back(n.id);
    RAGD_ASSIGN_OR_RETURN(auto chunks, store->get_chunks(ids));
    // key -> its record; nullopt when the document has no record
    std::unordered_map<std::string, std::optional<StoredDocument>> docs;
    std::vector<Hit> out;
    for (size_t i = 0; i < nb.size(); ++i) {
      if (!chunks[i]) continue;  // removed since the index answered
      Hit h;
      h.score = nb[i].score;
      h.chunk = std::move(chunks[i]->chunk);
      h.vector = std::move(chunks[i]->vector);
      std::string key = h.chunk.doc_id;
      if (!split_document_key(key, &h.tenant, &h.chunk.doc_id))
        return Status::Corruption("docstore: chunk " + std::to_string(h.chunk.id) + ": malformed document key");
      if (!scope.sees(h.tenant)) continue;  // not this reader's: never returned
      auto it = docs.find(key);
      if (it == docs.end()) {
        RAGD_ASSIGN_OR_RETURN(auto d, store->get_document(key));
        // No record: the document was removed since (or, on a replica, is not visible yet).
        it = docs.emplace(key, std::move(d)).first;
      }
      if (!it->second) continue;
      const StoredDocument& d = *it->second;
      h.source = d.source;
      h.title = d.title;
      h.url = d.url;
      h.format = d.format;
      h.page = d.page;
      h.metadata = d.metadata;
      out.push_back(std::move(h));
    }
    return out;
  }

  // Replica: applies the log entries after applied_seq to the live index (owners first, as
  // ingest does). False when the log no longer holds the next entry (the primary pruned it after
  // publishing an index that covers it).
  Result<bool> follow_log_locked() {
    RAGD_ASSIGN_OR_RETURN(auto entries, store->log_after(applied_seq));
    if (entries.empty()) return store->seq() <= applied_seq;
    if (entries.front().seq != applied_seq + 1) return false;
    for (const auto& e : entries) {
      RAGD_RETURN_IF_ERROR(index->remove(e.removed).status());
      clear_owner(e.removed);
      RAGD_ASSIGN_OR_RETURN(auto chunks, store->get_chunks(e.added));
      std::vector<uint64_t> ids;
      std::vector<float> vecs;
      std::unordered_map<std::string, std::vector<uint64_t>> by_tenant;
      for (auto& c : chunks) {
        if (!c) continue;  // removed by a later entry
        std::string tenant, id;
        if (!split_document_key(c->chunk.doc_id, &tenant, &id))
          return Status::Corruption("docstore: chunk " + std::to_string(c->chunk.id) + ": malformed document key");
        by_tenant[tenant].push_back(c->chunk.id);
        ids.push_back(c->chunk.id);
        vecs.insert(vecs.end(), c->vector.begin(), c->vector.end());
      }
      for (const auto& [tenant, tids] : by_tenant) set_owner(tids, tenant);
      RAGD_RETURN_IF_ERROR(index->add(ids, vecs));
      applied_seq = e.seq;
    }
    return true;
  }

  // Replica: swaps in `fresh` (covering the store up to `seq`) with owners read from the store.
  Status adopt_locked(std::shared_ptr<VectorIndex> fresh, uint64_t seq) {
    std::vector<uint32_t> owners;
    std::unordered_map<std::string, uint32_t> codes;
    RAGD_RETURN_IF_ERROR(store->for_each_document([&](const StoredDocument& d) {
      uint32_t code = kShared;
      if (!d.tenant.empty()) code = codes.emplace(d.tenant, static_cast<uint32_t>(codes.size() + 2)).first->second;
      for (uint64_t id : d.chunk_ids) {
        if (id >= owners.size()) owners.resize(std::max<size_t>(id + 1, owners.size() * 2), kNoOwner);
        owners[id] = code;
      }
      return true;
    }));
    std::shared_ptr<VectorIndex> old;
    {
      std::unique_lock lk(owner_mu);
      old = std::move(index);
      index = std::move(fresh);
      chunk_owner = std::move(owners);
      tenant_codes = std::move(codes);
    }
    applied_seq = seq;
    return Status::OK();  // `old` goes when the last search holding it ends
  }

  // Replica: one round of following the primary (caller holds write_mu).
  Status catch_up_locked() {
    RAGD_RETURN_IF_ERROR(store->catch_up());
    const uint64_t seq = store->seq();
    const FileId fid = file_id(index_path());
    if (fid.exists && !(fid == index_file)) {
      VectorIndex::FileInfo fi;
      auto loaded = VectorIndex::load(index_path(), opts.index, &fi);
      if (!loaded.ok()) {
        // A file that fails to load is skipped until the primary publishes another; the log and
        // the stored vectors still keep this replica's own index current.
        log::retrieval()->warn("replica: {}; keeping the current index", loaded.status().to_string());
        index_file = fid;
      } else if (fi.embedder != embedder->identity()) {
        log::retrieval()->warn("replica: {} was made by embedder '{}', the corpus uses '{}'; ignored", index_path(),
                               fi.embedder, embedder->identity());
        index_file = fid;
      } else if (fi.seq <= seq) {
        // A published generation the store has caught up with: it replaces ours (the same trained
        // quantizer as the primary's); the log after it is replayed below.
        std::shared_ptr<VectorIndex> fresh = std::move(loaded).value();
        RAGD_RETURN_IF_ERROR(adopt_locked(std::move(fresh), fi.seq));
        index_file = fid;
        log::retrieval()->info("replica: loaded the published index of seq {} ({} vectors)", fi.seq,
                               current_index()->size());
      }
      // fi.seq > seq: published after the batches this round read; taken next round.
    }
    RAGD_ASSIGN_OR_RETURN(bool contiguous, follow_log_locked());
    // The lexical copy follows on its own: the log after what it covers, or a rebuild.
    if (lexical) RAGD_RETURN_IF_ERROR(lexical_catch_up(lexical_seq));
    if (contiguous) {
      log_gaps = 0;
      return Status::OK();
    }
    // The primary pruned log entries this replica has not applied; the index file it published
    // covers them and is normally taken on the next round. Past a few rounds, rebuild from the
    // stored vectors instead.
    if (++log_gaps < 3) return Status::OK();
    RAGD_ASSIGN_OR_RETURN(auto fresh, index_from_store());
    RAGD_RETURN_IF_ERROR(adopt_locked(std::move(fresh), seq));
    log_gaps = 0;
    log::retrieval()->info("replica: rebuilt the index from the store at seq {}", seq);
    return Status::OK();
  }

  void start_catcher() {
    catcher = std::thread([this] {
      const auto period = std::chrono::milliseconds(std::max(1, opts.catch_up_ms));
      std::unique_lock lk(stop_mu);
      while (!stop_cv.wait_for(lk, period, [this] { return stopping; })) {
        lk.unlock();
        Status st;
        {
          std::lock_guard wl(write_mu);
          st = catch_up_locked();
        }
        if (!st.ok()) log::retrieval()->warn("replica: catching up with {}: {}", src, st.to_string());
        lk.lock();
      }
    });
  }
  void stop_catcher() {
    {
      std::lock_guard lk(stop_mu);
      stopping = true;
    }
    stop_cv.notify_all();
    if (catcher.joinable()) catcher.join();
  }

  Result<std::vector<float>> embed_query(std::string_view q) const {
    if (q.empty()) return Status::InvalidArgument("search: empty query");
    if (size_t bad = find_invalid_utf8(q); bad != std::string_view::npos)
      return Status::InvalidArgument("search: query is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    std::vector<float> v;
    std::string_view one[1] = {q};
    RAGD_RETURN_IF_ERROR(embedder->embed_queries(one, &v));
    return v;
  }
};

Corpus::Corpus(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Corpus::~Corpus() {
  if (impl_) impl_->stop_catcher();
  if (!impl_ || impl_->opts.read_only) return;
  std::lock_guard lk(impl_->write_mu);
  if (impl_->changes_since_save > 0 || impl_->index_saved_seq != impl_->store->seq()) {
    Status st = impl_->save_locked();
    if (!st.ok()) log::retrieval()->error("saving the vector index at close: {}", st.to_string());
  }
}

Result<std::unique_ptr<Corpus>> Corpus::open(const std::string& data_dir, const CorpusOptions& opts,
                                             std::shared_ptr<const engine::Tokenizer> tokenizer) {
  auto m = std::make_unique<Impl>();
  m->dir = fs::path(data_dir).lexically_normal().string();
  while (m->dir.size() > 1 && m->dir.back() == '/') m->dir.pop_back();
  m->opts = opts;
  m->tokenizer = std::move(tokenizer);
  m->src = m->dir;
  if (!opts.secondary_of.empty()) {
    m->replica = true;
    m->opts.read_only = true;
    m->src = fs::path(opts.secondary_of).lexically_normal().string();
    while (m->src.size() > 1 && m->src.back() == '/') m->src.pop_back();
    std::error_code same_ec;
    if (m->src == m->dir || fs::equivalent(m->src, m->dir, same_ec))
      return Status::InvalidArgument(m->dir + ": a replica needs its own directory, not the primary's");
    std::error_code ec;
    fs::create_directories(m->dir, ec);
    if (ec) return Status::IOError(m->dir + ": " + ec.message());
    if (!fs::exists(m->src + "/docstore"))
      return Status::NotFound(m->src + ": no corpus here to follow (start the primary, or ingest into it, first)");
    RAGD_ASSIGN_OR_RETURN(m->store, DocStore::open_secondary(m->src + "/docstore", m->dir + "/docstore-secondary"));
  } else if (opts.read_only) {
    if (!fs::exists(m->dir + "/docstore"))
      return Status::NotFound(m->dir + ": no corpus here (run `ragctl ingest PATH --data " + m->dir + "` first)");
  } else {
    std::error_code ec;
    fs::create_directories(m->dir, ec);
    if (ec) return Status::IOError(m->dir + ": " + ec.message());
    RAGD_ASSIGN_OR_RETURN(m->lock, LockFile::acquire(m->dir + "/LOCK"));
  }
  if (!m->store) {
    RAGD_ASSIGN_OR_RETURN(m->store, DocStore::open(m->dir + "/docstore", opts.read_only));
  }

  // Embedder: the corpus's own unless one is named; a different one is refused.
  auto stored_identity = m->store->meta("embedder");
  auto stored_name = m->store->meta("embedder_name");
  EmbedderOptions eo = opts.embedder;
  // "auto" on a corpus with no embedder recorded yet: term vectors (model_dir, else the shipped
  // ones) when there are any.
  std::string termvec_dir;
  if (eo.name == "auto" && !stored_name) termvec_dir = eo.model_dir.empty() ? default_termvec_dir() : eo.model_dir;
  if (!termvec_dir.empty()) {
    eo.name = "termvec";
    eo.model_dir = termvec_dir;
  } else if (eo.name.empty() || eo.name == "auto") {
    eo.name = stored_name.value_or("hashing");
    if (stored_name && *stored_name == "hashing") {
      if (auto d = m->store->meta("dim")) eo.dim = std::stoi(*d);
    }
    if (stored_name && (*stored_name == "model" || *stored_name == "termvec") && eo.model_dir.empty())
      if (auto md = m->store->meta("embedder_model_dir")) eo.model_dir = *md;
  }
  // A model embedder's settings the caller leaves at their defaults come from the corpus: the
  // prefixes, pooling override and length it was built with (so a corpus built with BGE's query
  // prefix reopens without repeating it; an explicit different value still meets the identity check).
  if (stored_name && *stored_name == "model" && (eo.name == "model" || eo.name == "encoder")) {
    const EmbedderOptions defaults;
    auto fill = [&](const char* key, std::string* field) {
      if (field->empty())
        if (auto v = m->store->meta(key)) *field = *v;
    };
    fill("embedder_query_prefix", &eo.query_prefix);
    fill("embedder_document_prefix", &eo.document_prefix);
    fill("embedder_pooling", &eo.pooling);
    if (eo.max_tokens == defaults.max_tokens)
      if (auto v = m->store->meta("embedder_max_tokens")) eo.max_tokens = std::atoi(v->c_str());
  }
  RAGD_ASSIGN_OR_RETURN(m->embedder, make_embedder(eo, m->tokenizer));
  if (stored_identity && *stored_identity != m->embedder->identity())
    return Status::FailedPrecondition(m->dir + ": corpus was built with embedder '" + *stored_identity +
                                      "', this run uses '" + m->embedder->identity() +
                                      "'; use the same embedder and dimension, or a new data directory");

  auto stored_spec = m->store->meta("index_spec");
  std::string spec = opts.index_spec.empty() ? stored_spec.value_or("Flat") : opts.index_spec;
  if (stored_spec && *stored_spec != spec)
    return Status::FailedPrecondition(m->dir + ": corpus index is '" + *stored_spec + "', asked for '" + spec +
                                      "'; omit --index or use a new data directory");
  m->opts.index.spec = spec;
  m->opts.index.dim = m->embedder->dim();
  if (!stored_identity && !m->opts.read_only) {
    RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_name", std::string(m->embedder->name())));
    RAGD_RETURN_IF_ERROR(m->store->put_meta("dim", std::to_string(m->embedder->dim())));
    if (m->embedder->name() == "termvec")
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_model_dir", eo.model_dir));
    if (m->embedder->name() == "model") {
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_model_dir", eo.model_dir));
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_query_prefix", eo.query_prefix));
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_document_prefix", eo.document_prefix));
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_pooling", eo.pooling));
      RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder_max_tokens", std::to_string(eo.max_tokens)));
    }
    RAGD_RETURN_IF_ERROR(m->store->put_meta("index_spec", spec));
    RAGD_RETURN_IF_ERROR(m->store->put_meta("embedder", m->embedder->identity()));
  }

  if (m->tokenizer) {
    RAGD_ASSIGN_OR_RETURN(auto ch, Chunker::create(*m->tokenizer, opts.chunker));
    m->chunker = ch;
    m->tokenizer_fp = tokenizer_fingerprint(*m->tokenizer);
  }

  RAGD_RETURN_IF_ERROR(m->load_owners());

  // Vector index: the saved file plus the store batches it does not cover.
  bool rebuild = true;
  m->index_file = file_id(m->index_path());
  if (fs::exists(m->index_path())) {
    VectorIndex::FileInfo fi;
    auto loaded = VectorIndex::load(m->index_path(), m->opts.index, &fi);
    if (!loaded.ok()) {
      log::retrieval()->warn("{}; rebuilding the index from the document store", loaded.status().to_string());
    } else if (fi.embedder != m->embedder->identity()) {
      log::retrieval()->warn("{}: index made by embedder '{}', corpus uses '{}'; rebuilding", m->index_path(),
                             fi.embedder, m->embedder->identity());
    } else if (fi.seq > m->store->seq()) {
      log::retrieval()->warn("{}: index covers seq {} beyond the store's {}; rebuilding", m->index_path(), fi.seq,
                             m->store->seq());
    } else {
      m->index = std::move(loaded).value();
      m->index_saved_seq = fi.seq;
      Status st = m->replay_log(fi.seq);
      if (st.ok() && m->index->size() == m->store->num_chunks()) {
        rebuild = false;
      } else {
        log::retrieval()->warn("{}: index does not match the store after replay ({} vectors, {} chunks{}); rebuilding",
                               m->index_path(), m->index->size(), m->store->num_chunks(),
                               st.ok() ? "" : ", " + st.to_string());
      }
    }
  }
  if (rebuild) RAGD_RETURN_IF_ERROR(m->rebuild_index());
  if (opts.lexical_index) RAGD_RETURN_IF_ERROR(m->open_lexical());
  if (!m->opts.read_only) {
    std::lock_guard lk(m->write_mu);
    RAGD_RETURN_IF_ERROR(m->maybe_save_locked());
  }
  m->applied_seq = m->store->seq();
  if (m->replica) {
    log::retrieval()->info("replica of {}: seq {}, {} documents, {} chunks; catching up every {} ms", m->src,
                           m->store->seq(), m->store->num_documents(), m->store->num_chunks(), m->opts.catch_up_ms);
    m->start_catcher();
  }
  return std::unique_ptr<Corpus>(new Corpus(std::move(m)));
}

Result<IngestSummary> Corpus::ingest(std::span<const Document> docs) {
  Impl& m = *impl_;
  if (m.opts.read_only) return m.read_only_error();
  if (!m.chunker) return Status::FailedPrecondition("ingest needs a tokenizer (for chunking)");
  std::lock_guard lk(m.write_mu);
  auto stored_tok = m.store->meta("tokenizer");
  if (stored_tok && *stored_tok != m.tokenizer_fp)
    return Status::FailedPrecondition(m.dir + ": corpus was chunked with another tokenizer (" + *stored_tok +
                                      ", this one is " + m.tokenizer_fp +
                                      "); token ids would not match; use the same model or a new data directory");
  IngestSummary sum;
  Mutation mut;
  if (!stored_tok) mut.put_meta["tokenizer"] = m.tokenizer_fp;
  // Shared documents are read-only to tenants: refuse the whole call before anything is written.
  // Each owner has its own id space, so a tenant's own document of that id stays its to update
  // (the shared one was uploaded after it); a tenant without one may not take the shared id.
  for (const Document& d : docs) {
    if (d.tenant.empty() || d.id.empty()) continue;
    RAGD_ASSIGN_OR_RETURN(auto own, m.store->get_document(document_key(d.tenant, d.id)));
    if (own) continue;
    RAGD_ASSIGN_OR_RETURN(auto shared, m.store->get_document(document_key("", d.id)));
    if (shared) return Status::PermissionDenied("document '" + clip_input(d.id) + "' is shared and read-only");
  }
  std::unordered_map<std::string, size_t> last_of;  // a repeated key: the last one wins
  for (size_t i = 0; i < docs.size(); ++i) last_of[document_key(docs[i].tenant, docs[i].id)] = i;
  std::vector<uint64_t> removed_ids;
  std::vector<StoredChunk> new_chunks;
  std::vector<std::string> embed_texts;  // per new chunk: document title + chunk text
  std::vector<std::pair<std::string, std::vector<uint64_t>>> owned;  // tenant, chunk ids written
  for (size_t i = 0; i < docs.size(); ++i) {
    const Document& d = docs[i];
    std::string who = d.id.empty() ? "#" + std::to_string(i) : clip_input(d.id);  // quoted back to the client
    auto reject = [&](std::string why) {
      ++sum.rejected;
      sum.problems.push_back({who, std::move(why)});
    };
    if (d.id.empty()) { reject("empty document id"); continue; }
    if (d.id.size() > 1024) { reject("document id longer than 1024 bytes"); continue; }
    if (find_invalid_utf8(d.id) != std::string::npos) { reject("document id is not valid UTF-8"); continue; }
    if (d.id[0] == '\x01') { reject("document id starts with a control character"); continue; }
    if (d.tenant.find('\x01') != std::string::npos || find_invalid_utf8(d.tenant) != std::string::npos) {
      reject("invalid tenant name");
      continue;
    }
    const std::string key = document_key(d.tenant, d.id);
    if (last_of[key] != i) { reject("duplicate id in the same batch (the later one is used)"); continue; }
    if (size_t bad = find_invalid_utf8(d.text); bad != std::string::npos) {
      reject("text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
      continue;
    }
    if (find_invalid_utf8(d.title) != std::string::npos) { reject("title is not valid UTF-8"); continue; }
    if (find_invalid_utf8(d.url) != std::string::npos) { reject("url is not valid UTF-8"); continue; }
    if (find_invalid_utf8(d.format) != std::string::npos) { reject("format is not valid UTF-8"); continue; }
    if (std::any_of(d.sections.begin(), d.sections.end(), [](const Section& sec) {
          return std::any_of(sec.path.begin(), sec.path.end(),
                             [](const std::string& p) { return find_invalid_utf8(p) != std::string::npos; });
        })) {
      reject("a section heading is not valid UTF-8");
      continue;
    }
    if (std::any_of(d.metadata.begin(), d.metadata.end(), [](const auto& kv) {
          return find_invalid_utf8(kv.first) != std::string::npos || find_invalid_utf8(kv.second) != std::string::npos;
        })) {
      reject("metadata is not valid UTF-8");
      continue;
    }
    Hasher128 h;
    h.str(d.title).str(d.text);
    // The citation fields and metadata are part of the version: a change to them alone replaces
    // the document (its chunks carry the section paths).
    h.str(d.url).str(d.format).u64(d.page).u64(d.metadata.size());
    for (const auto& [k, v] : d.metadata) h.str(k).str(v);
    h.u64(d.sections.size());
    for (const Section& sec : d.sections) {
      h.u64(sec.byte_begin).u64(sec.byte_end).u64(sec.path.size());
      for (const auto& p : sec.path) h.str(p);
    }
    Hash128 hash = h.digest();
    RAGD_ASSIGN_OR_RETURN(auto existing, m.store->get_document(key));
    if (existing && existing->content_hash == hash) {
      ++sum.unchanged;
      continue;
    }
    std::vector<Chunk> chunks = m.chunker->chunk(key, d.text, d.sections);
    if (chunks.empty()) { reject("empty text"); continue; }
    StoredDocument sd;
    sd.id = key;
    sd.tenant = d.tenant;
    sd.source = d.source.empty() ? d.id : d.source;
    sd.title = d.title;
    sd.url = d.url;
    sd.format = d.format;
    sd.page = d.page;
    sd.metadata = d.metadata;
    sd.content_hash = hash;
    sd.bytes = d.text.size();
    uint64_t first = m.store->reserve_chunk_ids(chunks.size());
    for (size_t c = 0; c < chunks.size(); ++c) {
      chunks[c].id = first + c;
      sd.chunk_ids.push_back(first + c);
      std::string head = d.title;
      if (!chunks[c].section.empty()) head += (head.empty() ? "" : "\n") + section_line(chunks[c].section);
      embed_texts.push_back(head.empty() ? chunks[c].text : head + "\n" + chunks[c].text);
      new_chunks.push_back(StoredChunk{std::move(chunks[c]), {}, 0});
    }
    if (existing) {
      ++sum.replaced;
      removed_ids.insert(removed_ids.end(), existing->chunk_ids.begin(), existing->chunk_ids.end());
    } else {
      ++sum.ingested;
    }
    sum.bytes += d.text.size();
    owned.emplace_back(d.tenant, sd.chunk_ids);
    mut.put_documents.push_back(std::move(sd));
  }
  if (mut.put_documents.empty()) return sum;

  // The lexical entries: owner and title per chunk, from the documents of this call.
  std::unordered_map<std::string, const StoredDocument*> doc_of;
  std::unordered_map<std::string, std::vector<std::pair<std::string, std::string>>> fields_of;
  for (const auto& sd : mut.put_documents) {
    doc_of.emplace(sd.id, &sd);
    fields_of.emplace(sd.id, filter_fields(sd));
  }
  // The mutation is consumed by the store: `lex` views copies that outlive it.
  std::vector<std::string> lex_strings;  // per chunk: owner, title, section, text
  lex_strings.reserve(new_chunks.size() * 4);
  for (const auto& c : new_chunks) {
    const StoredDocument* sd = doc_of.at(c.chunk.doc_id);
    lex_strings.push_back(sd->tenant);
    lex_strings.push_back(sd->title);
    lex_strings.push_back(lexical_heading(c.chunk.section));
    lex_strings.push_back(c.chunk.text);
  }
  std::vector<LexicalDoc> lex;
  lex.reserve(new_chunks.size());
  for (size_t i = 0; i < new_chunks.size(); ++i)
    lex.push_back({new_chunks[i].chunk.id, lex_strings[4 * i], lex_strings[4 * i + 1], lex_strings[4 * i + 2],
                   lex_strings[4 * i + 3], fields_of.at(new_chunks[i].chunk.doc_id)});
  // The lexical entries are written on a second thread while this one embeds and stores the
  // batch: Xapian's indexing is as costly as the rest of ingest, and the two overlap on two cores.
  // Entries written before the store batch is durable can be met by a search, which drops them
  // (hits are resolved against the store); if the batch is not stored they are taken out again.
  // They are committed (with the removals of replaced chunks) only once the batch is durable.
  std::optional<LexicalWriter> lex_writer;
  if (m.lexical) lex_writer.emplace(*m.lexical, lex);
  // Embed outside any index lock; searches go on meanwhile. The title is embedded with every
  // chunk: it often names the topic that the chunk's own sentences only imply.
  const size_t dim = static_cast<size_t>(m.embedder->dim());
  std::vector<float> vecs;
  for (size_t b = 0; b < new_chunks.size(); b += m.opts.embed_batch) {
    size_t e = std::min(new_chunks.size(), b + m.opts.embed_batch);
    std::vector<std::string_view> texts;
    for (size_t i = b; i < e; ++i) texts.push_back(embed_texts[i]);
    RAGD_RETURN_IF_ERROR(m.embedder->embed(texts, &vecs));
    for (size_t i = b; i < e; ++i) new_chunks[i].vector.assign(vecs.begin() + (i - b) * dim, vecs.begin() + (i - b + 1) * dim);
  }
  std::vector<uint64_t> add_ids;
  std::vector<float> add_vecs;
  add_ids.reserve(new_chunks.size());
  add_vecs.reserve(new_chunks.size() * dim);
  for (const auto& c : new_chunks) {
    add_ids.push_back(c.chunk.id);
    add_vecs.insert(add_vecs.end(), c.vector.begin(), c.vector.end());
  }
  sum.chunks_added = new_chunks.size();
  sum.chunks_removed = removed_ids.size();
  mut.put_chunks = std::move(new_chunks);
  mut.delete_chunks = removed_ids;
  RAGD_ASSIGN_OR_RETURN(sum.seq, m.store->apply(std::move(mut)));  // durable from here on
  if (lex_writer) lex_writer->keep();
  // The index follows the store; if this fails the next open replays the store's log. Owners
  // are known before the vectors become searchable.
  RAGD_RETURN_IF_ERROR(m.index->remove(removed_ids).status());
  m.clear_owner(removed_ids);
  for (const auto& [tenant, ids] : owned) m.set_owner(ids, tenant);
  RAGD_RETURN_IF_ERROR(m.index->add(add_ids, add_vecs));
  if (lex_writer) {
    lex_writer->help();
    RAGD_RETURN_IF_ERROR(lex_writer->wait());
    RAGD_RETURN_IF_ERROR(m.lexical->remove(removed_ids));
    m.lexical_seq = sum.seq;
  }
  m.commit_lexical_locked();
  m.changes_since_save += add_ids.size() + removed_ids.size();
  Status st = m.maybe_save_locked();
  if (!st.ok()) log::retrieval()->error("saving the vector index: {}", st.to_string());
  return sum;
}

Status Corpus::reindex() {
  Impl& m = *impl_;
  if (m.opts.read_only) return m.read_only_error();
  std::lock_guard lk(m.write_mu);
  RAGD_ASSIGN_OR_RETURN(std::shared_ptr<VectorIndex> fresh, m.index_from_store());
  {
    std::unique_lock ol(m.owner_mu);
    m.index = std::move(fresh);
  }
  if (m.lexical) {
    RAGD_RETURN_IF_ERROR(m.lexical_rebuild());
    m.lexical_seq = m.store->seq();
  }
  RAGD_RETURN_IF_ERROR(m.save_locked());
  log::retrieval()->info("reindexed {}: {} vectors, {} lexical entries", m.dir, m.index->size(),
                         m.lexical ? m.lexical->size() : 0);
  return Status::OK();
}

Result<std::optional<DocumentInfo>> Corpus::get_document(const std::string& id) const {
  return get_document(id, "");
}

Result<std::optional<DocumentInfo>> Corpus::get_document(const std::string& id, const std::string& tenant) const {
  if (!tenant.empty()) {
    RAGD_ASSIGN_OR_RETURN(auto own, impl_->store->get_document(document_key(tenant, id)));
    if (own) return std::optional<DocumentInfo>(to_info(*own));
  }
  if (!id.empty() && id[0] == '\x01') return std::optional<DocumentInfo>();
  RAGD_ASSIGN_OR_RETURN(auto d, impl_->store->get_document(document_key("", id)));
  if (!d) return std::optional<DocumentInfo>();
  return std::optional<DocumentInfo>(to_info(*d));
}

Result<bool> Corpus::remove_document(const std::string& id) { return remove_document(id, ""); }

Result<bool> Corpus::remove_document(const std::string& id, const std::string& tenant) {
  Impl& m = *impl_;
  if (m.opts.read_only) return m.read_only_error();
  if (!id.empty() && id[0] == '\x01') return false;
  std::lock_guard lk(m.write_mu);
  RAGD_ASSIGN_OR_RETURN(auto d, m.store->get_document(document_key(tenant, id)));
  if (!d) {
    if (tenant.empty()) return false;
    RAGD_ASSIGN_OR_RETURN(auto shared, m.store->get_document(document_key("", id)));
    if (shared) return Status::PermissionDenied("document '" + clip_input(id) + "' is shared and read-only");
    return false;
  }
  Mutation mut;
  mut.delete_documents.push_back(d->id);
  mut.delete_chunks = d->chunk_ids;
  RAGD_RETURN_IF_ERROR(m.store->apply(std::move(mut)).status());
  RAGD_RETURN_IF_ERROR(m.index->remove(d->chunk_ids).status());
  if (m.lexical) {
    RAGD_RETURN_IF_ERROR(m.lexical->remove(d->chunk_ids));
    m.lexical_seq = m.store->seq();
    m.commit_lexical_locked();
  }
  m.clear_owner(d->chunk_ids);
  m.changes_since_save += d->chunk_ids.size();
  Status st = m.maybe_save_locked();
  if (!st.ok()) log::retrieval()->error("saving the vector index: {}", st.to_string());
  return true;
}

Result<std::vector<Hit>> Corpus::search(std::string_view query, int k, const ReadScope& scope,
                                        const SearchParams& params) const {
  const std::string one[1] = {std::string(query)};
  RAGD_ASSIGN_OR_RETURN(auto hits, search_batch(one, k, scope, params));
  return std::move(hits[0]);
}


// The lexical index's owner terms a scope sees: the shared chunks ("") and the tenant's; nullopt =
// every chunk (everything()).
namespace {
std::optional<std::vector<std::string>> lexical_owners(const ReadScope& scope) {
  if (scope.is_everything()) return std::nullopt;
  std::vector<std::string> owners(1, std::string());
  if (!scope.tenant_name().empty()) owners.push_back(scope.tenant_name());
  return owners;
}
}  // namespace

Result<std::vector<std::vector<Hit>>> Corpus::search_batch(std::span<const std::string> queries, int k,
                                                           const ReadScope& scope, const SearchParams& params) const {
  if (k < 1 || k > 10000) return Status::InvalidArgument("search: k must be in [1, 10000], got " + std::to_string(k));
  if (queries.empty()) return std::vector<std::vector<Hit>>{};
  Impl& m = *impl_;
  const RetrievalMode mode = resolve_mode(params.mode);
  const bool filtered = params.metadata && !params.metadata->empty();
  if (!m.lexical && (mode != RetrievalMode::kDense || filtered))
    return Status::FailedPrecondition(std::string("search: this corpus keeps no lexical index (lexical_index = false): ") +
                                      (filtered ? "metadata filters need it" : "lexical and hybrid search need it"));
  for (const auto& text : queries) {
    if (text.empty()) return Status::InvalidArgument("search: empty query");
    if (size_t bad = find_invalid_utf8(text); bad != std::string::npos)
      return Status::InvalidArgument("search: query is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  // Each list is as long as the fusion looks (hybrid: HybridOptions' two lengths) or as the caller
  // asked; a lexical search with document evidence reads as deep as evidence does. Evidence
  // reorders the lexical ranking or the fused one.
  const bool evidence = mode != RetrievalMode::kDense && m.opts.evidence.weight > 0;
  const int n_dense = mode == RetrievalMode::kHybrid ? std::max(k, m.opts.hybrid.candidates) : k;
  const int n_lexical = mode == RetrievalMode::kHybrid ? std::max(k, m.opts.hybrid.lexical_candidates)
                        : evidence                     ? std::max(k, m.opts.evidence.candidates)
                                                       : k;
  const std::optional<std::vector<std::string>> owners = lexical_owners(scope);
  std::vector<std::vector<Neighbor>> dense(queries.size()), lexical(queries.size());
  if (mode != RetrievalMode::kLexical) {
    std::vector<float> q;
    for (const auto& text : queries) {
      RAGD_ASSIGN_OR_RETURN(auto v, m.embed_query(text));
      q.insert(q.end(), v.begin(), v.end());
    }
    // A metadata filter: the chunks it admits, from the lexical index's terms, as an allow-list
    // inside the vector search.
    std::optional<std::vector<uint64_t>> allowed;
    if (filtered) {
      RAGD_ASSIGN_OR_RETURN(allowed, m.lexical->matching(*params.metadata, owners));
    }
    std::shared_lock lk(m.owner_mu);
    auto filter = m.filter_for(scope);
    SearchParams p = params;
    if (filter) p.filter = &*filter;
    std::optional<AllowListFilter> allow;
    if (allowed) p.filter = &allow.emplace(p.filter, *allowed);
    if (!allowed || !allowed->empty()) {
      RAGD_ASSIGN_OR_RETURN(dense, m.index->search(q, n_dense, p));
    }
  }
  if (mode != RetrievalMode::kDense) {
    for (size_t i = 0; i < queries.size(); ++i) {
      RAGD_ASSIGN_OR_RETURN(auto hits,
                            m.lexical->search(queries[i], n_lexical, owners, filtered ? params.metadata : nullptr));
      for (const LexicalHit& h : hits) lexical[i].push_back({h.chunk_id, static_cast<float>(h.score)});
    }
  }
  std::vector<std::vector<Hit>> out;
  for (size_t i = 0; i < queries.size(); ++i) {
    std::vector<Hit> hits;
    if (mode == RetrievalMode::kDense) {
      RAGD_ASSIGN_OR_RETURN(hits, m.hits_for(dense[i], scope));
    } else if (mode == RetrievalMode::kLexical) {
      RAGD_ASSIGN_OR_RETURN(hits, m.hits_for(lexical[i], scope));
      if (evidence) apply_document_evidence(m.opts.evidence, &hits);
    } else {
      // Document evidence reorders the fused ranking's first `evidence.candidates` hits (a page
      // with several passages among them rises), not the lexical list before the fusion: chosen
      // on the even-numbered questions of the retrieval benchmark (docs/benchmarks.md).
      const int n_fused = evidence ? std::max(k, m.opts.evidence.candidates) : k;
      const std::vector<Neighbor> ranked = fuse_hybrid(dense[i], lexical[i], m.opts.hybrid, n_fused);
      RAGD_ASSIGN_OR_RETURN(hits, m.hits_for(ranked, scope));
      if (evidence) {
        if (hits.size() > static_cast<size_t>(n_fused)) hits.resize(static_cast<size_t>(n_fused));
        apply_document_evidence(m.opts.evidence, &hits);
      }
    }
    if (hits.size() > static_cast<size_t>(k)) hits.resize(static_cast<size_t>(k));
    out.push_back(std::move(hits));
  }
  return out;
}

void apply_document_evidence(const DocumentEvidence& opts, std::vector<Hit>* hits) {
  // Per document: its first (best) hit and its hits' scores, best first (hits arrive best first).
  struct Doc {
    size_t first = 0;
    std::vector<float> scores;
  };
  std::unordered_map<std::string, Doc> of_doc;
  std::vector<const Doc*> doc_of(hits->size());
  for (size_t i = 0; i < hits->size(); ++i) {
    const Hit& h = (*hits)[i];
    auto [it, fresh] = of_doc.try_emplace(h.tenant + '\x01' + h.chunk.doc_id);
    if (fresh) it->second.first = i;
    it->second.scores.push_back(h.score);
    doc_of[i] = &it->second;
  }
  std::vector<std::pair<float, size_t>> order;
  order.reserve(hits->size());
  for (size_t i = 0; i < hits->size(); ++i) {
    const Doc& d = *doc_of[i];
    double extra = 0;
    if (d.first == i) {
      // The document's first hit: the best `chunks` of its other hits (all but the first).
      for (size_t j = 1; j < d.scores.size() && j <= static_cast<size_t>(opts.chunks); ++j) extra += d.scores[j];
    }
    order.emplace_back(static_cast<float>((*hits)[i].score + opts.weight * extra), i);
  }
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  std::vector<Hit> out;
  out.reserve(hits->size());
  for (const auto& [score, i] : order) {
    out.push_back(std::move((*hits)[i]));
    out.back().score = score;
  }
  *hits = std::move(out);
}

namespace {

// Fused scores best first, ties in first-appearance order; at most 2k kept (hits of documents
// removed since the lists were made are dropped later: a few spare).
std::vector<Neighbor> rank_fused(const std::vector<uint64_t>& order, const std::unordered_map<uint64_t, double>& score,
                                 int k) {
  std::vector<Neighbor> fused;
  fused.reserve(order.size());
  for (uint64_t id : order) fused.push_back({id, static_cast<float>(score.at(id))});
  std::stable_sort(fused.begin(), fused.end(), [](const Neighbor& a, const Neighbor& b) { return a.score > b.score; });
  if (fused.size() > static_cast<size_t>(k) * 2) fused.resize(static_cast<size_t>(k) * 2);
  return fused;
}

}  // namespace

std::vector<Neighbor> fuse_hybrid(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                  const HybridOptions& opts, int k) {
  return opts.fusion == HybridFusion::kWeighted ? fuse_weighted(dense, lexical, opts, k)
                                                : fuse_reciprocal_rank(dense, lexical, opts, k);
}

std::vector<Neighbor> fuse_weighted(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                    const HybridOptions& opts, int k) {
  const size_t cap = static_cast<size_t>(std::max(k, opts.candidates));
  dense = dense.first(std::min(dense.size(), cap));
  lexical = lexical.first(std::min(lexical.size(), cap));
  const double a = std::clamp(opts.lexical_share, 0.0, 1.0);
  double top = 0, lex_floor = 0, dense_floor = 0;
  for (const Neighbor& n : lexical) top = std::max(top, static_cast<double>(n.score));
  if (!lexical.empty()) lex_floor = lexical.back().score;
  if (!dense.empty()) dense_floor = dense.back().score;
  const double scale = top > 0 ? 1.0 / top : 0.0;
  std::unordered_map<uint64_t, double> score;
  std::unordered_map<uint64_t, uint8_t> seen;  // bit 1: in the dense list, bit 2: in the lexical list
  std::vector<uint64_t> order;
  auto add = [&](std::span<const Neighbor> list, double weight, uint8_t bit) {
    for (const Neighbor& n : list) {
      auto [it, fresh] = score.emplace(n.id, 0.0);
      if (fresh) order.push_back(n.id);
      uint8_t& s = seen[n.id];
      if (s & bit) continue;  // a chunk counts once per list
      s |= bit;
      it->second += weight * n.score;
    }
  };
  add(dense, 1.0 - a, 1);
  add(lexical, a * scale, 2);
  for (auto& [id, sc] : score) {
    const uint8_t s = seen[id];
    if (!(s & 1)) sc += (1.0 - a) * dense_floor;
    if (!(s & 2)) sc += a * scale * lex_floor;
  }
  return rank_fused(order, score, k);
}

std::vector<Neighbor> fuse_reciprocal_rank(std::span<const Neighbor> dense, std::span<const Neighbor> lexical,
                                           const HybridOptions& opts, int k) {
  std::unordered_map<uint64_t, double> score;
  std::vector<uint64_t> order;  // first appearance, for ties
  auto add = [&](std::span<const Neighbor> list, double weight) {
    const size_t n = std::min(list.size(), static_cast<size_t>(std::max(k, opts.candidates)));
    for (size_t r = 0; r < n; ++r) {
      auto [it, fresh] = score.emplace(list[r].id, 0.0);
      if (fresh) order.push_back(list[r].id);
      it->second += weight / (opts.rrf_k + static_cast<double>(r + 1));
    }
  };
  add(dense, 1.0);
  add(lexical, opts.lexical_weight);
  return rank_fused(order, score, k);
}

bool Corpus::ranks_by_ratio_score(RetrievalMode mode) const {
  const RetrievalMode m = resolve_mode(mode);
  return m == RetrievalMode::kLexical ||
         (m == RetrievalMode::kHybrid && impl_->opts.hybrid.fusion == HybridFusion::kWeighted);
}

RetrievalMode Corpus::default_mode() const {
  if (!impl_->lexical) return RetrievalMode::kDense;
  if (impl_->opts.mode != RetrievalMode::kAuto) return impl_->opts.mode;
  return impl_->embedder->identity().rfind("hashing", 0) == 0 ? RetrievalMode::kLexical : RetrievalMode::kHybrid;
}

Status Corpus::search_progressive(std::string_view query, int k, std::span<const int> stages,
                                  const ReadScope& scope, const VectorIndex::StageCallback& on_stage) const {
  RAGD_ASSIGN_OR_RETURN(auto q, impl_->embed_query(query));
  std::shared_lock lk(impl_->owner_mu);
  auto filter = impl_->filter_for(scope);
  return impl_->index->search_progressive(q, k, stages, on_stage, filter ? &*filter : nullptr);
}

Result<std::vector<Hit>> Corpus::fetch_hits(std::span<const Neighbor> neighbors, const ReadScope& scope) const {
  return impl_->hits_for(neighbors, scope);
}

Result<std::vector<float>> Corpus::embed_query(std::string_view query) const { return impl_->embed_query(query); }

Result<std::vector<double>> Corpus::term_shares(std::span<const std::string> terms, const ReadScope& scope) const {
  const Impl& m = *impl_;
  if (!m.lexical) return Status::FailedPrecondition("term shares: this corpus keeps no lexical index (lexical_index = false)");
  return m.lexical->term_shares(terms, lexical_owners(scope));
}

Result<std::vector<std::vector<int64_t>>> Corpus::coarse_lists(std::span<const float> vectors, int n) const {
  std::shared_lock lk(impl_->owner_mu);
  return impl_->index->coarse_lists(vectors, n);
}

Result<std::vector<std::optional<Chunk>>> Corpus::get_chunks(std::span<const uint64_t> ids) const {
  RAGD_ASSIGN_OR_RETURN(auto cs, impl_->store->get_chunks(std::vector<uint64_t>(ids.begin(), ids.end())));
  std::vector<std::optional<Chunk>> out(cs.size());
  for (size_t i = 0; i < cs.size(); ++i)
    if (cs[i]) out[i] = std::move(cs[i]->chunk);
  return out;
}

Status Corpus::for_each_document(const std::function<bool(const DocumentInfo&)>& fn) const {
  return impl_->store->for_each_document([&](const StoredDocument& d) { return fn(to_info(d)); });
}

Status Corpus::save_index() {
  if (impl_->opts.read_only) return impl_->read_only_error();
  std::lock_guard lk(impl_->write_mu);
  return impl_->save_locked();
}

Status Corpus::check_consistency() const {
  const Impl& m = *impl_;
  const std::shared_ptr<VectorIndex> index = m.current_index();
  std::unordered_map<uint64_t, std::string> owner;  // chunk id -> doc listing it
  uint64_t docs = 0;
  Status bad = Status::OK();
  RAGD_RETURN_IF_ERROR(m.store->for_each_document([&](const StoredDocument& d) {
    ++docs;
    for (uint64_t c : d.chunk_ids) {
      if (!owner.emplace(c, d.id).second) {
        bad = Status::Corruption("chunk " + std::to_string(c) + " listed by two documents");
        return false;
      }
    }
    return true;
  }));
  RAGD_RETURN_IF_ERROR(bad);
  uint64_t chunks = 0;
  RAGD_RETURN_IF_ERROR(m.store->for_each_chunk([&](const StoredChunk& c) {
    ++chunks;
    auto it = owner.find(c.chunk.id);
    if (it == owner.end() || it->second != c.chunk.doc_id) {
      bad = Status::Corruption("chunk " + std::to_string(c.chunk.id) + " of document '" + c.chunk.doc_id +
                               "' is not listed by it");
      return false;
    }
    if (!index->contains(c.chunk.id)) {
      bad = Status::Corruption("chunk " + std::to_string(c.chunk.id) + " of document '" + c.chunk.doc_id +
                               "' is missing from the vector index");
      return false;
    }
    if (!m.lexical) return true;
    Result<bool> in_lexical = m.lexical->contains(c.chunk.id);
    if (!in_lexical.ok() || !*in_lexical) {
      bad = in_lexical.ok() ? Status::Corruption("chunk " + std::to_string(c.chunk.id) + " of document '" +
                                                 c.chunk.doc_id + "' is missing from the lexical index")
                            : in_lexical.status();
      return false;
    }
    return true;
  }));
  RAGD_RETURN_IF_ERROR(bad);
  if (chunks != owner.size())
    return Status::Corruption(std::to_string(owner.size() - chunks) + " chunks listed by documents are missing");
  if (index->size() != chunks)
    return Status::Corruption("vector index holds " + std::to_string(index->size()) + " vectors, store has " +
                              std::to_string(chunks) + " chunks");
  if (m.lexical && m.lexical->size() != chunks)
    return Status::Corruption("lexical index holds " + std::to_string(m.lexical->size()) + " chunks, store has " +
                              std::to_string(chunks));
  if (m.store->num_chunks() != chunks || m.store->num_documents() != docs)
    return Status::Corruption("manifest counters (" + std::to_string(m.store->num_documents()) + " documents, " +
                              std::to_string(m.store->num_chunks()) + " chunks) disagree with the store (" +
                              std::to_string(docs) + ", " + std::to_string(chunks) + ")");
  return Status::OK();
}

CorpusStats Corpus::stats() const {
  const Impl& m = *impl_;
  CorpusStats s;
  const std::shared_ptr<VectorIndex> index = m.current_index();
  s.documents = m.store->num_documents();
  s.chunks = m.store->num_chunks();
  s.vectors = index->size();
  s.seq = m.store->seq();
  {
    std::lock_guard lk(const_cast<std::mutex&>(m.write_mu));
    s.index_saved_seq = m.index_saved_seq;
  }
  s.embedder = m.embedder->identity();
  s.index_spec = index->spec();
  s.dim = m.embedder->dim();
  s.index_trained = index->trained();
  return s;
}

const Embedder& Corpus::embedder() const { return *impl_->embedder; }

bool Corpus::is_replica() const { return impl_->replica; }

namespace {

// The whole file, or nullopt when it does not exist.
Result<std::optional<std::string>> read_whole(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!fs::exists(path)) return std::optional<std::string>();
    return Status::IOError(path + ": cannot open");
  }
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return Status::IOError(path + ": read failed");
  return std::optional<std::string>(std::move(bytes));
}

// The sequence number in a VectorIndex file's header, as far as the copy needs it: 0 when unknown.
uint64_t index_file_seq(const std::string& path, const DocStore& store) {
  VectorIndexOptions io;
  io.spec = store.meta("index_spec").value_or("Flat");
  if (auto d = store.meta("dim")) io.dim = std::atoi(d->c_str());
  VectorIndex::FileInfo fi;
  auto loaded = VectorIndex::load(path, io, &fi);
  return loaded.ok() ? fi.seq : 0;
}

}  // namespace

Result<SnapshotInfo> Corpus::snapshot(const std::string& data_dir, const std::string& out_dir) {
  std::string src = fs::path(data_dir).lexically_normal().string();
  std::string out = fs::path(out_dir).lexically_normal().string();
  while (src.size() > 1 && src.back() == '/') src.pop_back();
  while (out.size() > 1 && out.back() == '/') out.pop_back();
  if (!fs::exists(src + "/docstore"))
    return Status::NotFound(src + ": no corpus here (nothing has been ingested into this data directory)");
  std::error_code ec;
  if (fs::exists(out, ec)) {
    if (!fs::is_directory(out, ec)) return Status::AlreadyExists(out + ": exists and is not a directory");
    if (!fs::is_empty(out, ec)) return Status::AlreadyExists(out + ": not empty; a snapshot goes into a new or empty directory");
  }
  fs::create_directories(out, ec);
  if (ec) return Status::IOError(out + ": " + ec.message());
  std::error_code same_ec;
  if (fs::equivalent(src, out, same_ec)) return Status::InvalidArgument(out + ": is the data directory itself");

  SnapshotInfo info;
  const std::string index_src = src + "/index.faiss";
  // The lexical index's committed state, taken before the store's checkpoint so that it covers no
  // more than the copy of the store (the rest is replayed from its log when the copy is opened):
  // with its tombstones, the copy answers with the statistics of the original. A data directory
  // without one (or with one of the single-database layout) gets it rebuilt when opened.
  if (Status st = LexicalIndex::copy_committed(src + "/lexical", out + "/lexical"); !st.ok() && st.code() != StatusCode::kNotFound)
    return st;
  std::optional<std::string> index_bytes;
  auto lock = LockFile::acquire(src + "/LOCK");
  if (lock.ok()) {
    // No writer: the store is quiet while the lock is held, and the index file covers a prefix of
    // its log (the rest is replayed when the copy is opened).
    RAGD_ASSIGN_OR_RETURN(auto store, DocStore::open(src + "/docstore", false));
    RAGD_ASSIGN_OR_RETURN(index_bytes, read_whole(index_src));
    RAGD_RETURN_IF_ERROR(store->checkpoint(out + "/docstore"));
  } else if (lock.status().code() == StatusCode::kUnavailable) {
    // A writer runs: copy through a secondary instance. The index file is read first, so it
    // covers no more than the checkpoint; if the writer publishes a new one meanwhile (and prunes
    // the log the old one needs), the copy is taken again.
    info.beside_writer = true;
    const std::string scratch = out + "/.snapshot-secondary";
    Status last = Status::OK();
    for (int attempt = 0; attempt < 5; ++attempt) {
      fs::remove_all(out + "/docstore", ec);
      fs::remove_all(scratch, ec);
      const FileId before = file_id(index_src);
      RAGD_ASSIGN_OR_RETURN(index_bytes, read_whole(index_src));
      {
        RAGD_ASSIGN_OR_RETURN(auto store, DocStore::open_secondary(src + "/docstore", scratch));
        last = store->checkpoint(out + "/docstore");
      }
      fs::remove_all(scratch, ec);
      if (last.ok() && file_id(index_src) == before) break;
      if (last.ok()) last = Status::Unavailable(src + ": the writer kept publishing new indexes during the copy; try again");
    }
    RAGD_RETURN_IF_ERROR(last);
  } else {
    return lock.status();
  }
  RAGD_ASSIGN_OR_RETURN(auto copy, DocStore::open(out + "/docstore", true));
  if (index_bytes) {
    RAGD_RETURN_IF_ERROR(write_file_durably(out + "/index.faiss", *index_bytes));
    info.index_seq = index_file_seq(out + "/index.faiss", *copy);
  }
  info.documents = copy->num_documents();
  info.chunks = copy->num_chunks();
  info.seq = copy->seq();
  return info;
}

Status Corpus::catch_up() {
  if (!impl_->replica) return Status::OK();
  std::lock_guard lk(impl_->write_mu);
  return impl_->catch_up_locked();
}

}  // namespace ragd::retrieval
