// RedisClient against real redis-server processes (single server and a 3-node cluster), started
// and stopped by PID here. Skips when /usr/bin/redis-server is missing.
#include "ragd/kvstore/redis_client.h"

#include <chrono>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "redis_test_util.h"

namespace ragd::kvstore {
namespace {

using namespace std::chrono_literals;
using testing::RedisCluster;
using testing::RedisClusterGuard;
using testing::RedisGuard;
using testing::RedisProcess;
using testing::RedisTempDir;

#define SKIP_WITHOUT_REDIS() \
  if (!testing::redis_available()) GTEST_SKIP() << testing::kRedisMissing

using Clock = std::chrono::steady_clock;
using KV = std::pair<std::string, std::string>;

std::unique_ptr<RedisClient> must_connect(const std::string& spec, std::chrono::milliseconds timeout) {
  auto seeds = parse_redis_urls(spec);
  EXPECT_TRUE(seeds.ok()) << seeds.status().to_string();
  if (!seeds.ok()) return nullptr;
  RedisOptions o;
  o.seeds = *seeds;
  o.timeout = timeout;
  auto c = RedisClient::connect(o);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  return c.ok() ? std::move(c).value() : nullptr;
}

std::string url(int port) { return "redis://127.0.0.1:" + std::to_string(port); }

std::string random_bytes(std::mt19937_64& rng, size_t n) {
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(rng() & 0xff);
  for (size_t i = 0; i < n; i += 97) s[i] = '\0';  // zero bytes on purpose, including the first
  return s;
}

std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) {
    if (!l.empty() && l.back() == '\r') l.pop_back();
    if (!l.empty()) out.push_back(l);
  }
  return out;
}

long long elapsed_ms(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
}

// ---------------------------------------------------------------------------------------------
// Parsing and slots (no server).

TEST(RedisUrlTest, ParsesSingleAndList) {
  auto one = parse_redis_urls("redis://127.0.0.1:7001");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  ASSERT_EQ(one->size(), 1u);
  EXPECT_EQ((*one)[0].host, "127.0.0.1");
  EXPECT_EQ((*one)[0].port, 7001);
  EXPECT_EQ((*one)[0].to_string(), "127.0.0.1:7001");

  auto list = parse_redis_urls("redis://a.example:1, b:65535 ,redis://c/,[::1]:6380,redis://d");
  ASSERT_TRUE(list.ok()) << list.status().to_string();
  ASSERT_EQ(list->size(), 5u);
  EXPECT_EQ((*list)[0].to_string(), "a.example:1");
  EXPECT_EQ((*list)[1].to_string(), "b:65535");
  EXPECT_EQ((*list)[2].to_string(), "c:6379");  // default port
  EXPECT_EQ((*list)[3].host, "::1");
  EXPECT_EQ((*list)[3].to_string(), "[::1]:6380");
  EXPECT_EQ((*list)[4].port, 6379);
}

TEST(RedisUrlTest, RejectsBadSpecsNamingTheProblem) {
  struct Case {
    const char* spec;
    const char* says;
  };
  const Case cases[] = {
      {"", "empty spec"},
      {"   ", "empty spec"},
      {"http://h:1", "scheme 'http'"},
      {"rediss://h:1", "scheme 'rediss'"},
      {"redis://:6379", "empty host"},
      {"redis://h:", "empty port"},
      {"redis://h:0", "port 0 out of range"},
      {"redis://h:65536", "port 65536 out of range"},
      {"redis://h:-1", "out of range"},
      {"redis://h:12ab", "'12ab' is not a number"},
      {"redis://h:1,,redis://g:2", "empty entry"},
      {"redis://h:1,", "empty entry"},
      {"redis://user:pw@h:1", "credentials"},
      {"redis://h:1/3", "database"},
      {"redis://[::1:6379", "unterminated"},
      {"::1:6379", "IPv6"},
  };
  for (const Case& c : cases) {
    auto r = parse_redis_urls(c.spec);
    ASSERT_FALSE(r.ok()) << "accepted '" << c.spec << "'";
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << c.spec;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos)
        << "spec '" << c.spec << "': message '" << r.status().message() << "' does not say '" << c.says << "'";
  }
  // The bad entry of a list is the one named.
  auto r = parse_redis_urls("redis://good:1,redis://bad:99999");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("redis://bad:99999"), std::string::npos) << r.status().message();
}

TEST(RedisKeySlotTest, KnownValuesAndHashTags) {
  // From the Redis Cluster specification and CLUSTER KEYSLOT documentation.
  EXPECT_EQ(redis_key_slot("foo"), 12182);
  EXPECT_EQ(redis_key_slot("somekey"), 11058);
  EXPECT_EQ(redis_key_slot("foo{hash_tag}"), 2515);
  EXPECT_EQ(redis_key_slot("bar{hash_tag}"), 2515);
  EXPECT_EQ(redis_key_slot("123456789"), 0x31C3);  // CRC16-XMODEM check value, < 16384
  EXPECT_EQ(redis_key_slot(""), 0);
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("{user1000}.followers"));
  EXPECT_EQ(redis_key_slot("{user1000}.following"), redis_key_slot("user1000"));
  EXPECT_NE(redis_key_slot("foo{}{bar}"), redis_key_slot("bar"));  // empty first tag: whole key
  EXPECT_EQ(redis_key_slot("foo{{bar}}zap"), redis_key_slot("{bar"));
  EXPECT_EQ(redis_key_slot("foo{bar}{zap}"), redis_key_slot("bar"));
  EXPECT_NE(redis_key_slot("{unterminated"), redis_key_slot("unterminated"));
}

// The constants agree with a real cluster-enabled server's CLUSTER KEYSLOT on random binary keys.
TEST(RedisKeySlotTest, MatchesServerKeyslot) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisProcess r = testing::start_redis(dir.path / "ks", testing::cluster_node_args());
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  auto c = must_connect(url(r.port), 1000ms);
  ASSERT_TRUE(c);
  std::mt19937_64 rng(1234);
  std::vector<std::string> keys = {"foo", "{user1000}.following", "foo{}{bar}", "foo{{bar}}zap", "a{b}c", "{}", "}{"};
  for (int i = 0; i < 60; ++i) {
    std::string k = random_bytes(rng, 1 + rng() % 40);
    if (i % 3 == 0) k.insert(rng() % k.size(), "{t" + std::to_string(i % 7) + "}");
    keys.push_back(k);
  }
  for (const std::string& k : keys) {
    const std::vector<std::string> args = {"CLUSTER", "KEYSLOT", k};
    auto s = c->command(args);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(*s, std::to_string(redis_key_slot(k)));
  }
}

// ---------------------------------------------------------------------------------------------
// Single server.

TEST(RedisSingleTest, BinaryRoundTripTtlAndReplies) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisProcess r = testing::start_redis(dir.path / "single");
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  auto c = must_connect(url(r.port), 2000ms);
  ASSERT_TRUE(c);
  EXPECT_FALSE(c->cluster());
  EXPECT_TRUE(c->ping().ok());

  std::mt19937_64 rng(42);
  const size_t sizes[] = {0, 1, 2, 7, 33, 129, 4096, 65537, 1u << 20, 2u << 20};
  std::vector<KV> kvs;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    std::string key = "{bin}:" + random_bytes(rng, 5) + std::to_string(i);  // binary key, one slot
    kvs.emplace_back(std::move(key), random_bytes(rng, sizes[i]));
  }
  ASSERT_TRUE(c->set_many(kvs, 0).ok());
  std::vector<std::string> keys;
  for (const auto& kv : kvs) keys.push_back(kv.first);
  keys.push_back("{bin}:missing");
  auto got = c->get_many(keys);
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  ASSERT_EQ(got->size(), keys.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    ASSERT_TRUE((*got)[i].has_value()) << "size " << sizes[i];
    EXPECT_TRUE(*(*got)[i] == kvs[i].second) << "value of size " << sizes[i] << " differs";
  }
  EXPECT_FALSE(got->back().has_value());

  // TTL: EX applied when ttl_s > 0, no expiry otherwise.
  const std::vector<KV> ttl_kv = {{"{ttl}:a", "x"}, {"{ttl}:b", "y"}};
  ASSERT_TRUE(c->set_many(ttl_kv, 100).ok());
  auto ttl = c->command(std::vector<std::string>{"TTL", "{ttl}:a"}, "{ttl}:a");
  ASSERT_TRUE(ttl.ok()) << ttl.status().to_string();
  EXPECT_GE(std::stoi(*ttl), 90);
  EXPECT_LE(std::stoi(*ttl), 100);
  auto no_ttl = c->command(std::vector<std::string>{"TTL", kvs[0].first});
  ASSERT_TRUE(no_ttl.ok());
  EXPECT_EQ(*no_ttl, "-1");

  // del_many counts the keys that existed.
  auto del = c->del_many(keys);
  ASSERT_TRUE(del.ok()) << del.status().to_string();
  EXPECT_EQ(*del, static_cast<int64_t>(kvs.size()));
  auto after = c->get_many(std::span(keys).first(2));
  ASSERT_TRUE(after.ok());
  EXPECT_FALSE((*after)[0].has_value());

  // command() rendering: status, integer, nil, array as lines.
  using Args = std::vector<std::string>;
  EXPECT_EQ(*c->command(Args{"PING"}), "PONG");
  EXPECT_EQ(*c->command(Args{"INCR", "counter"}), "1");
  EXPECT_EQ(*c->command(Args{"GET", "nope"}), "(nil)");
  ASSERT_TRUE(c->command(Args{"RPUSH", "list", "a", "b", "c"}).ok());
  EXPECT_EQ(*c->command(Args{"LRANGE", "list", "0", "-1"}), "a\nb\nc");

  // Error replies are IOError carrying Redis's message; the client stays usable.
  auto wrong = c->get_many(std::vector<std::string>{"list"});
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().code(), StatusCode::kIOError);
  EXPECT_NE(wrong.status().message().find("WRONGTYPE"), std::string::npos) << wrong.status().message();
  auto bad = c->command(Args{"NOSUCHCOMMAND"});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kIOError);
  EXPECT_NE(bad.status().message().find("unknown command"), std::string::npos) << bad.status().message();
  EXPECT_TRUE(c->ping().ok());

  const RedisClientStats st = c->stats();
  EXPECT_GE(st.commands, 20u);
  EXPECT_EQ(st.errors, 2u);
  EXPECT_EQ(st.moved + st.ask + st.reconnects, 0u);
}

TEST(RedisSingleTest, DifferentSlotBatchIsInvalidArgument) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisProcess r = testing::start_redis(dir.path / "single");
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  auto c = must_connect(url(r.port), 1000ms);
  ASSERT_TRUE(c);
  ASSERT_NE(redis_key_slot("a"), redis_key_slot("b"));
  const std::vector<KV> kvs = {{"{s}a", "1"}, {"{s}b", "2"}, {"c", "3"}};
  const Status st = c->set_many(kvs, 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
  EXPECT_NE(st.message().find("different slots"), std::string::npos) << st.message();
  const std::vector<std::string> keys = {"a", "b"};
  EXPECT_EQ(c->get_many(keys).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(c->del_many(keys).status().code(), StatusCode::kInvalidArgument);
  // Nothing was written.
  EXPECT_EQ(*c->command(std::vector<std::string>{"DBSIZE"}), "0");
  // Empty batches are no-ops.
  EXPECT_TRUE(c->set_many({}, 0).ok());
  EXPECT_TRUE(c->get_many({}).ok());
}

TEST(RedisSingleTest, KilledServerIsUnavailableWithinTimeoutThenReconnects) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisProcess r = testing::start_redis(dir.path / "k");
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  const auto timeout = 200ms;
  auto c = must_connect(url(r.port), timeout);
  ASSERT_TRUE(c);
  const std::vector<KV> kvs = {{"{k}1", "v1"}, {"{k}2", std::string(300000, 'z')}};
  const std::vector<std::string> keys = {"{k}1", "{k}2"};
  ASSERT_TRUE(c->set_many(kvs, 0).ok());

  testing::stop_redis(r.pid, SIGKILL);
  const int port = r.port;
  r.pid = -1;
  const long long bound = 3 * timeout.count() + 200;
  for (int i = 0; i < 3; ++i) {  // broken connection, then refused reconnects
    const auto t0 = Clock::now();
    auto g = c->get_many(keys);
    const long long ms = elapsed_ms(t0);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnavailable) << g.status().to_string();
    EXPECT_NE(g.status().message().find("127.0.0.1:" + std::to_string(port)), std::string::npos) << g.status().message();
    EXPECT_LT(ms, bound) << g.status().message();
    const auto t1 = Clock::now();
    EXPECT_EQ(c->set_many(kvs, 0).code(), StatusCode::kUnavailable);
    EXPECT_EQ(c->ping().code(), StatusCode::kUnavailable);
    EXPECT_LT(elapsed_ms(t1), 2 * bound);
  }

  // Same port again: the same client reconnects (the data is gone: no persistence).
  r = testing::start_redis(dir.path / "k", {}, port);
  ASSERT_GT(r.pid, 0);
  auto g = c->get_many(keys);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_FALSE((*g)[0].has_value());
  ASSERT_TRUE(c->set_many(kvs, 0).ok());
  g = c->get_many(keys);
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(*(*g)[1], kvs[1].second);
  EXPECT_GE(c->stats().reconnects, 1u);
  EXPECT_GE(c->stats().errors, 9u);
}

// A stopped (SIGSTOP) server accepts TCP connections but never answers: the reply timeout bounds
// every call, on the old connection and on a fresh one.
TEST(RedisSingleTest, UnresponsiveServerCostsAboutTheTimeout) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisProcess r = testing::start_redis(dir.path / "s");
  RedisGuard guard(r);
  ASSERT_GT(r.pid, 0);
  const auto timeout = 150ms;
  auto c = must_connect(url(r.port), timeout);
  ASSERT_TRUE(c);
  const std::vector<KV> kvs = {{"{s}1", "v1"}};
  const std::vector<std::string> keys = {"{s}1"};
  ASSERT_TRUE(c->set_many(kvs, 0).ok());

  ASSERT_EQ(::kill(r.pid, SIGSTOP), 0);
  const long long bound = 3 * timeout.count() + 200;
  for (int i = 0; i < 2; ++i) {
    const auto t0 = Clock::now();
    auto g = c->get_many(keys);
    const long long ms = elapsed_ms(t0);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnavailable) << g.status().to_string();
    EXPECT_NE(g.status().message().find("no reply within 150 ms"), std::string::npos) << g.status().message();
    EXPECT_GE(ms, timeout.count() - 20);
    EXPECT_LT(ms, bound);
  }
  const auto t0 = Clock::now();
  EXPECT_EQ(c->ping().code(), StatusCode::kUnavailable);
  EXPECT_LT(elapsed_ms(t0), bound);

  ASSERT_EQ(::kill(r.pid, SIGCONT), 0);
  auto g = c->get_many(keys);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(*(*g)[0], "v1");
}

TEST(RedisSingleTest, NoSeedAnswersIsUnavailableWithinTimeout) {
  SKIP_WITHOUT_REDIS();
  RedisOptions o;
  o.timeout = 150ms;
  o.seeds = {{"127.0.0.1", testing::free_port()}, {"10.255.255.1", 6379}};  // refused; unroutable or blackholed
  const auto t0 = Clock::now();
  auto c = RedisClient::connect(o);
  const long long ms = elapsed_ms(t0);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("10.255.255.1:6379"), std::string::npos) << c.status().message();
  EXPECT_LT(ms, 3 * o.timeout.count() + 200) << c.status().message();
  o.seeds.clear();
  EXPECT_EQ(RedisClient::connect(o).status().code(), StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Cluster.

// Map of node id -> port for a started cluster.
std::map<std::string, int> node_ids(const RedisCluster& cl) {
  std::map<std::string, int> ids;
  for (const auto& n : cl.nodes) ids[testing::redis_cli(n.port, {"CLUSTER", "MYID"})] = n.port;
  return ids;
}

TEST(RedisClusterTest, SpreadsKeysAndFollowsASlotMigration) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  RedisCluster cl = testing::start_redis_cluster(dir.path, 3);
  RedisClusterGuard guard(cl);
  ASSERT_TRUE(cl.ok());
  auto c = must_connect(cl.seeds(), 1000ms);
  ASSERT_TRUE(c);
  ASSERT_TRUE(c->cluster());
  EXPECT_TRUE(c->ping().ok());

  std::mt19937_64 rng(7);
  std::map<std::string, std::string> model;
  for (int t = 0; t < 60; ++t) {
    std::vector<KV> kvs;
    for (int i = 0; i < 4; ++i) {
      kvs.emplace_back("{seg" + std::to_string(t) + "}:" + std::to_string(i), random_bytes(rng, 1 + rng() % 3000));
    }
    ASSERT_TRUE(c->set_many(kvs, 0).ok());
    for (auto& kv : kvs) model[kv.first] = kv.second;
  }
  for (const auto& n : cl.nodes) {
    EXPECT_GT(std::stoll(testing::redis_cli(n.port, {"DBSIZE"})), 0) << "node " << n.port << " holds no key";
  }
  for (int t = 0; t < 60; ++t) {
    std::vector<std::string> keys;
    for (int i = 0; i < 4; ++i) keys.push_back("{seg" + std::to_string(t) + "}:" + std::to_string(i));
    auto g = c->get_many(keys);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    for (size_t i = 0; i < keys.size(); ++i) EXPECT_EQ((*g)[i], model[keys[i]]);
  }
  EXPECT_EQ(c->stats().moved + c->stats().ask, 0u);

  // Migrate the slot of {mig} to another node while the client reads and writes its keys.
  const std::string tag = "{mig}";
  const std::string slot = std::to_string(redis_key_slot(tag));
  std::vector<std::string> mig_keys;
  std::map<std::string, std::string> mig;
  for (int i = 0; i < 40; ++i) mig_keys.push_back(tag + ":" + std::to_string(i));
  {
    std::vector<KV> kvs;
    for (const auto& k : mig_keys) kvs.emplace_back(k, random_bytes(rng, 1 + rng() % 5000));
    ASSERT_TRUE(c->set_many(kvs, 0).ok());
    for (auto& kv : kvs) mig[kv.first] = kv.second;
  }
  auto src_id = c->command(std::vector<std::string>{"CLUSTER", "MYID"}, tag);
  ASSERT_TRUE(src_id.ok()) << src_id.status().to_string();
  const auto ids = node_ids(cl);
  ASSERT_EQ(ids.size(), 3u);
  ASSERT_TRUE(ids.count(*src_id));
  const int src = ids.at(*src_id);
  std::string dst_id;
  for (const auto& [id, port] : ids) {
    if (id != *src_id) dst_id = id;
  }
  const int dst = ids.at(dst_id);

  auto check_all = [&](const char* when) {
    std::vector<std::string> keys;
    for (const auto& [k, _] : mig) keys.push_back(k);
    auto g = c->get_many(keys);  // one batch: some keys on the source, some on the target
    ASSERT_TRUE(g.ok()) << when << ": " << g.status().to_string();
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE((*g)[i].has_value()) << when << ": " << keys[i] << " missing";
      EXPECT_TRUE(*(*g)[i] == mig[keys[i]]) << when << ": " << keys[i] << " has a wrong value";
    }
  };
  auto migrate_some = [&](int count) {
    const auto keys = lines(testing::redis_cli(src, {"CLUSTER", "GETKEYSINSLOT", slot, std::to_string(count)}));
    if (keys.empty()) return 0;
    std::vector<std::string> args = {"MIGRATE", "127.0.0.1", std::to_string(dst), "", "0", "5000", "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    EXPECT_EQ(testing::redis_cli(src, args), "OK");
    return static_cast<int>(keys.size());
  };

  ASSERT_EQ(testing::redis_cli(dst, {"CLUSTER", "SETSLOT", slot, "IMPORTING", *src_id}), "OK");
  ASSERT_EQ(testing::redis_cli(src, {"CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id}), "OK");
  check_all("migrating, nothing moved yet");
  ASSERT_EQ(migrate_some(15), 15);
  check_all("15 keys moved");
  EXPECT_GT(c->stats().ask, 0u);

  // Writes mid-migration: existing keys on either side, and new keys (which go to the target).
  {
    std::vector<KV> kvs;
    for (int i = 0; i < 50; i += 3) {
      kvs.emplace_back(tag + ":" + std::to_string(i), random_bytes(rng, 1 + rng() % 2000));
    }
    ASSERT_TRUE(c->set_many(kvs, 0).ok());
    for (auto& kv : kvs) mig[kv.first] = kv.second;
  }
  check_all("after writes mid-migration");
  while (migrate_some(7) > 0) check_all("migrating");
  for (const auto& n : cl.nodes) {
    ASSERT_EQ(testing::redis_cli(n.port, {"CLUSTER", "SETSLOT", slot, "NODE", dst_id}), "OK");
  }
  const uint64_t moved_before = c->stats().moved;
  check_all("slot moved");
  EXPECT_GT(c->stats().moved, moved_before);
  auto owner = c->command(std::vector<std::string>{"CLUSTER", "MYID"}, tag);
  ASSERT_TRUE(owner.ok());
  EXPECT_EQ(*owner, dst_id);
  EXPECT_EQ(testing::redis_cli(dst, {"CLUSTER", "COUNTKEYSINSLOT", slot}), std::to_string(mig.size()));
  EXPECT_EQ(testing::redis_cli(src, {"CLUSTER", "COUNTKEYSINSLOT", slot}), "0");

  // The rest of the data is untouched, and deletes route to the new owner.
  auto del = c->del_many(std::span(mig_keys).first(10));
  ASSERT_TRUE(del.ok()) << del.status().to_string();
  EXPECT_EQ(*del, 10);
  for (int t = 0; t < 60; t += 7) {
    const std::string k = "{seg" + std::to_string(t) + "}:1";
    auto g = c->get_many(std::vector<std::string>{k});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ((*g)[0], model[k]);
  }
  EXPECT_GE(c->stats().slot_reloads, 2u);
  EXPECT_TRUE(c->ping().ok());
}

TEST(RedisClusterTest, KilledNodeIsUnavailableOthersServeThenReconnects) {
  SKIP_WITHOUT_REDIS();
  RedisTempDir dir;
  const std::vector<std::string> extra = {"--cluster-require-full-coverage", "no"};
  RedisCluster cl = testing::start_redis_cluster(dir.path, 3, extra);
  RedisClusterGuard guard(cl);
  ASSERT_TRUE(cl.ok());
  const auto timeout = 200ms;
  auto c = must_connect(cl.seeds(), timeout);
  ASSERT_TRUE(c);
  const auto ids = node_ids(cl);

  // One tag on the victim, one elsewhere.
  const std::string victim_tag = "{victim}";
  auto victim_id = c->command(std::vector<std::string>{"CLUSTER", "MYID"}, victim_tag);
  ASSERT_TRUE(victim_id.ok()) << victim_id.status().to_string();
  std::string other_tag;
  for (int i = 0; other_tag.empty() && i < 100; ++i) {
    const std::string t = "{other" + std::to_string(i) + "}";
    auto id = c->command(std::vector<std::string>{"CLUSTER", "MYID"}, t);
    ASSERT_TRUE(id.ok());
    if (*id != *victim_id) other_tag = t;
  }
  ASSERT_FALSE(other_tag.empty());
  const std::vector<KV> vkv = {{victim_tag + "a", "va"}};
  const std::vector<KV> okv = {{other_tag + "a", "oa"}};
  ASSERT_TRUE(c->set_many(vkv, 0).ok());
  ASSERT_TRUE(c->set_many(okv, 0).ok());

  size_t vi = 0;
  for (; vi < cl.nodes.size() && cl.nodes[vi].port != ids.at(*victim_id); ++vi) {
  }
  ASSERT_LT(vi, cl.nodes.size());
  RedisProcess& victim = cl.nodes[vi];
  testing::stop_redis(victim.pid, SIGKILL);
  victim.pid = -1;

  const long long bound = 3 * timeout.count() + 200;
  for (int i = 0; i < 2; ++i) {
    const auto t0 = Clock::now();
    auto g = c->get_many(std::vector<std::string>{victim_tag + "a"});
    const long long ms = elapsed_ms(t0);
    ASSERT_FALSE(g.ok());
    EXPECT_EQ(g.status().code(), StatusCode::kUnavailable) << g.status().to_string();
    EXPECT_NE(g.status().message().find(std::to_string(victim.port)), std::string::npos) << g.status().message();
    EXPECT_LT(ms, bound) << g.status().message();
    auto o = c->get_many(std::vector<std::string>{other_tag + "a"});
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_EQ((*o)[0], "oa");
  }
  EXPECT_EQ(c->ping().code(), StatusCode::kUnavailable);

  // Restart on the same port and directory: it rejoins with its nodes.conf; the client reconnects.
  victim = testing::start_redis(victim.dir, testing::cluster_node_args(extra), victim.port);
  ASSERT_GT(victim.pid, 0);
  const auto deadline = Clock::now() + 10s;
  Status st;
  while (Clock::now() < deadline) {
    st = c->set_many(vkv, 0);
    if (st.ok()) break;
    std::this_thread::sleep_for(50ms);
  }
  ASSERT_TRUE(st.ok()) << st.to_string();
  auto g = c->get_many(std::vector<std::string>{victim_tag + "a"});
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ((*g)[0], "va");
  EXPECT_GE(c->stats().reconnects, 1u);
}

}  // namespace
}  // namespace ragd::kvstore
