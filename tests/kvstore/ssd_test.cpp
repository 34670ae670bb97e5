// The SSD tier with the real RocksDB: restart after kill -9, corrupted values, segments of another
// model, and RocksDB failures that must disable the tier while serving goes on.
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <spawn.h>

#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <rocksdb/db.h>

#include "fault_fs.h"
#include "kv_test_util.h"
#include "ragd/kvstore/kv_store.h"

extern char** environ;

namespace ragd::kvstore {
namespace {

using testing::dk;
using testing::make_kv;
using testing::TempDir;
using testing::test_format;

std::unique_ptr<KvStore> open_store(const Options& o, const KvFormat& f) {
  auto r = KvStore::open(o, f);
  RAGD_CHECK(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

std::vector<Hash128> keys_of(const std::vector<uint64_t>& docs) {
  std::vector<Hash128> k;
  for (uint64_t d : docs) k.push_back(dk(d));
  return k;
}

// Options whose segments all go straight to the SSD tier.
Options ssd_only(const std::string& dir) {
  Options o;
  o.hbm_bytes = 0;
  o.dram_bytes = 0;
  o.ssd_dir = dir;
  o.promote_on_load = false;
  return o;
}

void insert_path(KvStore& s, const KvFormat& f, const std::vector<uint64_t>& docs, int tokens) {
  std::vector<Hash128> parents;
  for (uint64_t d : docs) {
    auto kv = make_kv(f, tokens, d);
    auto r = s.insert(parents, dk(d), kv.data());
    RAGD_CHECK(r.ok() && r->outcome == KnowledgeTree::InsertOutcome::kInserted) << "insert failed";
    parents.push_back(dk(d));
  }
}

bool same_kv(const SegmentBuffer& s, const KvFormat& f, uint64_t doc) {
  auto want = make_kv(f, s.num_tokens(), doc);
  return std::memcmp(s.k_all(), want.k.data(), want.k.size() * 4) == 0 &&
         std::memcmp(s.v_all(), want.v.data(), want.v.size() * 4) == 0;
}

// Opens the store's RocksDB directly (store closed) and applies fn to it.
void with_raw_db(const std::string& dir, const std::function<void(rocksdb::DB&)>& fn) {
  rocksdb::Options ro;
  ro.enable_blob_files = true;
  rocksdb::DB* db = nullptr;
  auto s = rocksdb::DB::Open(ro, dir, &db);
  ASSERT_TRUE(s.ok()) << s.ToString();
  fn(*db);
  delete db;
}

// Run only as the child process of SegmentsSurviveKillDashNine (a fresh exec of this binary:
// forking a process that already runs RocksDB's background threads is not safe).
TEST(SsdTier, DISABLED_KillDashNineChild) {
  const char* dir = std::getenv("RAGD_KV_KILL_DIR");
  if (dir == nullptr) return;
  const KvFormat f = test_format(3, 2, 5);
  auto r = KvStore::open(ssd_only(dir), f);
  if (!r.ok()) ::_exit(3);
  auto& store = *r;
  std::vector<Hash128> parents;
  for (uint64_t d : {1, 2, 3}) {
    auto kv = make_kv(f, 33, d);
    auto ins = store->insert(parents, dk(d), kv.data(static_cast<int>(parents.size()) * 33));
    if (!ins.ok() || ins->outcome != KnowledgeTree::InsertOutcome::kInserted) ::_exit(4);
    parents.push_back(dk(d));
  }
  auto kv = make_kv(f, 7, 9);
  if (!store->insert_chunk(dk(9), kv.data(500)).ok()) ::_exit(5);
  // Wait for the queued SSD writes only: no memtable flush, so recovery relies on the WAL.
  store->drain_writes();
  ::kill(::getpid(), SIGKILL);
  ::_exit(6);
}

TEST(SsdTier, SegmentsSurviveKillDashNine) {
  const KvFormat f = test_format(3, 2, 5);
  TempDir dir;
  const std::string ssd = dir.sub("ssd");
  const std::string exe = std::filesystem::read_symlink("/proc/self/exe").string();
  std::string filter = "--gtest_filter=SsdTier.DISABLED_KillDashNineChild";
  std::string also = "--gtest_also_run_disabled_tests";
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), filter.data(), also.data(), nullptr};
  std::vector<std::string> env_s;
  for (char** e = environ; *e; ++e) env_s.emplace_back(*e);
  env_s.push_back("RAGD_KV_KILL_DIR=" + ssd);
  std::vector<char*> envp;
  for (auto& e : env_s) envp.push_back(e.data());
  envp.push_back(nullptr);
  pid_t pid = 0;
  ASSERT_EQ(::posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), envp.data()), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
  ASSERT_EQ(WTERMSIG(status), SIGKILL);

  auto store = open_store(ssd_only(ssd), f);
  Stats st = store->stats();
  EXPECT_EQ(st.restored_segments, 4u);
  EXPECT_TRUE(st.ssd_error.empty()) << st.ssd_error;
  auto hit = store->lookup(keys_of({1, 2, 3, 4}));
  ASSERT_EQ(hit.nodes.size(), 3u);
  for (auto& n : hit.nodes) EXPECT_EQ(n.tier, Tier::kSsd);
  EXPECT_EQ(hit.nodes[2].first_position, 66);
  auto h = store->load(hit.nodes);
  h->wait();
  ASSERT_TRUE(h->status().ok()) << h->status().to_string();
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_kv(*h->segment(i), f, i + 1)) << i;
  auto chunk = store->lookup_chunks(keys_of({9}));
  ASSERT_TRUE(chunk.chunks[0].has_value());
  EXPECT_EQ(chunk.chunks[0]->first_position, 500);
  EXPECT_EQ(store->stats().tiers[2].used_bytes, st.tiers[2].used_bytes);
  EXPECT_TRUE(store->check_invariants().ok());
}

TEST(SsdTier, CorruptedValueIsAMissNeverWrongKv) {
  const KvFormat f = test_format(3, 2, 5);
  TempDir dir;
  const std::string ssd = dir.sub("ssd");
  Hash128 victim;
  {
    auto store = open_store(ssd_only(ssd), f);
    insert_path(*store, f, {1, 2, 3}, 33);
    ASSERT_TRUE(store->flush().ok());
    victim = store->lookup(keys_of({1, 2}), {}, false).nodes[1].key;
  }
  // Flip one byte inside layer 1 of the second document's stored value.
  with_raw_db(ssd, [&](rocksdb::DB& db) {
    std::string v;
    const std::string k = SsdTier::layer_record_key(victim, 1);
    ASSERT_TRUE(db.Get(rocksdb::ReadOptions(), k, &v).ok());
    v[v.size() / 2] ^= 0x40;
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), k, v).ok());
  });
  auto store = open_store(ssd_only(ssd), f);
  auto hit = store->lookup(keys_of({1, 2, 3}));
  ASSERT_EQ(hit.nodes.size(), 3u);
  auto h = store->load(hit.nodes);
  h->wait();
  EXPECT_EQ(h->status().code(), StatusCode::kCorruption);
  EXPECT_NE(h->status().message().find("layer 1"), std::string::npos) << h->status().message();
  EXPECT_EQ(h->prefix_ok(), 1u);
  EXPECT_TRUE(same_kv(*h->segment(0), f, 1));
  EXPECT_FALSE(h->node_ok(1));
  EXPECT_FALSE(h->node_ok(2)) << "a node after the broken prefix must not be used";
  EXPECT_LT(h->layers_ready(1), 3) << "the corrupted layer was never marked ready";
  Stats st = store->stats();
  EXPECT_EQ(st.checksum_failures, 1u);
  EXPECT_GE(st.load_failures, 1u);
  hit.pin.release();
  // The corrupted node and its subtree are gone: the next lookup stops before it (recompute).
  EXPECT_EQ(store->lookup(keys_of({1, 2, 3}), {}, false).nodes.size(), 1u);
  EXPECT_TRUE(store->check_invariants().ok());
  ASSERT_TRUE(store->flush().ok());
  // ... and from RocksDB, so a restart does not bring it back.
  store.reset();
  auto again = open_store(ssd_only(ssd), f);
  EXPECT_EQ(again->stats().restored_segments, 1u);
}

TEST(SsdTier, CorruptedHeaderIsDroppedAtOpen) {
  const KvFormat f = test_format();
  TempDir dir;
  const std::string ssd = dir.sub("ssd");
  Hash128 key;
  {
    auto store = open_store(ssd_only(ssd), f);
    insert_path(*store, f, {1}, 7);
    ASSERT_TRUE(store->flush().ok());
    key = store->lookup(keys_of({1}), {}, false).nodes[0].key;
  }
  with_raw_db(ssd, [&](rocksdb::DB& db) {
    std::string v;
    ASSERT_TRUE(db.Get(rocksdb::ReadOptions(), SsdTier::header_record_key(key), &v).ok());
    v[49] ^= 0x01;
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), SsdTier::header_record_key(key), v).ok());
  });
  auto store = open_store(ssd_only(ssd), f);
  EXPECT_EQ(store->stats().checksum_failures, 1u);
  EXPECT_TRUE(store->lookup(keys_of({1})).nodes.empty());
}

TEST(SsdTier, OtherModelIsRejectedByKeyAndByHeader) {
  const KvFormat f = test_format();
  KvFormat other = f;
  other.model_fingerprint.lo += 1;
  TempDir dir;
  const std::string ssd = dir.sub("ssd");
  Hash128 key;
  {
    auto store = open_store(ssd_only(ssd), f);
    insert_path(*store, f, {1, 2}, 7);
    ASSERT_TRUE(store->flush().ok());
    key = store->lookup(keys_of({1}), {}, false).nodes[0].key;
  }
  {
    // By key: the other model's root is another key, so nothing is found; by header: at open
    // the segments are recognised as another model's and removed.
    auto store = open_store(ssd_only(ssd), other);
    EXPECT_TRUE(store->lookup(keys_of({1})).nodes.empty());
    EXPECT_EQ(store->stats().format_rejects, 2u);
    EXPECT_EQ(store->stats().restored_segments, 0u);
  }
  // A record under THIS model's key whose header claims another model (e.g. a stale or forged
  // record) is rejected by the header check too.
  {
    auto store = open_store(ssd_only(ssd), f);
    insert_path(*store, f, {1}, 7);
    ASSERT_TRUE(store->flush().ok());
  }
  with_raw_db(ssd, [&](rocksdb::DB& db) {
    std::string v;
    ASSERT_TRUE(db.Get(rocksdb::ReadOptions(), SsdTier::header_record_key(key), &v).ok());
    auto h = decode_segment_header({reinterpret_cast<const std::byte*>(v.data()), v.size()});
    ASSERT_TRUE(h.ok());
    h->model_fingerprint = other.model_fingerprint;  // re-encoded with a valid header checksum
    auto enc = encode_segment_header(*h);
    ASSERT_TRUE(db.Put(rocksdb::WriteOptions(), SsdTier::header_record_key(key),
                       rocksdb::Slice(reinterpret_cast<const char*>(enc.data()), enc.size()))
                    .ok());
  });
  auto store = open_store(ssd_only(ssd), f);
  EXPECT_TRUE(store->lookup(keys_of({1})).nodes.empty());
  EXPECT_EQ(store->stats().format_rejects, 1u);
}

TEST(SsdTier, UnwritableDirectoryDisablesTierAndServingGoesOn) {
  const KvFormat f = test_format();
  TempDir dir;
  const std::string file = dir.sub("a_file");
  std::ofstream(file) << "not a directory";
  Options o;
  o.ssd_dir = file + "/ssd";
  auto r = KvStore::open(o, f);
  ASSERT_TRUE(r.ok()) << "an SSD failure must not stop the store: " << r.status().to_string();
  auto& store = *r;
  Stats st = store->stats();
  EXPECT_FALSE(st.tiers[2].enabled);
  EXPECT_NE(st.ssd_error.find(o.ssd_dir), std::string::npos) << st.ssd_error;
  insert_path(*store, f, {1, 2}, 7);
  auto hit = store->lookup(keys_of({1, 2}));
  ASSERT_EQ(hit.nodes.size(), 2u);
  auto h = store->load(hit.nodes);
  h->wait();
  EXPECT_TRUE(h->status().ok());
}

TEST(SsdTier, DiskFullDisablesTierAndServingGoesOn) {
  const KvFormat f = test_format(2, 1, 4);
  TempDir dir;
  auto faults = std::make_shared<SsdFaults>();
  Options o;
  o.eviction = EvictionPolicy::kLru;
  const uint64_t seg = segment_header_size(2) + f.bytes_per_token() * 9;
  o.hbm_bytes = seg * 2;
  o.dram_bytes = seg * 2;
  o.ssd_dir = dir.sub("ssd");
  o.ssd_file_system = make_fault_file_system(rocksdb::FileSystem::Default(), faults);
  auto store = open_store(o, f);
  for (uint64_t d = 1; d <= 5; ++d) insert_path(*store, f, {d}, 9);  // 1 reaches SSD
  ASSERT_TRUE(store->flush().ok());
  EXPECT_EQ(store->lookup(keys_of({1}), {}, false).nodes.at(0).tier, Tier::kSsd);
  faults->no_space = true;
  for (uint64_t d = 6; d <= 8; ++d) insert_path(*store, f, {d}, 9);  // demotions hit "disk full"
  (void)store->flush();
  Stats st = store->stats();
  EXPECT_GT(faults->injected.load(), 0u);
  EXPECT_FALSE(st.tiers[2].enabled);
  EXPECT_NE(st.ssd_error.find("No space"), std::string::npos) << st.ssd_error;
  EXPECT_GE(st.ssd_errors, 1u);
  EXPECT_EQ(st.tiers[2].used_bytes, 0u);
  // SSD-only nodes are misses now; the faster tiers still serve.
  EXPECT_TRUE(store->lookup(keys_of({1}), {}, false).nodes.empty());
  auto hit = store->lookup(keys_of({8}));
  ASSERT_EQ(hit.nodes.size(), 1u);
  auto h = store->load(hit.nodes);
  h->wait();
  EXPECT_TRUE(h->status().ok());
  insert_path(*store, f, {9}, 9);
  EXPECT_TRUE(store->check_invariants().ok());
}

TEST(SsdTier, ReadErrorDisablesTierAndTheLoadIsAMiss) {
  const KvFormat f = test_format(2, 1, 4);
  TempDir dir;
  auto faults = std::make_shared<SsdFaults>();
  Options o = ssd_only(dir.sub("ssd"));
  o.ssd_file_system = make_fault_file_system(rocksdb::FileSystem::Default(), faults);
  o.ssd_min_blob_bytes = 64;
  auto store = open_store(o, f);
  insert_path(*store, f, {1, 2}, 9);
  ASSERT_TRUE(store->flush().ok());  // into SST / blob files, so reads touch the file system
  faults->read_error = true;
  auto hit = store->lookup(keys_of({1, 2}));
  ASSERT_EQ(hit.nodes.size(), 2u);
  auto h = store->load(hit.nodes);
  h->wait();
  EXPECT_EQ(h->status().code(), StatusCode::kIOError) << h->status().to_string();
  EXPECT_EQ(h->prefix_ok(), 0u);
  Stats st = store->stats();
  EXPECT_FALSE(st.tiers[2].enabled);
  EXPECT_NE(st.ssd_error.find("read"), std::string::npos) << st.ssd_error;
  // Serving continues: recompute and insert into the faster tiers.
  Options o2 = o;
  hit.pin.release();
  EXPECT_TRUE(store->lookup(keys_of({1})).nodes.empty());
  auto kv = make_kv(f, 9, 1);
  auto r = store->insert({}, dk(1), kv.data());
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->outcome, KnowledgeTree::InsertOutcome::kNoSpace) << "HBM/DRAM are 0 bytes in this test";
}

TEST(SsdTier, CapacityEvictsAndIsEnforcedAgainAfterReopen) {
  const KvFormat f = test_format(2, 1, 4);
  TempDir dir;
  const uint64_t seg = segment_header_size(2) + f.bytes_per_token() * 9;
  Options o = ssd_only(dir.sub("ssd"));
  o.eviction = EvictionPolicy::kLru;
  o.ssd_bytes = seg * 4;
  {
    auto store = open_store(o, f);
    for (uint64_t d = 1; d <= 6; ++d) insert_path(*store, f, {d}, 9);
    ASSERT_TRUE(store->flush().ok());
    Stats st = store->stats();
    EXPECT_EQ(st.tiers[2].nodes, 4u);
    EXPECT_EQ(st.tiers[2].evictions, 2u);
    EXPECT_TRUE(store->lookup(keys_of({1}), {}, false).nodes.empty());
  }
  o.ssd_bytes = seg * 2;
  auto store = open_store(o, f);
  Stats st = store->stats();
  EXPECT_EQ(st.restored_segments, 4u);
  EXPECT_EQ(st.tiers[2].nodes, 2u);
  EXPECT_LE(st.tiers[2].used_bytes, o.ssd_bytes);
  EXPECT_TRUE(store->check_invariants().ok());
}

}  // namespace
}  // namespace ragd::kvstore
