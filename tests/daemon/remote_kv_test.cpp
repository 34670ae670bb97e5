// Two real ragd replicas sharing one Redis as their remote KV tier: the second answers like the
// first, reusing the first's document KV from Redis; tenant and cache_salt scopes hold across the
// replicas; the pipeline's own head is shared; a dead Redis costs no request.
#include <fstream>
#include <regex>

#include "../kvstore/redis_test_util.h"
#include "real_daemon.h"

namespace ragd::testing {
namespace {

namespace rt = ragd::kvstore::testing;

const std::vector<std::string> kKeys = {"--api-key", "key-a=alpha", "--api-key", "key-b=beta", "--admin-key",
                                        "key-root=ops"};
const daemon::Headers kA = {{"Authorization", "Bearer key-a"}};
const daemon::Headers kB = {{"Authorization", "Bearer key-b"}};
const daemon::Headers kRoot = {{"Authorization", "Bearer key-root"}};
const std::string kRun = R"({"query":"which river flows past the old mill?","top_k":3,"max_tokens":8,"temperature":0)";

class RemoteKvTest : public E2eTest {
 protected:
  void SetUp() override {
    E2eTest::SetUp();
    if (IsSkipped()) return;
    if (!rt::redis_available()) GTEST_SKIP() << rt::kRedisMissing;
    redis_ = rt::start_redis(rdir_.path / "redis");
    ASSERT_GT(redis_.pid, 0);
    // One corpus, ingested offline into the primary's data directory.
    const fs::path src = dir_ / "remote_src";
    fs::create_directories(src);
    const char* topics[] = {"river", "mill", "bridge", "harbor", "forest"};
    for (int d = 0; d < 5; ++d) {
      std::ofstream f(src / ("doc" + std::to_string(d) + ".txt"));
      for (int s = 0; s < 12; ++s)
        f << "The " << topics[d] << " near the old mill is described in record " << d * 100 + s
          << " of the town archive, with the river and the bridge. ";
    }
    primary_dir_ = dir_ / ("remote_primary_" + std::to_string(counter_++));
    ASSERT_EQ(run_program({kBin + "/ragctl", "ingest", src.string(), "--data", primary_dir_.string(), "--model",
                       (dir_ / "model").string()}),
              0);
  }
  void TearDown() override { rt::stop_redis(redis_.pid); }

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(redis_.port); }
  // The fleet secret every replica seals and checks Redis values with.
  std::string secret_file() const {
    const auto path = dir_ / "fleet.key";
    if (!std::filesystem::exists(path)) std::ofstream(path) << "0f9e8d7c6b5a49382716051f2e3d4c5b\n";
    return path.string();
  }

  // A replica: the primary's corpus as a read-only secondary, its own scratch / SSD tier, the
  // shared Redis.
  void start_replica(RagdProcess& d, const std::string& name, bool primary) {
    std::vector<std::string> args = {kBin + "/ragd", "--model", (dir_ / "model").string(), "--listen", "127.0.0.1:0",
                                     "--threads", "2", "--set", "kvstore.remote.url=" + url(), "--set",
                                     "kvstore.remote.timeout_ms=200", "--set",
                                     "kvstore.remote.secret_file=" + secret_file()};
    if (primary) {
      args.insert(args.end(), {"--data", primary_dir_.string()});
    } else {
      args.insert(args.end(), {"--data", (dir_ / (name + "_scratch_" + std::to_string(counter_))).string(), "--set",
                               "runtime.data_replica_of=" + primary_dir_.string()});
    }
    args.insert(args.end(), kKeys.begin(), kKeys.end());
    std::string err;
    ASSERT_TRUE(d.start(args, &err, (dir_ / (name + ".log")).string())) << err;
    ASSERT_TRUE(wait_for([&] { return http(d, "GET", "/readyz").status == 200; }, 60000)) << name << " never ready";
  }
  static daemon::ClientResponse http(RagdProcess& d, const std::string& method, const std::string& target,
                                     const std::string& body = "", const daemon::Headers& h = {}) {
    HttpClient c("127.0.0.1", d.port(), 60000);
    auto r = c.request(method, target, body, h);
    return r.ok() ? *r : daemon::ClientResponse{};
  }
  struct Answer {
    std::string output;
    int64_t prompt = 0, remote = 0, hbm = 0, dram = 0, ssd = 0;
  };
  static Answer ask(RagdProcess& d, const daemon::Headers& h, const std::string& extra = "") {
    auto r = http(d, "POST", "/v1/pipelines/default/runs", kRun + extra + "}", h);
    EXPECT_EQ(r.status, 200) << r.body;
    Json j(r.body);
    Answer a;
    if (r.status != 200) return a;
    a.output = j.str("/output");
    a.prompt = j.num("/usage/prompt_tokens");
    a.remote = j.num("/usage/reused_tokens/remote");
    a.hbm = j.num("/usage/reused_tokens/hbm");
    a.dram = j.num("/usage/reused_tokens/dram");
    a.ssd = j.num("/usage/reused_tokens/ssd");
    return a;
  }
  // A metric's value from /metrics (admin view), 0 when absent.
  static double metric(RagdProcess& d, const std::string& series) {
    auto r = http(d, "GET", "/metrics", "", kRoot);
    std::smatch m;
    const std::regex re("\n" + std::regex_replace(series, std::regex(R"([{}"\\])"), R"(\$&)") + " ([0-9.e+-]+)");
    return std::regex_search(r.body, m, re) ? std::stod(m[1]) : 0;
  }
  // Waits until replica d has written at least n segments to Redis.
  static bool wait_puts(RagdProcess& d, double n) {
    return wait_for([&] { return metric(d, R"(ragd_kv_remote_events{event="puts"})") >= n; }, 20000);
  }

  rt::RedisTempDir rdir_;
  rt::RedisProcess redis_;
  fs::path primary_dir_;
  static inline int counter_ = 0;
};

TEST_F(RemoteKvTest, ReplicaReusesWhatAnotherComputedAndScopesHold) {
  RagdProcess a, b;
  start_replica(a, "a", /*primary=*/true);
  start_replica(b, "b", /*primary=*/false);
  // alpha on replica A: computed there (head + 3 documents), written behind to Redis.
  const Answer first = ask(a, kA);
  ASSERT_FALSE(first.output.empty());
  EXPECT_EQ(first.remote, 0);
  ASSERT_TRUE(wait_puts(a, 4)) << "replica A wrote fewer than 4 segments to Redis";

  // beta on replica B first: only the pipeline's head (server configuration) may come from alpha's
  // work; beta's documents are keyed in beta's scope and recomputed.
  const Answer beta = ask(b, kB);
  EXPECT_GT(beta.remote, 0) << "the shared head was not reused across tenants";
  const int64_t head = beta.remote;
  // alpha on replica B: the documents too, from Redis, and the same greedy answer.
  const Answer again = ask(b, kA);
  EXPECT_EQ(again.output, first.output);
  EXPECT_GT(again.remote, head) << "replica B recomputed documents replica A had computed";
  EXPECT_EQ(again.hbm, head) << "the head was in B's pool after beta's run";
  EXPECT_GT(metric(b, R"(ragd_kv_remote_events{event="hits"})"), 0);
  // Isolation: beta's documents did not come from alpha (the scope is in every document key; were
  // it dropped, beta would have reused as much as alpha did).
  EXPECT_LT(beta.remote, again.remote + again.hbm);

  // Replica B serves the primary's corpus read-only: a document write is refused, naming where to
  // write, and the corpus is unchanged.
  auto w = http(b, "POST", "/v1/documents", R"({"id":"late","text":"A document written to a replica."})", kA);
  EXPECT_EQ(w.status, 403) << w.body;
  EXPECT_NE(w.body.find("primary"), std::string::npos) << w.body;
  EXPECT_EQ(http(b, "GET", "/v1/documents/late", "", kA).status, 404);

  // Another salt: alpha again on A, whose tree holds alpha's documents: only the head is reused.
  const Answer salted = ask(a, kA, R"(,"cache_salt":"s-1")");
  EXPECT_EQ(salted.output, first.output);
  EXPECT_EQ(salted.hbm + salted.dram + salted.ssd + salted.remote, head) << "another cache_salt reused documents";
  // And a bad salt is a 400 naming the field.
  auto bad = http(a, "POST", "/v1/pipelines/default/runs", kRun + R"(,"cache_salt":""})", kA);
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("cache_salt"), std::string::npos) << bad.body;
  // The OpenAI route takes the same field, with the same range and message.
  auto bad_chat = http(a, "POST", "/v1/chat/completions",
                       R"({"messages":[{"role":"user","content":"hi"}],"max_tokens":2,"cache_salt":""})", kA);
  EXPECT_EQ(bad_chat.status, 400);
  EXPECT_NE(bad_chat.body.find("cache_salt must be 1..256 characters"), std::string::npos) << bad_chat.body;
  EXPECT_NE(bad.body.find("cache_salt must be 1..256 characters"), std::string::npos) << bad.body;
  // The daemon keeps serving after both.
  EXPECT_EQ(http(a, "GET", "/readyz").status, 200);
}

TEST_F(RemoteKvTest, DeadRedisCostsNoRequest) {
  RagdProcess a;
  start_replica(a, "dead", /*primary=*/true);
  const Answer first = ask(a, kA);
  ASSERT_FALSE(first.output.empty());
  rt::stop_redis(redis_.pid);
  redis_.pid = -1;
  // Every request still answers, with the same greedy output (beta's runs recompute documents).
  for (int i = 0; i < 4; ++i) {
    const Answer r = ask(a, i % 2 ? kA : kB, R"(,"cache_salt":"dead-)" + std::to_string(i) + "\"");
    EXPECT_EQ(r.output, first.output) << i;
  }
  EXPECT_TRUE(wait_for([&] { return metric(a, "ragd_kv_remote_breaker_open") == 1; }, 5000))
      << "the breaker did not open on a dead Redis";
  EXPECT_EQ(http(a, "GET", "/readyz").status, 200);
}

}  // namespace
}  // namespace ragd::testing
