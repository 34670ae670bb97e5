// Private to the daemon: encoding of run results (sources, usage, timings, events) shared by the
// REST, SSE and WebSocket answers, and the SSE bridge.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "errors.h"
#include "ragd/common/json_writer.h"
#include "ragd/daemon/server.h"
#include "ragd/pipelines/executor.h"

namespace ragd::daemon {

// JSON fragments.
void write_sources(JsonWriter& w, const std::vector<pipelines::Source>& s);
void write_usage(JsonWriter& w, const pipelines::Usage& u);
void write_timings(JsonWriter& w, const pipelines::Timings& t);

// {"event":"sources"|"token"|"done"|"error", ...} — the WebSocket message and the SSE data line.
std::string event_json(const pipelines::RunEvent& ev, const std::string& run_id);
std::string error_event_json(const ApiError& e, const std::string& run_id);
// "event: NAME\ndata: DATA\n\n" (no event line when event is null).
std::string sse_frame(const char* event, const std::string& data);
const char* event_name(pipelines::RunEvent::Kind k);

// Events produced before the transport hands over the stream's writer are buffered here.
// Thread-safety: thread-safe.
class SseBridge {
 public:
  void attach(std::shared_ptr<StreamWriter> w);
  bool send(std::string msg);  // false once the client is gone
  void finish();
  void abort();

 private:
  std::mutex mu_;
  std::shared_ptr<StreamWriter> writer_;  // guarded by mu_
  std::vector<std::string> pending_;      // guarded by mu_
  bool finished_ = false, aborted_ = false;  // guarded by mu_
};

}  // namespace ragd::daemon
