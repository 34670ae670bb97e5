// The real daemon against the smaller holes of security issue 48: a key in both key tables, a huge
// request value echoed and logged, a server path in a replica's refusal, a client that shuts down
// its sending side after a complete request.
#include <fstream>
#include <sstream>

#include <sys/socket.h>

#include "../run_capture.h"
#include "real_daemon.h"

namespace ragd::testing {
namespace {

using HardeningE2eTest = E2eTest;

// A key in [auth.keys] and [auth.admin_keys] (here from --api-key and --admin-key) was silently an
// admin key. Refused at start, --print-config included, naming the key by its first 4 characters.
TEST_F(HardeningE2eTest, KeyInBothTablesIsRefusedAtStart) {
  const std::string key = "sk-both-tables-0123456789";
  Ran r = run_capture({kBin + "/ragd", "--api-key", key + "=acme", "--admin-key", key + "=ops", "--print-config"});
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("'sk-b...' is in both [auth.keys]"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(key), std::string::npos) << "the secret key is printed: " << r.err;
  // From the config file and a flag, starting for real.
  const fs::path cfg = dir_ / "keys.toml";
  std::ofstream(cfg) << "[auth.keys]\n\"" << key << "\" = \"acme\"\n";
  r = run_capture(daemon_args("keys_data", {"--config", cfg.string(), "--admin-key", key + "=ops"}));
  EXPECT_EQ(r.status, 2) << r.out << r.err;
  EXPECT_NE(r.err.find("[auth.admin_keys] (tenant 'ops')"), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(key), std::string::npos) << r.err;
  // Control: distinct keys start (--print-config shows them masked).
  r = run_capture({kBin + "/ragd", "--api-key", key + "=acme", "--admin-key", "sk-root-0123456789=ops", "--print-config"});
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("\"sk-b...\" = \"acme\""), std::string::npos) << r.out;
}

// A 4 MiB context_must_include was logged in full twice per request and its 400 echoed 1,024
// bytes of it where the docs say 128. Now the body, the SSE error event and every log line it
// causes quote 128 bytes of it and its length.
TEST_F(HardeningE2eTest, HugeRequestValueIsClippedInTheAnswerAndTheLog) {
  const fs::path log = dir_ / "echo.log";
  std::string err;
  ASSERT_TRUE(d_.start(daemon_args("echo_data", {}), &err, log.string())) << err;
  ASSERT_TRUE(wait_for([&] { return get("/readyz").status == 200; }, 60000)) << "never ready";
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"d1","text":"Rivers run to the sea."})").status, 200);
  const std::string huge(4u << 20, 'Z');
  const std::string len = "(" + std::to_string(huge.size()) + " bytes)";
  const std::string body = R"({"query":"where do rivers run?","max_tokens":2,"context_must_include":")" + huge + "\"";
  auto r = call("POST", "/v1/pipelines/default/runs", body + "}");
  expect_error(r, 400, "invalid_request", "context_must_include: no document '" + std::string(128, 'Z') + "\u2026" + len);
  EXPECT_LT(r.body.size(), 1024u) << r.body.substr(0, 300);
  r = call("POST", "/v1/pipelines/default/runs", body + R"(,"stream":true})");
  EXPECT_NE(r.body.find("event: error"), std::string::npos) << r.body.substr(0, 300);
  EXPECT_NE(r.body.find(len), std::string::npos) << r.body.substr(0, 300);
  EXPECT_LT(r.body.size(), 2048u) << r.body.substr(0, 300);
  EXPECT_EQ(r.body.find(std::string(129, 'Z')), std::string::npos);
  d_.stop();  // the log is complete
  const std::string text = slurp_file(log);
  EXPECT_NE(text.find(len), std::string::npos) << "the failures are not logged";
  EXPECT_EQ(text.find(std::string(129, 'Z')), std::string::npos) << "the log quotes more than 128 bytes of the value";
  for (size_t b = 0, e; b < text.size(); b = e + 1) {
    e = text.find('\n', b);
    if (e == std::string::npos) e = text.size();
    EXPECT_LT(e - b, 2048u) << text.substr(b, 300);
  }
  // The whole log (start-up, warnings of a loaded machine included) stays far below the 8 MB one
  // request used to cost.
  EXPECT_LT(text.size(), 256u << 10);
}

// A replica's 403 named the primary's absolute data directory; messages never carry server paths.
// The log keeps it.
TEST_F(HardeningE2eTest, ReplicaRefusalNamesNoServerPath) {
  const fs::path src = dir_ / "replica_src", primary = dir_ / "replica_primary";
  fs::create_directories(src);
  std::ofstream(src / "a.txt") << "The lighthouse stands on the northern cape.\n";
  ASSERT_EQ(run_program({kBin + "/ragctl", "ingest", src.string(), "--data", primary.string(), "--model",
                     (dir_ / "model").string()}),
            0);
  const fs::path log = dir_ / "replica.log";
  std::string err;
  ASSERT_TRUE(d_.start(daemon_args("replica_scratch", {"--set", "runtime.data_replica_of=" + primary.string()}), &err,
                       log.string()))
      << err;
  ASSERT_TRUE(wait_for([&] { return get("/readyz").status == 200; }, 60000)) << "never ready";
  for (const auto& r : {call("POST", "/v1/documents", R"({"id":"new","text":"A new document."})"),
                        call("DELETE", "/v1/documents/a.txt")}) {
    expect_error(r, 403, "forbidden", "this replica serves the corpus read-only; ingest on the primary");
    EXPECT_EQ(r.body.find(primary.string()), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find(dir_.string()), std::string::npos) << r.body;
    EXPECT_EQ(r.body.find('/'), std::string::npos) << "a path in the answer: " << r.body;
  }
  d_.stop();
  EXPECT_NE(slurp_file(log).find(primary.string()), std::string::npos) << "the log lost the primary's directory";
}

// A client that shuts down its sending side after a complete POST /v1/documents (`nc -N`) had its
// document stored and never acknowledged. Now the acknowledgement comes, then the server closes.
TEST_F(HardeningE2eTest, HalfClosedClientGetsItsAcknowledgement) {
  start_daemon("half_data");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "The harbour master logs every ship that enters the bay. ";
  const std::string body = R"({"id":"half","text":")" + text + "\"}";
  HttpClient c("127.0.0.1", d_.port(), 60000);
  ASSERT_TRUE(c.connect().ok());
  ASSERT_TRUE(c.send_raw("POST /v1/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
                         std::to_string(body.size()) + "\r\n\r\n" + body)
                  .ok());
  ASSERT_EQ(::shutdown(c.fd(), SHUT_WR), 0);
  std::string got;
  char buf[4096];
  for (;;) {
    pollfd p{c.fd(), POLLIN, 0};
    ASSERT_GT(::poll(&p, 1, 60000), 0) << "no answer and no close: " << got;
    const ssize_t n = ::recv(c.fd(), buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  // Interim "102 Processing" responses may come first (the probe that tells a half-closed client
  // from a gone one); the final response is the acknowledgement.
  const size_t final_at = got.find("HTTP/1.1 200 OK\r\n");
  ASSERT_NE(final_at, std::string::npos) << got;
  EXPECT_EQ(got.substr(0, final_at).find("HTTP/1.1 2"), std::string::npos) << got;
  Json j(got.substr(got.find("\r\n\r\n", final_at) + 4));
  ASSERT_TRUE(j.ok) << got;
  EXPECT_EQ(j.num("/ingested"), 1) << got;
  auto r = call("GET", "/v1/documents/half");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/text"), text);
}

}  // namespace
}  // namespace ragd::testing
