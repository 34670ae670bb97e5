// Api: the routes of ragd over the Executor / DocumentApi interfaces (pipelines/runtime.h).
//
// Pipeline runs (JSON, SSE, WebSocket), documents, OpenAI-compatible completions / chat /
// embeddings / models, health, readiness, Prometheus metrics and cache stats. Authenticates API
// keys to tenants, enforces per-tenant concurrency limits (429 + Retry-After), answers every
// error with {"error":{"code","message","type","param"}}, logs every request with its id.
//
// The runtime may be attached after the server starts (model loading takes a while): until then
// /readyz and the model routes answer 503.
// Thread-safety: every method is thread-safe. The Executor and DocumentApi passed to
// set_runtime() must outlive the Api (or be detached with set_runtime(nullptr, nullptr) after
// runtime.stop()).
#pragma once

#include <memory>
#include <string>

#include "ragd/daemon/config.h"
#include "ragd/daemon/metrics.h"
#include "ragd/daemon/server.h"
#include "ragd/pipelines/runtime.h"

namespace ragd::daemon {

class ApiImpl;

class Api : public Handler {
 public:
  explicit Api(const DaemonConfig& cfg);
  ~Api() override;

  void set_runtime(pipelines::Executor* executor, pipelines::DocumentApi* documents);
  // Graceful stop, step 1: /readyz turns 503 and new requests get 503; in-flight ones continue.
  void begin_shutdown();
  // Runs (streams and non-streaming requests) still in flight.
  int in_flight() const;
  // Cancels every run in flight (shutdown deadline passed).
  void cancel_all();
  // Finishes queued document/embedding work and stops its pool; call before the runtime goes.
  void stop_background();
  MetricsRegistry& metrics();

  void handle(HttpRequest req, Responder respond) override;
  std::shared_ptr<WsHandler> open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out,
                                     HttpResponse* reject) override;
  HttpResponse transport_error(int status, const std::string& code, const std::string& message) override;

 private:
  std::shared_ptr<ApiImpl> impl_;
};

}  // namespace ragd::daemon
