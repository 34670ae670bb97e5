// OpenAI-compatible routes: /v1/chat/completions, /v1/completions, /v1/embeddings, /v1/models.
// A completion request's fields are implemented, accepted and ignored, or a 400 naming them
// (openai_fields.h); the implemented ones are type- and range-checked. n > 1 and several prompts
// run one run per choice (openai_fanout.h).
// A pipeline runs when `model` is its id (openai_models.h) or the "pipeline" extension field names
// it; the query is the conversation's recent user turns (rag_query.h); "retrieval_top_k",
// "retrieval_mode" and "filter" shape its search; responses then carry "ragd": {"sources",
// "timings", "usage"} and, for pipelines that number their passages, url_citation annotations.
#include <cctype>

#include <random>

#include "openai_encode.h"
#include "openai_fanout.h"
#include "openai_fields.h"
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
  JsonBody body;
  if (auto e = body.parse(req.body); e.failed()) return respond(to_response(e));
  Fields f(body.object());
  if (auto e = check_request_fields(f, chat); e.failed()) return respond(to_response(e));
  pipelines::Executor* ex = executor();
  const ModelCatalog catalog = ModelCatalog::of(*ex, documents());
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  ServedModel served;
  if (auto e = catalog.resolve_for(model, ServedModel::Kind::kGenerator, chat ? "/v1/chat/completions" : "/v1/completions", &served);
      e.failed())
    return respond(to_response(e));
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
  if (const ServedModel* p = catalog.pipeline(run.pipeline)) {
    st->annotate = chat && p->number_passages;
    st->footer = p->sources_footer;
    st->numbered = p->number_passages;
  }
  st->include_usage = parsed.include_usage;
  st->want_logprobs = parsed.want_logprobs;
  if (chat) st->tools = make_tool_state(run, ex->tool_call_format(), "call_" + ctx.id + "_");
  const bool stream = parsed.stream;
  // run
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  log::daemon()->info("{} {} model={} pipeline='{}' stream={}", ctx.id, chat ? "chat completion" : "completion",
                      clip_input(served.id), clip_input(run.pipeline), stream);
  // respond
  if (parsed.n > 1 || !parsed.more_prompts.empty()) return choices(ctx, req, respond, std::move(parsed), std::move(run), st, std::move(slot));
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

void ApiImpl::choices(const ReqCtx& ctx, const HttpRequest& req, Responder respond, OaiRequest parsed,
                      pipelines::RunRequest run, std::shared_ptr<OaiState> st, std::shared_ptr<void> slot) {
  if (!run.pipeline.empty() && !parsed.more_prompts.empty())
    return respond(to_response(bad_request("prompt", "a pipeline run takes one prompt (its query): send one string")));
  // Choice i of every prompt samples with seed + i: distinct choices, reproducible when seeded.
  uint64_t seed = 0;
  if (parsed.seeded) seed = *run.sampling.seed;
  else seed = std::random_device{}() * 0x9E3779B97F4A7C15ull ^ std::random_device{}();
  std::vector<OaiRequest::Prompt> prompts(1);
  prompts.insert(prompts.end(), parsed.more_prompts.begin(), parsed.more_prompts.end());
  auto gather = std::make_shared<OaiGather>();
  gather->n = parsed.n;
  std::vector<pipelines::RunRequest> runs;
  for (size_t p = 0; p < prompts.size(); ++p)
    for (int i = 0; i < parsed.n; ++i) {
      const int index = static_cast<int>(p) * parsed.n + i;
      pipelines::RunRequest r = run;
      if (p > 0) r.prompt = prompts[p].text, r.prompt_ids = prompts[p].ids;
      if (index > 0) r.id = ctx.id + "-" + std::to_string(index);
      r.sampling.seed = seed + static_cast<uint64_t>(i);
      runs.push_back(std::move(r));
      auto c = std::make_shared<OaiState>();
      c->chat = st->chat;
      c->index = index;
      c->gather = gather.get();
      c->id = st->id;
      c->model = st->model;
      c->created = st->created;
      c->include_usage = st->include_usage;
      c->want_logprobs = st->want_logprobs;
      c->annotate = st->annotate;
      c->footer = st->footer;
      c->numbered = st->numbered;
      if (st->tools) c->tools = make_tool_state(run, st->tools->format, "call_" + ctx.id + "_" + std::to_string(index) + "_");
      gather->choices.push_back(std::move(c));
    }
  gather->remaining = static_cast<int>(runs.size());
  std::vector<RunConsumer> consumers;
  std::vector<std::string> ids;
  for (const auto& r : runs) ids.push_back(r.id);
  // Each consumer keeps the gather (and so every choice's state) alive until its run is over.
  auto owning = [gather](RunConsumer c) -> RunConsumer { return [gather, c](const pipelines::RunEvent& ev) { return c(ev); }; };
  if (parsed.stream) {
    auto bridge = std::make_shared<SseBridge>();
    for (const auto& c : gather->choices) consumers.push_back(owning(openai_stream_consumer(bridge, c)));
    ApiError e = start_choices(std::move(runs), std::move(consumers), ctx.route, std::move(slot));
    if (e.failed()) return respond(to_response(e));
    return respond(sse_response(bridge, ctx.id));  // the other choices end when their writes fail
  }
  for (const auto& c : gather->choices) consumers.push_back(owning(openai_collect_consumer(c, respond)));
  ApiError e = start_choices(std::move(runs), std::move(consumers), ctx.route, std::move(slot));
  if (e.failed()) return respond(to_response(e));
  if (req.cancel)
    req.cancel->on_cancel([self = shared_from_this(), ids] {
      log::daemon()->info("{} client went away before the answer", ids.front());
      for (const auto& id : ids) self->hang_up(id);
    });
}

namespace {

// An /v1/embeddings input: strings, or token ids (one array of integers, or an array of them).
ApiError parse_embedding_input(const Fields& f, std::vector<std::string>* texts, std::vector<std::vector<int32_t>>* ids) {
  auto in = f.get("input");
  if (!in) return bad_request("input", "field 'input' is required");
  const char* kShape = "field 'input' must be a string, an array of strings, an array of token ids or an array of such arrays";
  auto token_ids = [](simdjson::dom::array a, const std::string& where, std::vector<int32_t>* out) -> ApiError {
    size_t k = 0;
    for (auto t : a) {
      int64_t v = 0;
      if (t.get_int64().get(v) || v < 0 || v > INT32_MAX)
        return bad_request(where, "field '" + where + "[" + std::to_string(k) + "]' must be a token id (an integer >= 0)");
      out->push_back(static_cast<int32_t>(v));
      ++k;
    }
    if (out->empty()) return bad_request(where, "field '" + where + "' must not be empty");
    return {};
  };
  std::string_view sv;
  simdjson::dom::array arr;
  if (!in->get_string().get(sv)) {
    texts->emplace_back(sv);
    return {};
  }
  if (in->get_array().get(arr)) return bad_request("input", kShape);
  if (arr.size() > 0 && arr.at(0).type() != simdjson::dom::element_type::STRING &&
      arr.at(0).type() != simdjson::dom::element_type::ARRAY) {
    ids->emplace_back();
    return token_ids(arr, "input", &ids->back());
  }
  size_t i = 0;
  for (auto el : arr) {
    const std::string where = "input[" + std::to_string(i++) + "]";
    simdjson::dom::array inner;
    if (!el.get_string().get(sv)) {
      if (!ids->empty()) return bad_request(where, "field 'input' mixes strings and token ids");
      texts->emplace_back(sv);
    } else if (!el.get_array().get(inner)) {
      if (!texts->empty()) return bad_request(where, "field 'input' mixes strings and token ids");
      ids->emplace_back();
      if (auto e = token_ids(inner, where, &ids->back()); e.failed()) return e;
    } else {
      return bad_request(where, "field '" + where + "' must be a string or an array of token ids");
    }
  }
  return {};
}

}  // namespace

void ApiImpl::embeddings(const ReqCtx& ctx, const HttpRequest& req, Responder respond) {
  JsonBody body;
  if (auto e = body.parse(req.body); e.failed()) return respond(to_response(e));
  Fields f(body.object());
  const ModelCatalog catalog = ModelCatalog::of(*executor(), documents());
  std::string model;
  if (auto e = f.str("model", &model); e.failed()) return respond(to_response(e));
  ServedModel served;
  if (auto e = catalog.resolve_for(model, ServedModel::Kind::kEmbedder, "/v1/embeddings", &served); e.failed())
    return respond(to_response(e));
  // Responses name the embedder (the generator's id when nothing embeds: the call then fails).
  const std::string model_name = served.id;
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
  if (auto e = parse_embedding_input(f, &texts, &ids); e.failed()) return respond(to_response(e));
  const size_t n_inputs = texts.size() + ids.size();
  if (n_inputs == 0) return respond(to_response(bad_request("input", "field 'input' must not be empty")));
  if (n_inputs > 2048) return respond(to_response(bad_request("input", "field 'input' has more than 2048 entries")));
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
  bool queued = blocking_.submit([self, texts = std::move(texts), ids = std::move(ids), format, dims, has_dims, model_name,
                                  respond, slot]() {
    pipelines::DocumentApi* docs = self->documents();
    if (!docs) return respond(to_response({503, "not_ready", "runtime is not available", "", {}}));
    auto res = ids.empty() ? docs->embed(texts) : docs->embed_ids(ids);
    if (!res.ok() && res.status().code() == StatusCode::kFailedPrecondition && !ids.empty())
      return respond(to_response(bad_request("input", res.status().message())));
    if (!res.ok()) return respond(to_response(from_status(res.status(), self->cfg_.limits.retry_after_s)));
    const auto& vecs = *res;
    if (has_dims && !vecs.empty() && static_cast<int64_t>(vecs[0].size()) != dims)
      return respond(to_response(bad_request("dimensions", "this embedder produces " + std::to_string(vecs[0].size()) +
                                                               " dimensions; got dimensions = " + std::to_string(dims))));
    int64_t words = 0;  // token-id inputs: their ids
    for (const auto& v : ids) words += static_cast<int64_t>(v.size());
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
    // Text inputs: the daemon has no tokenizer for the embedder, usage counts whitespace-separated words.
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
  const ModelCatalog catalog = ModelCatalog::of(*executor(), documents());
  const std::string& generator = catalog.models.front().id;
  auto write_model = [&](JsonWriter& w, const ServedModel& m) {
    w.begin_object().key("id").value(m.id).key("object").value("model").key("created").value(created_unix_);
    w.key("owned_by").value("ragd");
    if (m.kind == ServedModel::Kind::kPipeline) {
      // vLLM lists adapters with their base model as "parent"; what the pipeline is goes in "ragd".
      w.key("root").value(generator).key("parent").value(generator);
      w.key("ragd").begin_object().key("kind").value("pipeline").key("pipeline").value(m.pipeline);
      w.key("description").value(m.description).key("number_passages").value(m.number_passages).end_object();
    } else if (m.kind == ServedModel::Kind::kGenerator) {
      w.key("root").value(generator).key("parent").null();
      w.key("ragd").begin_object().key("kind").value("generator").end_object();
    } else {
      const bool emb = m.kind == ServedModel::Kind::kEmbedder;
      w.key("root").value(m.encoder.name).key("parent").null();
      w.key("ragd").begin_object().key("kind").value(emb ? "embedder" : "reranker").key("identity").value(m.encoder.identity);
      if (emb) w.key("dimensions").value(m.encoder.dim);
      w.key("route").value(emb ? "/v1/embeddings" : "/v1/rerank").end_object();
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
