// Streaming over the fake runtime: SSE framing, WebSocket events, cancel, disconnects, slow
// readers, and the OpenAI-compatible routes.
#include <cstring>
#include <thread>

#include "server_fixture.h"

namespace ragd::testing {
namespace {

using daemon::DaemonConfig;
using daemon::SseParser;
using daemon::WsClient;

struct SseEvent {
  std::string event, data;
};

class StreamTest : public ServerFixture {
 protected:
  void SetUp() override {
    DaemonConfig cfg;
    cfg.server.stream_queue_limit = 8;
    start(cfg);
  }
  // POSTs and collects the SSE events; checks the framing headers.
  std::vector<SseEvent> sse(const std::string& target, const std::string& body, int* status = nullptr) {
    std::vector<SseEvent> out;
    SseParser p([&](const std::string& e, const std::string& d) { out.push_back({e, d}); });
    daemon::HttpClient c("127.0.0.1", port_);
    auto r = c.request_stream("POST", target, body, {}, [&](std::string_view d) {
      p.feed(d);
      return true;
    });
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    if (r.ok()) {
      if (status) *status = r->status;
      if (r->status == 200) {
        EXPECT_EQ(r->header("content-type"), "text/event-stream");
        EXPECT_EQ(r->header("transfer-encoding"), "chunked");
      }
    }
    return out;
  }
  std::vector<Json> ws_until_done(WsClient& ws) {
    std::vector<Json> evs;
    for (;;) {
      auto m = ws.read(10000);
      if (!m.ok() || m->kind != WsClient::Message::Kind::kText) {
        ADD_FAILURE() << "no terminal event";
        return evs;
      }
      evs.emplace_back(m->text);
      std::string e = evs.back().str("/event");
      if (e == "done" || e == "error") return evs;
    }
  }
};

TEST_F(StreamTest, PipelineRunSse) {
  auto evs = sse("/v1/pipelines/default/runs", R"({"query":"q","max_tokens":4,"seed":1,"stream":true})");
  ASSERT_EQ(evs.size(), 6u);  // sources, 4 tokens, done
  EXPECT_EQ(evs[0].event, "sources");
  EXPECT_EQ(Json(evs[0].data).str("/sources/0/doc_id"), "doc-a");
  std::string text;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(evs[1 + i].event, "token");
    Json t(evs[1 + i].data);
    EXPECT_EQ(t.str("/event"), "token");
    EXPECT_EQ(t.num("/index"), i);
    text += t.str("/text");
  }
  EXPECT_EQ(text, "w1 w2 w3 w4 ");
  EXPECT_EQ(evs[5].event, "done");
  Json d(evs[5].data);
  EXPECT_EQ(d.num("/usage/completion_tokens"), 4);
  EXPECT_NEAR(d.dbl("/timings/ttft_ms"), 4.0, 1e-9);
}

TEST_F(StreamTest, SseClientDisconnectCancelsRun) {
  daemon::HttpClient c("127.0.0.1", port_);
  int tokens = 0;
  auto r = c.request_stream("POST", "/v1/pipelines/default/runs",
                            R"({"query":"slow","max_tokens":1000,"stream":true})", {}, [&](std::string_view d) {
                              tokens += d.find("\"token\"") != std::string_view::npos;
                              return tokens < 3;  // hang up after a few tokens
                            });
  ASSERT_TRUE(r.ok());
  ASSERT_TRUE(wait_for([&] { return ex_.active() == 0; })) << "run still active after disconnect";
  EXPECT_GE(ex_.cancels() + ex_.sink_refusals(), 1);
  ASSERT_TRUE(wait_for([&] { return in_flight() == 0; }));
  Json stats(call("GET", "/v1/cache/stats").body);
  EXPECT_EQ(stats.num("/executor/kv_pool/used_blocks"), 0);
  EXPECT_EQ(stats.num("/requests/running"), 0);
  // Counted once, as disconnected, with the tokens it streamed.
  const std::string m = call("GET", "/metrics").body;
  EXPECT_NE(m.find("finish_reason=\"disconnected\"} 1"), std::string::npos) << m;
  const size_t g = m.find("\nragd_generation_tokens_total ");
  ASSERT_NE(g, std::string::npos) << m;
  EXPECT_GE(std::stod(m.substr(g + 30)), 3.0) << m.substr(g, 60);
}

TEST_F(StreamTest, WebSocketEventsInOrder) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  ASSERT_TRUE(ws.send_text(R"({"type":"run","pipeline":"docs","query":"hi","max_tokens":3,"seed":4})").ok());
  auto evs = ws_until_done(ws);
  ASSERT_EQ(evs.size(), 5u);
  EXPECT_EQ(evs[0].str("/event"), "sources");
  EXPECT_EQ(evs[1].str("/text"), "w4 ");
  EXPECT_EQ(evs[3].num("/index"), 2);
  EXPECT_EQ(evs[4].str("/event"), "done");
  EXPECT_EQ(evs[4].str("/finish_reason"), "length");
  EXPECT_EQ(ex_.last_request().pipeline, "docs");
  // The connection serves another run, and bad input keeps it open.
  ASSERT_TRUE(ws.send_text("{not json").ok());
  auto m = ws.read(10000);
  ASSERT_TRUE(m.ok());
  Json err(m->text);
  EXPECT_EQ(err.str("/event"), "error");
  EXPECT_EQ(err.str("/error/code"), "invalid_json");
  ASSERT_TRUE(ws.send_text(R"({"query":"again","max_tokens":2,"temperature":9})").ok());
  m = ws.read(10000);
  ASSERT_TRUE(m.ok());
  EXPECT_NE(Json(m->text).str("/error/message").find("'temperature' is out of range"), std::string::npos) << m->text;
  ASSERT_TRUE(ws.send_text(R"({"query":"again","max_tokens":2})").ok());
  EXPECT_EQ(ws_until_done(ws).size(), 4u);
  ASSERT_TRUE(ws.close().ok());
}

TEST_F(StreamTest, WebSocketCancel) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  ASSERT_TRUE(ws.send_text(R"({"query":"slow","max_tokens":1000})").ok());
  int tokens = 0;
  std::vector<Json> evs;
  for (;;) {
    auto m = ws.read(10000);
    ASSERT_TRUE(m.ok() && m->kind == WsClient::Message::Kind::kText);
    evs.emplace_back(m->text);
    std::string e = evs.back().str("/event");
    if (e == "token" && ++tokens == 2) ASSERT_TRUE(ws.send_text(R"({"type":"cancel"})").ok());
    if (e == "done" || e == "error") break;
  }
  EXPECT_EQ(evs.back().str("/event"), "done");
  EXPECT_EQ(evs.back().str("/finish_reason"), "cancelled");
  EXPECT_LT(evs.back().num("/usage/completion_tokens"), 1000);
  EXPECT_GE(ex_.cancels(), 1);
}

TEST_F(StreamTest, WebSocketSecondRunWhileActiveIsRefused) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  ASSERT_TRUE(ws.send_text(R"({"query":"slow","max_tokens":1000})").ok());
  ASSERT_TRUE(ws.send_text(R"({"query":"second","max_tokens":1})").ok());
  bool refused = false;
  for (int i = 0; i < 2000 && !refused; ++i) {
    auto m = ws.read(10000);
    ASSERT_TRUE(m.ok() && m->kind == WsClient::Message::Kind::kText);
    Json j(m->text);
    if (j.str("/event") == "error") {
      EXPECT_EQ(j.str("/error/code"), "run_in_progress");
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  ASSERT_TRUE(ws.send_text(R"({"type":"cancel"})").ok());
  ws_until_done(ws);
}

TEST_F(StreamTest, WebSocketDisconnectFreesRun) {
  {
    WsClient ws;
    ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
    ASSERT_TRUE(ws.send_text(R"({"query":"slow","max_tokens":1000})").ok());
    auto m = ws.read(10000);  // sources
    ASSERT_TRUE(m.ok());
    ASSERT_EQ(ex_.active(), 1);
  }  // socket closed without a close frame
  ASSERT_TRUE(wait_for([&] { return ex_.active() == 0; }));
  ASSERT_TRUE(wait_for([&] { return in_flight() == 0; }));
  Json stats(call("GET", "/v1/cache/stats").body);
  EXPECT_EQ(stats.num("/executor/kv_pool/used_blocks"), 0);
  EXPECT_EQ(stats.num("/executor/scheduler/running"), 0);
}

TEST_F(StreamTest, WebSocketSlowReaderIsDisconnectedAndCancelled) {
  WsClient ws;
  ASSERT_TRUE(ws.connect("127.0.0.1", port_, "/v1/stream").ok());
  // 64 KiB tokens and a queue limit of 8: socket buffers fill, then the queue, then we are cut off.
  ASSERT_TRUE(ws.send_text(R"({"query":"big","max_tokens":100000})").ok());
  ASSERT_TRUE(wait_for([&] { return ex_.sink_refusals() + ex_.cancels() >= 1; }, 30000)) << "run was not cancelled";
  ASSERT_TRUE(wait_for([&] { return ex_.active() == 0; }, 30000)) << "run still active";
  // Drain: the stream ends with close code 1008 (or the socket is cut).
  bool closed = false;
  uint16_t code = 0;
  for (int i = 0; i < 100000 && !closed; ++i) {
    auto m = ws.read(5000);
    if (!m.ok()) {
      closed = true;
      break;
    }
    if (m->kind == WsClient::Message::Kind::kClose) {
      closed = true;
      code = m->close_code;
    }
    if (m->kind == WsClient::Message::Kind::kTimeout) break;
  }
  EXPECT_TRUE(closed);
  if (code != 0) EXPECT_EQ(code, 1008);
  ASSERT_TRUE(wait_for([&] { return in_flight() == 0; }));
}

TEST_F(StreamTest, WebSocketAuth) {
  server_->stop();
  DaemonConfig cfg;
  cfg.auth.keys = {{"k1", "acme"}};
  start(cfg);
  WsClient ws;
  Status st = ws.connect("127.0.0.1", port_, "/v1/stream");
  EXPECT_FALSE(st.ok());
  EXPECT_EQ(ws.upgrade_status(), 401);
  EXPECT_NE(st.message().find("missing API key"), std::string::npos) << st.message();
  WsClient ok;
  ASSERT_TRUE(ok.connect("127.0.0.1", port_, "/v1/stream", {{"Authorization", "Bearer k1"}}).ok());
  WsClient by_query;
  ASSERT_TRUE(by_query.connect("127.0.0.1", port_, "/v1/stream?api_key=k1").ok());
}

// ---- OpenAI-compatible ----
TEST_F(StreamTest, ChatCompletionNonStreaming) {
  auto r = call("POST", "/v1/chat/completions",
                R"({"model":"fake-llama","messages":[{"role":"system","content":"be brief"},)"
                R"({"role":"user","content":[{"type":"text","text":"hello"}]}],"max_tokens":3,"seed":0,)"
                R"("stop":["\n\n"],"logprobs":true,"temperature":0.2,"user":"accepted-and-ignored"})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  EXPECT_EQ(j.str("/object"), "chat.completion");
  EXPECT_EQ(j.str("/model"), "fake-llama");
  EXPECT_EQ(j.str("/choices/0/message/role"), "assistant");
  EXPECT_EQ(j.str("/choices/0/message/content"), "w0 w1 w2 ");
  EXPECT_EQ(j.str("/choices/0/finish_reason"), "length");
  EXPECT_EQ(j.size("/choices/0/logprobs/content"), 3u);
  EXPECT_NEAR(j.dbl("/choices/0/logprobs/content/1/logprob"), -0.25, 1e-6);
  EXPECT_EQ(j.num("/usage/completion_tokens"), 3);
  EXPECT_EQ(j.num("/usage/total_tokens"), j.num("/usage/prompt_tokens") + 3);
  auto req = ex_.last_request();
  ASSERT_EQ(req.messages.size(), 2u);
  EXPECT_EQ(req.messages[1].content, "hello");
  EXPECT_TRUE(req.pipeline.empty());
  ASSERT_TRUE(req.sampling.stop.has_value());
  ASSERT_EQ(req.sampling.stop->size(), 1u);
  EXPECT_EQ((*req.sampling.stop)[0], "\n\n");
  EXPECT_TRUE(req.want_logprobs);
}

TEST_F(StreamTest, ChatCompletionStreamingSse) {
  auto evs = sse("/v1/chat/completions",
                 R"({"model":"fake-llama","messages":[{"role":"user","content":"hi"}],"max_tokens":2,"stream":true,)"
                 R"("stream_options":{"include_usage":true},"pipeline":"default"})");
  ASSERT_GE(evs.size(), 6u);
  EXPECT_EQ(evs.back().data, "[DONE]");
  // sources extension chunk, role chunk, 2 content chunks, finish chunk, usage chunk, [DONE]
  Json src(evs[0].data);
  EXPECT_EQ(src.str("/ragd/sources/0/doc_id"), "doc-a");
  Json role(evs[1].data);
  EXPECT_EQ(role.str("/object"), "chat.completion.chunk");
  EXPECT_EQ(role.str("/choices/0/delta/role"), "assistant");
  std::string text;
  for (size_t i = 2; i + 3 < evs.size(); ++i) text += Json(evs[i].data).str("/choices/0/delta/content");
  EXPECT_EQ(text, "w0 w1 ");
  Json fin(evs[evs.size() - 3].data);
  EXPECT_EQ(fin.str("/choices/0/finish_reason"), "length");
  Json usage(evs[evs.size() - 2].data);
  EXPECT_EQ(usage.size("/choices"), 0u);
  EXPECT_EQ(usage.num("/usage/completion_tokens"), 2);
  EXPECT_EQ(usage.num("/usage/prompt_tokens_details/cached_tokens"), 6);
  EXPECT_EQ(ex_.last_request().query, "hi");
}

// model = a pipeline id; a pipeline that numbers its passages annotates the answer's "[n]" markers,
// whole and streamed (the fake answers "Grass [1] and water [2, 9]." to "citations").
TEST_F(StreamTest, PipelineModelAnnotatesCitations) {
  const std::string body = R"({"model":"pipeline:docs","messages":[{"role":"user","content":"citations"}],"max_tokens":5)";
  auto r = call("POST", "/v1/chat/completions", body + "}");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  EXPECT_EQ(j.str("/model"), "pipeline:docs");
  EXPECT_EQ(ex_.last_request().pipeline, "docs");
  EXPECT_EQ(ex_.last_request().query, "citations");
  EXPECT_EQ(j.str("/choices/0/message/content"), "Grass [1] and water [2, 9].");
  ASSERT_EQ(j.size("/choices/0/message/annotations"), 2u) << r.body;  // 9 is not a passage
  EXPECT_EQ(j.num("/choices/0/message/annotations/0/url_citation/start_index"), 6);
  EXPECT_EQ(j.num("/choices/0/message/annotations/0/url_citation/end_index"), 9);
  EXPECT_EQ(j.str("/choices/0/message/annotations/0/url_citation/doc_id"), "doc-a");
  EXPECT_EQ(j.str("/choices/0/message/annotations/0/url_citation/url"), "/v1/documents/doc-a");
  EXPECT_EQ(j.num("/choices/0/message/annotations/1/url_citation/start_index"), 20);
  EXPECT_EQ(j.num("/choices/0/message/annotations/1/url_citation/end_index"), 26);
  EXPECT_EQ(j.str("/choices/0/message/annotations/1/url_citation/doc_id"), "doc-b");
  // Streamed: the same annotations in a delta after the last content, before the finish chunk.
  auto evs = sse("/v1/chat/completions", body + R"(,"stream":true})");
  ASSERT_GE(evs.size(), 4u);
  Json ann(evs[evs.size() - 3].data);
  ASSERT_EQ(ann.size("/choices/0/delta/annotations"), 2u) << evs[evs.size() - 3].data;
  EXPECT_EQ(ann.num("/choices/0/delta/annotations/1/url_citation/start_index"), 20);
  EXPECT_EQ(Json(evs[evs.size() - 2].data).str("/choices/0/finish_reason"), "length");
  // The default pipeline does not number its passages: no annotations.
  r = call("POST", "/v1/chat/completions", R"({"model":"default","messages":[{"role":"user","content":"citations"}],"max_tokens":5})");
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_FALSE(Json(r.body).has("/choices/0/message/annotations"));
}

TEST_F(StreamTest, CompletionWithLogprobs) {
  auto r = call("POST", "/v1/completions", R"({"prompt":"once upon","max_tokens":2,"logprobs":1})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  EXPECT_EQ(j.str("/object"), "text_completion");
  EXPECT_EQ(j.str("/choices/0/text"), "w0 w1 ");
  EXPECT_EQ(j.size("/choices/0/logprobs/tokens"), 2u);
  EXPECT_EQ(j.num("/choices/0/logprobs/text_offset/1"), 3);
  EXPECT_EQ(ex_.last_request().prompt, "once upon");
  int st = 0;
  auto evs = sse("/v1/completions", R"({"prompt":"x","max_tokens":2,"stream":true})", &st);
  ASSERT_EQ(evs.size(), 4u) << "status " << st;
  EXPECT_EQ(Json(evs[0].data).str("/choices/0/text"), "w0 ");
  EXPECT_EQ(evs[3].data, "[DONE]");
}

TEST_F(StreamTest, OpenAiBadInputs) {
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":"hi"})"), 400, "invalid_request",
               "'messages' must be an array");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"wizard","content":"x"}]})"), 400,
               "invalid_request", "'messages[0].role' must be system, user, assistant or tool");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"n":17})"), 400,
               "invalid_request", "'n'");
  expect_error(call("POST", "/v1/chat/completions", R"({"messages":[{"role":"user","content":"x"}],"some_sdk_field":1})"),
               400, "invalid_request", "unknown field 'some_sdk_field'");
  expect_error(call("POST", "/v1/chat/completions", R"({"model":"gpt-9","messages":[{"role":"user","content":"x"}]})"),
               404, "model_not_found", "gpt-9");
  expect_error(call("POST", "/v1/chat/completions",
                    R"({"messages":[{"role":"user","content":"x"}],"pipeline":"nope"})"),
               404, "pipeline_not_found", "nope");
  expect_error(call("POST", "/v1/completions", R"({"prompt":["a",{"b":1}]})"), 400, "invalid_request", "'prompt[1]'");
  expect_error(call("POST", "/v1/completions", R"({"prompt":"a","top_p":0})"), 400, "invalid_request", "'top_p'");
}

TEST_F(StreamTest, EmbeddingsFloatAndBase64) {
  auto r = call("POST", "/v1/embeddings", R"({"model":"fake-llama","input":["alpha beta","gamma"]})");
  ASSERT_EQ(r.status, 200) << r.body;
  Json j(r.body);
  ASSERT_EQ(j.size("/data"), 2u);
  EXPECT_EQ(j.size("/data/0/embedding"), 8u);
  auto ref = FakeDocuments::embed_one("gamma");
  for (int i = 0; i < 8; ++i) EXPECT_NEAR(j.dbl("/data/1/embedding/" + std::to_string(i)), ref[i], 1e-6);
  EXPECT_EQ(j.num("/usage/prompt_tokens"), 3);
  r = call("POST", "/v1/embeddings", R"({"input":"gamma","encoding_format":"base64"})");
  ASSERT_EQ(r.status, 200);
  std::string b64 = Json(r.body).str("/data/0/embedding");
  // Decode and compare with the float reference.
  auto val = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : 63;
  };
  std::string bytes;
  for (size_t i = 0; i + 3 < b64.size(); i += 4) {
    uint32_t v = (val(b64[i]) << 18) | (val(b64[i + 1]) << 12) | ((b64[i + 2] == '=' ? 0 : val(b64[i + 2])) << 6) |
                 (b64[i + 3] == '=' ? 0 : val(b64[i + 3]));
    bytes += static_cast<char>(v >> 16);
    if (b64[i + 2] != '=') bytes += static_cast<char>((v >> 8) & 0xff);
    if (b64[i + 3] != '=') bytes += static_cast<char>(v & 0xff);
  }
  ASSERT_EQ(bytes.size(), 32u);
  std::vector<float> got(8);
  std::memcpy(got.data(), bytes.data(), 32);
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ(got[i], ref[i]);
  expect_error(call("POST", "/v1/embeddings", R"({"input":[1,2,3]})"), 400, "invalid_request", "token-id inputs");
  expect_error(call("POST", "/v1/embeddings", R"({"input":"x","encoding_format":"hex"})"), 400, "invalid_request",
               "'encoding_format'");
}

TEST_F(StreamTest, Models) {
  auto r = call("GET", "/v1/models");
  ASSERT_EQ(r.status, 200);
  Json j(r.body);
  EXPECT_EQ(j.str("/object"), "list");
  EXPECT_EQ(j.str("/data/0/id"), "fake-llama");
  EXPECT_EQ(call("GET", "/v1/models/fake-llama").status, 200);
  expect_error(call("GET", "/v1/models/other"), 404, "model_not_found", "other");
}

}  // namespace
}  // namespace ragd::testing
