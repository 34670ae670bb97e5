// KV events: the msgpack writer and the EventBatch layout as the reference Python msgpack decodes
// them, the block mapping, and a store publishing over real ZMQ sockets to a subscriber written
// per vLLM's definitions (kv_events_sub.py), live and by replay.
#include "ragd/kvstore/kv_events.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <chrono>
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "../../kvstore/src/msgpack_writer.h"
#include "kv_test_util.h"
#include "redis_test_util.h"
#include "ragd/kvstore/keys.h"
#include "ragd/kvstore/kv_store.h"

namespace ragd::kvstore {
namespace {

constexpr const char* kPython = "/usr/bin/python3";  // Debian's, with python3-zmq and python3-msgpack
constexpr const char* kSub = RAGD_KV_EVENTS_SUB;
// Subscribers run under a bound: a hung one fails its check in seconds instead of holding the test.
constexpr const char* kBounded = "timeout -k 5 90";

bool python_ready() {
  static const bool ok =
      std::system(fmt::format("{} -c 'import zmq, msgpack' >/dev/null 2>&1", kPython).c_str()) == 0;
  return ok;
}
#define SKIP_WITHOUT_PYTHON()                                                                                 \
  if (!python_ready())                                                                                       \
  GTEST_SKIP() << kPython << " lacks the zmq or msgpack module (Debian: python3-zmq python3-msgpack); the " \
                              "reference decoder is needed for this check"

std::string temp_path(const std::string& name) {
  return fmt::format("{}/ragd_kv_events_{}_{}", ::testing::TempDir(), ::getpid(), name);
}

// Runs a command, returns (exit status, stdout).
std::pair<int, std::string> run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  char buf[4096];
  while (size_t n = std::fread(buf, 1, sizeof buf, p)) out.append(buf, n);
  const int st = ::pclose(p);
  return {WIFEXITED(st) ? WEXITSTATUS(st) : -1, out};
}

std::string decode_with_python(const std::string& bytes) {
  const std::string f = temp_path("blob.msgpack");
  std::ofstream(f, std::ios::binary) << bytes;
  auto [rc, out] = run(fmt::format("{} {} decode {}", kPython, kSub, f));
  std::remove(f.c_str());
  EXPECT_EQ(rc, 0) << out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}

TEST(KvEvents, MsgpackWriterMatchesPythonMsgpack) {
  SKIP_WITHOUT_PYTHON();
  MsgpackWriter w;
  std::string want = "[";
  auto add = [&](const std::string& json) { want += (want.size() > 1 ? ", " : "") + json; };
  w.array(33);
  w.nil(), add("null");
  w.boolean(true), add("true");
  w.boolean(false), add("false");
  for (uint64_t v : {0ull, 127ull, 128ull, 255ull, 256ull, 65535ull, 65536ull, 4294967295ull, 4294967296ull,
                     18446744073709551615ull}) {
    w.uint(v);
    add(std::to_string(v));
  }
  for (int64_t v : {int64_t{-1}, int64_t{-32}, int64_t{-33}, int64_t{-128}, int64_t{-129}, int64_t{-32768},
                    int64_t{-32769}, int64_t{-2147483648LL}, int64_t{-2147483649LL}, INT64_MIN, int64_t{5}}) {
    w.integer(v);
    add(std::to_string(v));
  }
  w.float64(1.5), add("1.5");
  w.float64(-0.25), add("-0.25");
  w.str(""), add("\"\"");
  w.str("abc"), add("\"abc\"");
  w.str(std::string(40, 'x')), add("\"" + std::string(40, 'x') + "\"");
  w.str(std::string(300, 'y')), add("\"" + std::string(300, 'y') + "\"");
  const unsigned char bin[] = {1, 2, 255};
  w.bin(bin, 3), add(R"({"bin": "0102ff"})");
  w.array(20);
  std::string arr = "[";
  for (int i = 0; i < 20; ++i) {
    w.integer(i);
    arr += (i ? ", " : "") + std::to_string(i);
  }
  add(arr + "]");
  w.map(1).str("a").uint(1), add(R"({"a": 1})");
  want += "]";
  // Decodes to the same values, and the reference packer picks the same (smallest) encodings.
  EXPECT_EQ(decode_with_python(w.data()), R"({"value": )" + want + R"(, "same_bytes_when_repacked": true})");
}

TEST(KvEvents, EventBatchLayoutIsVllms) {
  SKIP_WITHOUT_PYTHON();
  std::vector<KvEvent> ev(4);
  ev[0].kind = KvEvent::Kind::kBlockStored;
  ev[0].block_hashes = {18446744073709551615ull, 7};
  ev[0].token_ids = {1, 2, 3, 4};
  ev[0].block_size = 2;
  ev[0].medium = "GPU";
  ev[1] = ev[0];
  ev[1].parent_block_hash = 7;
  ev[1].medium = "CPU";
  ev[2].kind = KvEvent::Kind::kBlockRemoved;
  ev[2].block_hashes = {9};
  ev[2].medium = "DISK";
  ev[3].kind = KvEvent::Kind::kAllBlocksCleared;
  EXPECT_EQ(decode_with_python(encode_event_batch(1700000000.5, ev)),
            R"({"value": [1700000000.5, [["BlockStored", [18446744073709551615, 7], null, [1, 2, 3, 4], 2, null, "GPU"], )"
            R"(["BlockStored", [18446744073709551615, 7], 7, [1, 2, 3, 4], 2, null, "CPU"], ["BlockRemoved", [9], "DISK"], )"
            R"(["AllBlocksCleared"]], 0], "same_bytes_when_repacked": true})");
}

// ---- block mapping -----------------------------------------------------------------------------

const Hash128 kScope{0x1234, 0x5678};

std::vector<int32_t> seq_tokens(int n, int32_t base = 1000) {
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) t[static_cast<size_t>(i)] = base + i;
  return t;
}

TEST(KvEvents, NodeOwnsTheBlocksEndingInItsTokens) {
  const auto t = seq_tokens(64);
  std::span<const int32_t> all(t);
  // Root node of 20 tokens: block [0,16), tail [16,20).
  NodeBlocks a = map_node_blocks({}, all.subspan(0, 20), 16, kScope);
  ASSERT_EQ(a.hashes.size(), 1u);
  EXPECT_FALSE(a.parent_hash.has_value());
  EXPECT_EQ(a.hashes[0], event_block_hash(std::nullopt, all.subspan(0, 16), kScope));
  EXPECT_EQ(a.token_ids, std::vector<int32_t>(t.begin(), t.begin() + 16));
  EXPECT_EQ(a.end.tail, std::vector<int32_t>(t.begin() + 16, t.begin() + 20));
  // Child of 13 tokens [20,33): block [16,32) straddles the parent; tail [32,33).
  NodeBlocks b = map_node_blocks(a.end, all.subspan(20, 13), 16, kScope);
  ASSERT_EQ(b.hashes.size(), 1u);
  EXPECT_EQ(b.parent_hash, a.hashes[0]);
  EXPECT_EQ(b.hashes[0], event_block_hash(a.hashes[0], all.subspan(16, 16), kScope));
  EXPECT_EQ(b.token_ids, std::vector<int32_t>(t.begin() + 16, t.begin() + 32));
  EXPECT_EQ(b.end.tail.size(), 1u);
  // A short node [33,40) completes no block: its tail accumulates, the chain end stays.
  NodeBlocks c = map_node_blocks(b.end, all.subspan(33, 7), 16, kScope);
  EXPECT_TRUE(c.hashes.empty());
  EXPECT_EQ(c.end.last_hash, b.hashes[0]);
  EXPECT_EQ(c.end.tail, std::vector<int32_t>(t.begin() + 32, t.begin() + 40));
  // Its child [40,64) completes [32,48) and [48,64), chained from b's block.
  NodeBlocks d = map_node_blocks(c.end, all.subspan(40, 24), 16, kScope);
  ASSERT_EQ(d.hashes.size(), 2u);
  EXPECT_EQ(d.parent_hash, b.hashes[0]);
  EXPECT_EQ(d.hashes[0], event_block_hash(b.hashes[0], all.subspan(32, 16), kScope));
  EXPECT_EQ(d.hashes[1], event_block_hash(d.hashes[0], all.subspan(48, 16), kScope));
  EXPECT_TRUE(d.end.tail.empty());
  // Another scope (the chunk cache, a tenant) hashes differently.
  EXPECT_NE(map_node_blocks({}, all.subspan(0, 16), 16, Hash128{1, 1}).hashes[0], a.hashes[0]);
}

TEST(KvEvents, AnySplitOfAPathGivesTheSameBlocks) {
  std::mt19937 rng(7);
  const auto t = seq_tokens(300);
  const NodeBlocks whole = map_node_blocks({}, t, 16, kScope);
  ASSERT_EQ(whole.hashes.size(), 300u / 16);
  for (int trial = 0; trial < 50; ++trial) {
    BlockChainEnd at;
    std::vector<uint64_t> hashes;
    std::vector<int32_t> tokens;
    for (size_t pos = 0; pos < t.size();) {
      const size_t n = std::min(t.size() - pos, static_cast<size_t>(1 + rng() % 40));
      NodeBlocks nb = map_node_blocks(at, std::span<const int32_t>(t).subspan(pos, n), 16, kScope);
      EXPECT_EQ(nb.parent_hash, hashes.empty() ? std::nullopt : std::optional<uint64_t>(hashes.back()));
      hashes.insert(hashes.end(), nb.hashes.begin(), nb.hashes.end());
      tokens.insert(tokens.end(), nb.token_ids.begin(), nb.token_ids.end());
      at = nb.end;
      pos += n;
    }
    EXPECT_EQ(hashes, whole.hashes);
    EXPECT_EQ(tokens, whole.token_ids);
  }
}

TEST(KvEvents, TrackerChainsChildrenAndChunksStartOwnChains) {
  std::vector<KvEvent> out;
  KvEventTracker tr(16, [&](KvEvent e) { out.push_back(std::move(e)); });
  const auto t = seq_tokens(40);
  std::span<const int32_t> all(t);
  const Hash128 root = kScope, ka{1, 1}, kb{2, 2}, kc{3, 3}, orphan{4, 4}, chunk_root{9, 9}, kchunk{5, 5};
  tr.set_tokens(ka, root, true, root, all.subspan(0, 20), false);
  tr.set_tokens(kb, ka, false, root, all.subspan(20, 20), false);
  tr.set_tokens(kc, orphan, false, root, all.subspan(0, 20), false);  // parent unknown: not tracked
  tr.set_tokens(kchunk, chunk_root, true, chunk_root, all.subspan(20, 20), false);
  ASSERT_NE(tr.blocks(kb), nullptr);
  EXPECT_EQ(tr.blocks(kc), nullptr);
  EXPECT_EQ(tr.blocks(kb)->parent_hash, tr.blocks(ka)->hashes.back());
  EXPECT_FALSE(tr.blocks(kchunk)->parent_hash.has_value());
  EXPECT_EQ(tr.blocks(kchunk)->token_ids, std::vector<int32_t>(t.begin() + 20, t.begin() + 36));

  TreeNodeInfo a;
  a.key = ka;
  a.tiers = tier_bit(Tier::kHbm);
  tr.on_tier_change(a, Tier::kHbm, true);
  a.tiers |= tier_bit(Tier::kDram);
  tr.on_tier_change(a, Tier::kDram, true);
  a.tiers = tier_bit(Tier::kDram);
  tr.on_tier_change(a, Tier::kHbm, false);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_EQ(out[0].kind, KvEvent::Kind::kBlockStored);
  EXPECT_STREQ(out[0].medium, "GPU");
  EXPECT_STREQ(out[1].medium, "CPU");
  EXPECT_EQ(out[2].kind, KvEvent::Kind::kBlockRemoved);
  EXPECT_STREQ(out[2].medium, "GPU");
  // A resync re-announces what subscribers should hold after AllBlocksCleared.
  auto rs = tr.resync_events();
  ASSERT_EQ(rs.size(), 2u);
  EXPECT_EQ(rs[0].kind, KvEvent::Kind::kAllBlocksCleared);
  EXPECT_STREQ(rs[1].medium, "CPU");
  // Leaving the last tier forgets the entry.
  a.tiers = 0;
  tr.on_tier_change(a, Tier::kDram, false);
  EXPECT_EQ(tr.blocks(ka), nullptr);
  // A node never announced (entered no tier) emits nothing when it leaves.
  TreeNodeInfo c;
  c.key = kc;
  tr.on_tier_change(c, Tier::kSsd, true);
  EXPECT_EQ(out.size(), 4u);
}

// ---- a store publishing over ZMQ -----------------------------------------------------------------

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  RAGD_CHECK(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  const int port = ntohs(a.sin_port);
  ::close(fd);
  return port;
}


std::string json_ints(const std::vector<int32_t>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s + "]";
}

// CURVE keys of a publisher and its subscribers, in files as an operator keeps them.
struct CurveSetup {
  CurveKeyPair server, client, stranger;
  std::string secret_file, allowed_file;
};
CurveSetup make_curve_setup() {
  CurveSetup c;
  c.server = *make_curve_keypair();
  c.client = *make_curve_keypair();
  c.stranger = *make_curve_keypair();
  c.secret_file = temp_path("server.key");
  std::ofstream(c.secret_file) << c.server.secret_key << "\n";
  c.allowed_file = temp_path("allowed.keys");
  std::ofstream(c.allowed_file) << "# the router\n" << c.client.public_key << "\n\n";
  return c;
}

// A store publishes a path, an eviction and a second root; a live subscriber written per vLLM's
// definitions checks the stream, a late one replays it. With CURVE, only the allowed key gets
// anything: a plaintext subscriber and a stranger's key, live and by replay, get nothing.
void store_publishes_and_replays(bool curve, bool token_ids) {
  const KvFormat f = testing::test_format();
  const auto head = testing::doc_tokens(100, 20), a = testing::doc_tokens(101, 13), b = testing::doc_tokens(102, 31),
             c = testing::doc_tokens(103, 16);
  std::vector<int32_t> path = head;
  path.insert(path.end(), a.begin(), a.end());
  path.insert(path.end(), b.begin(), b.end());
  const int pub_port = free_port(), replay_port = free_port();

  const CurveSetup keys = curve ? make_curve_setup() : CurveSetup{};
  auto expectation = [&](const std::string& name, const CurveKeyPair* as, bool nothing) {
    const std::string file = temp_path(name);
    std::string extra;
    if (as)
      extra += fmt::format(R"(, "curve_server_key": "{}", "curve_public_key": "{}", "curve_secret_key": "{}")",
                           keys.server.public_key, as->public_key, as->secret_key);
    if (!token_ids) extra += R"(, "token_ids": false)";
    if (nothing) extra += R"(, "expect_nothing": true)";
    std::ofstream(file) << fmt::format(
        R"({{"block_size": 16, "path_tokens": {}, "extra_root_tokens": {}, "removed_after_eviction": true, "demoted_to_cpu": true, "topic": "kv@ragd", "timeout_s": {}{}}})",
        json_ints(path), json_ints(c), nothing ? 6 : 20, extra);
    return file;
  };
  const std::string expect = expectation("expect.json", curve ? &keys.client : nullptr, false);

  // The live subscribers join first (each says "ready" once connected).
  FILE* live = ::popen(fmt::format("{} {} {} live tcp://127.0.0.1:{} {}", kBounded, kPython, kSub, pub_port, expect).c_str(), "r");
  ASSERT_NE(live, nullptr);
  std::vector<FILE*> intruders;
  std::vector<std::string> intruder_files;
  if (curve) {
    intruder_files = {expectation("plain.json", nullptr, true), expectation("stranger.json", &keys.stranger, true)};
    for (const auto& f : intruder_files) {
      intruders.push_back(::popen(fmt::format("{} {} {} live tcp://127.0.0.1:{} {}", kBounded, kPython, kSub, pub_port, f).c_str(), "r"));
      ASSERT_NE(intruders.back(), nullptr);
    }
  }

  Options o;
  o.eviction = EvictionPolicy::kLru;
  o.hbm_bytes = segment_bytes(f, 20) + segment_bytes(f, 13) + segment_bytes(f, 31) + segment_bytes(f, 16) - 1;
  o.dram_bytes = 1 << 20;
  o.events.endpoint = fmt::format("tcp://*:{}", pub_port);
  o.events.replay_endpoint = fmt::format("tcp://*:{}", replay_port);
  o.events.topic = "kv@ragd";
  o.events.token_ids = token_ids;
  if (curve) {
    o.events.curve_secret_key_file = keys.secret_file;
    o.events.curve_allowed_clients_file = keys.allowed_file;
  }
  auto store = KvStore::open(o, f);
  ASSERT_TRUE(store.ok()) << store.status().to_string();
  KvStore& s = **store;

  char line[256] = {};
  ASSERT_NE(std::fgets(line, sizeof line, live), nullptr);
  ASSERT_STREQ(line, "ready\n");
  for (FILE* p : intruders) {
    ASSERT_NE(std::fgets(line, sizeof line, p), nullptr);
    ASSERT_STREQ(line, "ready\n");
  }

  const Hash128 dh = doc_key(head), da = doc_key(a), db = doc_key(b), dc = doc_key(c);
  const auto kh = testing::make_kv(f, 20, 1), ka = testing::make_kv(f, 13, 2), kb = testing::make_kv(f, 31, 3),
             kc = testing::make_kv(f, 16, 4);
  auto r0 = s.insert({}, dh, kh.data(0), {}, head);
  ASSERT_TRUE(r0.ok() && r0->outcome == KnowledgeTree::InsertOutcome::kInserted);
  const std::vector<Hash128> p1 = {dh}, p2 = {dh, da};
  auto r1 = s.insert(p1, da, ka.data(20), {}, a);
  ASSERT_TRUE(r1.ok() && r1->outcome == KnowledgeTree::InsertOutcome::kInserted);
  auto r2 = s.insert(p2, db, kb.data(33), {}, b);
  ASSERT_TRUE(r2.ok() && r2->outcome == KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_EQ(r2->tier, Tier::kHbm);
  // A second root path: the HBM tier is full, so the leaf b is evicted (demoted to DRAM).
  auto r3 = s.insert({}, dc, kc.data(0), {}, c);
  ASSERT_TRUE(r3.ok() && r3->outcome == KnowledgeTree::InsertOutcome::kInserted);
  EXPECT_GE(s.stats().tiers[0].evictions, 1u);

  std::string out;
  while (std::fgets(line, sizeof line, live)) out += line;
  const int st = ::pclose(live);
  EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0) << out;
  EXPECT_NE(out.find("ok live"), std::string::npos) << out;

  for (size_t i = 0; i < intruders.size(); ++i) {
    std::string iout;
    while (std::fgets(line, sizeof line, intruders[i])) iout += line;
    const int ist = ::pclose(intruders[i]);
    EXPECT_TRUE(WIFEXITED(ist) && WEXITSTATUS(ist) == 0) << intruder_files[i] << ": " << iout;
    EXPECT_NE(iout.find("ok nothing received"), std::string::npos) << iout;
  }

  // A late subscriber gets every batch again from the ROUTER, from seq 0.
  auto [rc, rout] = run(fmt::format("{} {} {} replay tcp://127.0.0.1:{} {}", kBounded, kPython, kSub, replay_port, expect));
  EXPECT_EQ(rc, 0) << rout;
  EXPECT_NE(rout.find("ok replay"), std::string::npos) << rout;
  for (const auto& file : intruder_files) {
    auto [irc, iout] = run(fmt::format("{} {} {} replay tcp://127.0.0.1:{} {}", kBounded, kPython, kSub, replay_port, file));
    EXPECT_EQ(irc, 0) << iout;
    EXPECT_NE(iout.find("ok nothing received"), std::string::npos) << file << ": " << iout;
  }

  const Stats stats = s.stats();
  EXPECT_GE(stats.kv_events_batches, 1u);
  EXPECT_GE(stats.kv_events_events, 6u);  // 4 path/root stores, 1 demotion store, 1 removal
  EXPECT_EQ(stats.kv_events_dropped, 0u);
  EXPECT_EQ(stats.kv_events_replays, 1u);  // intruders' replay requests never reach the ROUTER
  if (curve) EXPECT_GE(stats.kv_events_auth_denied, 2u);  // the stranger's key, live and replay
  else EXPECT_EQ(stats.kv_events_auth_denied, 0u);
  EXPECT_NE(stats.to_json().find(R"("kv_events":{"batches":)"), std::string::npos);
  s.close();
  std::remove(expect.c_str());
  for (const auto& file : intruder_files) std::remove(file.c_str());
}

TEST(KvEvents, StorePublishesPathEvictionAndReplaysToLateSubscriber) {
  SKIP_WITHOUT_PYTHON();
  store_publishes_and_replays(/*curve=*/false, /*token_ids=*/true);
}

TEST(KvEvents, CurveStreamReachesOnlyTheAllowedSubscriber) {
  SKIP_WITHOUT_PYTHON();
  store_publishes_and_replays(/*curve=*/true, /*token_ids=*/true);
}

TEST(KvEvents, TokenIdsCanBeLeftOut) {
  SKIP_WITHOUT_PYTHON();
  store_publishes_and_replays(/*curve=*/false, /*token_ids=*/false);
}

// ---- sockets -------------------------------------------------------------------------------------

// Publishes a one-event batch every 20 ms for `ms` and counts what `sub` receives.
int publish_and_count(KvEventPublisher& pub, zmq::socket_t& sub, int ms) {
  int got = 0;
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    KvEvent e;
    e.kind = KvEvent::Kind::kBlockRemoved;
    e.block_hashes = {42};
    pub.publish(e);
    zmq::pollitem_t item{sub.handle(), 0, ZMQ_POLLIN, 0};
    if (zmq::poll(&item, 1, std::chrono::milliseconds(20)) > 0) {
      std::vector<zmq::message_t> msg;
      while (zmq::recv_multipart(sub, std::back_inserter(msg), zmq::recv_flags::dontwait)) {
        EXPECT_EQ(msg.size(), 3u);
        ++got;
        msg.clear();
      }
    }
  }
  return got;
}

zmq::socket_t subscriber(zmq::context_t& ctx, const std::string& ep, const CurveKeyPair* client = nullptr,
                         const std::string& server_key = {}) {
  zmq::socket_t sub(ctx, zmq::socket_type::sub);
  sub.set(zmq::sockopt::linger, 0);
  sub.set(zmq::sockopt::subscribe, "");
  if (ep.find('[') != std::string::npos) sub.set(zmq::sockopt::ipv6, 1);
  if (client) {
    sub.set(zmq::sockopt::curve_serverkey, server_key);
    sub.set(zmq::sockopt::curve_publickey, client->public_key);
    sub.set(zmq::sockopt::curve_secretkey, client->secret_key);
  }
  sub.connect(ep);
  return sub;
}

bool ipv6_loopback() {
  const int fd = ::socket(AF_INET6, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in6 a{};
  a.sin6_family = AF_INET6;
  a.sin6_addr = in6addr_loopback;
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  ::close(fd);
  return ok;
}

// tcp://127.0.0.1:P is connected to under vLLM's rule; with mode bind it is served on loopback,
// and so is tcp://[::1]:P (which stopped the process with ENODEV without the IPv6 option).
TEST(KvEvents, BindsLoopbackOnlyEndpoints) {
  std::vector<std::string> eps = {fmt::format("tcp://127.0.0.1:{}", free_port())};
  if (ipv6_loopback()) eps.push_back(fmt::format("tcp://[::1]:{}", free_port()));
  for (const std::string& ep : eps) {
    SCOPED_TRACE(ep);
    KvEventsOptions o;
    o.endpoint = ep;
    o.mode = KvEventsSocketMode::kBind;
    auto pub = KvEventPublisher::start(o);
    ASSERT_TRUE(pub.ok()) << pub.status().to_string();
    zmq::context_t ctx;
    auto sub = subscriber(ctx, ep);
    EXPECT_GT(publish_and_count(**pub, sub, 1500), 0);
    (*pub)->stop();
  }
  // Under vLLM's rule a loopback address is connected to, not bound: nobody listens there.
  const std::string ep = fmt::format("tcp://127.0.0.1:{}", free_port());
  KvEventsOptions o;
  o.endpoint = ep;
  auto pub = KvEventPublisher::start(o);
  ASSERT_TRUE(pub.ok());
  EXPECT_TRUE(testing::port_bindable(std::stoi(ep.substr(ep.rfind(':') + 1)))) << "auto mode bound a loopback endpoint";
}

// The unauthorized: no key, the wrong server key, a key not in the allowed list. None receives a
// message while the allowed key receives them; the stranger's handshakes are counted.
TEST(KvEvents, CurveRefusesSubscribersWithoutAnAllowedKey) {
  const CurveSetup keys = make_curve_setup();
  KvEventsOptions o;
  o.endpoint = fmt::format("tcp://127.0.0.1:{}", free_port());
  o.mode = KvEventsSocketMode::kBind;
  o.curve_secret_key_file = keys.secret_file;
  o.curve_allowed_clients_file = keys.allowed_file;
  auto pub = KvEventPublisher::start(o);
  ASSERT_TRUE(pub.ok()) << pub.status().to_string();
  zmq::context_t ctx;
  const CurveKeyPair wrong_server = *make_curve_keypair();
  auto plain = subscriber(ctx, o.endpoint);
  auto wrong = subscriber(ctx, o.endpoint, &keys.client, wrong_server.public_key);
  auto stranger = subscriber(ctx, o.endpoint, &keys.stranger, keys.server.public_key);
  auto allowed = subscriber(ctx, o.endpoint, &keys.client, keys.server.public_key);
  EXPECT_GT(publish_and_count(**pub, allowed, 1500), 0);
  for (zmq::socket_t* s : {&plain, &wrong, &stranger}) EXPECT_EQ(publish_and_count(**pub, *s, 500), 0);
  EXPECT_GE((*pub)->counters().auth_denied, 1u);
  (*pub)->stop();
}

TEST(KvEvents, CurveConfigurationErrorsAreClear) {
  const CurveSetup keys = make_curve_setup();
  KvEventsOptions o;
  o.endpoint = fmt::format("tcp://127.0.0.1:{}", free_port());
  o.mode = KvEventsSocketMode::kBind;
  o.curve_secret_key_file = keys.secret_file;
  auto no_list = KvEventPublisher::start(o);
  ASSERT_FALSE(no_list.ok());
  EXPECT_NE(no_list.status().message().find("curve_allowed_clients_file"), std::string::npos);
  o.curve_allowed_clients_file = temp_path("bad.keys");
  std::ofstream(o.curve_allowed_clients_file) << keys.client.public_key << "\nnot-a-key\n";
  auto bad = KvEventPublisher::start(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("line 2"), std::string::npos) << bad.status().message();
  o.curve_allowed_clients_file = keys.allowed_file;
  o.curve_secret_key_file = "/nonexistent/server.key";
  EXPECT_FALSE(KvEventPublisher::start(o).ok());
  EXPECT_EQ(*curve_public_key(keys.server.secret_key), keys.server.public_key);
  EXPECT_FALSE(curve_public_key("short").ok());
}

TEST(KvEvents, BadEndpointFailsOpen) {
  Options o;
  o.events.endpoint = "nonsense://x";
  auto store = KvStore::open(o, testing::test_format());
  EXPECT_FALSE(store.ok());
}

}  // namespace
}  // namespace ragd::kvstore
