// POST /v1/pipelines/{name}/runs and the ragd run body shared with the WebSocket.
#include "api_impl.h"
#include "ragd/common/log.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {
ApiError parse_reuse(const std::string& s, pipelines::ReuseMode* out) {
  Result<pipelines::ReuseMode> m = pipelines::parse_reuse_mode(s);
  if (!m.ok())
    return bad_request("reuse", "field 'reuse' must be one of " + std::string(pipelines::kReuseModeNames) + "; got '" + clip_input(s) + "'");
  *out = *m;
  return {};
}
}  // namespace

ApiError ApiImpl::parse_run_body(const Fields& f, const ReqCtx& ctx, pipelines::RunRequest* out, bool* stream,
                                 bool allow_pipeline_field) {
  if (allow_pipeline_field) {
    if (auto e = f.only({"type", "pipeline", "query", "top_k", "max_tokens", "temperature", "top_p", "seed", "stop",
                         "stream", "reuse", "recompute_ratio", "epic_k", "tenant", "logprobs", "ignore_eos",
                         "context_must_include", "overlap", "retrieval_interval", "speculative_prefill",
                         "extractive"});
        e.failed())
      return e;
    std::string p = "default";
    if (auto e = f.str("pipeline", &p); e.failed()) return e;
    out->pipeline = p;
  } else {
    if (auto e = f.only({"query", "top_k", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "reuse",
                         "recompute_ratio", "epic_k", "tenant", "logprobs", "ignore_eos", "context_must_include",
                         "overlap", "retrieval_interval", "speculative_prefill", "extractive"});
        e.failed())
      return e;
  }
  if (auto e = f.str("query", &out->query, true); e.failed()) return e;
  // Extension (evaluation): a document id that must be in the context (see docs/api.md).
  if (auto e = f.str("context_must_include", &out->context_must_include); e.failed()) return e;
  if (out->query.empty()) return bad_request("query", "field 'query' must not be empty");
  int64_t v = 0;
  bool present = false;
  if (auto e = f.integer("top_k", &v, kRetrievalTopKMin, kRetrievalTopKMax, &present); e.failed()) return e;
  if (present) out->top_k = static_cast<int>(v);
  int max_tokens = -1;
  if (auto e = f.integer("max_tokens", &v, 1, 1 << 20, &present); e.failed()) return e;
  if (present) max_tokens = static_cast<int>(v);
  if (present) out->overrides.max_tokens = max_tokens;  // explicit values win over the pipeline's
  double d = 0;
  if (auto e = f.number("temperature", &d, 0.0, 2.0, &present); e.failed()) return e;
  if (present) out->overrides.temperature = static_cast<float>(d);
  if (auto e = f.number("top_p", &d, 1e-9, 1.0, &present); e.failed()) return e;
  if (present) out->overrides.top_p = static_cast<float>(d);
  uint64_t seed = 0;
  if (auto e = f.seed("seed", &seed, &present); e.failed()) return e;
  if (present) out->overrides.seed = seed;
  if (f.get("stop")) {
    std::vector<std::string> stop;
    if (auto e = f.string_list("stop", &stop); e.failed()) return e;
    out->overrides.stop = std::move(stop);
  }
  bool extractive = false;
  if (auto e = f.boolean("extractive", &extractive, &present); e.failed()) return e;
  if (present) out->overrides.extractive = extractive;  // answers copied verbatim from the prompt
  if (auto e = f.boolean("stream", stream); e.failed()) return e;
  if (auto e = f.boolean("logprobs", &out->want_logprobs); e.failed()) return e;
  // Extension (as in vLLM): keep generating past the model's end-of-sequence token.
  if (auto e = f.boolean("ignore_eos", &out->sampling.ignore_eos); e.failed()) return e;
  std::string reuse;
  if (auto e = f.str("reuse", &reuse); e.failed()) return e;
  if (!reuse.empty()) {
    pipelines::ReuseMode m = pipelines::ReuseMode::kNone;
    if (auto e = parse_reuse(reuse, &m); e.failed()) return e;
    out->reuse = m;
  }
  if (auto e = f.number("recompute_ratio", &d, 0.0, 1.0, &present); e.failed()) return e;
  if (present) out->recompute_ratio = d;
  if (auto e = f.integer("epic_k", &v, 0, 4096, &present); e.failed()) return e;
  if (present) out->epic_k = static_cast<int>(v);
  std::string overlap;
  if (auto e = f.str("overlap", &overlap); e.failed()) return e;
  if (!overlap.empty()) {
    Result<pipelines::RetrievalOverlap> o = pipelines::parse_overlap(overlap);
    if (!o.ok()) return bad_request("overlap", "field 'overlap' must be one of none, piperag, speculative or both; got '" + clip_input(overlap) + "'");
    out->overlap = *o;
  }
  if (auto e = f.integer("retrieval_interval", &v, 1, 4096, &present); e.failed()) return e;
  if (present) out->retrieval_interval = static_cast<int>(v);
  if (f.get("speculative_prefill")) {
    bool sp = false;
    if (auto e = f.boolean("speculative_prefill", &sp); e.failed()) return e;
    out->speculative_prefill = sp;
  }
  std::string tenant;
  if (auto e = f.str("tenant", &tenant); e.failed()) return e;
  if (!tenant.empty() && ctx.authed_by_key && tenant != ctx.tenant)
    return {403, "forbidden", "tenant '" + clip_input(tenant) + "' does not match the API key's tenant", "tenant", {}};
  out->tenant = tenant.empty() ? ctx.tenant : tenant;
  if (ctx.authed_by_key) out->kv_scope = out->tenant;  // tenants never reuse each other's document KV
  // Pipeline must exist; its max_tokens is the default.
  bool found = false;
  for (const auto& p : executor()->pipelines()) {
    if (p.name != out->pipeline) continue;
    found = true;
    if (max_tokens < 0) max_tokens = p.max_tokens;
  }
  if (!found) return {404, "pipeline_not_found", "unknown pipeline '" + clip_input(out->pipeline) + "'", "pipeline", {}};
  out->sampling.max_tokens = max_tokens > 0 ? max_tokens : 256;
  out->id = ctx.id;
  return {};
}

// Collects a whole run for a non-streaming answer.
struct Collected {
  std::mutex mu;
  std::string output;
  std::vector<pipelines::Source> sources;  // the first context
  std::vector<std::pair<int, std::vector<pipelines::Source>>> changes;  // iterative runs: later contexts
  std::vector<std::pair<std::string, float>> tokens;  // text, logprob
  RunEvent done;
};

void ApiImpl::pipeline_run(const ReqCtx& ctx, const std::string& name, const HttpRequest& req, Responder respond) {
  simdjson::dom::object obj;
  if (auto e = parse_object(req.body, &obj); e.failed()) return respond(to_response(e));
  pipelines::RunRequest run;
  run.pipeline = name;
  bool stream = false;
  if (auto e = parse_run_body(Fields(obj), ctx, &run, &stream, false); e.failed()) {
    if (e.code == "pipeline_not_found") e.param = "name";
    return respond(to_response(e));
  }
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  const std::string rid = ctx.id;
  log::daemon()->info("{} run pipeline '{}' tenant {} stream={} max_tokens={}", rid, name, clip_input(run.tenant), stream,
                      run.sampling.max_tokens);
  if (stream) {
    auto bridge = std::make_shared<SseBridge>();
    ApiError e = start_run(std::move(run), ctx.route, std::move(slot), [bridge, rid](const RunEvent& ev) {
      bool ok = bridge->send(sse_frame(event_name(ev.kind), event_json(ev, rid)));
      if (ev.kind == RunEvent::Kind::kDone || ev.kind == RunEvent::Kind::kError) bridge->finish();
      return ok;
    });
    if (e.failed()) return respond(to_response(e));
    return respond(sse_response(bridge, rid));
  }
  auto col = std::make_shared<Collected>();
  ApiError e = start_run(std::move(run), ctx.route, std::move(slot), [col, rid, name, respond](const RunEvent& ev) {
    std::lock_guard<std::mutex> l(col->mu);
    switch (ev.kind) {
      case RunEvent::Kind::kSources:
        if (col->sources.empty() && col->changes.empty() && ev.from_token == 0) col->sources = ev.sources;
        else col->changes.emplace_back(ev.from_token, ev.sources);
        break;
      case RunEvent::Kind::kToken: col->output += ev.text; break;
      case RunEvent::Kind::kError: {
        ApiError err = from_status(ev.error, 1, rid);
        respond(to_response(err));
        break;
      }
      case RunEvent::Kind::kDone: {
        JsonWriter w;
        w.begin_object().key("id").value(rid).key("pipeline").value(name).key("output").value(col->output);
        w.key("finish_reason").value(ev.finish_reason).key("sources");
        write_sources(w, col->sources);
        if (!col->changes.empty()) {
          w.key("context_changes").begin_array();
          for (const auto& [from, src] : col->changes) {
            w.begin_object().key("from_token").value(from).key("sources");
            write_sources(w, src);
            w.end_object();
          }
          w.end_array();
        }
        w.key("usage");
        write_usage(w, ev.usage);
        w.key("timings");
        write_timings(w, ev.timings);
        w.end_object();
        HttpResponse r;
        r.body = w.take();
        respond(std::move(r));
        break;
      }
    }
    return true;
  });
  if (e.failed()) return respond(to_response(e));
  cancel_on_disconnect(req, rid);
}

}  // namespace ragd::daemon
