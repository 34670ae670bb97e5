// Pipeline runs: request parsing, executor bridging with metrics, JSON / SSE / WebSocket output.
#include "api_impl.h"
#include "ragd/common/log.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

// ---------------------------------------------------------------------------------------------
// event encoding (shared with openai.cpp through run_events.h)

std::string event_json(const RunEvent& ev, const std::string& run_id) {
  JsonWriter w;
  w.begin_object();
  switch (ev.kind) {
    case RunEvent::Kind::kSources:
      w.key("event").value("sources").key("id").value(run_id).key("sources");
      write_sources(w, ev.sources);
      break;
    case RunEvent::Kind::kToken:
      w.key("event").value("token").key("index").value(ev.index).key("text").value(ev.text);
      w.key("token_id").value(static_cast<int64_t>(ev.token_id)).key("logprob").value(ev.logprob);
      break;
    case RunEvent::Kind::kDone:
      w.key("event").value("done").key("id").value(run_id).key("finish_reason").value(ev.finish_reason);
      w.key("usage");
      write_usage(w, ev.usage);
      w.key("timings");
      write_timings(w, ev.timings);
      break;
    case RunEvent::Kind::kError: {
      ApiError e = from_status(ev.error, 1);
      w.key("event").value("error").key("id").value(run_id).key("error").begin_object();
      w.key("code").value(e.code).key("message").value(ev.error.message()).end_object();
      break;
    }
  }
  w.end_object();
  return w.take();
}

std::string error_event_json(const ApiError& e, const std::string& run_id) {
  JsonWriter w;
  w.begin_object().key("event").value("error");
  if (!run_id.empty()) w.key("id").value(run_id);
  w.key("error").begin_object().key("code").value(e.code).key("message").value(e.message);
  if (!e.param.empty()) w.key("param").value(e.param);
  w.key("status").value(e.status).end_object().end_object();
  return w.take();
}

std::string sse_frame(const char* event, const std::string& data) {
  std::string out;
  if (event) {
    out += "event: ";
    out += event;
    out += "\n";
  }
  out += "data: ";
  out += data;
  out += "\n\n";
  return out;
}

const char* event_name(RunEvent::Kind k) {
  switch (k) {
    case RunEvent::Kind::kSources: return "sources";
    case RunEvent::Kind::kToken: return "token";
    case RunEvent::Kind::kDone: return "done";
    case RunEvent::Kind::kError: return "error";
  }
  return "?";
}

// SseBridge: events may arrive before the transport hands over the writer; buffer until then.
void SseBridge::attach(std::shared_ptr<StreamWriter> w) {
  std::vector<std::string> pending;
  bool finish = false;
  {
    std::lock_guard<std::mutex> l(mu_);
    writer_ = w;
    pending.swap(pending_);
    finish = finished_;
  }
  for (auto& m : pending) w->send(std::move(m));
  if (finish) w->finish();
}

bool SseBridge::send(std::string msg) {
  std::shared_ptr<StreamWriter> w;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (!writer_) {
      pending_.push_back(std::move(msg));
      return !aborted_;
    }
    w = writer_;
  }
  return w->send(std::move(msg));
}

void SseBridge::finish() {
  std::shared_ptr<StreamWriter> w;
  {
    std::lock_guard<std::mutex> l(mu_);
    finished_ = true;
    w = writer_;
  }
  if (w) w->finish();
}

void SseBridge::abort() {
  std::lock_guard<std::mutex> l(mu_);
  aborted_ = true;
}

// ---------------------------------------------------------------------------------------------
// executor bridging

ApiError ApiImpl::start_run(pipelines::RunRequest req, const std::string& route, std::shared_ptr<void> slot,
                            RunConsumer consumer) {
  pipelines::Executor* ex = executor();
  if (!ex) return {503, "not_ready", "model and stores are still loading", "", {}};
  auto track = std::make_shared<RunTrack>();
  track->id = req.id;
  track->route = route;
  track->tenant = req.tenant;
  track->slot = std::move(slot);
  {
    std::lock_guard<std::mutex> l(runs_mu_);
    if (runs_.count(req.id)) return {409, "duplicate_request_id", "request id '" + req.id + "' is already running", "", {}};
    runs_[req.id] = track;
  }
  waiting_.fetch_add(1);
  auto self = shared_from_this();
  auto finish = [self, track](const std::string& reason) {
    if (track->finished) return;
    track->finished = true;
    if (track->started) self->running_.fetch_sub(1);
    else self->waiting_.fetch_sub(1);
    self->runs_total_->inc({track->route, reason});
    self->e2e_->observe({}, ms_since(track->t0) / 1000.0);
    {
      std::lock_guard<std::mutex> l(self->runs_mu_);
      self->runs_.erase(track->id);
    }
    track->slot.reset();
  };
  const std::string id = req.id;
  Status st = ex->submit(std::move(req), [self, track, consumer, finish](const RunEvent& ev) -> bool {
    if (track->finished) return false;
    auto now = Clock::now();
    if (!track->started) {
      track->started = true;
      self->waiting_.fetch_sub(1);
      self->running_.fetch_add(1);
    }
    if (ev.kind == RunEvent::Kind::kToken) {
      if (track->tokens == 0) {
        track->first_token = now;
        self->ttft_->observe({}, std::chrono::duration<double>(now - track->t0).count());
      } else {
        self->itl_->observe({}, std::chrono::duration<double>(now - track->last_token).count());
      }
      track->last_token = now;
      track->tokens++;
    }
    bool keep = consumer(ev);
    if (ev.kind == RunEvent::Kind::kDone) {
      const auto& u = ev.usage;
      self->prompt_tokens_->inc({}, u.prompt_tokens);
      self->generated_tokens_->inc({}, u.completion_tokens);
      self->reused_tokens_->inc({"hbm"}, u.reused_hbm);
      self->reused_tokens_->inc({"dram"}, u.reused_dram);
      self->reused_tokens_->inc({"ssd"}, u.reused_ssd);
      self->recomputed_tokens_->inc({}, u.recomputed_tokens);
      self->queue_time_->observe({}, ev.timings.queue_ms / 1000.0);
      if (track->tokens > 1)
        self->tpot_->observe({}, std::chrono::duration<double>(track->last_token - track->first_token).count() /
                                     (track->tokens - 1));
      log::daemon()->info("{} run done: {} prompt + {} generated tokens, reused {}/{}/{} (hbm/dram/ssd), {:.1f} ms, {}",
                          track->id, u.prompt_tokens, u.completion_tokens, u.reused_hbm, u.reused_dram, u.reused_ssd,
                          ms_since(track->t0), ev.finish_reason);
      finish(ev.finish_reason.empty() ? "stop" : ev.finish_reason);
    } else if (ev.kind == RunEvent::Kind::kError) {
      log::daemon()->warn("{} run failed: {}", track->id, ev.error.to_string());
      finish("error");
    } else if (!keep) {
      finish("cancelled");  // the client is gone; later events are refused
    }
    return keep;
  });
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> l(runs_mu_);
      runs_.erase(id);
    }
    waiting_.fetch_sub(1);
    track->finished = true;
    ApiError e = from_status(st, cfg_.limits.retry_after_s);
    if (st.code() == StatusCode::kNotFound) e.code = "pipeline_not_found";
    return e;
  }
  return {};
}

void ApiImpl::cancel_run(const std::string& id) {
  pipelines::Executor* ex = executor();
  if (!ex) return;
  log::daemon()->info("{} cancelling run", id);
  ex->cancel(id);
}

namespace {
ApiError parse_reuse(const std::string& s, pipelines::ReuseMode* out) {
  Result<pipelines::ReuseMode> m = pipelines::parse_reuse_mode(s);
  if (!m.ok()) return bad_request("reuse", "field 'reuse' must be one of none, prefix, knowledge_tree; got '" + s + "'");
  *out = *m;
  return {};
}
}  // namespace

HttpResponse ApiImpl::sse_response(std::shared_ptr<SseBridge> bridge, const std::string& rid) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.stream = [bridge](std::shared_ptr<StreamWriter> w) { bridge->attach(std::move(w)); };
  r.on_abort = [self = shared_from_this(), bridge, rid] {
    bridge->abort();
    self->cancel_run(rid);
  };
  return r;
}

ApiError ApiImpl::parse_run_body(const Fields& f, const ReqCtx& ctx, pipelines::RunRequest* out, bool* stream,
                                 bool allow_pipeline_field) {
  if (allow_pipeline_field) {
    if (auto e = f.only({"type", "pipeline", "query", "top_k", "max_tokens", "temperature", "top_p", "seed", "stop",
                         "stream", "reuse", "tenant", "logprobs", "ignore_eos"});
        e.failed())
      return e;
    std::string p = "default";
    if (auto e = f.str("pipeline", &p); e.failed()) return e;
    out->pipeline = p;
  } else {
    if (auto e = f.only({"query", "top_k", "max_tokens", "temperature", "top_p", "seed", "stop", "stream", "reuse",
                         "tenant", "logprobs", "ignore_eos"});
        e.failed())
      return e;
  }
  if (auto e = f.str("query", &out->query, true); e.failed()) return e;
  if (out->query.empty()) return bad_request("query", "field 'query' must not be empty");
  int64_t v = 0;
  bool present = false;
  if (auto e = f.integer("top_k", &v, 1, 1000, &present); e.failed()) return e;
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
  if (auto e = f.uinteger("seed", &seed, &present); e.failed()) return e;
  if (present) out->overrides.seed = seed;
  if (auto el = f.get("stop")) {
    std::string_view sv;
    simdjson::dom::array arr;
    out->overrides.stop.emplace();
    if (!el->get_string().get(sv)) {
      out->overrides.stop->emplace_back(sv);
    } else if (!el->get_array().get(arr)) {
      for (auto s : arr) {
        if (s.get_string().get(sv)) return bad_request("stop", "field 'stop' must be a string or an array of strings");
        out->overrides.stop->emplace_back(sv);
      }
    } else {
      return bad_request("stop", "field 'stop' must be a string or an array of strings");
    }
  }
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
  std::string tenant;
  if (auto e = f.str("tenant", &tenant); e.failed()) return e;
  if (!tenant.empty() && ctx.authed_by_key && tenant != ctx.tenant)
    return {403, "forbidden", "tenant '" + tenant + "' does not match the API key's tenant", "tenant", {}};
  out->tenant = tenant.empty() ? ctx.tenant : tenant;
  if (ctx.authed_by_key) out->kv_scope = out->tenant;  // tenants never reuse each other's document KV
  // Pipeline must exist; its max_tokens is the default.
  bool found = false;
  for (const auto& p : executor()->pipelines()) {
    if (p.name != out->pipeline) continue;
    found = true;
    if (max_tokens < 0) max_tokens = p.max_tokens;
  }
  if (!found) return {404, "pipeline_not_found", "unknown pipeline '" + out->pipeline + "'", "pipeline", {}};
  out->sampling.max_tokens = max_tokens > 0 ? max_tokens : 256;
  out->id = ctx.id;
  return {};
}

// Collects a whole run for a non-streaming answer.
struct Collected {
  std::mutex mu;
  std::string output;
  std::vector<pipelines::Source> sources;
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
  log::daemon()->info("{} run pipeline '{}' tenant {} stream={} max_tokens={}", rid, name, run.tenant, stream,
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
      case RunEvent::Kind::kSources: col->sources = ev.sources; break;
      case RunEvent::Kind::kToken: col->output += ev.text; break;
      case RunEvent::Kind::kError: {
        ApiError err = from_status(ev.error, 1);
        respond(to_response(err));
        break;
      }
      case RunEvent::Kind::kDone: {
        JsonWriter w;
        w.begin_object().key("id").value(rid).key("pipeline").value(name).key("output").value(col->output);
        w.key("finish_reason").value(ev.finish_reason).key("sources");
        write_sources(w, col->sources);
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
  if (e.failed()) respond(to_response(e));
}

// ---------------------------------------------------------------------------------------------
// WebSocket /v1/stream

namespace {
class WsRunHandler : public WsHandler, public std::enable_shared_from_this<WsRunHandler> {
 public:
  WsRunHandler(std::shared_ptr<ApiImpl> api, ReqCtx ctx, std::shared_ptr<StreamWriter> out)
      : api_(std::move(api)), ctx_(std::move(ctx)), out_(std::move(out)) {}

  void on_text(std::string msg) override {
    simdjson::dom::object obj;
    if (auto e = parse_object(msg, &obj); e.failed()) return reply_error(e, "");
    Fields f(obj);
    std::string type = "run";
    if (auto e = f.str("type", &type); e.failed()) return reply_error(e, "");
    if (type == "cancel") {
      std::string active;
      {
        std::lock_guard<std::mutex> l(mu_);
        active = active_;
      }
      if (!active.empty()) api_->cancel_run(active);
      return;
    }
    if (type == "ping") {
      out_->send(R"({"event":"pong"})");
      return;
    }
    if (type != "run") return reply_error(bad_request("type", "field 'type' must be run, cancel or ping; got '" + type + "'"), "");
    ReqCtx rc = ctx_;
    rc.id = api_->new_request_id(nullptr);
    rc.t0 = Clock::now();
    {
      std::lock_guard<std::mutex> l(mu_);
      if (!active_.empty())
        return reply_error({409, "run_in_progress", "a run is already active on this connection (" + active_ + "); cancel it first", "", {}}, rc.id);
    }
    if (auto e = api_->require_ready(); e.failed()) return reply_error(e, rc.id);
    pipelines::RunRequest run;
    bool stream = true;
    if (auto e = api_->parse_run_body(f, rc, &run, &stream, true); e.failed()) return reply_error(e, rc.id);
    std::shared_ptr<void> slot;
    if (auto e = api_->acquire_slot(run.tenant, &slot); e.failed()) return reply_error(e, rc.id);
    {
      std::lock_guard<std::mutex> l(mu_);
      active_ = rc.id;
    }
    log::daemon()->info("{} ws run pipeline '{}' tenant {} max_tokens={}", rc.id, run.pipeline, run.tenant, run.sampling.max_tokens);
    auto self = shared_from_this();
    std::string rid = rc.id;
    ApiError e = api_->start_run(std::move(run), "/v1/stream", std::move(slot), [self, rid](const RunEvent& ev) {
      bool ok = self->out_->send(event_json(ev, rid));
      if (ev.kind == RunEvent::Kind::kDone || ev.kind == RunEvent::Kind::kError) {
        std::lock_guard<std::mutex> l(self->mu_);
        if (self->active_ == rid) self->active_.clear();
      }
      return ok;
    });
    if (e.failed()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        active_.clear();
      }
      reply_error(e, rid);
    }
  }

  void on_close() override {
    std::string active;
    {
      std::lock_guard<std::mutex> l(mu_);
      active = active_;
      closed_ = true;
    }
    if (!active.empty()) {
      log::daemon()->info("{} websocket closed mid-run; cancelling", active);
      api_->cancel_run(active);
    }
  }

 private:
  void reply_error(const ApiError& e, const std::string& rid) { out_->send(error_event_json(e, rid)); }

  std::shared_ptr<ApiImpl> api_;
  ReqCtx ctx_;
  std::shared_ptr<StreamWriter> out_;
  std::mutex mu_;
  std::string active_;  // guarded by mu_: id of the run in flight, "" when idle
  bool closed_ = false; // guarded by mu_
};
}  // namespace

std::shared_ptr<WsHandler> ApiImpl::make_ws_handler(ReqCtx ctx, std::shared_ptr<StreamWriter> out) {
  return std::make_shared<WsRunHandler>(shared_from_this(), std::move(ctx), std::move(out));
}

}  // namespace ragd::daemon
