#include "doc_store.h"

#include <filesystem>
#include <limits>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/slice.h>
#include <rocksdb/utilities/checkpoint.h>
#include <rocksdb/write_batch.h>

#include "codec.h"

namespace ragd::retrieval {

namespace {

constexpr uint8_t kRecordVersion = 1;
// v2 = v1 + owner tenant (v1 documents are shared); v3 = v2 + url, format, page, metadata
constexpr uint8_t kDocumentVersionTenant = 2;
constexpr uint8_t kDocumentVersion = 3;
constexpr uint8_t kChunkVersion = 2;  // v2 = v1 + section path
constexpr char kTenantMark = '\x01';
enum Cf : size_t { kDefault = 0, kDocuments = 1, kChunks = 2, kManifest = 3 };
const char* const kCfNames[] = {"default", "documents", "chunks", "manifest"};
const std::string kLogPrefix = "log/";

std::string encode_document(const StoredDocument& d) {
  Encoder e;
  e.u8(kDocumentVersion);
  e.str(d.tenant);
  e.str(d.source);
  e.str(d.title);
  e.u64(d.content_hash.lo);
  e.u64(d.content_hash.hi);
  e.u64(d.bytes);
  e.u64(d.seq);
  e.array(d.chunk_ids);
  e.str(d.url);
  e.str(d.format);
  e.u32(d.page);
  e.u64(d.metadata.size());
  for (const auto& [k, v] : d.metadata) {
    e.str(k);
    e.str(v);
  }
  return e.finish();
}

Result<StoredDocument> decode_document(const std::string& id, std::string_view rec) {
  Decoder dc(rec);
  StoredDocument d;
  d.id = id;
  uint8_t v = dc.u8();
  if (v >= kDocumentVersionTenant) d.tenant = dc.str();
  d.source = dc.str();
  d.title = dc.str();
  d.content_hash.lo = dc.u64();
  d.content_hash.hi = dc.u64();
  d.bytes = dc.u64();
  d.seq = dc.u64();
  d.chunk_ids = dc.array<uint64_t>();
  if (v >= kDocumentVersion) {
    d.url = dc.str();
    d.format = dc.str();
    d.page = dc.u32();
    uint64_t n = dc.u64();
    for (uint64_t i = 0; i < n && dc.ok(); ++i) {
      std::string k = dc.str();
      d.metadata.emplace_back(std::move(k), dc.str());
    }
  }
  if (!dc.done() || v < kRecordVersion || v > kDocumentVersion)
    return Status::Corruption("docstore: document record '" + id + "': bad record (checksum or format)");
  std::string key_tenant, key_id;
  if (!split_document_key(id, &key_tenant, &key_id) || key_tenant != d.tenant)
    return Status::Corruption("docstore: document record '" + id + "': owner does not match its key");
  return d;
}

std::string encode_chunk(const StoredChunk& s) {
  const Chunk& c = s.chunk;
  Encoder e;
  e.u8(kChunkVersion);
  e.str(c.doc_id);
  e.u32(c.index);
  e.u64(c.byte_begin);
  e.u64(c.byte_end);
  e.u64(c.token_begin);
  e.u64(c.token_end);
  e.str(c.text);
  e.array(c.token_ids);
  e.array(s.vector);
  e.u64(s.seq);
  e.strs(c.section);
  return e.finish();
}

Result<StoredChunk> decode_chunk(uint64_t id, std::string_view rec) {
  Decoder dc(rec);
  StoredChunk s;
  Chunk& c = s.chunk;
  c.id = id;
  uint8_t v = dc.u8();
  c.doc_id = dc.str();
  c.index = dc.u32();
  c.byte_begin = dc.u64();
  c.byte_end = dc.u64();
  c.token_begin = dc.u64();
  c.token_end = dc.u64();
  c.text = dc.str();
  c.token_ids = dc.array<int32_t>();
  s.vector = dc.array<float>();
  s.seq = dc.u64();
  if (v >= kChunkVersion) c.section = dc.strs();
  if (!dc.done() || v < kRecordVersion || v > kChunkVersion) return Status::Corruption("docstore: chunk " + std::to_string(id) + ": bad record");
  return s;
}

std::string encode_log(const LogEntry& l) {
  Encoder e;
  e.u8(kRecordVersion);
  e.array(l.added);
  e.array(l.removed);
  return e.finish();
}

Status from_rocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return Status::OK();
  if (s.IsCorruption()) return Status::Corruption(what + ": " + s.ToString());
  if (s.IsIOError() && s.ToString().find("lock") != std::string::npos)
    return Status::Unavailable(what + ": " + s.ToString());
  return Status::IOError(what + ": " + s.ToString());
}

uint64_t parse_u64(const std::optional<std::string>& v) {
  if (!v) return 0;
  try {
    return std::stoull(*v);
  } catch (...) {
    return 0;
  }
}

}  // namespace

std::string document_key(const std::string& tenant, const std::string& id) {
  if (tenant.empty()) return id;
  std::string k;
  k.reserve(tenant.size() + id.size() + 2);
  k += kTenantMark;
  k += tenant;
  k += kTenantMark;
  k += id;
  return k;
}

bool split_document_key(std::string_view key, std::string* tenant, std::string* id) {
  if (key.empty() || key[0] != kTenantMark) {
    tenant->clear();
    *id = std::string(key);
    return !key.empty();
  }
  size_t end = key.find(kTenantMark, 1);
  if (end == std::string_view::npos || end == 1 || end + 1 >= key.size()) return false;
  *tenant = std::string(key.substr(1, end - 1));
  *id = std::string(key.substr(end + 1));
  return true;
}

DocStore::~DocStore() {
  if (db_) {
    for (auto* h : cfs_) db_->DestroyColumnFamilyHandle(h);
    delete db_;
  }
}

Result<std::unique_ptr<DocStore>> DocStore::open(const std::string& dir, bool read_only) {
  rocksdb::DBOptions dbo;
  dbo.create_if_missing = !read_only;
  dbo.create_missing_column_families = !read_only;
  dbo.keep_log_file_num = 4;
  dbo.max_manifest_file_size = 64ull << 20;
  rocksdb::ColumnFamilyOptions cfo;
  cfo.compression = rocksdb::kNoCompression;
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const char* n : kCfNames) descs.emplace_back(n, cfo);
  std::unique_ptr<DocStore> ds(new DocStore());
  ds->read_only_ = read_only;
  rocksdb::Status s;
  if (read_only) {
    if (!std::filesystem::exists(dir)) return Status::NotFound(dir + ": no document store here");
    s = rocksdb::DB::OpenForReadOnly(dbo, dir, descs, &ds->cfs_, &ds->db_);
  } else {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return Status::IOError(dir + ": " + ec.message());
    s = rocksdb::DB::Open(dbo, dir, descs, &ds->cfs_, &ds->db_);
  }
  RAGD_RETURN_IF_ERROR(from_rocks(s, "docstore " + dir));
  // Every stored block is read and checked now: a corrupted file fails the open with its name,
  // rather than a store that opens and then fails its reads.
  RAGD_RETURN_IF_ERROR(from_rocks(ds->db_->VerifyChecksum(), "docstore " + dir + ": checksum verification"));
  ds->load_counters();
  return ds;
}

void DocStore::load_counters() {
  seq_ = parse_u64(meta("seq"));
  next_chunk_id_ = std::max<uint64_t>(1, parse_u64(meta("next_chunk_id")));
  num_chunks_ = parse_u64(meta("num_chunks"));
  num_docs_ = parse_u64(meta("num_docs"));
}

Result<std::unique_ptr<DocStore>> DocStore::open_secondary(const std::string& primary_dir,
                                                           const std::string& scratch_dir) {
  if (!std::filesystem::exists(primary_dir + "/CURRENT"))
    return Status::NotFound(primary_dir + ": no document store here (start the primary, or ingest, first)");
  std::error_code ec;
  std::filesystem::create_directories(scratch_dir, ec);
  if (ec) return Status::IOError(scratch_dir + ": " + ec.message());
  rocksdb::DBOptions dbo;
  // A secondary keeps every table file open: the primary may delete a file once compacted away,
  // and an open descriptor still reads it.
  dbo.max_open_files = -1;
  dbo.keep_log_file_num = 4;
  rocksdb::ColumnFamilyOptions cfo;
  cfo.compression = rocksdb::kNoCompression;
  std::vector<rocksdb::ColumnFamilyDescriptor> descs;
  for (const char* n : kCfNames) descs.emplace_back(n, cfo);
  std::unique_ptr<DocStore> ds(new DocStore());
  ds->read_only_ = true;
  ds->secondary_ = true;
  rocksdb::Status s = rocksdb::DB::OpenAsSecondary(dbo, primary_dir, scratch_dir, descs, &ds->cfs_, &ds->db_);
  RAGD_RETURN_IF_ERROR(from_rocks(s, "docstore " + primary_dir + " (secondary in " + scratch_dir + ")"));
  RAGD_RETURN_IF_ERROR(from_rocks(ds->db_->TryCatchUpWithPrimary(), "docstore " + primary_dir + ": catch up"));
  ds->load_counters();
  return ds;
}

Status DocStore::catch_up() {
  if (!secondary_) return Status::OK();
  RAGD_RETURN_IF_ERROR(from_rocks(db_->TryCatchUpWithPrimary(), "docstore: catch up with the primary"));
  load_counters();
  return Status::OK();
}

Status DocStore::checkpoint(const std::string& dir) const {
  rocksdb::Checkpoint* raw = nullptr;
  RAGD_RETURN_IF_ERROR(from_rocks(rocksdb::Checkpoint::Create(db_, &raw), "docstore: checkpoint"));
  std::unique_ptr<rocksdb::Checkpoint> cp(raw);
  // A secondary cannot flush: its copy takes the primary's WAL files as they are.
  const uint64_t flush_above = secondary_ ? std::numeric_limits<uint64_t>::max() : 0;
  return from_rocks(cp->CreateCheckpoint(dir, flush_above), "docstore: checkpoint into " + dir);
}

std::optional<std::string> DocStore::meta(const std::string& key) const {
  std::string v;
  if (!db_->Get(rocksdb::ReadOptions(), cfs_[kManifest], key, &v).ok()) return std::nullopt;
  return v;
}

Status DocStore::put_meta(const std::string& key, const std::string& value) {
  rocksdb::WriteOptions wo;
  wo.sync = true;
  return from_rocks(db_->Put(wo, cfs_[kManifest], key, value), "docstore: manifest " + key);
}

uint64_t DocStore::reserve_chunk_ids(size_t n) {
  uint64_t first = next_chunk_id_;
  next_chunk_id_ += n;
  return first;
}

Result<std::optional<StoredDocument>> DocStore::get_document(const std::string& id) const {
  std::string v;
  auto s = db_->Get(rocksdb::ReadOptions(), cfs_[kDocuments], id, &v);
  if (s.IsNotFound()) return std::optional<StoredDocument>();
  RAGD_RETURN_IF_ERROR(from_rocks(s, "docstore: document '" + id + "'"));
  RAGD_ASSIGN_OR_RETURN(auto d, decode_document(id, v));
  return std::optional<StoredDocument>(std::move(d));
}

Result<std::optional<StoredChunk>> DocStore::get_chunk(uint64_t id) const {
  std::string v;
  auto s = db_->Get(rocksdb::ReadOptions(), cfs_[kChunks], be64(id), &v);
  if (s.IsNotFound()) return std::optional<StoredChunk>();
  RAGD_RETURN_IF_ERROR(from_rocks(s, "docstore: chunk " + std::to_string(id)));
  RAGD_ASSIGN_OR_RETURN(auto c, decode_chunk(id, v));
  return std::optional<StoredChunk>(std::move(c));
}

Result<std::vector<std::optional<StoredChunk>>> DocStore::get_chunks(const std::vector<uint64_t>& ids) const {
  std::vector<std::string> keys;
  keys.reserve(ids.size());
  for (uint64_t id : ids) keys.push_back(be64(id));
  std::vector<rocksdb::Slice> slices(keys.begin(), keys.end());
  std::vector<rocksdb::ColumnFamilyHandle*> cfs(ids.size(), cfs_[kChunks]);
  std::vector<std::string> vals;
  auto sts = db_->MultiGet(rocksdb::ReadOptions(), cfs, slices, &vals);
  std::vector<std::optional<StoredChunk>> out(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (sts[i].IsNotFound()) continue;
    RAGD_RETURN_IF_ERROR(from_rocks(sts[i], "docstore: chunk " + std::to_string(ids[i])));
    RAGD_ASSIGN_OR_RETURN(auto c, decode_chunk(ids[i], vals[i]));
    out[i] = std::move(c);
  }
  return out;
}

Status DocStore::for_each_document(const std::function<bool(const StoredDocument&)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cfs_[kDocuments]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    RAGD_ASSIGN_OR_RETURN(auto d, decode_document(it->key().ToString(), it->value().ToStringView()));
    if (!fn(d)) break;
  }
  return from_rocks(it->status(), "docstore: documents scan");
}

Status DocStore::for_each_chunk(const std::function<bool(const StoredChunk&)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cfs_[kChunks]));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    RAGD_ASSIGN_OR_RETURN(auto c, decode_chunk(from_be64(it->key().ToStringView()), it->value().ToStringView()));
    if (!fn(c)) break;
  }
  return from_rocks(it->status(), "docstore: chunks scan");
}

Result<std::vector<LogEntry>> DocStore::log_after(uint64_t after) const {
  std::vector<LogEntry> out;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cfs_[kManifest]));
  for (it->Seek(kLogPrefix + be64(after + 1)); it->Valid() && it->key().starts_with(kLogPrefix); it->Next()) {
    std::string_view k = it->key().ToStringView();
    LogEntry l;
    l.seq = from_be64(k.substr(kLogPrefix.size()));
    Decoder dc(it->value().ToStringView());
    uint8_t v = dc.u8();
    l.added = dc.array<uint64_t>();
    l.removed = dc.array<uint64_t>();
    if (!dc.done() || v != kRecordVersion) return Status::Corruption("docstore: log entry " + std::to_string(l.seq) + ": bad record");
    out.push_back(std::move(l));
  }
  RAGD_RETURN_IF_ERROR(from_rocks(it->status(), "docstore: log scan"));
  return out;
}

Result<uint64_t> DocStore::apply(Mutation m) {
  if (read_only_) return Status::FailedPrecondition("docstore: opened read-only");
  const uint64_t seq = seq_ + 1;
  rocksdb::WriteBatch wb;
  int64_t docs_delta = 0;
  LogEntry log;
  log.seq = seq;
  uint64_t max_id = next_chunk_id_ - 1;
  std::string scratch;
  for (const auto& id : m.delete_documents) {
    if (db_->Get(rocksdb::ReadOptions(), cfs_[kDocuments], id, &scratch).ok()) --docs_delta;
    wb.Delete(cfs_[kDocuments], id);
  }
  for (auto& d : m.put_documents) {
    if (!db_->Get(rocksdb::ReadOptions(), cfs_[kDocuments], d.id, &scratch).ok()) ++docs_delta;
    d.seq = seq;
    wb.Put(cfs_[kDocuments], d.id, encode_document(d));
  }
  for (uint64_t id : m.delete_chunks) {
    wb.Delete(cfs_[kChunks], be64(id));
    log.removed.push_back(id);
  }
  for (auto& c : m.put_chunks) {
    c.seq = seq;
    wb.Put(cfs_[kChunks], be64(c.chunk.id), encode_chunk(c));
    log.added.push_back(c.chunk.id);
    max_id = std::max(max_id, c.chunk.id);
  }
  const uint64_t num_chunks = num_chunks_ + m.put_chunks.size() - m.delete_chunks.size();
  const uint64_t num_docs = static_cast<uint64_t>(static_cast<int64_t>(num_docs_) + docs_delta);
  const uint64_t next_id = std::max(next_chunk_id_, max_id + 1);
  wb.Put(cfs_[kManifest], kLogPrefix + be64(seq), encode_log(log));
  wb.Put(cfs_[kManifest], "seq", std::to_string(seq));
  wb.Put(cfs_[kManifest], "next_chunk_id", std::to_string(next_id));
  wb.Put(cfs_[kManifest], "num_chunks", std::to_string(num_chunks));
  wb.Put(cfs_[kManifest], "num_docs", std::to_string(num_docs));
  for (const auto& [k, v] : m.put_meta) wb.Put(cfs_[kManifest], k, v);
  rocksdb::WriteOptions wo;
  wo.sync = true;
  RAGD_RETURN_IF_ERROR(from_rocks(db_->Write(wo, &wb), "docstore: write batch " + std::to_string(seq)));
  seq_ = seq;
  num_chunks_ = num_chunks;
  num_docs_ = num_docs;
  next_chunk_id_ = next_id;
  return seq;
}

Status DocStore::prune_log(uint64_t upto) {
  if (read_only_ || upto == 0) return Status::OK();
  rocksdb::WriteOptions wo;
  return from_rocks(db_->DeleteRange(wo, cfs_[kManifest], kLogPrefix + be64(0), kLogPrefix + be64(upto + 1)),
                    "docstore: prune log");
}

}  // namespace ragd::retrieval
