// The embedded web console (GET /, /console/{file}) and the document listing it uses
// (GET /v1/documents), over the fake runtime.
#include "server_fixture.h"

namespace ragd::testing {
namespace {

using daemon::DaemonConfig;

bool flag(const Json& j, const std::string& ptr) {
  bool b = false;
  if (j.at(ptr).get_bool().get(b)) ADD_FAILURE() << ptr << " is not a boolean";
  return b;
}

class ConsoleTest : public ServerFixture {
 protected:
  void SetUp() override {
    DaemonConfig cfg;
    cfg.auth.keys = {{"key-acme", "acme"}, {"key-globex", "globex"}};
    cfg.auth.admin_keys = {{"key-root", "ops"}};
    start(cfg);
  }
  daemon::Headers key(const std::string& k) { return {{"Authorization", "Bearer " + k}}; }
  std::vector<std::string> listed(const daemon::ClientResponse& r) {
    std::vector<std::string> ids;
    Json j(r.body);
    for (size_t i = 0; i < j.size("/data"); ++i) ids.push_back(j.str("/data/" + std::to_string(i) + "/id"));
    return ids;
  }
};

TEST_F(ConsoleTest, IndexNeedsNoKeyAndCarriesSecurityHeaders) {
  auto r = call("GET", "/");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.header("content-type"), "text/html; charset=utf-8");
  EXPECT_NE(r.body.find("<title>ragd console</title>"), std::string::npos);
  EXPECT_NE(r.header("content-security-policy").find("default-src 'self'; connect-src 'self' ws: wss:"), std::string::npos);
  EXPECT_EQ(r.header("x-content-type-options"), "nosniff");
  EXPECT_EQ(r.header("cache-control"), "no-cache");
  EXPECT_EQ(r.header("etag").size(), 34u) << r.header("etag");
  EXPECT_EQ(call("GET", "/console").body, r.body);
}

TEST_F(ConsoleTest, AssetsHaveTheirContentTypes) {
  auto js = call("GET", "/console/console.js");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.header("content-type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js.body.find("/v1/stream"), std::string::npos);
  auto css = call("GET", "/console/console.css");
  ASSERT_EQ(css.status, 200);
  EXPECT_EQ(css.header("content-type"), "text/css; charset=utf-8");
  EXPECT_EQ(call("GET", "/console/index.html").body, call("GET", "/").body);
  expect_error(call("GET", "/console/missing.js"), 404, "route_not_found", "missing.js");
  expect_error(call("GET", "/console/..%2Fserver.cpp"), 404, "route_not_found", "server.cpp");
  auto post = call("POST", "/");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.header("allow"), "GET");
}

TEST_F(ConsoleTest, EtagRevalidationIs304) {
  std::string etag = call("GET", "/console/console.js").header("etag");
  auto r = call("GET", "/console/console.js", "", {{"If-None-Match", etag}});
  EXPECT_EQ(r.status, 304);
  EXPECT_TRUE(r.body.empty());
  EXPECT_EQ(r.header("etag"), etag);
  EXPECT_EQ(call("GET", "/console/console.js", "", {{"If-None-Match", "\"other\", W/" + etag}}).status, 304);
  EXPECT_EQ(call("GET", "/console/console.js", "", {{"If-None-Match", "\"other\""}}).status, 200);
}

TEST_F(ConsoleTest, HeadSendsHeadersWithoutBodyAndKeepsTheConnection) {
  daemon::HttpClient c("127.0.0.1", port_, 20000);
  auto head = c.request("HEAD", "/");
  ASSERT_TRUE(head.ok());
  EXPECT_EQ(head->status, 200);
  EXPECT_TRUE(head->body.empty());
  auto get = c.request("GET", "/");
  ASSERT_TRUE(get.ok());
  EXPECT_EQ(head->header("content-length"), std::to_string(get->body.size()));
  auto health = c.request("GET", "/healthz");  // the same connection still frames correctly
  ASSERT_TRUE(health.ok());
  EXPECT_EQ(health->body, R"({"status":"ok"})");
}

TEST_F(ConsoleTest, DocumentListIsScopedByTenant) {
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"shared-1","text":"for everyone"})", key("key-root")).status, 200);
  ASSERT_EQ(call("POST", "/v1/documents", R"({"documents":[{"id":"a-2","title":"Two","text":"acme"},{"id":"a-1","text":"acme one"}]})",
                 key("key-acme")).status, 200);
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"g-1","text":"globex"})", key("key-globex")).status, 200);
  expect_error(call("GET", "/v1/documents"), 401, "unauthorized", "missing API key");

  auto r = call("GET", "/v1/documents", "", key("key-acme"));
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(listed(r), (std::vector<std::string>{"a-1", "a-2", "shared-1"}));
  Json j(r.body);
  EXPECT_EQ(j.str("/object"), "list");
  EXPECT_FALSE(flag(j, "/has_more"));
  EXPECT_EQ(j.str("/data/1/title"), "Two");
  EXPECT_FALSE(flag(j, "/data/1/shared"));
  EXPECT_TRUE(flag(j, "/data/2/shared"));
  EXPECT_EQ(j.num("/data/1/bytes"), 4);
  EXPECT_EQ(listed(call("GET", "/v1/documents", "", key("key-globex"))), (std::vector<std::string>{"g-1", "shared-1"}));
  // An admin key reads the shared documents (those it writes), as GET /v1/documents/{id} does.
  EXPECT_EQ(listed(call("GET", "/v1/documents", "", key("key-root"))), (std::vector<std::string>{"shared-1"}));
}

TEST_F(ConsoleTest, DocumentListPages) {
  ASSERT_EQ(call("POST", "/v1/documents", R"([{"id":"d1","text":"1"},{"id":"d2","text":"2"},{"id":"d3","text":"3"}])",
                 key("key-acme")).status, 200);
  auto p1 = call("GET", "/v1/documents?limit=2", "", key("key-acme"));
  EXPECT_EQ(listed(p1), (std::vector<std::string>{"d1", "d2"}));
  EXPECT_TRUE(flag(Json(p1.body), "/has_more"));
  auto p2 = call("GET", "/v1/documents?limit=2&after=d2", "", key("key-acme"));
  EXPECT_EQ(listed(p2), (std::vector<std::string>{"d3"}));
  EXPECT_FALSE(flag(Json(p2.body), "/has_more"));
  expect_error(call("GET", "/v1/documents?limit=0", "", key("key-acme")), 400, "invalid_request", "'limit'");
  expect_error(call("GET", "/v1/documents?limit=2x", "", key("key-acme")), 400, "invalid_request", "'limit'");
  expect_error(call("GET", "/v1/documents?sort=id", "", key("key-acme")), 400, "invalid_request", "unknown query parameter 'sort'");
}

}  // namespace
}  // namespace ragd::testing
