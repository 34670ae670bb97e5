// Support for the daemon fuzz targets: the real Api (routes, auth, body parsing) in front of a
// runtime double that never touches a model or a store, and helpers that wait for an answer.
//
// FuzzExecutor answers every submitted run at once, on the submitting thread: sources, one token
// echoing a piece of the query, done. FuzzDocuments accepts every ingest and knows one document
// ("doc-1", shared). Both are deterministic and keep no state between inputs, so an input behaves
// the same whatever ran before it.
// Thread-safety: the doubles are thread-safe; the helpers may be called from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "ragd/daemon/api.h"
#include "ragd/daemon/config.h"
#include "ragd/daemon/server.h"
#include "ragd/pipelines/runtime.h"

namespace ragd::fuzz {

// Turns the daemon's logging off (RAGD_LOG_LEVEL=off) unless the environment sets a level.
void quiet_logs();

// API keys of the authenticated Api: "k-tenant" (tenant "acme") and "k-admin" (admin, "ops").
inline constexpr const char* kTenantKey = "k-tenant";
inline constexpr const char* kAdminKey = "k-admin";

// A process-wide Api over the runtime doubles; `auth` selects the one with API keys on.
daemon::Api& fuzz_api(bool auth);

// Calls api.handle(req) and waits for the answer (streams are read to their end). Returns the
// status, or 0 when no answer came within `timeout_ms` (the caller aborts on that: a handler
// must answer every request).
int handle_and_wait(daemon::Api& api, daemon::HttpRequest req, int timeout_ms = 5000);

// A StreamWriter that keeps the last message and counts them (WebSocket / SSE sinks).
class CollectingWriter : public daemon::StreamWriter {
 public:
  bool send(std::string msg) override;
  void finish() override;
  void close(uint16_t code, std::string reason) override;
  bool is_open() const override;
  bool finished() const;
  size_t messages() const;

 private:
  mutable std::mutex mu_;
  std::string last_;        // guarded by mu_
  size_t count_ = 0;        // guarded by mu_
  bool finished_ = false;   // guarded by mu_
  bool closed_ = false;     // guarded by mu_
};

}  // namespace ragd::fuzz
