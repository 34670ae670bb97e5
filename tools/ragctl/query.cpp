// ragctl query "question" [--pipeline NAME] [--url http://host:port]: one non-streaming pipeline
// run against a running daemon, pretty-printed (or --json for the raw response).
#include <CLI/CLI.hpp>

#include "command.h"
#include "ragd/daemon/client.h"
#include "ragd/common/json_writer.h"
#include "run_print.h"

namespace ragd::tools {
namespace {

struct QueryArgs {
  std::string question, pipeline = "default", url = default_daemon_url(), api_key = default_api_key(), reuse;
  int top_k = -1, max_tokens = -1;
  double temperature = -1;
  int64_t seed = -1;
  bool json = false;
};

std::string run_body(const QueryArgs& a, bool stream) {
  JsonWriter w;
  w.begin_object().key("query").value(a.question);
  if (a.top_k > 0) w.key("top_k").value(a.top_k);
  if (a.max_tokens > 0) w.key("max_tokens").value(a.max_tokens);
  if (a.temperature >= 0) w.key("temperature").value(a.temperature);
  if (a.seed >= 0) w.key("seed").value(a.seed);
  if (!a.reuse.empty()) w.key("reuse").value(a.reuse);
  if (stream) w.key("stream").value(true);
  w.end_object();
  return w.take();
}

int run_query(const QueryArgs& a) {
  auto url = daemon::parse_url(a.url);
  if (!url.ok()) {
    std::fprintf(stderr, "ragctl query: %s\n", url.status().message().c_str());
    return 2;
  }
  daemon::HttpClient c(url->host, url->port, 600000);
  daemon::Headers h;
  if (!a.api_key.empty()) h.emplace_back("Authorization", "Bearer " + a.api_key);
  std::string target = "/v1/pipelines/" + a.pipeline + "/runs";
  auto r = c.request("POST", target, run_body(a, false), h);
  if (!r.ok()) {
    std::fprintf(stderr, "ragctl query: %s\n", r.status().message().c_str());
    return 1;
  }
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  bool parsed = !parser.parse(r->body).get(doc);
  if (r->status != 200) {
    if (parsed)
      std::fprintf(stderr, "ragctl query: HTTP %d %s: %s\n", r->status, jstr(doc, "/error/code").c_str(),
                   jstr(doc, "/error/message").c_str());
    else
      std::fprintf(stderr, "ragctl query: HTTP %d: %s\n", r->status, r->body.c_str());
    return 1;
  }
  if (a.json || !parsed) {
    std::printf("%s\n", r->body.c_str());
    return 0;
  }
  std::printf("Answer (%s):\n%s\n\n", jstr(doc, "/finish_reason").c_str(), jstr(doc, "/output").c_str());
  simdjson::dom::element e;
  if (!doc["sources"].get(e)) print_sources(e);
  simdjson::dom::element u, t;
  if (!doc["usage"].get(u) && !doc["timings"].get(t)) print_usage_timings(u, t);
  std::printf("Request: %s\n", jstr(doc, "/id").c_str());
  return 0;
}

Registration reg("query", "ask a running daemon one question (non-streaming) and pretty-print the answer",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<QueryArgs>();
                   sub.add_option("question", a->question, "the question")->required();
                   sub.add_option("--pipeline", a->pipeline, "pipeline name")->capture_default_str();
                   sub.add_option("--url", a->url, "daemon URL (default $RAGD_URL or http://127.0.0.1:8080)");
                   sub.add_option("--api-key", a->api_key, "API key (default $RAGD_API_KEY)");
                   sub.add_option("--top-k", a->top_k, "chunks to retrieve (default: the pipeline's)");
                   sub.add_option("--max-tokens", a->max_tokens, "tokens to generate (default: the pipeline's)");
                   sub.add_option("--temperature", a->temperature, "sampling temperature (default 0 = greedy)");
                   sub.add_option("--seed", a->seed, "sampling seed");
                   sub.add_option("--reuse", a->reuse, "none | prefix | knowledge_tree (default: the pipeline's)");
                   sub.add_flag("--json", a->json, "print the raw JSON response");
                   return [a]() { return run_query(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
