// OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models.
// Unknown request fields are ignored (SDKs send extras); known ones are type- and range-checked.
// A pipeline runs when `model` is its id (openai_models.h) or the "pipeline" extension field names
// it; the query is the conversation's recent user turns (rag_query.h); "retrieval_top_k",
// "retrieval_mode" and "filter" shape its search; responses then carry "ragd": {"sources",
// "timings", "usage"} and, for pipelines that number their passages, url_citation annotations.
#include <cctype>

#include "openai_encode.h"
#include "openai_models.h"
#include "rag_query.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// A pipeline run's pipeline (the model's id, or the "pipeline" field: both may be sent when they
// agree) and query (chat: rag_query's rule; completions: the prompt).
ApiError set_rag_query(const ServedModel& served, bool chat, pipelines::RunRequest* run) {
  if (served.kind == ServedModel::Kind::kPipeline) {
    if (!run->pipeline.empty() && run->pipeline != served.pipeline)
      return bad_request("pipeline", "field 'pipeline' names '" + clip_input(run->pipeline) + "' but model '" + served.id +
                                         "' is pipeline '" + served.pipeline + "'");
    run->pipeline = served.pipeline;
  }
  if (run->pipeline.empty()) return {};
  // The pipeline's existence and defaults are the executor's (an unknown one: 404 from start_run).
  if (chat) {
    run->query = rag_query(run->messages);
    if (run->query.empty()) return bad_request("messages", "a pipeline run needs a non-empty user message as its query");
  } else {
    if (!run->prompt_ids.empty()) return bad_request("prompt", "a pipeline's query is text: field 'prompt' must be a string");
    run->query = run->prompt;
  }
  return {};
}

}  // namespace

void ApiImpl::chat_completions(const ReqCtx& ctx, const HttpRequest& req, Responder respond, bool chat) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  Fields f(obj);
  pipelines::Executor* ex = executor();
  const ModelCatalog catalog = ModelCatalog::of(*ex);
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  ServedModel served;
  if (auto e = catalog.resolve(model, &served); e.failed()) return respond(to_response(e));
  // parse
  OaiRequest parsed;
  if (auto e = parse_openai_request(f, chat, &parsed); e.failed()) return respond(to_response(e));
  pipelines::RunRequest run = std::move(parsed.run);
  if (auto e = set_rag_query(served, chat, &run); e.failed()) return respond(to_response(e));
  run.id = ctx.id;
  run.tenant = ctx.tenant;
  if (ctx.authed_by_key) run.kv_scope = run.tenant;  // tenants never reuse each other's KV
  auto st = std::make_shared<OaiState>();
  st->chat = chat;
  st->id = (chat ? "chatcmpl-" : "cmpl-") + ctx.id;
  st->model = served.id;
  st->created = unix_now();
  if (const ServedModel* p = catalog.pipeline(run.pipeline)) st->annotate = chat && p->number_passages;
  st->include_usage = parsed.include_usage;
  st->want_logprobs = parsed.want_logprobs;
  const bool stream = parsed.stream;
  // run
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  log::daemon()->info("{} {} model={} pipeline='{}' stream={}", ctx.id, chat ? "chat completion" : "completion",
                      clip_input(served.id), clip_input(run.pipeline), stream);
  // respond
  if (stream) {
    auto bridge = std::make_shared<SseBridge>();
    ApiError e = start_run(std::move(run), ctx.route, std::move(slot), openai_stream_consumer(bridge, st));
    if (e.failed()) return respond(to_response(e));
    return respond(sse_response(bridge, ctx.id));
  }
  ApiError e = start_run(std::move(run), ctx.route, std::move(slot), openai_collect_consumer(st, respond));
  if (e.failed()) return respond(to_response(e));
  cancel_on_disconnect(req, ctx.id);
}

void ApiImpl::embeddings(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  Fields f(obj);
  const std::string model_name = executor()->model_name();
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  if (!model.empty() && model != model_name && model != "ragd")
    return respond(to_response({404, "model_not_found", "model '" + clip_input(model) + "' is not served here (serving '" + model_name + "')", "model", {}}));
  auto in = f.get("input");
  if (!in) return respond(to_response(bad_request("input", "field 'input' is required")));
  std::vector<std::string> texts;
  std::string_view sv;
  simdjson::dom::array arr;
  if (!in->get_string().get(sv)) {
    texts.emplace_back(sv);
  } else if (!in->get_array().get(arr)) {
    size_t i = 0;
    for (auto el : arr) {
      if (el.get_string().get(sv))
        return respond(to_response(bad_request("input[" + std::to_string(i) + "]",
                                               "field 'input[" + std::to_string(i) + "]' must be a string (token-id inputs are not supported)")));
      texts.emplace_back(sv);
      ++i;
    }
  } else {
    return respond(to_response(bad_request("input", "field 'input' must be a string or an array of strings")));
  }
  if (texts.empty()) return respond(to_response(bad_request("input", "field 'input' must not be empty")));
  if (texts.size() > 2048) return respond(to_response(bad_request("input", "field 'input' has more than 2048 entries")));
  for (size_t i = 0; i < texts.size(); ++i)
    if (texts[i].empty())
      return respond(to_response(bad_request("input[" + std::to_string(i) + "]", "field 'input[" + std::to_string(i) + "]' must not be empty")));
  std::string format = "float";
  if (auto e = f.str("encoding_format", &format); e.failed()) return respond(to_response(e));
  if (format != "float" && format != "base64")
    return respond(to_response(bad_request("encoding_format", "field 'encoding_format' must be float or base64; got '" + clip_input(format) + "'")));
  int64_t dims = 0;
  bool has_dims = false;
  if (auto e = f.integer("dimensions", &dims, 1, 1 << 16, &has_dims); e.failed()) return respond(to_response(e));
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(ctx.tenant, &slot); e.failed()) return respond(to_response(e));
  auto self = shared_from_this();
  bool queued = blocking_.submit([self, texts = std::move(texts), format, dims, has_dims, model_name, respond, slot]() {
    pipelines::DocumentApi* docs = self->documents();
    if (!docs) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = docs->embed(texts);
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s)));
    const auto& vecs = *res;
    if (has_dims && !vecs.empty() && static_cast<int64_t>(vecs[0].size()) != dims)
      return respond(to_response(bad_request("dimensions", "this embedder produces " + std::to_string(vecs[0].size()) +
                                                               " dimensions; got dimensions = " + std::to_string(dims))));
    int64_t words = 0;
    for (const auto& t : texts) {
      bool in_word = false;
      for (char c : t) {
        bool sp = std::isspace(static_cast<unsigned char>(c));
        if (!sp && !in_word) ++words;
        in_word = !sp;
      }
    }
    JsonWriter w;
    w.begin_object().key("object").value("list").key("data").begin_array();
    for (size_t i = 0; i < vecs.size(); ++i) {
      w.begin_object().key("object").value("embedding").key("index").value(static_cast<uint64_t>(i)).key("embedding");
      if (format == "base64") {
        w.value(base64(reinterpret_cast<const uint8_t*>(vecs[i].data()), vecs[i].size() * sizeof(float)));
      } else {
        w.begin_array();
        for (float x : vecs[i]) w.value(x);
        w.end_array();
      }
      w.end_object();
    }
    w.end_array().key("model").value(model_name);
    // The daemon has no tokenizer for the embedder: usage counts whitespace-separated words.
    w.key("usage").begin_object().key("prompt_tokens").value(words).key("total_tokens").value(words).end_object();
    w.end_object();
    HttpResponse r;
    r.body = w.take();
    respond(std::move(r));
  });
  if (!queued) respond(to_response({429, "overloaded", "embedding queue is full", "", {{"Retry-After", "1"}}}));
}

void ApiImpl::models(const ReqCtx& ctx, const std::string& id, Responder respond) {
  (void)ctx;
  const ModelCatalog catalog = ModelCatalog::of(*executor());
  const std::string& generator = catalog.models.front().id;
  auto write_model = [&](JsonWriter& w, const ServedModel& m) {
    w.begin_object().key("id").value(m.id).key("object").value("model").key("created").value(created_unix_);
    w.key("owned_by").value("ragd");
    if (m.kind == ServedModel::Kind::kPipeline) {
      // vLLM lists adapters with their base model as "parent"; what the pipeline is goes in "ragd".
      w.key("root").value(generator).key("parent").value(generator);
      w.key("ragd").begin_object().key("kind").value("pipeline").key("pipeline").value(m.pipeline);
      w.key("description").value(m.description).key("number_passages").value(m.number_passages).end_object();
    } else {
      w.key("root").value(generator).key("parent").null();
      w.key("ragd").begin_object().key("kind").value("generator").end_object();
    }
    w.end_object();
  };
  JsonWriter w;
  if (id.empty()) {
    w.begin_object().key("object").value("list").key("data").begin_array();
    for (const auto& m : catalog.models) write_model(w, m);
    w.end_array().end_object();
  } else {
    ServedModel m;
    if (auto e = catalog.resolve(id, &m); e.failed()) return respond(to_response(e));
    write_model(w, m);
  }
  HttpResponse r;
  r.body = w.take();
  respond(std::move(r));
}

}  // namespace ragd::daemon
