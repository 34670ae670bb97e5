// OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models.
// Unknown request fields are ignored (SDKs send extras); known ones are type- and range-checked.
// Extension fields: "pipeline" (retrieval through a ragd pipeline; the last user message is the
// query) and "retrieval_top_k"; responses then carry "ragd": {"sources", "timings", "usage"}.
#include <cctype>

#include "openai_encode.h"
#include "ragd/common/log.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

void ApiImpl::chat_completions(const ReqCtx& ctx, const HttpRequest& req, Responder respond, bool chat) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  Fields f(obj);
  pipelines::Executor* ex = executor();
  const std::string model_name = ex->model_name();
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  if (!model.empty() && model != model_name && model != "ragd")
    return respond(to_response({404, "model_not_found", "model '" + clip_input(model) + "' is not served here (serving '" + model_name + "')", "model", {}}));
  // parse
  OaiRequest parsed;
  if (auto e = parse_openai_request(f, chat, &parsed); e.failed()) return respond(to_response(e));
  pipelines::RunRequest run = std::move(parsed.run);
  run.id = ctx.id;
  run.tenant = ctx.tenant;
  if (ctx.authed_by_key) run.kv_scope = run.tenant;  // tenants never reuse each other's KV
  auto st = std::make_shared<OaiState>();
  st->chat = chat;
  st->id = (chat ? "chatcmpl-" : "cmpl-") + ctx.id;
  st->model = model_name;
  st->created = unix_now();
  st->include_usage = parsed.include_usage;
  st->want_logprobs = parsed.want_logprobs;
  const bool stream = parsed.stream;
  // run
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  log::daemon()->info("{} {} model={} pipeline='{}' stream={}", ctx.id, chat ? "chat completion" : "completion",
                      model_name, clip_input(run.pipeline), stream);
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
  const std::string name = executor()->model_name();
  auto write_model = [&](JsonWriter& w) {
    w.begin_object().key("id").value(name).key("object").value("model").key("created").value(created_unix_);
    w.key("owned_by").value("ragd").end_object();
  };
  JsonWriter w;
  if (id.empty()) {
    w.begin_object().key("object").value("list").key("data").begin_array();
    write_model(w);
    w.end_array().end_object();
  } else {
    if (id != name) return respond(to_response({404, "model_not_found", "model '" + clip_input(id) + "' is not served here", "model", {}}));
    write_model(w);
  }
  HttpResponse r;
  r.body = w.take();
  respond(std::move(r));
}

}  // namespace ragd::daemon
