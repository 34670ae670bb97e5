// WebSocket /v1/stream: one run at a time per connection; run, cancel and ping messages.
#include "api_impl.h"
#include "ragd/common/log.h"
#include "run_events.h"

namespace ragd::daemon {

using pipelines::RunEvent;

namespace {
class WsRunHandler : public WsHandler, public std::enable_shared_from_this<WsRunHandler> {
 public:
  WsRunHandler(std::shared_ptr<ApiImpl> api, ReqCtx ctx, std::shared_ptr<StreamWriter> out)
      : api_(std::move(api)), ctx_(std::move(ctx)), out_(std::move(out)) {}

  void on_text(std::string msg) override {
    JsonBody body;
    if (auto e = body.parse(msg); e.failed()) return reply_error(e, "");
    Fields f(body.object());
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
    if (type != "run") return reply_error(bad_request("type", "field 'type' must be run, cancel or ping; got '" + clip_input(type) + "'"), "");
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
    log::daemon()->info("{} ws run pipeline '{}' tenant {} max_tokens={}", rc.id, clip_input(run.pipeline), clip_input(run.tenant),
                        run.sampling.max_tokens ? std::to_string(*run.sampling.max_tokens) : std::string("default"));
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
      api_->hang_up(active);
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
