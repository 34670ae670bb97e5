// The remote KV tier against real Redis servers (one server, and a 3-node Redis Cluster): sharing
// between two stores (as two replicas would), scopes, bad values as misses, the circuit breaker,
// Redis's own eviction, segments cut into pieces; trust: values sealed with the fleet secret's MAC
// (a forged value under another tenant's key is refused), Redis AUTH (password, ACL user).
#include "ragd/kvstore/kv_store.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <thread>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <simdjson.h>

#include "kv_test_util.h"
#include "redis_test_util.h"
#include "ragd/kvstore/redis_client.h"

namespace ragd::kvstore {
namespace {

using testing::dk;
using testing::doc_tokens;
using testing::make_kv;
using testing::test_format;
using namespace testing;  // redis_test_util.h
using Clock = std::chrono::steady_clock;

std::string url_of(int port) { return "redis://127.0.0.1:" + std::to_string(port); }

// A file holding `contents` under the test's temp dir (secrets, passwords).
std::string write_file(const std::string& name, const std::string& contents) {
  const std::string path = ::testing::TempDir() + "ragd_remote_" + std::to_string(::getpid()) + "_" + name;
  std::ofstream(path, std::ios::binary) << contents;
  return path;
}

const std::string& fleet_secret_file() {
  static const std::string path = write_file("fleet.key", "3f1c9a7e5b2d4c6e8a0b1d3f5e7c9a1b\n");
  return path;
}

// Sealed with the test fleet's secret unless `sealed` is false (trust_unauthenticated).
Options remote_options(const std::string& url, bool sealed = true) {
  Options o;
  o.hbm_bytes = 64 << 20;
  o.remote.url = url;
  o.remote.timeout_ms = 200;
  o.remote.max_value_bytes = 64 << 10;  // the smallest piece: segments below span several values
  o.remote.breaker_backoff_ms = 100;
  if (sealed) o.remote.secret_file = fleet_secret_file();
  else o.remote.trust_unauthenticated = true;
  return o;
}

std::unique_ptr<KvStore> open_store(const Options& o, const KvFormat& f) {
  auto r = KvStore::open(o, f);
  RAGD_CHECK(r.ok()) << r.status().to_string();
  return std::move(r).value();
}

// Inserts the path docs (ids), each `tokens` long, as a replica computing them would.
void insert_path(KvStore& s, const KvFormat& f, const std::vector<uint64_t>& docs, int tokens, std::string_view tenant = {}) {
  std::vector<Hash128> parents;
  for (uint64_t d : docs) {
    auto kv = make_kv(f, tokens, d);
    auto r = s.insert(parents, dk(d), kv.data(static_cast<int>(parents.size()) * tokens), tenant);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    parents.push_back(dk(d));
  }
}

std::vector<Hash128> keys_of(const std::vector<uint64_t>& docs) {
  std::vector<Hash128> k;
  for (uint64_t d : docs) k.push_back(dk(d));
  return k;
}

// What a replica that has nothing local does: look the path up, and load what the tree lacks from
// the remote tier.
std::shared_ptr<LoadHandle> load_missing(KvStore& s, const std::vector<uint64_t>& docs, std::string_view tenant = {}) {
  const std::vector<Hash128> keys = keys_of(docs);
  LookupResult hit = s.lookup(keys, tenant);
  LoadOptions lo;
  lo.remote = RemoteTail{keys, hit.nodes.size(), std::string(tenant), false};
  auto h = s.load(hit.nodes, std::move(lo));
  h->wait();
  return h;
}

void expect_kv(const SegmentBuffer& s, const KvFormat& f, uint64_t doc) {
  auto want = make_kv(f, s.num_tokens(), doc);
  for (size_t i = 0; i < want.k.size(); ++i) {
    ASSERT_EQ(s.k_all()[i], want.k[i]) << "doc " << doc << " k[" << i << "]";
    ASSERT_EQ(s.v_all()[i], want.v[i]) << "doc " << doc << " v[" << i << "]";
  }
}

class RemoteTierTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!redis_available()) GTEST_SKIP() << kRedisMissing;
    redis_ = start_redis(dir_.path / "redis");
    ASSERT_GT(redis_.pid, 0);
  }
  void TearDown() override { stop_redis(redis_.pid); }
  RedisTempDir dir_;
  RedisProcess redis_;
  // 4 layers x 4 heads x 16 dims f32: 2 KiB per token, so a 77-token node is ~154 KiB (3 pieces).
  const KvFormat f_ = test_format(4, 4, 16);
};

TEST_F(RemoteTierTest, ASecondStoreReusesWhatTheFirstComputed) {
  auto a = open_store(remote_options(url_of(redis_.port)), f_);
  insert_path(*a, f_, {1, 2, 3}, 77);
  a->drain_writes();
  EXPECT_EQ(a->stats().remote.puts, 3u);
  // Pieces: every segment spans several values, all under its own hash tag.
  EXPECT_EQ(redis_cli(redis_.port, {"DBSIZE"}), "9");

  auto b = open_store(remote_options(url_of(redis_.port)), f_);
  auto h = load_missing(*b, {1, 2, 3, 4});
  ASSERT_EQ(h->size(), 4u);
  for (size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(h->node_ok(i)) << i << ": " << h->status().to_string();
    EXPECT_EQ(h->source(i), Tier::kRemote);
    EXPECT_EQ(h->segment(i)->header().first_position, static_cast<int>(i) * 77);
    expect_kv(*h->segment(i), f_, i + 1);
  }
  EXPECT_FALSE(h->node_ok(3));  // never computed anywhere: a miss
  const Stats st = b->stats();
  EXPECT_EQ(st.remote.hits, 3u);
  EXPECT_EQ(st.remote.misses, 1u);
  EXPECT_EQ(st.remote_load_tokens, 3u * 77);
  {  // the stats JSON is valid and carries the remote tier's counters
    const std::string js = b->stats_json();
    simdjson::dom::parser parser;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(js).get(doc), simdjson::SUCCESS) << js;
    uint64_t hits = 0;
    ASSERT_EQ(doc.at_pointer("/remote/hits").get_uint64().get(hits), simdjson::SUCCESS) << js;
    EXPECT_EQ(hits, 3u);
    EXPECT_EQ(doc.at_pointer("/remote_load_tokens").get_uint64().get(hits), simdjson::SUCCESS);
    EXPECT_EQ(hits, 3u * 77);
  }
  // Promoted: the next lookup finds the path locally.
  EXPECT_EQ(b->lookup(keys_of({1, 2, 3})).nodes.size(), 3u);
  // Read from Redis, so not written back.
  b->drain_writes();
  EXPECT_EQ(b->stats().remote.puts, 0u);
}

TEST_F(RemoteTierTest, ChunksTravelToo) {
  auto a = open_store(remote_options(url_of(redis_.port)), f_);
  for (uint64_t d : {11, 12}) {
    auto kv = make_kv(f_, 50, d);
    ASSERT_TRUE(a->insert_chunk(dk(d), kv.data(20), "t").ok());
  }
  a->drain_writes();
  auto b = open_store(remote_options(url_of(redis_.port)), f_);
  LoadOptions lo;
  lo.independent = true;
  lo.remote = RemoteTail{keys_of({12, 13, 11}), 0, "t", true};
  auto h = b->load({}, std::move(lo));
  h->wait();
  ASSERT_EQ(h->size(), 3u);
  ASSERT_TRUE(h->node_ok(0));
  EXPECT_FALSE(h->node_ok(1));
  ASSERT_TRUE(h->node_ok(2));  // independent: a miss does not stop the others
  expect_kv(*h->segment(0), f_, 12);
  expect_kv(*h->segment(2), f_, 11);
  EXPECT_TRUE(h->segment(0)->header().is_chunk);
  EXPECT_EQ(b->lookup_chunks(keys_of({11, 12}), "t").hits().size(), 2u);
}

// Tenant and salt scopes are in the key: another scope never even asks for the value. The negative
// control: without isolation the same lookup hits (so the check would fail if the scope were dropped).
TEST_F(RemoteTierTest, AnotherScopeNeverReusesIt) {
  Options o = remote_options(url_of(redis_.port));
  o.tenant_isolation = true;
  auto a = open_store(o, f_);
  insert_path(*a, f_, {1, 2}, 40, "acme");
  a->drain_writes();
  auto b = open_store(o, f_);
  for (const char* other : {"", "globex", "acme\x1fsalt"}) {
    auto h = load_missing(*b, {1, 2}, other);
    EXPECT_FALSE(h->node_ok(0)) << "scope '" << other << "' reused acme's KV";
  }
  EXPECT_EQ(b->stats().remote.hits, 0u);
  auto mine = load_missing(*b, {1, 2}, "acme");
  EXPECT_TRUE(mine->node_ok(0) && mine->node_ok(1));
  // The control: a store without isolation keys everything under one scope.
  Options shared = o;
  shared.tenant_isolation = false;
  auto c = open_store(shared, f_);
  insert_path(*c, f_, {5}, 40, "acme");
  c->drain_writes();
  auto d = open_store(shared, f_);
  EXPECT_TRUE(load_missing(*d, {5}, "globex")->node_ok(0));
}

// Without a MAC (trust_unauthenticated) the checksums and the format check still catch accidents.
TEST_F(RemoteTierTest, CorruptOrForeignValuesAreMissesWithAMetric) {
  auto a = open_store(remote_options(url_of(redis_.port), /*sealed=*/false), f_);
  insert_path(*a, f_, {1, 2}, 77);
  a->drain_writes();
  // A flipped byte in the middle piece of node 0.
  Options o = remote_options(url_of(redis_.port), /*sealed=*/false);
  auto probe = RemoteTier::open(o.remote, f_);
  ASSERT_TRUE(probe.ok());
  const Hash128 k0 = child_key(tree_scope_key(f_, ""), dk(1));
  const std::string piece = (*probe)->piece_key(k0, 1);
  ASSERT_EQ(redis_cli(redis_.port, {"EXISTS", piece}), "1");
  redis_cli(redis_.port, {"SETRANGE", piece, "1000", "\x7f\x7f"});
  auto b = open_store(o, f_);
  auto h = load_missing(*b, {1, 2});
  EXPECT_FALSE(h->node_ok(0));
  EXPECT_FALSE(h->node_ok(1));  // its parent is gone: the path stops
  EXPECT_EQ(b->stats().remote.checksum_failures, 1u);

  // Another model's segment under node 0's key (as if a misconfigured replica wrote it).
  const KvFormat other = test_format(4, 4, 16, /*model=*/0xbad);
  SegmentIdentity id;
  id.key = k0;
  id.parent_key = tree_scope_key(f_, "");
  id.doc_key = dk(1);
  auto kv = make_kv(other, 77, 1);
  auto seg = SegmentBuffer::build(other, id, kv.data());
  ASSERT_TRUE(seg.ok());
  auto foreign = RemoteTier::open(o.remote, other);
  ASSERT_TRUE(foreign.ok());
  ASSERT_TRUE((*foreign)->put(*seg));
  (*foreign)->drain();
  auto c = open_store(o, f_);
  auto h2 = load_missing(*c, {1});
  EXPECT_FALSE(h2->node_ok(0));
  EXPECT_EQ(c->stats().remote.format_rejects, 1u);
  // A piece evicted under the first one: a partial miss, counted.
  insert_path(*a, f_, {7}, 77);
  a->drain_writes();
  redis_cli(redis_.port, {"DEL", (*probe)->piece_key(child_key(tree_scope_key(f_, ""), dk(7)), 2)});
  auto d = open_store(o, f_);
  EXPECT_FALSE(load_missing(*d, {7})->node_ok(0));
  EXPECT_EQ(d->stats().remote.partial_misses, 1u);
}

// ---- trust -------------------------------------------------------------------------------------

// What an attacker who can write to Redis (but lacks the fleet secret) does: tenant B's key, a
// well-formed segment for it whose KV is tenant A's, checksums recomputed, written raw. `envelope`:
// the MAC envelope copied from A's own sealed value (a replay of a real seal), or none.
// A raw Redis client on the test's server (binary-safe reads and writes, as an attacker's).
std::unique_ptr<RedisClient> raw_client(int port) {
  RedisOptions ro;
  ro.seeds = {RedisEndpoint{"127.0.0.1", port}};
  ro.timeout = std::chrono::milliseconds(1000);
  auto c = RedisClient::connect(ro);
  RAGD_CHECK(c.ok()) << c.status().to_string();
  return std::move(c).value();
}

void forge_into(int port, const RemoteTier& probe, const KvFormat& f, const Hash128& b_key, const Hash128& b_parent,
                uint64_t b_doc, uint64_t a_doc, int tokens, const std::string& envelope) {
  SegmentIdentity id;
  id.key = b_key;
  id.parent_key = b_parent;
  id.doc_key = dk(b_doc);
  auto kv = make_kv(f, tokens, a_doc);  // A's KV
  auto seg = SegmentBuffer::build(f, id, kv.data());
  ASSERT_TRUE(seg.ok());
  const auto bytes = (*seg)->bytes();
  const std::pair<std::string, std::string> value{
      probe.piece_key(b_key, 0), envelope + std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size())};
  ASSERT_TRUE(raw_client(port)->set_many(std::span(&value, 1), 0).ok());
}

// The reproduction of the cross-tenant injection: without a MAC the forged value is served into
// B's prompt (A's KV); with the fleet's MAC it is a miss counted in mac_failures, and nothing of it
// reaches a local tier.
TEST_F(RemoteTierTest, ForgedValueUnderAnotherTenantsKeyIsRefusedByTheMac) {
  const int tokens = 20;  // one piece: the forged value is written as one Redis value
  for (bool sealed : {false, true}) {
    SCOPED_TRACE(sealed ? "sealed" : "trust_unauthenticated");
    redis_cli(redis_.port, {"FLUSHALL"});
    Options o = remote_options(url_of(redis_.port), sealed);
    o.tenant_isolation = true;  // keys carry the tenant, as the daemon's are with API keys
    auto a = open_store(o, f_);
    insert_path(*a, f_, {41}, tokens, "acme");  // A's secret document
    a->drain_writes();
    auto probe = RemoteTier::open(o.remote, f_);
    ASSERT_TRUE(probe.ok());
    const Hash128 a_key = child_key(tree_scope_key(f_, "acme"), dk(41));
    EXPECT_EQ(redis_cli(redis_.port, {"GETRANGE", (*probe)->piece_key(a_key, 0), "0", "3"}) == "RGDA", sealed);
    std::string envelope;
    if (sealed) {  // A's real envelope, copied byte for byte
      const std::string k = (*probe)->piece_key(a_key, 0);
      auto got = raw_client(redis_.port)->get_many(std::span(&k, 1));
      ASSERT_TRUE(got.ok() && (*got)[0].has_value());
      envelope = (*got)[0]->substr(0, ValueMac::kEnvelopeBytes);
    }
    const Hash128 b_root = tree_scope_key(f_, "globex");
    const Hash128 b_key = child_key(b_root, dk(42));
    forge_into(redis_.port, **probe, f_, b_key, b_root, 42, 41, tokens, envelope);

    auto b = open_store(o, f_);  // another replica: nothing local
    auto h = load_missing(*b, {42}, "globex");
    const Stats st = b->stats();
    if (!sealed) {
      // Today's hole, kept visible: the checksums pass and A's KV would enter B's prompt.
      ASSERT_TRUE(h->node_ok(0));
      expect_kv(*h->segment(0), f_, 41);
      EXPECT_EQ(st.remote.mac_failures, 0u);
      continue;
    }
    EXPECT_FALSE(h->node_ok(0));
    EXPECT_EQ(st.remote.hits, 0u);
    EXPECT_EQ(st.remote.mac_failures, 1u);
    // Never promoted: B's tree holds nothing for the key, in any tier.
    EXPECT_TRUE(b->lookup(keys_of({42}), "globex").nodes.empty());
    // A forged value without any envelope is refused the same way.
    forge_into(redis_.port, **probe, f_, b_key, b_root, 42, 41, tokens, "");
    EXPECT_FALSE(load_missing(*b, {42}, "globex")->node_ok(0));
    EXPECT_EQ(b->stats().remote.mac_failures, 2u);
    // And B's own document, sealed by a replica with the secret, is served.
    redis_cli(redis_.port, {"DEL", (*probe)->piece_key(b_key, 0)});  // the forged one
    auto a2 = open_store(o, f_);
    insert_path(*a2, f_, {42}, tokens, "globex");
    a2->drain_writes();
    auto c = open_store(o, f_);
    auto hc = load_missing(*c, {42}, "globex");
    ASSERT_TRUE(hc->node_ok(0));
    expect_kv(*hc->segment(0), f_, 42);
  }
}

// Replicas with different fleet secrets do not use each other's values (and do not erase them).
TEST_F(RemoteTierTest, AnotherFleetSecretIsAMiss) {
  auto a = open_store(remote_options(url_of(redis_.port)), f_);
  insert_path(*a, f_, {3}, 77);  // 3 pieces
  a->drain_writes();
  Options other = remote_options(url_of(redis_.port));
  other.remote.secret_file = write_file("other.key", "a different fleet secret, 40 bytes long..");
  auto b = open_store(other, f_);
  EXPECT_FALSE(load_missing(*b, {3})->node_ok(0));
  EXPECT_EQ(b->stats().remote.mac_failures, 1u);
  // The value is still there for the replicas that hold the right secret.
  auto c = open_store(remote_options(url_of(redis_.port)), f_);
  auto h = load_missing(*c, {3});
  ASSERT_TRUE(h->node_ok(0));
  expect_kv(*h->segment(0), f_, 3);
  // HMAC-SHA-256 instead of GMAC: shares between replicas that use it, refused by a GMAC one.
  Options hm = remote_options(url_of(redis_.port));
  hm.remote.mac = MacAlgorithm::kHmacSha256;
  auto d = open_store(hm, f_);
  insert_path(*d, f_, {4}, 77);
  d->drain_writes();
  auto e = open_store(hm, f_);
  ASSERT_TRUE(load_missing(*e, {4})->node_ok(0));
  auto g = open_store(remote_options(url_of(redis_.port)), f_);
  EXPECT_FALSE(load_missing(*g, {4})->node_ok(0));
  EXPECT_EQ(g->stats().remote.mac_failures, 1u);
}

TEST(RemoteTierOptions, RefusesUnauthenticatedValuesUnlessTrusted) {
  RemoteOptions o;
  o.url = "redis://127.0.0.1:6379";
  Status s = o.validate();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("secret_file"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("trust_unauthenticated"), std::string::npos) << s.message();
  o.trust_unauthenticated = true;
  EXPECT_TRUE(o.validate().ok());
  o.trust_unauthenticated = false;
  o.secret_file = write_file("short.key", "too short\n");
  EXPECT_TRUE(o.validate().ok());  // the file is read when the tier opens
  auto t = RemoteTier::open(o, test_format(4, 4, 16));
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("at least 16"), std::string::npos) << t.status().message();
  EXPECT_EQ(t.status().message().find("too short"), std::string::npos) << "the secret must not be echoed";
  o.secret_file = "/nonexistent/fleet.key";
  EXPECT_FALSE(RemoteTier::open(o, test_format(4, 4, 16)).ok());
  o.secret_file = fleet_secret_file();
  o.username = "ragd";
  EXPECT_FALSE(o.validate().ok()) << "a username without a password";
}

// Redis AUTH: without the password nothing is read or written; with it (default user, then an ACL
// user limited to ragd's keys) replicas share; a wrong one is refused with Redis's words.
TEST(RemoteTierAuth, PasswordAndAclUser) {
  if (!redis_available()) GTEST_SKIP() << kRedisMissing;
  RedisTempDir dir;
  const std::string pw = "p4ss-for-the-test-redis";
  ::setenv("REDISCLI_AUTH", pw.c_str(), 1);  // the helpers' redis-cli (readiness PING, ACL below)
  RedisProcess r = start_redis(dir.path / "redis", {"--requirepass", pw});
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  const KvFormat f = test_format(4, 4, 16);
  Options o = remote_options(url_of(r.port));
  {  // no AUTH: NOAUTH on every call; nothing written, nothing read
    auto a = open_store(o, f);
    insert_path(*a, f, {1}, 30);
    a->drain_writes();
    EXPECT_EQ(a->stats().remote.puts, 0u);
    EXPECT_GE(a->stats().remote.puts_dropped, 1u);
  }
  o.remote.password_file = write_file("redis.pass", pw + "\n");
  auto a = open_store(o, f);
  insert_path(*a, f, {1}, 30);
  a->drain_writes();
  EXPECT_EQ(a->stats().remote.puts, 1u);
  auto b = open_store(o, f);
  ASSERT_TRUE(load_missing(*b, {1})->node_ok(0));
  // An ACL user that may touch only ragd's keys.
  ASSERT_EQ(redis_cli(r.port, {"ACL", "SETUSER", "ragd", "on", ">user-pw-1234", "~ragd:kv:*", "+@all"}), "OK");
  Options u = o;
  u.remote.username = "ragd";
  u.remote.password_file = write_file("user.pass", "user-pw-1234");
  auto c = open_store(u, f);
  ASSERT_TRUE(load_missing(*c, {1})->node_ok(0));
  insert_path(*c, f, {2}, 30);
  c->drain_writes();
  EXPECT_EQ(c->stats().remote.puts, 1u);
  // A wrong password: the tier opens (the breaker keeps probing), says why, reads nothing.
  Options w = o;
  w.remote.password_file = write_file("wrong.pass", "not-the-password");
  auto d = open_store(w, f);
  EXPECT_FALSE(load_missing(*d, {1})->node_ok(0));
  const std::string why = d->stats().remote.last_error;
  EXPECT_NE(why.find("WRONGPASS"), std::string::npos) << why;
  EXPECT_EQ(why.find("not-the-password"), std::string::npos) << "the password must not be echoed";
  ::unsetenv("REDISCLI_AUTH");
}

// A dead Redis costs one timeout, then the breaker answers at once; a restarted Redis is found
// again by the probe and reads resume.
TEST_F(RemoteTierTest, DeadRedisOpensTheBreakerAndItClosesAgain) {
  auto a = open_store(remote_options(url_of(redis_.port)), f_);
  insert_path(*a, f_, {1}, 30);
  a->drain_writes();
  auto b = open_store(remote_options(url_of(redis_.port)), f_);
  const int port = redis_.port;
  stop_redis(redis_.pid);
  redis_.pid = -1;
  auto t0 = Clock::now();
  auto h = load_missing(*b, {1});
  const double first_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_FALSE(h->node_ok(0));
  EXPECT_LT(first_ms, 3 * 200 + 300) << "a dead Redis must cost about one timeout";
  EXPECT_EQ(b->stats().remote.breaker, "open");
  t0 = Clock::now();
  for (int i = 0; i < 20; ++i) EXPECT_FALSE(load_missing(*b, {1})->node_ok(0));
  const double open_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  EXPECT_LT(open_ms, 200) << "loads while the breaker is open must not wait for Redis";
  // Writes while open are dropped (counted), not queued without bound.
  insert_path(*b, f_, {9}, 30);
  EXPECT_GE(b->stats().remote.puts_dropped, 1u);

  redis_ = start_redis(dir_.path / "redis2", {}, port);
  ASSERT_GT(redis_.pid, 0);
  insert_path(*a, f_, {1}, 30);  // a fresh Redis is empty: the writer fills it again
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (b->stats().remote.breaker != "closed" && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  ASSERT_EQ(b->stats().remote.breaker, "closed");
  // a's own breaker closes too, then a can write again.
  while (a->stats().remote.breaker != "closed" && Clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  insert_path(*a, f_, {2}, 30);
  a->drain_writes();
  auto c = open_store(remote_options(url_of(redis_.port)), f_);
  EXPECT_TRUE(load_missing(*c, {2})->node_ok(0));
}

// Redis's own eviction (tiny maxmemory, allkeys-lru): whatever is loaded is exact, the rest are
// misses; nothing errors.
TEST_F(RemoteTierTest, TinyMaxmemoryEvictsAndNothingBreaks) {
  redis_cli(redis_.port, {"CONFIG", "SET", "maxmemory", "2mb"});
  redis_cli(redis_.port, {"CONFIG", "SET", "maxmemory-policy", "allkeys-lru"});
  auto a = open_store(remote_options(url_of(redis_.port)), f_);
  for (uint64_t d = 100; d < 140; ++d) insert_path(*a, f_, {d}, 77);  // ~6 MiB into 2 MiB
  a->drain_writes();
  auto b = open_store(remote_options(url_of(redis_.port)), f_);
  int hits = 0;
  for (uint64_t d = 100; d < 140; ++d) {
    auto h = load_missing(*b, {d});
    if (h->node_ok(0)) {
      ++hits;
      expect_kv(*h->segment(0), f_, d);
    }
  }
  const Stats st = b->stats();
  EXPECT_GT(hits, 0);
  EXPECT_LT(hits, 40);
  EXPECT_EQ(st.remote.checksum_failures + st.remote.format_rejects, 0u);
  EXPECT_EQ(st.remote.breaker, "closed");
  EXPECT_NE(redis_cli(redis_.port, {"INFO", "stats"}).find("evicted_keys:"), std::string::npos);
}

TEST(RemoteTierCluster, SharesThroughAThreeNodeCluster) {
  if (!redis_available()) GTEST_SKIP() << kRedisMissing;
  RedisTempDir dir;
  RedisCluster cluster = start_redis_cluster(dir.path / "cluster", 3);
  RedisClusterGuard stop(cluster);  // stopped by PID even when an assertion ends the test early
  ASSERT_TRUE(cluster.ok());
  const KvFormat f = test_format(4, 4, 16);
  auto a = open_store(remote_options(cluster.seeds()), f);
  std::vector<uint64_t> docs;
  for (uint64_t d = 1; d <= 12; ++d) docs.push_back(d);
  insert_path(*a, f, docs, 40);
  a->drain_writes();
  EXPECT_EQ(a->stats().remote.puts, docs.size());
  // The pieces of the 12 segments landed on more than one node.
  int nodes_with_keys = 0;
  for (const auto& n : cluster.nodes) nodes_with_keys += redis_cli(n.port, {"DBSIZE"}) != "0";
  EXPECT_GE(nodes_with_keys, 2);
  auto b = open_store(remote_options(cluster.seeds()), f);
  auto h = load_missing(*b, docs);
  for (size_t i = 0; i < docs.size(); ++i) {
    ASSERT_TRUE(h->node_ok(i)) << i;
    expect_kv(*h->segment(i), f, docs[i]);
  }
}


// A slot migrated while replicas read: every load is exact (MOVED / ASK followed), none errors.
TEST(RemoteTierCluster, KeepsServingWhileASlotMigrates) {
  if (!redis_available()) GTEST_SKIP() << kRedisMissing;
  RedisTempDir dir;
  RedisCluster cluster = start_redis_cluster(dir.path / "cluster", 3);
  RedisClusterGuard stop(cluster);  // stopped by PID even when an assertion ends the test early
  ASSERT_TRUE(cluster.ok());
  const KvFormat f = test_format(4, 4, 16);
  auto a = open_store(remote_options(cluster.seeds()), f);
  std::vector<uint64_t> docs;
  for (uint64_t d = 1; d <= 8; ++d) docs.push_back(d);
  insert_path(*a, f, docs, 77);  // 3 pieces per segment
  a->drain_writes();
  ASSERT_EQ(a->stats().remote.puts, docs.size());
  // The slot of node 4's segment (its hash tag), its owner and another node.
  Hash128 key = tree_scope_key(f, "");
  for (size_t i = 0; i < 4; ++i) key = child_key(key, dk(docs[i]));
  const std::string slot = std::to_string(redis_key_slot("{" + key.to_hex() + "}"));
  int src = -1, dst = -1;
  std::string src_id, dst_id;
  for (const auto& n : cluster.nodes) {
    const std::string id = redis_cli(n.port, {"CLUSTER", "MYID"});
    if (src < 0 && redis_cli(n.port, {"CLUSTER", "COUNTKEYSINSLOT", slot}) != "0") {
      src = n.port;
      src_id = id;
    } else if (dst < 0) {
      dst = n.port;
      dst_id = id;
    }
  }
  ASSERT_GT(src, 0);
  ASSERT_GT(dst, 0);
  auto check = [&](const char* when) {
    auto b = open_store(remote_options(cluster.seeds()), f);  // nothing local: every node from Redis
    auto h = load_missing(*b, docs);
    for (size_t i = 0; i < docs.size(); ++i) {
      ASSERT_TRUE(h->node_ok(i)) << when << ": node " << i << ": " << h->status().to_string();
      expect_kv(*h->segment(i), f, docs[i]);
    }
    EXPECT_EQ(b->stats().remote.errors, 0u) << when;
  };
  ASSERT_EQ(redis_cli(dst, {"CLUSTER", "SETSLOT", slot, "IMPORTING", src_id}), "OK");
  ASSERT_EQ(redis_cli(src, {"CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id}), "OK");
  check("migrating, nothing moved");
  // Move one piece, read (ASK for it), then the rest.
  auto move = [&](int count) {
    std::string out = redis_cli(src, {"CLUSTER", "GETKEYSINSLOT", slot, std::to_string(count)});
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(dst), "", "0", "5000", "KEYS"};
    size_t n = 0;
    for (size_t at = 0; at < out.size();) {
      size_t e = out.find('\n', at);
      if (e == std::string::npos) e = out.size();
      if (e > at) {
        args.push_back(out.substr(at, e - at));
        ++n;
      }
      at = e + 1;
    }
    if (n > 0) EXPECT_EQ(redis_cli(src, args), "OK");
    return n;
  };
  ASSERT_EQ(move(1), 1u);
  check("one piece moved");
  while (move(10) > 0) {
  }
  for (const auto& n : cluster.nodes) ASSERT_EQ(redis_cli(n.port, {"CLUSTER", "SETSLOT", slot, "NODE", dst_id}), "OK");
  check("slot moved");
  // Writes after the move land on the new owner.
  insert_path(*a, f, {1, 2, 3, 4, 99}, 77);
  a->drain_writes();
  EXPECT_EQ(a->stats().remote.puts_dropped, 0u);
}

}  // namespace
}  // namespace ragd::kvstore
