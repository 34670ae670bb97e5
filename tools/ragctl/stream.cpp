// ragctl stream "question" [--pipeline NAME] [--url ws://host:port]: a WebSocket run that prints
// the sources, then tokens as they arrive (an iterative pipeline's context changes in between,
// marked with the token they apply from), then usage and timings. Ctrl-C sends {"type":"cancel"}
// and waits for the daemon's final event (a second Ctrl-C quits at once).
#include <atomic>
#include <csignal>

#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/daemon/client.h"
#include "ragd/common/json_writer.h"
#include "run_print.h"

namespace ragd::tools {
namespace {

std::atomic<int> g_interrupts{0};
void on_sigint(int) { g_interrupts.fetch_add(1); }

struct StreamArgs {
  std::string question, pipeline = "default", url, api_key = default_api_key(), reuse, overlap;
  int top_k = -1, max_tokens = -1, retrieval_interval = -1;
  double temperature = -1;
  int64_t seed = -1;
  bool ignore_eos = false;
};

int run_stream(const StreamArgs& a) {
  std::string u = a.url.empty() ? default_daemon_url() : a.url;
  auto url = daemon::parse_url(u);
  if (!url.ok()) {
    std::fprintf(stderr, "ragctl stream: %s\n", url.status().message().c_str());
    return 2;
  }
  std::string target = url->target == "/" ? "/v1/stream" : url->target;
  daemon::Headers h;
  if (!a.api_key.empty()) h.emplace_back("Authorization", "Bearer " + a.api_key);
  daemon::WsClient ws;
  if (Status st = ws.connect(url->host, url->port, target, h); !st.ok()) {
    std::fprintf(stderr, "ragctl stream: %s\n", st.message().c_str());
    return 1;
  }
  JsonWriter w;
  w.begin_object().key("type").value("run").key("pipeline").value(a.pipeline).key("query").value(a.question);
  if (a.top_k > 0) w.key("top_k").value(a.top_k);
  if (a.max_tokens > 0) w.key("max_tokens").value(a.max_tokens);
  if (a.temperature >= 0) w.key("temperature").value(a.temperature);
  if (a.seed >= 0) w.key("seed").value(a.seed);
  if (!a.reuse.empty()) w.key("reuse").value(a.reuse);
  if (!a.overlap.empty()) w.key("overlap").value(a.overlap);
  if (a.retrieval_interval > 0) w.key("retrieval_interval").value(a.retrieval_interval);
  if (a.ignore_eos) w.key("ignore_eos").value(true);
  w.end_object();
  if (Status st = ws.send_text(w.str()); !st.ok()) {
    std::fprintf(stderr, "ragctl stream: %s\n", st.message().c_str());
    return 1;
  }
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, nullptr);  // no SA_RESTART: poll() returns EINTR at once

  simdjson::dom::parser parser;
  bool cancel_sent = false, in_answer = false;
  for (;;) {
    int n = g_interrupts.load();
    if (n >= 2) {
      std::fprintf(stderr, "\nragctl stream: interrupted\n");
      return 130;
    }
    if (n == 1 && !cancel_sent) {
      cancel_sent = true;
      (void)ws.send_text(R"({"type":"cancel"})");
      std::fprintf(stderr, "\n[cancelling...]\n");
    }
    auto m = ws.read(100);
    if (!m.ok()) {
      if (m.status().code() == StatusCode::kCancelled) continue;  // EINTR from Ctrl-C
      std::fprintf(stderr, "\nragctl stream: %s\n", m.status().message().c_str());
      return 1;
    }
    if (m->kind == daemon::WsClient::Message::Kind::kTimeout) continue;
    if (m->kind == daemon::WsClient::Message::Kind::kClose) {
      std::fprintf(stderr, "\nragctl stream: server closed the connection (%u %s)\n", m->close_code, m->close_reason.c_str());
      return 1;
    }
    simdjson::dom::element ev;
    if (parser.parse(m->text).get(ev)) continue;
    std::string kind = jstr(ev, "/event");
    if (kind == "sources") {
      int64_t from = 0;
      (void)ev["from_token"].get(from);
      if (in_answer) std::printf("\n[context changes at token %lld]\n", static_cast<long long>(from));
      simdjson::dom::element s;
      if (!ev["sources"].get(s)) print_sources(s);
      if (in_answer) std::printf("Answer (continued):\n");
    } else if (kind == "token") {
      if (!in_answer) {
        std::printf("Answer:\n");
        in_answer = true;
      }
      std::string t = jstr(ev, "/text");
      std::fwrite(t.data(), 1, t.size(), stdout);
      std::fflush(stdout);
    } else if (kind == "done") {
      std::printf("\n\n[%s]\n", jstr(ev, "/finish_reason").c_str());
      simdjson::dom::element u, t;
      if (!ev["usage"].get(u) && !ev["timings"].get(t)) print_usage_timings(u, t);
      (void)ws.close(1000);
      return cancel_sent ? 130 : 0;
    } else if (kind == "error") {
      std::fprintf(stderr, "\nragctl stream: %s: %s\n", jstr(ev, "/error/code").c_str(), jstr(ev, "/error/message").c_str());
      (void)ws.close(1000);
      return 1;
    }
  }
}

Registration reg("stream", "ask a running daemon a question over WebSocket and print tokens as they arrive",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<StreamArgs>();
                   sub.add_option("question", a->question, "the question")->required();
                   sub.add_option("--pipeline", a->pipeline, "pipeline name")->capture_default_str();
                   sub.add_option("--url", a->url, "daemon URL, ws://host:port[/v1/stream] (default $RAGD_URL)");
                   sub.add_option("--api-key", a->api_key, "API key (default $RAGD_API_KEY)");
                   sub.add_option("--top-k", a->top_k, "chunks to retrieve (default: the pipeline's)");
                   sub.add_option("--max-tokens", a->max_tokens, "tokens to generate (default: the pipeline's)");
                   sub.add_option("--temperature", a->temperature, "sampling temperature (default 0 = greedy)");
                   sub.add_option("--seed", a->seed, "sampling seed");
                   sub.add_option("--reuse", a->reuse, "none | prefix | knowledge_tree | cacheblend | epic | auto");
                   sub.add_option("--overlap", a->overlap, "iterative pipelines: none | piperag | speculative | both");
                   sub.add_option("--retrieval-interval", a->retrieval_interval,
                                  "iterative pipelines: generated tokens between retrievals");
                   sub.add_flag("--ignore-eos", a->ignore_eos, "keep generating past end-of-sequence");
                   return [a]() { return run_stream(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
