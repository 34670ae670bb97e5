#include "ragd/kvstore/ssd_tier.h"

#include <atomic>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

namespace ragd::kvstore {
namespace {

void put_be64(std::string* s, uint64_t v) {
  for (int i = 7; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}

Status to_status(const rocksdb::Status& s, std::string_view what, const std::string& dir) {
  if (s.ok()) return Status::OK();
  if (s.IsNotFound()) return Status::NotFound(fmt::format("ssd tier {}: {}: not found", dir, what));
  if (s.IsCorruption()) return Status::Corruption(fmt::format("ssd tier {}: {}: {}", dir, what, s.ToString()));
  return Status::IOError(fmt::format("ssd tier {}: {}: {}", dir, what, s.ToString()));
}

}  // namespace

struct SsdTier::Impl {
  SsdTierOptions opts;
  std::atomic<uint64_t> loads{0}, load_bytes{0}, stores{0}, store_bytes{0}, evictions{0}, errors{0};
  std::unique_ptr<rocksdb::Env> env;  // owns the composite env over an injected file system (outlives db)
  std::unique_ptr<rocksdb::DB> db;
  rocksdb::WriteOptions wopts;
};

SsdTier::SsdTier() : impl_(std::make_unique<Impl>()) {}
SsdTier::~SsdTier() {
  if (impl_->db) {
    (void)impl_->db->Close();
    impl_->db.reset();
  }
}

Result<std::unique_ptr<SsdTier>> SsdTier::open(const SsdTierOptions& o) {
  if (o.dir.empty()) return Status::InvalidArgument("ssd tier: directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(o.dir, ec);
  if (ec) return Status::IOError(fmt::format("ssd tier {}: cannot create directory: {}", o.dir, ec.message()));
  std::unique_ptr<SsdTier> t(new SsdTier());
  t->impl_->opts = o;
  rocksdb::Options ro;
  ro.create_if_missing = true;
  ro.compression = rocksdb::kNoCompression;  // KV floats barely compress; keep loads cheap
  ro.enable_blob_files = true;
  ro.min_blob_size = o.min_blob_bytes;
  ro.blob_compression_type = rocksdb::kNoCompression;
  ro.enable_blob_garbage_collection = true;
  ro.blob_garbage_collection_age_cutoff = 0.5;
  ro.max_background_jobs = 2;
  ro.write_buffer_size = 32ull << 20;
  ro.keep_log_file_num = 2;
  ro.info_log_level = rocksdb::WARN_LEVEL;
  if (o.file_system) {
    t->impl_->env = rocksdb::NewCompositeEnv(o.file_system);
    ro.env = t->impl_->env.get();
  }
  // Flushes and compactions of a cache tier yield to model compute.
  rocksdb::Env* env = ro.env ? ro.env : rocksdb::Env::Default();
  (void)env->LowerThreadPoolCPUPriority(rocksdb::Env::LOW, rocksdb::CpuPriority::kIdle);
  (void)env->LowerThreadPoolCPUPriority(rocksdb::Env::HIGH, rocksdb::CpuPriority::kLow);
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(ro, o.dir, &db);
  if (!s.ok()) return Status::IOError(fmt::format("ssd tier {}: cannot open RocksDB: {}", o.dir, s.ToString()));
  t->impl_->db.reset(db);
  t->impl_->wopts.sync = o.sync_writes;
  return t;
}

const std::string& SsdTier::dir() const { return impl_->opts.dir; }

std::string SsdTier::header_record_key(const Hash128& key) {
  std::string k = "h";
  put_be64(&k, key.hi);
  put_be64(&k, key.lo);
  return k;
}

std::string SsdTier::layer_record_key(const Hash128& key, uint32_t layer) {
  std::string k = "l";
  put_be64(&k, key.hi);
  put_be64(&k, key.lo);
  for (int i = 3; i >= 0; --i) k.push_back(static_cast<char>((layer >> (8 * i)) & 0xFF));
  return k;
}

Status SsdTier::put(const SegmentBuffer& seg) {
  const SegmentHeader& h = seg.header();
  const auto* base = reinterpret_cast<const char*>(seg.bytes().data());
  rocksdb::WriteBatch batch;
  const size_t lb = h.layer_bytes();
  std::string value;
  for (uint32_t l = 0; l < h.num_layers; ++l) {
    value.assign(base + h.layers[l].k_offset, lb);
    value.append(base + h.layers[l].v_offset, lb);
    auto s = batch.Put(layer_record_key(h.key, l), value);
    if (!s.ok()) return to_status(s, "batch put", impl_->opts.dir);
  }
  auto s = batch.Put(header_record_key(h.key), rocksdb::Slice(base, h.payload_offset));
  if (!s.ok()) return to_status(s, "batch put", impl_->opts.dir);
  return to_status(impl_->db->Write(impl_->wopts, &batch), "write segment " + h.key.to_hex(), impl_->opts.dir);
}

Status SsdTier::remove(const Hash128& key, uint32_t num_layers) {
  rocksdb::WriteBatch batch;
  auto s = batch.Delete(header_record_key(key));
  for (uint32_t l = 0; s.ok() && l < num_layers; ++l) s = batch.Delete(layer_record_key(key, l));
  if (!s.ok()) return to_status(s, "batch delete", impl_->opts.dir);
  return to_status(impl_->db->Write(impl_->wopts, &batch), "delete segment " + key.to_hex(), impl_->opts.dir);
}

Status SsdTier::read_header(const Hash128& key, std::string* out) const {
  return to_status(impl_->db->Get(rocksdb::ReadOptions(), header_record_key(key), out), "read header " + key.to_hex(),
                   impl_->opts.dir);
}

Status SsdTier::read_layer(const Hash128& key, uint32_t layer, size_t layer_bytes, std::byte* k_dst,
                           std::byte* v_dst) const {
  rocksdb::PinnableSlice v;
  auto s = impl_->db->Get(rocksdb::ReadOptions(), impl_->db->DefaultColumnFamily(), layer_record_key(key, layer), &v);
  if (!s.ok()) return to_status(s, fmt::format("read layer {} of {}", layer, key.to_hex()), impl_->opts.dir);
  if (v.size() != 2 * layer_bytes)
    return Status::Corruption(fmt::format("kv segment {}: layer {} record has {} bytes, expected {}", key.to_hex(), layer,
                                          v.size(), 2 * layer_bytes));
  std::memcpy(k_dst, v.data(), layer_bytes);
  std::memcpy(v_dst, v.data() + layer_bytes, layer_bytes);
  return Status::OK();
}

Status SsdTier::scan_headers(const std::function<void(const Hash128&, std::span<const std::byte>)>& fn) const {
  std::unique_ptr<rocksdb::Iterator> it(impl_->db->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek("h"); it->Valid() && it->key().starts_with("h"); it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() != 17) continue;  // not a header record
    Hash128 key;
    for (int i = 0; i < 8; ++i) key.hi = (key.hi << 8) | static_cast<uint8_t>(k[1 + i]);
    for (int i = 0; i < 8; ++i) key.lo = (key.lo << 8) | static_cast<uint8_t>(k[9 + i]);
    rocksdb::Slice v = it->value();
    fn(key, {reinterpret_cast<const std::byte*>(v.data()), v.size()});
  }
  return to_status(it->status(), "scan headers", impl_->opts.dir);
}

Status SsdTier::flush() {
  return to_status(impl_->db->Flush(rocksdb::FlushOptions()), "flush", impl_->opts.dir);
}

// ---- KvTier ----------------------------------------------------------------------------------------

Status SsdTier::store(const SegmentRef& seg) {
  Status st = put(*seg);
  if (!st.ok()) {
    impl_->errors += 1;
    return st;
  }
  impl_->stores += 1;
  impl_->store_bytes += seg->size();
  return st;
}

Status SsdTier::evict(const Hash128& key, uint32_t num_layers) {
  Status st = remove(key, num_layers);
  (st.ok() ? impl_->evictions : impl_->errors) += 1;
  return st;
}

Status SsdTier::load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) {
  uint64_t bytes = 0;
  Status st = load_layered(
      key, fmt, sink, [&](std::string* header) { return read_header(key, header); },
      [&](uint32_t layer, size_t layer_bytes, std::byte* k, std::byte* v) {
        bytes += 2 * layer_bytes;
        return read_layer(key, layer, layer_bytes, k, v);
      });
  if (st.ok()) {
    impl_->loads += 1;
    impl_->load_bytes += bytes;
  } else if (st.code() != StatusCode::kNotFound) {
    impl_->errors += 1;
  }
  return st;
}

Status SsdTier::scan(const std::function<void(const Hash128& key, std::span<const std::byte> header)>& fn) {
  return scan_headers(fn);
}

TierIoStats SsdTier::io_stats() const {
  TierIoStats s;
  s.loads = impl_->loads.load();
  s.load_bytes = impl_->load_bytes.load();
  s.stores = impl_->stores.load();
  s.store_bytes = impl_->store_bytes.load();
  s.evictions = impl_->evictions.load();
  s.errors = impl_->errors.load();
  return s;
}

}  // namespace ragd::kvstore
