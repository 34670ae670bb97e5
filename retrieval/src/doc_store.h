// DocStore: the RocksDB half of a corpus (private to the retrieval module).
//
// Column families:
//   documents  document key      -> owner tenant, source, title, content hash, byte size, seq, chunk ids,
//                                   url, format, page, metadata (v3)
//   chunks     be64(chunk id)    -> doc id, index, byte/token offsets, text, token ids, vector, seq,
//                                   section path (v2)
//   manifest   "seq", "next_chunk_id", "num_chunks", "num_docs", "embedder", "index_spec",
//              "dim", "tokenizer" -> values;  "log/" + be64(seq) -> chunk ids added and removed
// Every record ends with an xxh3-64 checksum; a mismatch reads as Corruption naming the key.
//
// Ownership: a document belongs to a tenant or is shared (tenant ""). The tenant is part of the
// document key (document_key(): a shared document's key is its id, a tenant's is
// "\x01" TENANT "\x01" ID, so tenants have their own id spaces) and is recorded in the document
// record itself (record version 2), both written in the batch that writes the document and its
// chunks. Version-1 records (stores written before tenants existed) carry no tenant: their
// documents are shared. A record whose tenant disagrees with its key is Corruption.
// apply() writes one WriteBatch (documents, chunks, the log entry and the counters) with
// sync=true: when it returns OK the change is durable, and a crash leaves all of it or none.
// Secondary mode (open_secondary()): a RocksDB secondary instance over another process's store,
// with its own scratch directory; it reads what the primary had written at the last catch_up()
// (whole batches only: RocksDB replays the primary's WAL batch by batch) and refuses writes.
// Thread-safety: reads are safe from any thread; apply()/prune_log()/put_meta() must be
// serialised by the caller (Corpus holds its ingest mutex); catch_up() is safe beside reads.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/hash.h"
#include "ragd/common/status.h"
#include "ragd/retrieval/document.h"

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
}  // namespace rocksdb

namespace ragd::retrieval {

// The key of document `id` owned by `tenant` ("" = shared).
std::string document_key(const std::string& tenant, const std::string& id);
// Splits a document key into tenant and id; false when the key is malformed.
bool split_document_key(std::string_view key, std::string* tenant, std::string* id);

struct StoredDocument {
  std::string id;      // the document key (see document_key())
  std::string tenant;  // owner; "" = shared
  std::string source;
  std::string title;
  // Citation fields and metadata (document record version 3; older records read as empty).
  std::string url;
  std::string format;
  uint32_t page = 0;
  std::vector<std::pair<std::string, std::string>> metadata;  // key, minified JSON value
  Hash128 content_hash;
  uint64_t bytes = 0;  // text size
  uint64_t seq = 0;    // sequence number of the batch that wrote it
  std::vector<uint64_t> chunk_ids;
};

struct StoredChunk {
  Chunk chunk;                // chunk.id set
  std::vector<float> vector;  // [dim] embedding
  uint64_t seq = 0;
};

struct LogEntry {
  uint64_t seq = 0;
  std::vector<uint64_t> added;
  std::vector<uint64_t> removed;
};

struct Mutation {
  std::vector<StoredDocument> put_documents;
  std::vector<std::string> delete_documents;
  std::vector<StoredChunk> put_chunks;
  std::vector<uint64_t> delete_chunks;
  std::map<std::string, std::string> put_meta;  // extra manifest keys
};

class DocStore {
 public:
  static Result<std::unique_ptr<DocStore>> open(const std::string& dir, bool read_only);
  // A secondary instance of the store in `primary_dir`; `scratch_dir` holds its own info logs
  // (created when missing). NotFound when the primary has no store yet.
  static Result<std::unique_ptr<DocStore>> open_secondary(const std::string& primary_dir,
                                                          const std::string& scratch_dir);
  ~DocStore();

  // Secondary only: reads what the primary has written since (TryCatchUpWithPrimary) and reloads
  // the counters (seq, num_chunks, num_docs). OK and a no-op on a primary.
  Status catch_up();
  // A consistent copy of the store in `dir` (which must not exist): RocksDB Checkpoint, hard
  // links where possible. A secondary copies the primary's files as of its last catch_up() or
  // later (never a partial batch).
  Status checkpoint(const std::string& dir) const;
  bool secondary() const { return secondary_; }

  Result<std::optional<StoredDocument>> get_document(const std::string& id) const;
  Result<std::optional<StoredChunk>> get_chunk(uint64_t id) const;
  // Missing ids give nullopt in their slot.
  Result<std::vector<std::optional<StoredChunk>>> get_chunks(const std::vector<uint64_t>& ids) const;

  // Calls fn for every document / chunk in key order; stops early when fn returns false.
  Status for_each_document(const std::function<bool(const StoredDocument&)>& fn) const;
  Status for_each_chunk(const std::function<bool(const StoredChunk&)>& fn) const;
  // Log entries with seq > after, in order.
  Result<std::vector<LogEntry>> log_after(uint64_t after) const;

  std::optional<std::string> meta(const std::string& key) const;
  uint64_t seq() const { return seq_; }
  uint64_t num_chunks() const { return num_chunks_; }
  uint64_t num_documents() const { return num_docs_; }
  // First id of `n` fresh chunk ids (persisted by the next apply()).
  uint64_t reserve_chunk_ids(size_t n);

  // One durable batch; assigns and returns its sequence number and appends a log entry of the
  // chunk ids added and removed. Stamps seq into the documents and chunks it writes.
  Result<uint64_t> apply(Mutation m);
  // Deletes log entries with seq <= upto (the vector index file now covers them).
  Status prune_log(uint64_t upto);
  Status put_meta(const std::string& key, const std::string& value);

 private:
  DocStore() = default;
  rocksdb::DB* db_ = nullptr;
  std::vector<rocksdb::ColumnFamilyHandle*> cfs_;  // default, documents, chunks, manifest
  bool read_only_ = false;
  bool secondary_ = false;
  void load_counters();
  // Written under the caller's write serialisation, read from any thread.
  std::atomic<uint64_t> seq_{0};
  uint64_t next_chunk_id_ = 1;  // writer only
  std::atomic<uint64_t> num_chunks_{0};
  std::atomic<uint64_t> num_docs_{0};
};

}  // namespace ragd::retrieval
