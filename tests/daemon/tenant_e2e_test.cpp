// Two tenants against the real daemon: retrieval, documents, shared documents, the HTTP edge,
// ownership that fails closed, and a crash during concurrent uploads.
#include <atomic>
#include <mutex>
#include <set>

#include <sys/socket.h>

#include <rocksdb/db.h>

#include "real_daemon.h"

namespace ragd::testing {
namespace {

const daemon::Headers kA = {{"Authorization", "Bearer key-a"}};
const daemon::Headers kB = {{"Authorization", "Bearer key-b"}};
const daemon::Headers kRoot = {{"Authorization", "Bearer key-root"}};
const std::vector<std::string> kKeys = {"--api-key", "key-a=alpha", "--api-key", "key-b=beta", "--admin-key",
                                        "key-root=ops"};
const std::string kSecret = "swordfish";
const std::string kQuery = "what is the vault password?";

class TenantE2eTest : public E2eTest {
 protected:
  // A shared document ingested offline (`ragctl ingest`), then the daemon with two tenants.
  void start_with_shared(const std::string& data) {
    fs::path src = dir_ / (data + "_src");
    fs::create_directories(src);
    std::ofstream(src / "handbook.txt") << "The company handbook describes the vacation policy and the vault rules.\n";
    ASSERT_EQ(run_program({kBin + "/ragctl", "ingest", src.string(), "--data", (dir_ / data).string(), "--model",
                       (dir_ / "model").string()}),
              0);
    start_daemon(data, kKeys);
  }
  void upload_tenant_documents() {
    auto r = call("POST", "/v1/documents",
                  R"({"id":"vault","text":"The vault password is )" + kSecret +
                      R"( seventy seven. Keep the vault password secret."})",
                  kA);
    ASSERT_EQ(r.status, 200) << r.body;
    // Two of B's documents and the shared handbook match kQuery's words, each more weakly than A's
    // document: B's top 3 is full only when the tenant filter is inside the match (lexical too).
    r = call("POST", "/v1/documents",
             R"({"documents":[{"id":"b1","text":"Bananas are yellow fruit rich in potassium. The fruit stall has no password."},)"
             R"({"id":"b2","text":"The garden has roses and tulips in spring."},)"
             R"({"id":"b3","text":"Trains run on rails between the cities; the station keeps tickets in a vault."}]})",
             kB);
    ASSERT_EQ(r.status, 200) << r.body;
  }
  // Checks a JSON sources array: exactly `k` entries, none of them tenant A's, no secret text.
  void expect_clean_sources(const Json& j, const std::string& ptr, size_t k, const std::string& where) {
    ASSERT_EQ(j.size(ptr), k) << where;
    for (size_t i = 0; i < k; ++i) {
      std::string p = ptr + "/" + std::to_string(i);
      EXPECT_NE(j.str(p + "/doc_id"), "vault") << where;
      EXPECT_EQ(j.str(p + "/snippet").find(kSecret), std::string::npos) << where;
      EXPECT_NE(j.str(p + "/doc_id").rfind("/", 0), 0u) << where << ": a server path as a document id";
    }
  }
};

TEST_F(TenantE2eTest, NoCrossTenantRetrievalOnAnyPath) {
  start_with_shared("t_retrieval");
  upload_tenant_documents();
  const std::string run = R"({"query":")" + kQuery + R"(","top_k":3,"min_score_ratio":0,"max_tokens":2})";
  // Positive control: A retrieves its own document.
  auto r = call("POST", "/v1/pipelines/default/runs", run, kA);
  ASSERT_EQ(r.status, 200) << r.body;
  {
    Json j(r.body);
    bool found = false;
    for (size_t i = 0; i < j.size("/sources"); ++i) found = found || j.str("/sources/" + std::to_string(i) + "/doc_id") == "vault";
    EXPECT_TRUE(found) << r.body;
  }
  // B: its 3 documents and the shared one are visible, 3 of them match; top-k stays k.
  r = call("POST", "/v1/pipelines/default/runs", run, kB);
  ASSERT_EQ(r.status, 200) << r.body;
  expect_clean_sources(Json(r.body), "/sources", 3, "runs");
  // SSE.
  std::string sources;
  daemon::SseParser p([&](const std::string& e, const std::string& d) {
    if (e == "sources") sources = d;
  });
  HttpClient c("127.0.0.1", d_.port(), 60000);
  auto sr = c.request_stream("POST", "/v1/pipelines/default/runs",
                             R"({"query":")" + kQuery + R"(","top_k":3,"min_score_ratio":0,"max_tokens":2,"stream":true})", kB,
                             [&](std::string_view d) {
                               p.feed(d);
                               return true;
                             });
  ASSERT_TRUE(sr.ok());
  expect_clean_sources(Json(sources), "/sources", 3, "sse");
  // WebSocket (browsers put the key in the query string; only this route accepts it there).
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", d_.port(), "/v1/stream?api_key=key-b").ok());
  ASSERT_TRUE(ws.send_text(R"({"pipeline":"default","query":")" + kQuery + R"(","top_k":3,"min_score_ratio":0,"max_tokens":2})").ok());
  bool saw_sources = false;
  for (;;) {
    auto m = ws.read(60000);
    ASSERT_TRUE(m.ok() && m->kind == WsClient::Message::Kind::kText);
    Json j(m->text);
    std::string ev = j.str("/event");
    ASSERT_NE(ev, "error") << m->text;
    if (ev == "sources") {
      saw_sources = true;
      expect_clean_sources(j, "/sources", 3, "websocket");
    }
    if (ev == "done") break;
  }
  EXPECT_TRUE(saw_sources);
  // Chat completions with a pipeline.
  r = call("POST", "/v1/chat/completions",
           R"({"messages":[{"role":"user","content":")" + kQuery +
               R"("}],"pipeline":"default","retrieval_top_k":3,"min_score_ratio":0,"max_tokens":2})",
           kB);
  ASSERT_EQ(r.status, 200) << r.body;
  expect_clean_sources(Json(r.body), "/ragd/sources", 3, "chat");
  // A tenant's cache statistics are its own: no executor or cache numbers.
  Json stats(call("GET", "/v1/cache/stats", "", kB).body);
  EXPECT_FALSE(stats.has("/executor"));
  EXPECT_TRUE(Json(call("GET", "/v1/cache/stats", "", kRoot).body).has("/executor"));
  EXPECT_EQ(d_.stop(), 0);
}

TEST_F(TenantE2eTest, DocumentsAreScopedAndSharedOnesReadOnly) {
  start_with_shared("t_docs");
  upload_tenant_documents();
  // Another tenant's document is indistinguishable from an absent one.
  expect_error(call("GET", "/v1/documents/vault", "", kB), 404, "document_not_found", "vault");
  expect_error(call("DELETE", "/v1/documents/vault", "", kB), 404, "document_not_found", "vault");
  expect_error(call("GET", "/v1/documents/nothing", "", kB), 404, "document_not_found", "nothing");
  // The same id from B is B's own document; A's is untouched.
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"vault","text":"beta's own vault notes"})", kB).status, 200);
  auto r = call("GET", "/v1/documents/vault", "", kA);
  ASSERT_EQ(r.status, 200);
  EXPECT_NE(Json(r.body).str("/text").find(kSecret), std::string::npos);
  EXPECT_EQ(Json(call("GET", "/v1/documents/vault", "", kB).body).str("/text"), "beta's own vault notes");
  // The shared (CLI) document: visible to both under an id relative to the ingest root.
  for (const auto* h : {&kA, &kB}) {
    r = call("GET", "/v1/documents/handbook.txt", "", *h);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_TRUE(Json(r.body).at("/shared").get_bool().value());
    EXPECT_EQ(Json(r.body).str("/source"), "handbook.txt");
  }
  // ... writable by neither, only by the admin key.
  expect_error(call("POST", "/v1/documents", R"({"id":"handbook.txt","text":"poisoned"})", kB), 403, "forbidden",
               "read-only");
  expect_error(call("DELETE", "/v1/documents/handbook.txt", "", kA), 403, "forbidden", "read-only");
  EXPECT_NE(Json(call("GET", "/v1/documents/handbook.txt", "", kA).body).str("/text").find("vacation"), std::string::npos);
  r = call("POST", "/v1/documents", R"({"id":"handbook.txt","text":"The handbook, second edition."})", kRoot);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).num("/replaced"), 1);
  EXPECT_EQ(Json(call("GET", "/v1/documents/handbook.txt", "", kB).body).str("/text"), "The handbook, second edition.");
  // Keys in the query string are refused outside /v1/stream.
  expect_error(call("GET", "/v1/documents/vault?api_key=key-a"), 401, "unauthorized", "/v1/stream");
  EXPECT_EQ(call("DELETE", "/v1/documents/handbook.txt", "", kRoot).status, 200);
  expect_error(call("GET", "/v1/documents/handbook.txt", "", kA), 404, "document_not_found", "handbook.txt");
  EXPECT_EQ(d_.stop(), 0);
}

// Tenant-isolation issue, low 1: once an admin uploaded a shared document with the id of a
// tenant's own one, the tenant could still delete its document but no longer update it (403).
// Each owner has its own id space: the tenant updates its own; the shared one stays read-only.
TEST_F(TenantE2eTest, TenantUpdatesItsOwnDocumentAfterASharedOneTakesItsId) {
  start_with_shared("t_update");
  auto text_of = [&](const daemon::Headers& h) { return Json(call("GET", "/v1/documents/notes", "", h).body).str("/text"); };
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"notes","text":"alpha notes, first draft"})", kA).status, 200);
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"notes","text":"shared notes from operations"})", kRoot).status, 200);
  auto r = call("POST", "/v1/documents", R"({"id":"notes","text":"alpha notes, second draft"})", kA);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).num("/replaced"), 1);
  EXPECT_EQ(text_of(kA), "alpha notes, second draft");
  EXPECT_EQ(text_of(kB), "shared notes from operations");
  // A tenant without its own "notes" still may not write the shared one.
  expect_error(call("POST", "/v1/documents", R"({"id":"notes","text":"poisoned"})", kB), 403, "forbidden", "read-only");
  EXPECT_EQ(text_of(kB), "shared notes from operations");
  EXPECT_EQ(call("DELETE", "/v1/documents/notes", "", kA).status, 200);
  EXPECT_EQ(text_of(kA), "shared notes from operations");
  expect_error(call("POST", "/v1/documents", R"({"id":"notes","text":"alpha again"})", kA), 403, "forbidden", "read-only");
  EXPECT_EQ(d_.stop(), 0);
}

// Finding 4: a tenant's run never reuses KV computed for another tenant, so usage and latency
// cannot reveal what others asked; the same tenant does reuse (positive control).
TEST_F(TenantE2eTest, NoCrossTenantKvReuse) {
  start_with_shared("t_kv");
  const std::string run = R"({"query":"what does the handbook say about the vacation policy?","top_k":1,"max_tokens":2})";
  auto reused = [](const std::string& body) {
    Json j(body);
    return j.num("/usage/reused_tokens/hbm") + j.num("/usage/reused_tokens/dram") + j.num("/usage/reused_tokens/ssd") +
           j.num("/usage/reused_tokens/remote");
  };
  auto r = call("POST", "/v1/pipelines/default/runs", run, kA);
  ASSERT_EQ(r.status, 200) << r.body;
  r = call("POST", "/v1/pipelines/default/runs", run, kA);
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t own = reused(r.body);
  // The pipeline's head (server configuration) is shared by every scope: what A reuses under
  // another cache_salt. It is the same for every question, so it tells nobody what others asked.
  r = call("POST", "/v1/pipelines/default/runs", run.substr(0, run.size() - 1) + R"(,"cache_salt":"other"})", kA);
  ASSERT_EQ(r.status, 200) << r.body;
  const int64_t head = reused(r.body);
  EXPECT_GT(head, 0) << "the pipeline's head is shared: " << r.body;
  EXPECT_GT(own, head) << "the same tenant reuses its own documents' KV";
  r = call("POST", "/v1/pipelines/default/runs", run, kB);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(reused(r.body), head) << "tenant B reused KV computed for tenant A's documents: " << r.body;
  EXPECT_EQ(d_.stop(), 0);
}

TEST_F(TenantE2eTest, SmuggledRequestAfterBadTransferEncodingIsNotServed) {
  start_daemon("t_smuggle", kKeys);
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"vault","text":"the vault password is )" + kSecret + R"("})", kA).status, 200);
  for (const char* te : {"gzip", "identity", "xchunked"}) {
    HttpClient c("127.0.0.1", d_.port(), 10000);
    ASSERT_TRUE(c.connect().ok());
    std::string hidden = "GET /v1/documents/vault HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-a\r\n\r\n";
    ASSERT_TRUE(c.send_raw(std::string("POST /v1/documents HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer key-b\r\n") +
                           "Transfer-Encoding: " + te + "\r\n\r\n" + hidden)
                    .ok());
    std::string got;
    char buf[4096];
    for (;;) {
      ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
      if (n <= 0) break;  // the server closed the connection
      got.append(buf, static_cast<size_t>(n));
    }
    EXPECT_EQ(got.rfind("HTTP/1.1 400", 0), 0u) << te << ": " << got;
    EXPECT_EQ(got.find(kSecret), std::string::npos) << te << ": " << got;
    EXPECT_EQ(got.find("HTTP/1.1 ", 1), std::string::npos) << te << ": a second response: " << got;
  }
  EXPECT_EQ(d_.stop(), 0);
}

TEST_F(TenantE2eTest, CorruptOwnershipRefusesToStart) {
  start_daemon("t_corrupt", kKeys);
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"vault","text":"the vault password is )" + kSecret + R"("})", kA).status, 200);
  EXPECT_EQ(d_.stop(), 0);
  // Flip one byte of a document record (its owner is in there) behind the daemon's back.
  {
    rocksdb::DBOptions o;
    std::vector<rocksdb::ColumnFamilyDescriptor> cfs;
    for (const char* n : {"default", "documents", "chunks", "manifest"}) cfs.emplace_back(n, rocksdb::ColumnFamilyOptions());
    std::vector<rocksdb::ColumnFamilyHandle*> handles;
    rocksdb::DB* db = nullptr;
    ASSERT_TRUE(rocksdb::DB::Open(o, (dir_ / "t_corrupt" / "docstore").string(), cfs, &handles, &db).ok());
    std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(rocksdb::ReadOptions(), handles[1]));
    it->SeekToFirst();
    ASSERT_TRUE(it->Valid());
    std::string key = it->key().ToString(), value = it->value().ToString();
    it.reset();
    value[3] ^= 0x20;
    ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), handles[1], key, value).ok());
    for (auto* h : handles) db->DestroyColumnFamilyHandle(h);
    delete db;
  }
  std::string err;
  const std::string log = (dir_ / "t_corrupt.log").string();
  ASSERT_TRUE(d_.start(daemon_args("t_corrupt", kKeys), &err, log)) << err;
  EXPECT_EQ(d_.wait_exit(60000), 1) << "the daemon must not serve a store whose owners it cannot read";
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("ownership cannot be read"), std::string::npos) << text;
}

TEST_F(TenantE2eTest, KillDuringConcurrentUploadsLeavesNoOrphanOwnership) {
  start_daemon("t_kill", kKeys);
  std::mutex mu;
  std::set<std::pair<int, int>> acked;  // (tenant 0/1, n), guarded by mu
  std::atomic<bool> stop{false};
  std::atomic<int> attempted[2] = {0, 0};
  auto uploader = [&](int t) {
    for (int n = 0; !stop.load(); ++n) {
      attempted[t] = n + 1;
      HttpClient c("127.0.0.1", d_.port(), 5000);
      auto r = c.request("POST", "/v1/documents",
                         R"({"id":"doc-)" + std::to_string(n) + R"(","text":"tenant )" + std::to_string(t) +
                             " upload " + std::to_string(n) + R"( about trains and gardens"})",
                         t == 0 ? kA : kB);
      if (r.ok() && r->status == 200) {
        std::lock_guard<std::mutex> l(mu);
        acked.insert({t, n});
      } else {
        break;  // the daemon is gone
      }
    }
  };
  std::thread a(uploader, 0), b(uploader, 1);
  ASSERT_TRUE(wait_for([&] {
    std::lock_guard<std::mutex> l(mu);
    return acked.size() >= 10;
  }, 60000));
  d_.kill_now();
  stop = true;
  a.join();
  b.join();
  start_daemon("t_kill", kKeys);
  for (int t = 0; t < 2; ++t) {
    const auto& own = t == 0 ? kA : kB;
    const auto& other = t == 0 ? kB : kA;
    for (int n = 0; n < attempted[t]; ++n) {
      const std::string id = "doc-" + std::to_string(n);
      bool was_acked = acked.count({t, n}) > 0;
      auto mine = call("GET", "/v1/documents/" + id, "", own);
      if (was_acked) {
        ASSERT_EQ(mine.status, 200) << "acknowledged upload " << id << " of tenant " << t << " lost";
        EXPECT_NE(Json(mine.body).str("/text").find("tenant " + std::to_string(t) + " upload"), std::string::npos);
      } else {
        EXPECT_TRUE(mine.status == 200 || mine.status == 404) << mine.body;
      }
      // Whatever survived is its owner's alone.
      auto theirs = call("GET", "/v1/documents/" + id, "", other);
      if (theirs.status == 200)
        EXPECT_NE(Json(theirs.body).str("/text").find("tenant " + std::to_string(1 - t)), std::string::npos);
      else
        EXPECT_EQ(theirs.status, 404);
    }
  }
  // No id is left reserved by an upload that was never acknowledged.
  for (int t = 0; t < 2; ++t) {
    const std::string last = "doc-" + std::to_string(attempted[t] - 1);
    auto r = call("POST", "/v1/documents", R"({"id":")" + last + R"(","text":"written again after the crash"})",
                  t == 0 ? kA : kB);
    EXPECT_EQ(r.status, 200) << r.body;
  }
  EXPECT_EQ(d_.stop(), 0);
}

}  // namespace
}  // namespace ragd::testing
