// Executor submission with metrics and accounting around a consumer; SSE responses of runs.
#include "api_impl.h"
#include "ragd/common/log.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

ApiError ApiImpl::start_run(pipelines::RunRequest req, const std::string& route, std::shared_ptr<void> slot,
                            RunConsumer consumer) {
  pipelines::Executor* ex = executor();
  if (!ex) return {503, "not_ready", "model and stores are still loading", "", {}};
  const std::string pipeline = req.pipeline;
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
  auto self = shared_from_this();
  auto finish = [self, track](const std::string& reason) {
    if (track->finished) return;
    track->finished = true;
    self->metrics_.runs_total->inc({track->route, reason});
    self->metrics_.e2e->observe({}, ms_since(track->t0) / 1000.0);
    {
      std::lock_guard<std::mutex> l(self->runs_mu_);
      self->runs_.erase(track->id);
    }
    track->slot.reset();
  };
  const std::string id = req.id;
  Status st = ex->submit(std::move(req), [self, track, consumer, finish](const RunEvent& ev) -> bool {
    if (track->finished) return false;
    // Every run ends in exactly one terminal count, with its tokens, whatever the client did.
    auto now = Clock::now();
    if (ev.kind == RunEvent::Kind::kToken) {
      if (track->tokens == 0) {
        track->first_token = now;
        self->metrics_.ttft->observe({}, std::chrono::duration<double>(now - track->t0).count());
      } else {
        self->metrics_.itl->observe({}, std::chrono::duration<double>(now - track->last_token).count());
      }
      track->last_token = now;
      track->tokens++;
    }
    // A final event is accounted before the consumer answers the client, so that whatever the
    // client does next (read /metrics, start its next run) sees this run finished.
    if (ev.kind == RunEvent::Kind::kDone) {
      const auto& u = ev.usage;
      self->metrics_.prompt_tokens->inc({}, u.prompt_tokens);
      self->metrics_.generated_tokens->inc({}, u.completion_tokens);
      u.reused.for_each([&](std::string_view tier, int64_t n) {
        self->metrics_.reused_tokens->inc({std::string(tier)}, static_cast<double>(n));
      });
      self->metrics_.recomputed_tokens->inc({}, u.recomputed_tokens);
      if (u.reuse == "cacheblend" || u.reuse == "epic") {
        self->metrics_.blend_runs->inc({u.reuse, u.approximate ? "blended" : "exact"}, 1);
        self->metrics_.blended_tokens->inc({u.reuse}, u.blended_tokens);
        self->metrics_.repaired_tokens->inc({u.reuse}, u.repaired_tokens);
      }
      if (u.adapt) self->metrics_.adapt_choices->inc({u.adapt->pipeline, u.adapt->choice, u.adapt->reason}, 1);
      self->metrics_.queue_time->observe({}, ev.timings.queue_ms / 1000.0);
      if (track->tokens > 1)
        self->metrics_.tpot->observe({}, std::chrono::duration<double>(track->last_token - track->first_token).count() /
                                     (track->tokens - 1));
      std::string reused;
      u.reused.for_each([&](std::string_view tier, int64_t n) { reused += fmt::format("{}{} {}", reused.empty() ? "" : ", ", tier, n); });
      log::daemon()->info("{} run done: {} prompt + {} generated tokens, reused {}, {:.1f} ms, {}", track->id, u.prompt_tokens,
                          u.completion_tokens, reused, ms_since(track->t0), ev.finish_reason);
      if (track->hung_up.load()) track->client_gone = true;
      finish(track->client_gone ? "disconnected" : ev.finish_reason.empty() ? "stop" : ev.finish_reason);
      return track->client_gone ? false : consumer(ev);
    }
    if (ev.kind == RunEvent::Kind::kError) {
      log::daemon()->warn("{} run failed: {}", track->id, clip_input(ev.error.to_string(), kEchoMessageMaxBytes));
      if (track->hung_up.load()) track->client_gone = true;
      finish(track->client_gone ? "disconnected" : "error");
      return track->client_gone ? false : consumer(ev);
    }
    if (track->client_gone) return false;
    const bool keep = consumer(ev);
    // The client is gone: the executor cancels the run and its final event does the accounting.
    if (!keep) track->client_gone = true;
    return keep;
  });
  if (!st.ok()) {
    {
      std::lock_guard<std::mutex> l(runs_mu_);
      runs_.erase(id);
    }
    track->finished = true;
    ApiError e = from_status(st, cfg_.limits.retry_after_s, id);
    // A constraint the executor could not compile names its request field first (ConstraintSpec::origin).
    if (st.code() == StatusCode::kInvalidArgument)
      for (const char* field : {"response_format.json_schema.schema", "response_format", "guided_json", "guided_regex", "guided_choice"})
        if (st.message().rfind(std::string(field) + ": ", 0) == 0) {
          e.param = field;
          break;
        }
    if (st.code() == StatusCode::kNotFound)  // the executor knows the pipelines; the name is the client's
      e = {404, "pipeline_not_found", "unknown pipeline '" + clip_input(pipeline) + "'", "pipeline", {}};
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

void ApiImpl::hang_up(const std::string& id) {
  {
    std::lock_guard<std::mutex> l(runs_mu_);
    auto it = runs_.find(id);
    if (it == runs_.end()) return;  // already finished
    it->second->hung_up.store(true);
  }
  cancel_run(id);
}

void ApiImpl::cancel_on_disconnect(const HttpRequest& req, const std::string& id) {
  if (!req.cancel) return;
  req.cancel->on_cancel([self = shared_from_this(), id] {
    log::daemon()->info("{} client went away before the answer", id);
    self->hang_up(id);
  });
}

HttpResponse ApiImpl::sse_response(std::shared_ptr<SseBridge> bridge, const std::string& rid) {
  HttpResponse r;
  r.content_type = "text/event-stream";
  r.stream = [bridge](std::shared_ptr<StreamWriter> w) { bridge->attach(std::move(w)); };
  r.on_abort = [self = shared_from_this(), bridge, rid] {
    bridge->abort();
    self->hang_up(rid);
  };
  return r;
}

}  // namespace ragd::daemon
