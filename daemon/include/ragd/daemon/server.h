// The HTTP/1.1 + WebSocket transport (Boost.Beast inside server.cpp only; no Boost here).
//
// One io_context run by N threads; every connection on its own strand; keep-alive; body and
// header limits; first-bytes/read/write/idle deadlines; one write in flight per connection with a
// bounded queue of outgoing stream messages.
//
// Connection caps: at server.max_connections open connections (or
// server.max_connections_per_client from one address) a new connection is still accepted, into one
// of a few health slots: it is handed to the Handler with HttpRequest::connection_limit set and is
// closed after one response. When the health slots are full, the one that has waited longest
// without sending a byte is closed to make room, so that a health probe always gets through.
// Above twice the health slots new connections are closed at once.
//
// The transport knows nothing about routes: it hands each request to a Handler and writes back what the Handler answers, possibly later and from any
// thread (Responder), possibly as a stream (Server-Sent Events over chunked encoding).
//
// Thread-safety: Server's methods are thread-safe. Handler methods are called concurrently from
// io threads and must not block. StreamWriter methods are thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "ragd/common/status.h"
#include "ragd/daemon/config.h"

namespace ragd::daemon {

// Tells the handler of a pending non-streaming request that its client went away (closed, or shut
// down its sending side) before the answer was written, so that it can cancel the work.
// Thread-safety: thread-safe.
class CancelSignal {
 public:
  // Registers f, called at most once (on an io thread) when the client goes away; called at once,
  // on this thread, when it already has. A later call replaces an earlier callback that has not
  // run. Ignored once the answer is being written (reset()).
  void on_cancel(std::function<void()> f);
  // Transport: the answer is being written; the callback is dropped and never runs.
  void reset();
  // Transport: the client went away; runs the callback once.
  void cancel();

 private:
  std::mutex mu_;
  std::function<void()> fn_;  // guarded by mu_
  bool cancelled_ = false;    // guarded by mu_
  bool done_ = false;         // guarded by mu_
};

struct HttpRequest {
  std::string method;   // "GET", "POST", ...
  std::string target;   // as sent: "/v1/documents/a%20b?x=1"
  std::string path;     // target without the query string (still percent-encoded)
  std::string query;    // after '?', raw
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  std::string remote;   // "127.0.0.1:53012"
  bool keep_alive = true;
  // Non-empty when the connection was accepted above a connection cap; names the cap, e.g.
  // "connection limit reached: server.max_connections = 1024". Such a connection closes after one
  // response, and the handler serves only its health endpoints on it (503 for the rest).
  std::string connection_limit;
  // Fires when the client goes away before the response is written (set by the transport; null
  // for requests built elsewhere).
  std::shared_ptr<CancelSignal> cancel;

  // Header value or "" (name lower-case).
  const std::string& header(const std::string& name) const;
};

// The outgoing side of a stream (SSE response or WebSocket session).
class StreamWriter {
 public:
  virtual ~StreamWriter() = default;
  // Queues one message: for SSE the bytes of one or more events, for WebSocket one text frame.
  // Returns false when the client is gone or its queue is over the limit; in the latter case the
  // transport disconnects it (WebSocket close code 1008). Callers cancel their work on false.
  virtual bool send(std::string msg) = 0;
  // Ends an SSE response (the connection is then closed). No-op for WebSocket.
  virtual void finish() = 0;
  // Closes a WebSocket with a code (1000 normal, 1001 going away, 1008 policy, 1011 error).
  virtual void close(uint16_t code, std::string reason) = 0;
  virtual bool is_open() const = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // Streaming: when set, the transport sends the head (text/event-stream, chunked) and calls
  // stream(writer) on the connection's strand; the handler then sends events from any thread and
  // calls writer->finish() at the end.
  std::function<void(std::shared_ptr<StreamWriter>)> stream;
  // Called at most once (on an io thread) when a streaming client disconnects before finish().
  std::function<void()> on_abort;
};

// {"error":{"code":..,"message":..,"type":..,"param":..}} with the given status.
HttpResponse error_response(int status, const std::string& code, const std::string& message,
                            const std::string& param = "");

// Receives the messages of one WebSocket connection.
class WsHandler {
 public:
  virtual ~WsHandler() = default;
  virtual void on_text(std::string msg) = 0;  // one complete text message
  virtual void on_close() = 0;                // connection gone (called once)
};

using Responder = std::function<void(HttpResponse)>;

class Handler {
 public:
  virtual ~Handler() = default;
  // Answers `req` by calling respond exactly once, from any thread, now or later.
  virtual void handle(HttpRequest req, Responder respond) = 0;
  // WebSocket upgrade of `req`: returns the connection's handler, or nullptr and sets *reject
  // (sent as a plain HTTP response, e.g. 401).
  virtual std::shared_ptr<WsHandler> open_ws(const HttpRequest& req, std::shared_ptr<StreamWriter> out,
                                             HttpResponse* reject) = 0;
  // Requests the transport rejects itself (413 body too large, 431 headers, 400 unparsable):
  // lets the handler count and format them.
  virtual HttpResponse transport_error(int status, const std::string& code, const std::string& message) = 0;
};

class Server {
 public:
  virtual ~Server() = default;
  // Binds and starts the io threads. Fails with a Status naming the address.
  static Result<std::unique_ptr<Server>> start(const ServerOptions& opts, std::shared_ptr<Handler> handler);
  virtual uint16_t port() const = 0;
  virtual std::string address() const = 0;  // "127.0.0.1:PORT"
  // Stops accepting new connections; open ones continue. Idempotent.
  virtual void stop_accepting() = 0;
  // Closes every connection, stops and joins the io threads. Idempotent.
  virtual void stop() = 0;
  // Open connections, those accepted above a cap included.
  virtual int open_connections() const = 0;
  // io_context threads running.
  virtual int threads() const = 0;
  // The connection cap in force: server.max_connections, lowered when the open-file limit
  // (RLIMIT_NOFILE at start) leaves no room for it.
  virtual int max_connections() const = 0;
};

}  // namespace ragd::daemon
