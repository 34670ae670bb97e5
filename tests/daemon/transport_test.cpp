// The transport under hostile or careless clients, over the fake runtime: connection caps with
// health endpoints still answered, the first-bytes deadline, 408 for a request that never
// completes, cancellation of non-streaming runs whose client went away, the whole answer for a
// client that only shut down its sending side, WebSocket close codes.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <poll.h>
#include <sys/socket.h>

#include "server_fixture.h"

namespace ragd::testing {
namespace {

using daemon::DaemonConfig;
using daemon::HttpClient;
using daemon::WsClient;

// Reads until the server closes the connection or `timeout_ms` passes; *closed tells which.
std::string read_until_close(int fd, int timeout_ms, bool* closed) {
  std::string got;
  *closed = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    int left = static_cast<int>(
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) return got;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, left) <= 0) continue;
    char buf[4096];
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) {
      *closed = true;
      return got;
    }
    got.append(buf, static_cast<size_t>(n));
  }
}

std::string raw_request(const std::string& method, const std::string& target, const std::string& body) {
  return method + " " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Opens `n` connections that send nothing.
std::vector<std::unique_ptr<HttpClient>> open_idle(uint16_t port, int n) {
  std::vector<std::unique_ptr<HttpClient>> out;
  for (int i = 0; i < n; ++i) {
    auto c = std::make_unique<HttpClient>("127.0.0.1", port, 5000);
    EXPECT_TRUE(c->connect().ok());
    out.push_back(std::move(c));
  }
  return out;
}

class ConnectionCapTest : public ServerFixture {
 protected:
  void SetUp() override {
    DaemonConfig cfg;
    cfg.server.max_connections = 4;
    cfg.server.first_byte_timeout_ms = 60000;  // idle connections stay for the whole test
    start(cfg);
  }
};

TEST_F(ConnectionCapTest, HealthIsAnsweredAtTheCapAndOtherRoutesGet503) {
  EXPECT_EQ(server_->max_connections(), 4);
  // More idle connections than the cap and the health slots together: the oldest idle ones in the
  // health slots are closed to make room.
  auto idle = open_idle(port_, 40);
  ASSERT_TRUE(wait_for([&] { return server_->open_connections() <= 4 + 16; })) << server_->open_connections();
  // A short client timeout: the answer must not wait for idle connections to time out.
  for (const char* path : {"/healthz", "/readyz"}) {
    HttpClient c("127.0.0.1", port_, 3000);
    auto r = c.request("GET", path);
    ASSERT_TRUE(r.ok()) << path << ": " << r.status().to_string();
    EXPECT_EQ(r->status, 200) << path << ": " << r->body;
    EXPECT_EQ(r->header("connection"), "close") << path;  // one response per connection above the cap
  }
  HttpClient c("127.0.0.1", port_, 3000);
  auto r = c.request("POST", "/v1/pipelines/default/runs", R"({"query":"q","max_tokens":1})");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_error(*r, 503, "too_many_connections", "server.max_connections = 4");
  EXPECT_NE(r->body.find("/healthz"), std::string::npos) << r->body;
  EXPECT_EQ(r->header("retry-after"), "1");
  EXPECT_EQ(ex_.active(), 0);
  // Once the idle connections go, requests are served again.
  idle.clear();
  ASSERT_TRUE(wait_for([&] { return server_->open_connections() == 0; }));
  EXPECT_EQ(call("POST", "/v1/pipelines/default/runs", R"({"query":"q","max_tokens":1})").status, 200);
}

TEST_F(ConnectionCapTest, PerClientCap) {
  server_->stop();
  DaemonConfig cfg;
  cfg.server.max_connections_per_client = 2;
  cfg.server.first_byte_timeout_ms = 60000;
  start(cfg);
  auto idle = open_idle(port_, 2);
  ASSERT_TRUE(wait_for([&] { return server_->open_connections() == 2; }));
  HttpClient c("127.0.0.1", port_, 3000);
  auto r = c.request("GET", "/v1/pipelines");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  expect_error(*r, 503, "too_many_connections", "server.max_connections_per_client = 2 from 127.0.0.1");
  EXPECT_EQ(call("GET", "/healthz").status, 200);
  idle.clear();
  ASSERT_TRUE(wait_for([&] { return server_->open_connections() == 0; }));
  EXPECT_EQ(call("GET", "/v1/pipelines").status, 200);
}

class DeadlineTest : public ServerFixture {
 protected:
  void SetUp() override {
    DaemonConfig cfg;
    cfg.server.first_byte_timeout_ms = 200;
    cfg.server.read_timeout_ms = 500;
    start(cfg);
  }
};

TEST_F(DeadlineTest, IdleConnectionsCloseAfterTheFirstBytesDeadline) {
  auto idle = open_idle(port_, 3);
  for (auto& c : idle) {
    bool closed = false;
    std::string got = read_until_close(c->fd(), 10000, &closed);
    EXPECT_TRUE(closed) << "idle connection still open";
    EXPECT_EQ(got, "");  // closed quietly: no request was begun
  }
  ASSERT_TRUE(wait_for([&] { return server_->open_connections() == 0; }));
  // A connection that sends its request at once is served as usual.
  EXPECT_EQ(call("GET", "/healthz").status, 200);
}

TEST_F(DeadlineTest, BodyShorterThanContentLengthIs408) {
  HttpClient c("127.0.0.1", port_);
  ASSERT_TRUE(c.connect().ok());
  // Headers promise 100 bytes; 12 come.
  ASSERT_TRUE(c.send_raw("POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                         "Content-Length: 100\r\n\r\n{\"id\":\"a\",\"t").ok());
  bool closed = false;
  std::string got = read_until_close(c.fd(), 10000, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 408", 0), 0u) << got;
  EXPECT_NE(got.find("Connection: close"), std::string::npos) << got;
  auto body_at = got.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << got;
  daemon::ClientResponse r;
  r.status = 408;
  r.headers["content-type"] = "application/json";
  r.body = got.substr(body_at + 4);
  expect_error(r, 408, "request_timeout", "server.read_timeout_ms = 500");
}

// A slow run holds the tenant's only slot; its client hangs up; the run is cancelled and the slot
// is free again.
class DisconnectTest : public ServerFixture {
 protected:
  void SetUp() override {
    DaemonConfig cfg;
    cfg.limits.max_concurrent_per_tenant = 1;
    start(cfg);
  }
  void hang_up_during(const std::string& target, const std::string& body) {
    const int cancels_before = ex_.cancels();
    {
      HttpClient c("127.0.0.1", port_);
      ASSERT_TRUE(c.connect().ok());
      ASSERT_TRUE(c.send_raw(raw_request("POST", target, body)).ok());
      ASSERT_TRUE(wait_for([&] { return ex_.active() == 1; }));
      // The slot is taken while the run goes on.
      expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"q","max_tokens":1})"), 429,
                   "rate_limited", "tenant 'default'");
    }  // the client closes its socket without reading the answer
    ASSERT_TRUE(wait_for([&] { return ex_.cancels() > cancels_before; })) << "run not cancelled";
    ASSERT_TRUE(wait_for([&] { return ex_.active() == 0; }));
    ASSERT_TRUE(wait_for([&] { return in_flight() == 0; }));
    auto r = call("POST", "/v1/pipelines/default/runs", R"({"query":"q","max_tokens":1})");
    EXPECT_EQ(r.status, 200) << r.body;
  }
};

TEST_F(DisconnectTest, PipelineRunIsCancelledAndFreesTheSlot) {
  // 1000 slow tokens take 20 s: only a cancel ends the run within the test.
  hang_up_during("/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":1000})");
}

TEST_F(DisconnectTest, ChatCompletionIsCancelledAndFreesTheSlot) {
  hang_up_during("/v1/chat/completions", R"({"messages":[{"role":"user","content":"slow"}],"max_tokens":1000})");
}

TEST_F(DisconnectTest, PipelinedRequestWhileWaitingIsStillServed) {
  // Bytes that come while an answer is pending are the next request, not a disconnect.
  HttpClient c("127.0.0.1", port_);
  ASSERT_TRUE(c.connect().ok());
  ASSERT_TRUE(c.send_raw(raw_request("POST", "/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":5})")).ok());
  ASSERT_TRUE(wait_for([&] { return ex_.active() == 1; }));
  ASSERT_TRUE(c.send_raw("GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").ok());
  bool closed = false;
  std::string got = read_until_close(c.fd(), 10000, &closed);
  EXPECT_TRUE(closed);
  EXPECT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find("\"finish_reason\":\"length\""), std::string::npos) << got;
  EXPECT_NE(got.find("{\"status\":\"ok\"}"), std::string::npos) << got;
  EXPECT_EQ(ex_.cancels(), 0);
}

// A client that shuts down its sending side after a complete request (shutdown(SHUT_WR), as
// `nc -N` does) still reads its whole answer, then the server closes (security issue 48: it got
// nothing, and a posted document was stored but never acknowledged). Before the final response an
// HTTP/1.1 client may get interim "102 Processing" responses (the probe that tells a half-closed
// client from one that closed, which is still cancelled: DisconnectTest above).
class HalfCloseTest : public ServerFixture {
 protected:
  void SetUp() override { start(); }
  // Sends `raw`, shuts down the sending side, reads until the server closes. *interim: the 1xx
  // responses before the final one, each checked to be a bare "102 Processing".
  std::string final_response(const std::string& raw, int* interim = nullptr) {
    HttpClient c("127.0.0.1", port_);
    EXPECT_TRUE(c.connect().ok());
    EXPECT_TRUE(c.send_raw(raw).ok());
    EXPECT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
    bool closed = false;
    std::string got = read_until_close(c.fd(), 20000, &closed);
    EXPECT_TRUE(closed) << "the server did not close the connection after the answer: " << got.substr(0, 300);
    int n = 0;
    const std::string kProcessing = "HTTP/1.1 102 Processing\r\n\r\n";
    while (got.rfind("HTTP/1.1 1", 0) == 0) {
      EXPECT_EQ(got.rfind(kProcessing, 0), 0u) << got.substr(0, 100);
      got = got.substr(std::min(got.size(), got.find("\r\n\r\n") + 4));
      ++n;
    }
    if (interim) *interim = n;
    return got;
  }
};

TEST_F(HalfCloseTest, PlainAnswerArrivesInFull) {
  int interim = -1;
  // 5 slow tokens: the server sees the end of stream long before the answer.
  const std::string got =
      final_response(raw_request("POST", "/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":5,"seed":1})"), &interim);
  ASSERT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  const size_t body_at = got.find("\r\n\r\n");
  ASSERT_NE(body_at, std::string::npos) << got;
  const std::string body = got.substr(body_at + 4);
  EXPECT_NE(got.find("Content-Length: " + std::to_string(body.size()) + "\r\n"), std::string::npos) << got;
  Json j(body);
  ASSERT_TRUE(j.ok) << body;
  EXPECT_EQ(j.str("/output"), "w1 w2 w3 w4 w5 ") << body;
  EXPECT_EQ(j.num("/usage/completion_tokens"), 5) << body;
  EXPECT_EQ(interim, 1);  // one probe; the client read it and stayed
  EXPECT_EQ(ex_.cancels(), 0);
}

TEST_F(HalfCloseTest, StreamedAnswerArrivesInFull) {
  const std::string got = final_response(
      raw_request("POST", "/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":5,"seed":1,"stream":true})"));
  ASSERT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  EXPECT_NE(got.find("text/event-stream"), std::string::npos) << got;
  for (int i = 1; i <= 5; ++i) EXPECT_NE(got.find("\"text\":\"w" + std::to_string(i) + " \""), std::string::npos) << i << ": " << got;
  EXPECT_NE(got.find("event: done"), std::string::npos) << got;
  EXPECT_EQ(got.substr(got.size() - 5), "0\r\n\r\n") << "the chunked body is not terminated: " << got;
  EXPECT_EQ(ex_.cancels(), 0);
}

TEST_F(HalfCloseTest, PostedDocumentIsAcknowledged) {
  // Its text makes the fake store take 200 ms, as embedding a real document does.
  const std::string got =
      final_response(raw_request("POST", "/v1/documents", R"({"id":"half-closed","text":"slow to embed"})"));
  ASSERT_EQ(got.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << got;
  Json j(got.substr(got.find("\r\n\r\n") + 4));
  ASSERT_TRUE(j.ok) << got;
  EXPECT_EQ(j.num("/ingested"), 1) << got;
  auto r = call("GET", "/v1/documents/half-closed");
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/text"), "slow to embed");
}

TEST_F(HalfCloseTest, Http10GetsNoInterimResponse) {
  // RFC 9110 15.2: no 1xx to an HTTP/1.0 client; the answer still comes.
  std::string raw = raw_request("POST", "/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":3,"seed":1})");
  raw.replace(raw.find("HTTP/1.1"), 8, "HTTP/1.0");
  int interim = -1;
  const std::string got = final_response(raw, &interim);
  EXPECT_EQ(interim, 0);
  EXPECT_NE(got.find(" 200 OK\r\n"), std::string::npos) << got;
  EXPECT_NE(got.find("\"output\":\"w1 w2 w3 \""), std::string::npos) << got;
}

// Pipelined requests sent before the end of stream are all answered, in order.
TEST_F(HalfCloseTest, PipelinedRequestsBeforeTheEndAreAllAnswered) {
  const std::string got = final_response(
      raw_request("POST", "/v1/pipelines/default/runs", R"({"query":"slow","max_tokens":2,"seed":1})") +
      "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  const size_t first = got.find("\"output\":\"w1 w2 \"");
  const size_t second = got.find("{\"status\":\"ok\"}");
  EXPECT_NE(first, std::string::npos) << got;
  EXPECT_NE(second, std::string::npos) << got;
  EXPECT_LT(first, second) << got;
}

class WsCloseTest : public ServerFixture {
 protected:
  void SetUp() override { start(); }
};

TEST_F(WsCloseTest, InvalidCloseCodeIsAnsweredWith1002) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  ASSERT_TRUE(ws.close(9999, "bye").ok());
  auto m = ws.read(5000);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->kind, WsClient::Message::Kind::kClose);
  EXPECT_EQ(m->close_code, 1002);
}

TEST_F(WsCloseTest, ValidCloseCodeIsEchoed) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  ASSERT_TRUE(ws.close(4000, "bye").ok());
  auto m = ws.read(5000);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  ASSERT_EQ(m->kind, WsClient::Message::Kind::kClose);
  EXPECT_EQ(m->close_code, 4000);
}

}  // namespace
}  // namespace ragd::testing
