// POST /v1/pipelines/{name}/runs and the ragd run body shared with the WebSocket.
#include "api_impl.h"
#include "run_param_decode.h"
#include "ragd/common/log.h"
#include "ragd/pipelines/run_params.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {

// On the pipeline route the pipeline is named by the path: an unknown one is the `name` param.
ApiError name_param(ApiError e) {
  if (e.code == "pipeline_not_found") e.param = "name";
  return e;
}

}  // namespace

ApiError ApiImpl::parse_run_body(const Fields& f, const ReqCtx& ctx, pipelines::RunRequest* out, bool* stream,
                                 bool allow_pipeline_field) {
  // Route fields, then the run parameters' table.
  if (auto e = f.only([&](std::string_view k) {
        if (k == "query" || k == "stream" || k == "tenant") return true;
        if (allow_pipeline_field && (k == "type" || k == "pipeline")) return true;
        return pipelines::find_run_param(RunRoute::kRagd, k) != nullptr;
      });
      e.failed())
    return e;
  if (allow_pipeline_field) {
    std::string p = "default";
    if (auto e = f.str("pipeline", &p); e.failed()) return e;
    out->pipeline = p;
  }
  if (auto e = f.str("query", &out->query, true); e.failed()) return e;
  if (out->query.empty()) return bad_request("query", "field 'query' must not be empty");
  if (auto e = f.boolean("stream", stream); e.failed()) return e;
  if (auto e = decode_run_params(f, RunRoute::kRagd, out); e.failed()) return e;
  std::string tenant;
  if (auto e = f.str("tenant", &tenant); e.failed()) return e;
  if (!tenant.empty() && ctx.authed_by_key && tenant != ctx.tenant)
    return {403, "forbidden", "tenant '" + clip_input(tenant) + "' does not match the API key's tenant", "tenant", {}};
  out->tenant = tenant.empty() ? ctx.tenant : tenant;
  if (ctx.authed_by_key) out->kv_scope = out->tenant;  // tenants never reuse each other's document KV
  // The pipeline's existence and every default are the executor's (pipelines::resolve_run): an
  // unknown pipeline is its NotFound, answered 404 pipeline_not_found.
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
  JsonBody body;
  if (auto e = body.parse(req.body); e.failed()) return respond(to_response(e));
  pipelines::RunRequest run;
  run.pipeline = name;
  bool stream = false;
  if (auto e = parse_run_body(Fields(body.object()), ctx, &run, &stream, false); e.failed()) return respond(to_response(e));
  std::shared_ptr<void> slot;
  if (auto e = acquire_slot(run.tenant, &slot); e.failed()) return respond(to_response(e));
  const std::string rid = ctx.id;
  log::daemon()->info("{} run pipeline '{}' tenant {} stream={}", rid, clip_input(name), clip_input(run.tenant), stream);
  if (stream) {
    auto bridge = std::make_shared<SseBridge>();
    ApiError e = start_run(std::move(run), ctx.route, std::move(slot), [bridge, rid](const RunEvent& ev) {
      bool ok = bridge->send(sse_frame(event_name(ev.kind), event_json(ev, rid)));
      if (ev.kind == RunEvent::Kind::kDone || ev.kind == RunEvent::Kind::kError) bridge->finish();
      return ok;
    });
    if (e.failed()) return respond(to_response(name_param(e)));
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
  if (e.failed()) return respond(to_response(name_param(e)));
  cancel_on_disconnect(req, rid);
}

}  // namespace ragd::daemon
