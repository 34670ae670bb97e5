// End to end: the real `ragd` binary with a tiny random model (`ragctl make-model --preset tiny`)
// and a temp data directory, on a free loopback port. Skipped with a message when bin/ragd or
// bin/ragctl is not built.
#include <fstream>

#include "../run_capture.h"
#include "real_daemon.h"

namespace ragd::testing {
namespace {

TEST_F(E2eTest, RoutesStreamsCancelAndCleanShutdown) {
  start_daemon("data1");
  EXPECT_EQ(get("/healthz").status, 200);
  // Documents.
  auto r = call("POST", "/v1/documents",
                R"({"documents":[{"id":"kv","title":"KV","text":"The KV cache stores attention keys and values for reuse across requests."},)"
                R"({"id":"rag","text":"Retrieval augmented generation fetches documents and puts them in the prompt."}]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).num("/ingested"), 2);
  r = get("/v1/documents/kv");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/id"), "kv");
  r = get("/v1/documents");  // the listing over the real document store
  ASSERT_EQ(r.status, 200) << r.body;
  ASSERT_EQ(Json(r.body).size("/data"), 2u) << r.body;
  EXPECT_EQ(Json(r.body).str("/data/0/id"), "kv");
  EXPECT_EQ(Json(r.body).str("/data/0/title"), "KV");
  EXPECT_GE(Json(r.body).num("/data/0/chunks"), 1);
  EXPECT_EQ(Json(r.body).str("/data/1/id"), "rag");
  // Pipelines and a non-streaming run.
  r = get("/v1/pipelines");
  ASSERT_EQ(r.status, 200) << r.body;
  Json pl(r.body);
  ASSERT_GE(pl.size("/data"), 1u);
  std::string pipeline = pl.str("/data/0/name");
  r = call("POST", "/v1/pipelines/" + pipeline + "/runs", R"({"query":"what does the KV cache store?","max_tokens":6,"seed":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json run(r.body);
  EXPECT_GE(run.size("/sources"), 1u);
  EXPECT_GE(run.num("/usage/completion_tokens"), 1);
  EXPECT_GT(run.num("/usage/prompt_tokens"), 0);
  // SSE: the same events as the WebSocket.
  std::vector<std::string> names;
  daemon::SseParser p([&](const std::string& e, const std::string&) { names.push_back(e); });
  HttpClient c("127.0.0.1", d_.port(), 60000);
  auto sr = c.request_stream("POST", "/v1/pipelines/" + pipeline + "/runs",
                             R"({"query":"what is retrieval augmented generation?","max_tokens":4,"stream":true})", {},
                             [&](std::string_view d) {
                               p.feed(d);
                               return true;
                             });
  ASSERT_TRUE(sr.ok());
  ASSERT_GE(names.size(), 3u);
  EXPECT_EQ(names.front(), "sources");
  EXPECT_EQ(names.back(), "done");
  // WebSocket with cancel.
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", d_.port(), "/v1/stream").ok());
  ASSERT_TRUE(ws.send_text(R"({"pipeline":")" + pipeline + R"(","query":"tell me everything","max_tokens":2000,"ignore_eos":true})").ok());
  std::string last;
  int tokens = 0;
  for (;;) {
    auto m = ws.read(60000);
    ASSERT_TRUE(m.ok() && m->kind == WsClient::Message::Kind::kText);
    Json j(m->text);
    last = j.str("/event");
    if (last == "token" && ++tokens == 2) ASSERT_TRUE(ws.send_text(R"({"type":"cancel"})").ok());
    if (last == "done") {
      EXPECT_EQ(j.str("/finish_reason"), "cancelled");
      break;
    }
    ASSERT_NE(last, "error") << m->text;
  }
  // Disconnect mid-stream frees the request (visible in stats).
  {
    WsClient gone;
    ASSERT_TRUE(gone.connect("127.0.0.1", d_.port(), "/v1/stream").ok());
    ASSERT_TRUE(gone.send_text(R"({"pipeline":")" + pipeline + R"(","query":"keep talking","max_tokens":2000,"ignore_eos":true})").ok());
    for (int seen = 0; seen < 2;) {
      auto m = gone.read(60000);
      ASSERT_TRUE(m.ok());
      seen += Json(m->text).str("/event") == "token";
    }
  }
  ASSERT_TRUE(wait_for([&] {
    Json s(get("/v1/cache/stats").body);
    return s.num("/requests/in_flight") == 0 && s.num("/executor/scheduler/running") == 0 &&
           s.num("/executor/scheduler/waiting") == 0;
  }, 60000)) << get("/v1/cache/stats").body;
  Json stats(get("/v1/cache/stats").body);
  EXPECT_GE(stats.num("/executor/scheduler/cancelled"), 2);
  // OpenAI-compatible.
  r = get("/v1/models");
  ASSERT_EQ(r.status, 200);
  std::string model = Json(r.body).str("/data/0/id");
  r = call("POST", "/v1/chat/completions",
           R"({"model":")" + model + R"(","messages":[{"role":"user","content":"hi"}],"max_tokens":3,"temperature":0})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/object"), "chat.completion");
  r = call("POST", "/v1/completions", R"({"prompt":"hello","max_tokens":3,"temperature":0,"logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/choices/0/logprobs/tokens"), static_cast<size_t>(Json(r.body).num("/usage/completion_tokens")));
  r = call("POST", "/v1/embeddings", R"({"input":["alpha","beta"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/data"), 2u);
  // Errors.
  expect_error(call("POST", "/v1/pipelines/nope/runs", R"({"query":"q"})"), 404, "pipeline_not_found", "nope");
  expect_error(call("POST", "/v1/pipelines/" + pipeline + "/runs", R"({"query":)"), 400, "invalid_json", "malformed");
  // Metrics saw it all.
  std::string m = get("/metrics").body;
  EXPECT_NE(m.find("ragd_time_to_first_token_seconds_count"), std::string::npos);
  EXPECT_NE(m.find("ragd_ready 1"), std::string::npos);
  EXPECT_NE(m.find("ragd_kv_cache_bytes{tier=\"hbm\"}"), std::string::npos) << m;
  EXPECT_NE(m.find("ragd_kv_cache_hits{tier=\"dram\"}"), std::string::npos) << m;
  // Delete, then SIGTERM: exit 0.
  EXPECT_EQ(call("DELETE", "/v1/documents/rag").status, 200);
  EXPECT_EQ(get("/v1/documents/rag").status, 404);
  EXPECT_EQ(d_.stop(), 0);
}

// SIGTERM: new connections are still accepted while in-flight runs finish, so that health probes
// see /readyz 503 (and new runs are refused with 503) instead of a refused connection.
// Citations: a document's url, metadata, format and headings go in through POST /v1/documents and
// come back in GET /v1/documents/{id} and in every source of a run (section path, byte range);
// metadata that is not an object of allowed values is a 400 naming the key, and nothing is written.
TEST_F(E2eTest, SourcesCarryCitations) {
  start_daemon("data_cite");
  auto r = call("POST", "/v1/documents",
                R"({"id":"guide","url":"https://example.org/guide","format":"markdown","metadata":{"lang":"en","year":2024},)"
                R"("text":"# Guide\n\nIntro words.\n\n## Zebra care\n\nZebras eat grass and drink water every day.\n"})");
  ASSERT_EQ(r.status, 200) << r.body;
  r = get("/v1/documents/guide");
  ASSERT_EQ(r.status, 200) << r.body;
  Json doc(r.body);
  EXPECT_EQ(doc.str("/url"), "https://example.org/guide");
  EXPECT_EQ(doc.str("/format"), "markdown");
  EXPECT_EQ(doc.str("/title"), "Guide");  // the first heading, as `ragctl ingest` titles Markdown
  EXPECT_EQ(doc.str("/metadata/lang"), "en");
  EXPECT_EQ(doc.num("/metadata/year"), 2024);
  r = call("POST", "/v1/pipelines/default/runs", R"({"query":"what do zebras eat?","max_tokens":2,"top_k":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json run(r.body);
  ASSERT_EQ(run.size("/sources"), 1u) << r.body;
  EXPECT_EQ(run.str("/sources/0/doc_id"), "guide");
  EXPECT_EQ(run.str("/sources/0/title"), "Guide");
  EXPECT_EQ(run.str("/sources/0/url"), "https://example.org/guide");
  EXPECT_EQ(run.str("/sources/0/section/0"), "Guide");
  EXPECT_EQ(run.str("/sources/0/section/1"), "Zebra care");
  const std::string text = doc.str("/text");
  const auto b = static_cast<size_t>(run.num("/sources/0/byte_begin")), e = static_cast<size_t>(run.num("/sources/0/byte_end"));
  ASSERT_LT(b, e);
  ASSERT_LE(e, text.size());
  EXPECT_NE(text.substr(b, e - b).find("Zebras eat grass"), std::string::npos) << text.substr(b, e - b);
  // Metadata filters inside the search: a matching filter keeps the source, another leaves none.
  r = call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","max_tokens":1,"top_k":1,"filter":{"year":{"gte":2020}}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).str("/sources/0/doc_id"), "guide");
  r = call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","max_tokens":1,"top_k":1,"filter":{"lang":"fr"}})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(Json(r.body).size("/sources"), 0u) << r.body;
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","filter":{"year":{"gteq":1}}})"), 400,
               "invalid_request", "filter key 'year'");
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","filter":[1]})"), 400, "invalid_request",
               "filter");
  expect_error(call("POST", "/v1/documents", R"({"id":"bad","text":"x y z","metadata":{"tags":{"a":1}}})"), 400,
               "invalid_request", "metadata key 'tags'");
  expect_error(call("POST", "/v1/documents", R"({"id":"bad","text":"x y z","format":"rtf"})"), 400, "invalid_request",
               "format");
  EXPECT_EQ(get("/v1/documents/bad").status, 404);
  // Speculative decoding: a draft model the server did not load, or method draft without one, is a
  // 400 naming it; the next request is served.
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","speculative_k":4,"draft_model":"/etc"})"), 400,
               "invalid_request", "draft_model '/etc' is not loaded by this server");
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","speculative_method":"draft"})"), 400,
               "invalid_request", "needs a draft_model");
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","speculative_method":"tree"})"), 400,
               "invalid_request", "ngram | draft");
  r = call("POST", "/v1/pipelines/default/runs", R"({"query":"zebras","max_tokens":2,"speculative_method":"ngram"})");
  EXPECT_EQ(r.status, 200) << r.body;
}

TEST_F(E2eTest, ReadyzAnswers503WhileDraining) {
  start_daemon("data_drain");
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"a","text":"alpha beta gamma delta"})").status, 200);
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", d_.port(), "/v1/stream").ok());
  ASSERT_TRUE(ws.send_text(R"({"query":"tell me everything","max_tokens":100000,"ignore_eos":true})").ok());
  for (int tokens = 0; tokens < 2;) {
    auto m = ws.read(60000);
    ASSERT_TRUE(m.ok() && m->kind == WsClient::Message::Kind::kText);
    tokens += Json(m->text).str("/event") == "token";
  }
  d_.signal(SIGTERM);
  // The run ends by itself when it reaches the model's 2,048 positions (a quarter of a second on a
  // fast machine), and the daemon exits then: poll until the signal has been seen, not a fixed wait.
  auto r = get("/readyz");
  for (int i = 0; i < 1000 && r.status == 200; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    r = get("/readyz");
  }
  expect_error(r, 503, "shutting_down", "shutting down");
  expect_error(call("POST", "/v1/pipelines/default/runs", R"({"query":"q"})"), 503, "shutting_down", "shutting down");
  ws.close(1000);  // the in-flight run is cancelled; the daemon then exits cleanly
  EXPECT_EQ(d_.wait_exit(60000), 0);
}

TEST_F(E2eTest, RagctlQueryAndStreamWithCtrlC) {
  start_daemon("data3");
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"a","text":"alpha beta gamma delta"})").status, 200);
  std::string url = "http://127.0.0.1:" + std::to_string(d_.port());
  EXPECT_EQ(run_program({kBin + "/ragctl", "query", "alpha?", "--url", url, "--max-tokens", "3"}), 0);
  EXPECT_EQ(run_program({kBin + "/ragctl", "query", "alpha?", "--url", url, "--pipeline", "nope"}), 1);
  // ragctl stream: SIGINT after the first tokens sends cancel; it prints the final event, exits 130.
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    std::string ws = "ws://127.0.0.1:" + std::to_string(d_.port());
    execl((kBin + "/ragctl").c_str(), "ragctl", "stream", "tell me about alpha", "--url", ws.c_str(), "--max-tokens",
          "5000", "--ignore-eos", nullptr);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  bool sent = false;
  char buf[4096];
  for (;;) {
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, 60000) <= 0) break;
    ssize_t n = read(fds[0], buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (!sent && out.find("Answer:") != std::string::npos && out.size() > out.find("Answer:") + 12) {
      kill(pid, SIGINT);
      sent = true;
    }
  }
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_TRUE(sent) << out;
  EXPECT_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 130) << out;
  EXPECT_NE(out.find("Sources:"), std::string::npos) << out;
  EXPECT_NE(out.find("[cancelled]"), std::string::npos) << out;
  EXPECT_NE(out.find("Timings:"), std::string::npos) << out;
  EXPECT_EQ(d_.stop(), 0);
}

TEST_F(E2eTest, ApiKeysAndRestartKeepsDocuments) {
  start_daemon("data2", {"--api-key", "k-acme=acme", "--api-key", "k-other=other"});
  daemon::Headers acme = {{"Authorization", "Bearer k-acme"}}, other = {{"Authorization", "Bearer k-other"}};
  expect_error(get("/v1/pipelines"), 401, "unauthorized", "missing API key");
  ASSERT_EQ(call("POST", "/v1/documents", R"({"id":"mine","text":"acme private notes"})", acme).status, 200);
  expect_error(call("GET", "/v1/documents/mine", "", other), 404, "document_not_found", "mine");
  EXPECT_EQ(d_.stop(), 0);
  // Restart on the same data directory: the document and its owner survive.
  start_daemon("data2", {"--api-key", "k-acme=acme", "--api-key", "k-other=other"});
  EXPECT_EQ(call("GET", "/v1/documents/mine", "", acme).status, 200);
  expect_error(call("GET", "/v1/documents/mine", "", other), 404, "document_not_found", "mine");
  EXPECT_EQ(d_.stop(), 0);
}

// A document store whose table files are damaged is found out when the daemon opens it (RocksDB
// checksums), not by the first run: the daemon exits with status 1 and says which store and why,
// instead of answering /readyz 200 and then failing every run.
TEST_F(E2eTest, CorruptDocumentStoreIsRefusedAtStartWithTheReason) {
  start_daemon("data_corrupt");
  for (int i = 0; i < 40; ++i) {
    const std::string body = R"({"id":"doc)" + std::to_string(i) + R"(","text":")" + std::string(2000, 'a' + i % 26) + R"("})";
    ASSERT_EQ(call("POST", "/v1/documents", body).status, 200);
  }
  ASSERT_EQ(d_.stop(), 0);
  start_daemon("data_corrupt");  // reopening replays the log into table files
  ASSERT_EQ(d_.stop(), 0);
  std::vector<fs::path> ssts;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "data_corrupt"))
    if (e.path().extension() == ".sst" && e.path().string().find("docstore") != std::string::npos) ssts.push_back(e.path());
  ASSERT_FALSE(ssts.empty()) << "no document-store table file to damage";
  for (const auto& p : ssts) {  // flip bytes in the middle of every table file
    std::fstream f(p, std::ios::in | std::ios::out | std::ios::binary);
    const auto size = static_cast<std::streamoff>(fs::file_size(p));
    for (std::streamoff off = size / 3; off < size / 3 + 256 && off < size; off += 7) {
      f.seekg(off);
      const char c = static_cast<char>(f.get());
      f.seekp(off);
      f.put(static_cast<char>(c ^ 0x5a));
    }
  }
  const std::string log = (dir_ / "corrupt.log").string();
  std::string err;
  ASSERT_TRUE(d_.start(daemon_args("data_corrupt", {}), &err, log)) << err;
  EXPECT_EQ(d_.wait_exit(60000), 1);
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("cannot start runtime"), std::string::npos) << text;
  EXPECT_NE(text.find("docstore"), std::string::npos) << text;
  EXPECT_NE(text.find("Corruption"), std::string::npos) << text;
}

TEST_F(E2eTest, PrintConfigWithoutConfigFile) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    execl((kBin + "/ragd").c_str(), "ragd", "--listen", "127.0.0.1:9", "--set", "runtime.max_running=7",
          "--print-config", nullptr);
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fds[0], buf, sizeof buf)) > 0) out.append(buf, static_cast<size_t>(n));
  close(fds[0]);
  int st = 0;
  waitpid(pid, &st, 0);
  EXPECT_EQ(WEXITSTATUS(st), 0);
  EXPECT_NE(out.find("listen = \"127.0.0.1:9\""), std::string::npos) << out;
  EXPECT_NE(out.find("max_running = 7"), std::string::npos) << out;
}

// A bad value of a setting that lives in a module's own Options (nested in RuntimeOptions) is
// refused by --print-config with that module's message, the one open_runtime would give.
TEST_F(E2eTest, PrintConfigRefusesABadModuleSetting) {
  struct Case {
    std::vector<std::string> sets;
    const char* message;
  };
  const Case cases[] = {
      {{"kvstore.remote.url=redis://127.0.0.1:6379", "kvstore.remote.trust_unauthenticated=true", "kvstore.remote.timeout_ms=0"},
       "kvstore.remote.timeout_ms must be in 1..60000, got 0"},
      {{"runtime.max_running=0"}, "runtime.max_running: must be > 0, got 0"},
      {{"runtime.tenant_share_percent=0"}, "runtime.tenant_share_percent must be in [1, 100], got 0"},
      {{"runtime.num_threads=-1"}, "runtime.num_threads: must be >= 0, got -1"},
      {{"runtime.speculative_k=17"}, "runtime.speculative_k must be in [0, 16], got 17"},
  };
  for (const Case& k : cases) {
    SCOPED_TRACE(k.message);
    std::vector<std::string> args = {kBin + "/ragd"};
    for (const std::string& s : k.sets) args.insert(args.end(), {"--set", s});
    args.push_back("--print-config");
    Ran r = run_capture(args);
    EXPECT_EQ(r.status, 2) << r.out << r.err;
    EXPECT_EQ(r.out, "");
    EXPECT_NE(r.err.find(k.message), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace ragd::testing
