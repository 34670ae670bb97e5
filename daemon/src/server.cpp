// Beast transport: listener, HTTP sessions (plain and SSE), WebSocket sessions.
// The only translation unit of the daemon that includes Boost.Asio/Beast.
#include "ragd/daemon/server.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <deque>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include <sys/resource.h>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/websocket.hpp>

#include "ragd/common/log.h"

namespace ragd::daemon {

namespace beast = boost::beast;
namespace http = beast::http;
namespace websocket = beast::websocket;
namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr int kReservedFds = 64;     // descriptors left to the rest of the process (storage, logs)
constexpr int kHealthSlots = 16;     // connections above a cap that are served health endpoints
constexpr size_t kReadChunk = 4096;  // bytes asked for by one read of the request side

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void shutdown() = 0;  // any thread
  // A strong reference, or null when the session is already being destroyed.
  virtual std::shared_ptr<void> keep_alive() = 0;
};

// State shared by the listener and every session.
struct Shared {
  ServerOptions opts;
  std::shared_ptr<Handler> handler;
  std::atomic<int> connections{0};  // open connections, those above a cap included
  std::atomic<int> over_cap{0};     // of which accepted above a cap (health slots)
  std::mutex mu;
  std::list<SessionBase*> sessions;  // guarded by mu; entries removed by the session destructor
  std::mutex clients_mu;
  std::unordered_map<std::string, int> per_client;  // guarded by clients_mu; within-cap connections by address

  int client_connections(const std::string& client) {
    std::lock_guard<std::mutex> l(clients_mu);
    auto it = per_client.find(client);
    return it == per_client.end() ? 0 : it->second;
  }
};

// One accepted connection's place in the connection counts, given back on destruction. Moves from
// the HTTP session to the WebSocket session on upgrade.
class ConnTicket {
 public:
  ConnTicket(std::shared_ptr<Shared> sh, std::string client, bool over_cap)
      : sh_(std::move(sh)), client_(std::move(client)), over_cap_(over_cap) {
    sh_->connections.fetch_add(1);
    if (over_cap_) {
      sh_->over_cap.fetch_add(1);
    } else {
      std::lock_guard<std::mutex> l(sh_->clients_mu);
      ++sh_->per_client[client_];
    }
  }
  ~ConnTicket() {
    if (over_cap_) {
      sh_->over_cap.fetch_sub(1);
    } else {
      std::lock_guard<std::mutex> l(sh_->clients_mu);
      auto it = sh_->per_client.find(client_);
      if (it != sh_->per_client.end() && --it->second <= 0) sh_->per_client.erase(it);
    }
    sh_->connections.fetch_sub(1);
  }
  ConnTicket(const ConnTicket&) = delete;
  ConnTicket& operator=(const ConnTicket&) = delete;

 private:
  std::shared_ptr<Shared> sh_;
  std::string client_;
  bool over_cap_;
};

class Registration {
 public:
  Registration(std::shared_ptr<Shared> sh, SessionBase* s) : sh_(std::move(sh)) {
    std::lock_guard<std::mutex> l(sh_->mu);
    it_ = sh_->sessions.insert(sh_->sessions.end(), s);
  }
  ~Registration() {
    std::lock_guard<std::mutex> l(sh_->mu);
    sh_->sessions.erase(it_);
  }
  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

 private:
  std::shared_ptr<Shared> sh_;
  std::list<SessionBase*>::iterator it_;
};

std::string reason_phrase(int status) {
  auto r = http::obsolete_reason(http::int_to_status(static_cast<unsigned>(status)));
  return r.empty() ? std::string("Unknown") : std::string(r);
}

// True when the request has no Transfer-Encoding, or its codings (over every such header) end in
// one "chunked" that appears nowhere else.
bool transfer_encoding_ok(const http::request<http::string_body>& req) {
  std::vector<std::string> codings;
  for (const auto& f : req) {
    if (f.name() != http::field::transfer_encoding) continue;
    std::string_view v = f.value();
    size_t i = 0;
    while (i <= v.size()) {
      size_t j = v.find(',', i);
      if (j == std::string_view::npos) j = v.size();
      std::string_view c = v.substr(i, j - i);
      while (!c.empty() && (c.front() == ' ' || c.front() == '\t')) c.remove_prefix(1);
      while (!c.empty() && (c.back() == ' ' || c.back() == '\t')) c.remove_suffix(1);
      std::string lc;
      for (char ch : c) lc += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      codings.push_back(lc);
      i = j + 1;
    }
  }
  if (codings.empty()) return true;
  for (size_t i = 0; i + 1 < codings.size(); ++i)
    if (codings[i] == "chunked" || codings[i].empty()) return false;
  return codings.back() == "chunked";
}

std::string serialize_head(const HttpResponse& r, bool keep_alive, bool chunked, size_t content_length) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason_phrase(r.status) + "\r\n";
  out += "Server: ragd\r\n";
  out += "Content-Type: " + r.content_type + "\r\n";
  for (const auto& [k, v] : r.headers) out += k + ": " + v + "\r\n";
  if (chunked) out += "Transfer-Encoding: chunked\r\nCache-Control: no-cache\r\nX-Accel-Buffering: no\r\n";
  else out += "Content-Length: " + std::to_string(content_length) + "\r\n";
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out;
}

template <class Req>
HttpRequest to_request(const Req& req, const std::string& remote) {
  HttpRequest r;
  r.method = std::string(req.method_string());
  r.target = std::string(req.target());
  auto q = r.target.find('?');
  r.path = r.target.substr(0, q);
  if (q != std::string::npos) r.query = r.target.substr(q + 1);
  for (const auto& f : req) {
    std::string name(f.name_string());
    for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    auto [it, inserted] = r.headers.emplace(name, std::string(f.value()));
    if (!inserted) it->second += ", " + std::string(f.value());
  }
  r.body = req.body();
  r.remote = remote;
  r.keep_alive = req.keep_alive();
  return r;
}

std::string endpoint_str(const tcp::socket& s) {
  beast::error_code ec;
  auto ep = s.remote_endpoint(ec);
  if (ec) return "?";
  return ep.address().to_string() + ":" + std::to_string(ep.port());
}

// ---------------------------------------------------------------------------------------------
// WebSocket session
class WsSession : public SessionBase, public StreamWriter, public std::enable_shared_from_this<WsSession> {
 public:
  WsSession(beast::tcp_stream&& stream, std::shared_ptr<Shared> sh, std::unique_ptr<ConnTicket> ticket,
            std::string remote)
      : ws_(std::move(stream)), sh_(std::move(sh)), reg_(sh_, this), ticket_(std::move(ticket)),
        remote_(std::move(remote)), close_timer_(ws_.get_executor()) {}

  void run(http::request<http::string_body> req) {
    beast::get_lowest_layer(ws_).expires_never();
    websocket::stream_base::timeout t{};
    t.handshake_timeout = std::chrono::milliseconds(sh_->opts.read_timeout_ms);
    t.idle_timeout = std::chrono::milliseconds(2 * sh_->opts.ws_ping_interval_ms);
    t.keep_alive_pings = true;  // ping at idle_timeout / 2, drop the peer if nothing comes back
    ws_.set_option(t);
    ws_.set_option(websocket::stream_base::decorator(
        [](websocket::response_type& res) { res.set(http::field::server, "ragd"); }));
    ws_.read_message_max(sh_->opts.max_body_bytes);
    // RFC 6455 7.4: close codes from 5000 up are invalid; Beast would echo them. Fail the
    // connection with 1002 instead (sent before Beast's echo, which is then skipped).
    ws_.control_callback([this](websocket::frame_type kind, beast::string_view) {
      if (kind != websocket::frame_type::close) return;
      const uint16_t code = ws_.reason().code;
      if (code >= 5000) do_close(1002, "invalid close code " + std::to_string(code));
    });
    HttpRequest hr = to_request(req, remote_);
    HttpResponse reject;
    handler_ = sh_->handler->open_ws(hr, shared_from_this(), &reject);
    if (!handler_) {
      open_ = false;
      auto raw = std::make_shared<std::string>(serialize_head(reject, false, false, reject.body.size()) + reject.body);
      beast::get_lowest_layer(ws_).expires_after(std::chrono::milliseconds(sh_->opts.write_timeout_ms));
      net::async_write(beast::get_lowest_layer(ws_), net::buffer(*raw),
                       [self = shared_from_this(), raw](beast::error_code, size_t) {
                         beast::error_code ec;
                         beast::get_lowest_layer(self->ws_).socket().shutdown(tcp::socket::shutdown_both, ec);
                         beast::get_lowest_layer(self->ws_).close();
                       });
      return;
    }
    ws_.async_accept(req, [self = shared_from_this()](beast::error_code ec) { self->on_accept(ec); });
  }

  bool send(std::string msg) override {
    if (!open_.load()) return false;
    int q = queued_.fetch_add(1) + 1;
    if (q > sh_->opts.stream_queue_limit) {
      close(1008, "client not reading: stream queue limit reached");
      return false;
    }
    net::post(ws_.get_executor(), [self = shared_from_this(), m = std::move(msg)]() mutable {
      self->outq_.push_back(std::move(m));
      self->maybe_write();
    });
    return true;
  }
  void finish() override {}
  void close(uint16_t code, std::string reason) override {
    open_ = false;
    net::post(ws_.get_executor(), [self = shared_from_this(), code, reason = std::move(reason)]() {
      self->do_close(code, reason);
    });
  }
  bool is_open() const override { return open_.load(); }

  void shutdown() override { close(1001, "server shutting down"); }
  std::shared_ptr<void> keep_alive() override { return weak_from_this().lock(); }

 private:
  void on_accept(beast::error_code ec) {
    if (ec) return on_gone();
    accepted_ = true;
    maybe_write();
    do_read();
  }
  void do_read() {
    ws_.async_read(buf_, [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }
  void on_read(beast::error_code ec) {
    if (ec) return on_gone();
    std::string msg = beast::buffers_to_string(buf_.data());
    buf_.consume(buf_.size());
    if (handler_) handler_->on_text(std::move(msg));
    do_read();
  }
  void maybe_write() {
    if (writing_ || !accepted_ || closing_ || outq_.empty()) return;
    writing_ = true;
    ws_.text(true);
    ws_.async_write(net::buffer(outq_.front()), [self = shared_from_this()](beast::error_code ec, size_t) {
      self->on_write(ec);
    });
  }
  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) return on_gone();
    outq_.pop_front();
    queued_.fetch_sub(1);
    maybe_write();
  }
  void do_close(uint16_t code, const std::string& reason) {
    if (closing_ || gone_) return;
    closing_ = true;
    open_ = false;
    if (!accepted_) {
      beast::get_lowest_layer(ws_).close();
      return on_gone();
    }
    log::daemon()->info("ws {} closing: {} {}", remote_, code, reason);
    websocket::close_reason cr(static_cast<websocket::close_code>(code), reason);
    ws_.async_close(cr, [self = shared_from_this()](beast::error_code) {
      self->close_timer_.cancel();
      beast::get_lowest_layer(self->ws_).close();
    });
    // A peer that does not read never lets the close frame out: cut the socket after a grace period.
    close_timer_.expires_after(std::chrono::seconds(2));
    close_timer_.async_wait([self = shared_from_this()](beast::error_code ec) {
      if (!ec) beast::get_lowest_layer(self->ws_).close();
    });
    on_gone();
  }
  void on_gone() {
    open_ = false;
    if (gone_) return;
    gone_ = true;
    // The handler holds this session as its writer: dropping it here breaks the cycle.
    if (auto h = std::move(handler_)) h->on_close();
  }

  websocket::stream<beast::tcp_stream> ws_;
  std::shared_ptr<Shared> sh_;
  Registration reg_;
  std::unique_ptr<ConnTicket> ticket_;
  std::string remote_;
  net::steady_timer close_timer_;
  beast::flat_buffer buf_;
  std::shared_ptr<WsHandler> handler_;
  // strand-only state
  std::deque<std::string> outq_;
  bool writing_ = false, accepted_ = false, closing_ = false, gone_ = false;
  std::atomic<bool> open_{true};
  std::atomic<int> queued_{0};  // messages accepted by send() and not yet written
};

// ---------------------------------------------------------------------------------------------
// HTTP session: keep-alive request/response; a streamed (SSE) response ends the connection.
//
// Reading one request has two deadlines: its first bytes must come within first_byte_timeout_ms
// (a new connection) or idle_timeout_ms (a kept-alive one), else the connection closes quietly;
// the rest of it within read_timeout_ms, else 408. Both are timers that cancel the read rather than
// beast::tcp_stream expiries, which would close the socket before a 408 could be written.
class HttpSession : public SessionBase, public StreamWriter, public std::enable_shared_from_this<HttpSession> {
 public:
  // `connection_limit` non-empty: accepted above that cap; serves one request and closes.
  HttpSession(tcp::socket&& socket, std::shared_ptr<Shared> sh, std::unique_ptr<ConnTicket> ticket,
              std::string connection_limit)
      : stream_(std::move(socket)), sh_(std::move(sh)), reg_(sh_, this), ticket_(std::move(ticket)),
        read_timer_(stream_.get_executor()), connection_limit_(std::move(connection_limit)) {
    remote_ = endpoint_str(stream_.socket());
  }

  void run() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->do_read(); });
  }
  std::shared_ptr<void> keep_alive() override { return weak_from_this().lock(); }
  void shutdown() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->upgraded_) return;
      // Idle keep-alive connections close now; one waiting for its handler closes after answering.
      if (self->streaming_ || self->reading_) self->do_close();
      else self->close_after_response_ = true;
    });
  }
  // Health-slot eviction: closes the connection if it has not sent a byte yet.
  void evict_if_idle() {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->awaiting_first_bytes_ || self->closed_) return;
      log::daemon()->debug("http {} closed: health slot needed by a newer connection", self->remote_);
      self->do_close();
    });
  }

  // StreamWriter (SSE)
  bool send(std::string msg) override {
    if (!open_.load()) return false;
    int q = queued_.fetch_add(1) + 1;
    if (q > sh_->opts.stream_queue_limit) {
      open_ = false;
      net::post(stream_.get_executor(), [self = shared_from_this()] {
        log::daemon()->warn("http {} stream queue limit reached; disconnecting", self->remote_);
        self->abort();
        self->do_close();
      });
      return false;
    }
    char head[24];
    std::snprintf(head, sizeof head, "%zx\r\n", msg.size());
    std::string chunk = head + std::move(msg) + "\r\n";
    net::post(stream_.get_executor(), [self = shared_from_this(), c = std::move(chunk)]() mutable {
      if (self->finished_ || self->closed_) return;
      self->enqueue(std::move(c), true);
    });
    return true;
  }
  void finish() override {
    net::post(stream_.get_executor(), [self = shared_from_this()] {
      if (self->finished_ || self->closed_) return;
      self->finished_ = true;
      self->on_abort_ = nullptr;
      self->after_write_ = After::kClose;
      self->enqueue("0\r\n\r\n", false);
    });
  }
  void close(uint16_t, std::string) override { finish(); }
  bool is_open() const override { return open_.load(); }

 private:
  enum class After { kNone, kRead, kClose };

  void do_read() {
    if (closed_) return;
    // The watch of the previous request is still being cancelled: read once it has returned.
    if (watching_) {
      read_when_watch_ends_ = true;
      return;
    }
    parser_.emplace();
    parser_->body_limit(sh_->opts.max_body_bytes);
    parser_->header_limit(static_cast<uint32_t>(sh_->opts.max_header_bytes));
    reading_ = true;
    if (buffer_.size() > 0) return read_request();  // a pipelined request is already here
    awaiting_first_bytes_ = true;
    arm_read_deadline(first_ ? sh_->opts.first_byte_timeout_ms : sh_->opts.idle_timeout_ms);
    stream_.socket().async_read_some(buffer_.prepare(kReadChunk),
                                     [self = shared_from_this()](beast::error_code ec, size_t n) {
                                       self->on_first_bytes(ec, n);
                                     });
  }

  void on_first_bytes(beast::error_code ec, size_t n) {
    awaiting_first_bytes_ = false;
    if (closed_) return;
    if (ec) {
      reading_ = false;
      read_timer_.cancel();
      if (deadline_passed_)
        log::daemon()->debug("http {} closed: no request within {} ms", remote_,
                             first_ ? sh_->opts.first_byte_timeout_ms : sh_->opts.idle_timeout_ms);
      return do_close();
    }
    buffer_.commit(n);
    read_request();
  }

  void read_request() {
    first_ = false;
    arm_read_deadline(sh_->opts.read_timeout_ms);
    http::async_read(stream_, buffer_, *parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_read(ec); });
  }

  // When `ms` pass before the read in progress completes, cancels it (its handler sees
  // operation_aborted with deadline_passed_ set).
  void arm_read_deadline(int ms) {
    deadline_passed_ = false;
    const uint64_t gen = ++read_gen_;
    read_timer_.expires_after(std::chrono::milliseconds(ms));
    read_timer_.async_wait([self = shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->read_gen_ || !self->reading_ || self->closed_) return;
      self->deadline_passed_ = true;
      beast::error_code ignored;
      self->stream_.socket().cancel(ignored);
    });
  }

  void on_read(beast::error_code ec) {
    reading_ = false;
    read_timer_.cancel();
    if (closed_) return;
    if (ec && deadline_passed_) {
      // Part of a request came but not all of it in time (e.g. a body shorter than its Content-Length).
      return reject(408, "request_timeout",
                    "request not received in full within server.read_timeout_ms = " +
                        std::to_string(sh_->opts.read_timeout_ms) + " ms");
    }
    if (ec == http::error::end_of_stream || ec == net::error::eof || ec == beast::error::timeout ||
        ec == net::error::operation_aborted || ec == net::error::connection_reset) {
      return do_close();
    }
    if (ec == http::error::body_limit) {
      return reject(413, "body_too_large",
                    "request body exceeds server.max_body_bytes = " + std::to_string(sh_->opts.max_body_bytes));
    }
    if (ec == http::error::header_limit) {
      return reject(431, "headers_too_large",
                    "request headers exceed server.max_header_bytes = " + std::to_string(sh_->opts.max_header_bytes));
    }
    if (ec) {
      if (ec.category() == http::make_error_code(http::error::bad_target).category())
        return reject(400, "bad_request", "malformed HTTP request: " + ec.message());
      return do_close();
    }
    // RFC 9112 6.1: a request whose transfer coding is not a final "chunked" cannot be framed;
    // answer 400 and close, so that bytes after it are never read as another request.
    if (!transfer_encoding_ok(parser_->get())) {
      return reject(400, "bad_transfer_encoding",
                    "unsupported Transfer-Encoding: only a final 'chunked' coding is accepted");
    }
    if (websocket::is_upgrade(parser_->get())) {
      if (!connection_limit_.empty())
        return reject(503, "too_many_connections", connection_limit_ + "; no WebSocket is opened on this connection");
      upgraded_ = true;
      auto ws = std::make_shared<WsSession>(std::move(stream_), sh_, std::move(ticket_), remote_);
      ws->run(parser_->release());
      return;
    }
    http11_ = parser_->get().version() >= 11;
    HttpRequest req = to_request(parser_->get(), remote_);
    if (!connection_limit_.empty()) {
      req.connection_limit = connection_limit_;
      req.keep_alive = false;
    }
    cancel_ = std::make_shared<CancelSignal>();
    req.cancel = cancel_;
    keep_alive_ = req.keep_alive;
    head_request_ = req.method == "HEAD";
    awaiting_response_ = true;
    auto self = shared_from_this();
    sh_->handler->handle(std::move(req), [self](HttpResponse r) {
      net::post(self->stream_.get_executor(), [self, r = std::move(r)]() mutable { self->on_response(std::move(r)); });
    });
    // An answer given during handle() was posted first and has run by now; a request still
    // waiting is watched.
    net::post(stream_.get_executor(), [self] {
      if (self->awaiting_response_) self->watch();
    });
  }

  void reject(int status, const std::string& code, const std::string& message) {
    keep_alive_ = false;
    on_response(sh_->handler->transport_error(status, code, message));
  }

  void on_response(HttpResponse r) {
    awaiting_response_ = false;
    if (cancel_) {
      cancel_->reset();
      cancel_.reset();
    }
    if (closed_) {
      if (r.stream && r.on_abort) r.on_abort();  // client already gone
      return;
    }
    if (r.stream) {
      streaming_ = true;
      on_abort_ = std::move(r.on_abort);
      enqueue(serialize_head(r, false, true, 0), false);
      watch();
      r.stream(shared_from_this());
      return;
    }
    // The next request is read by the parser: stop the watch (only reads are pending now).
    if (watching_) {
      beast::error_code ignored;
      stream_.socket().cancel(ignored);
    }
    bool ka = keep_alive_ && !close_after_response_;
    after_write_ = ka ? After::kRead : After::kClose;
    // HEAD: the GET's headers (Content-Length included), no body.
    enqueue(serialize_head(r, ka, false, r.body.size()) + (head_request_ ? std::string() : r.body), false);
  }

  // While a request waits for its answer, or a stream is being sent, nobody reads the request side:
  // watch it so that a client that goes away is noticed at once and its work cancelled, rather
  // than at the next write. Bytes that come while an answer is pending (a pipelined request) are
  // kept for the next read, up to max_header_bytes. End of stream is not a client gone: a client
  // may shut down only its sending side after a complete request (shutdown(SHUT_WR), `nc -N`) and
  // still read the answer, so the answer is written; probe_peer() tells the two apart.
  void watch() {
    if (watching_ || closed_ || finished_) return;
    if (peer_shut_) {
      // Nothing more can be read. A stream's own writes notice a client that is gone.
      if (awaiting_response_ && !streaming_) probe_peer();
      return;
    }
    const bool keep = !streaming_;
    if (keep && buffer_.size() >= sh_->opts.max_header_bytes) return;
    watching_ = true;
    auto on_done = [self = shared_from_this(), keep](beast::error_code ec, size_t n) { self->on_watch(ec, n, keep); };
    if (keep) stream_.socket().async_read_some(buffer_.prepare(kReadChunk), std::move(on_done));
    else stream_.socket().async_read_some(net::buffer(watch_buf_), std::move(on_done));
  }

  void on_watch(beast::error_code ec, size_t n, bool keep) {
    watching_ = false;
    if (keep && !ec) buffer_.commit(n);
    if (closed_ || finished_) return;
    if (!streaming_ && !awaiting_response_) {
      // Stopped (or returned) because the answer came: the next read may start.
      if (read_when_watch_ends_) {
        read_when_watch_ends_ = false;
        if (close_after_response_) return do_close();
        do_read();
      }
      return;
    }
    if (ec == net::error::eof) {
      log::daemon()->debug("http {} shut down its sending side; the answer is still sent", remote_);
      peer_shut_ = true;
      return watch();
    }
    if (ec) {
      log::daemon()->info("http {} client went away {}", remote_, streaming_ ? "mid-stream" : "before the response");
      return do_close();
    }
    watch();
  }

  // After end of stream, whether the client only shut down its sending side or closed its socket,
  // only a write can tell: a closed socket answers data with a reset. HTTP/1.1 lets a server send
  // interim 1xx responses before the final one and clients must skip them (RFC 9110 §15.2), so
  // the probe is "102 Processing". A reset puts an error on the socket: the client went away and
  // the request is cancelled, as when the watch sees a reset. HTTP/1.0 has no interim responses:
  // the answer is written and a client gone is noticed by that write.
  void probe_peer() {
    if (!http11_) return;
    if (!probing_) {
      probing_ = true;
      stream_.socket().async_wait(tcp::socket::wait_error,
                                  [self = shared_from_this()](beast::error_code ec) { self->on_probe(ec); });
    }
    enqueue("HTTP/1.1 102 Processing\r\n\r\n", false);
  }

  void on_probe(beast::error_code ec) {
    probing_ = false;
    if (ec || closed_) return;  // cancelled: the connection is closing
    log::daemon()->info("http {} client went away {}", remote_, streaming_ ? "mid-stream" : "before the response");
    do_close();
  }

  void enqueue(std::string s, bool counted) {
    outq_.push_back({std::move(s), counted});
    if (!writing_) do_write();
  }

  void do_write() {
    writing_ = true;
    stream_.expires_after(std::chrono::milliseconds(sh_->opts.write_timeout_ms));
    net::async_write(stream_, net::buffer(outq_.front().first),
                     [self = shared_from_this()](beast::error_code ec, size_t) { self->on_write(ec); });
  }

  void on_write(beast::error_code ec) {
    writing_ = false;
    if (ec) {
      abort();
      return do_close();
    }
    if (outq_.front().second) queued_.fetch_sub(1);
    outq_.pop_front();
    if (!outq_.empty()) return do_write();
    stream_.expires_never();
    After a = after_write_;
    after_write_ = After::kNone;
    if (a == After::kClose) return do_close();
    if (a == After::kRead) {
      if (close_after_response_) return do_close();
      do_read();
    }
  }

  void abort() {
    open_ = false;
    if (on_abort_) {
      auto f = std::move(on_abort_);
      on_abort_ = nullptr;
      f();
    }
  }

  void do_close() {
    if (closed_) return;
    if (streaming_ && !finished_) abort();
    if (awaiting_response_ && cancel_) {
      auto c = std::move(cancel_);
      c->cancel();
    }
    closed_ = true;
    open_ = false;
    read_timer_.cancel();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
    stream_.close();
  }

  beast::tcp_stream stream_;
  std::shared_ptr<Shared> sh_;
  Registration reg_;
  std::unique_ptr<ConnTicket> ticket_;
  net::steady_timer read_timer_;
  const std::string connection_limit_;
  std::string remote_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  std::array<char, 256> watch_buf_{};
  // strand-only state
  std::deque<std::pair<std::string, bool>> outq_;  // bytes, counts against the stream queue
  bool writing_ = false, first_ = true, keep_alive_ = true, reading_ = false;
  bool streaming_ = false, finished_ = false, closed_ = false, upgraded_ = false;
  bool close_after_response_ = false, head_request_ = false;
  bool awaiting_first_bytes_ = false, deadline_passed_ = false, awaiting_response_ = false;
  bool watching_ = false, read_when_watch_ends_ = false;
  bool http11_ = true;      // the request being answered is HTTP/1.1 (interim responses allowed)
  bool peer_shut_ = false;  // the client shut down its sending side (end of stream read)
  bool probing_ = false;    // probe_peer's wait for a socket error is pending
  uint64_t read_gen_ = 0;
  std::shared_ptr<CancelSignal> cancel_;  // of the request awaiting its answer
  After after_write_ = After::kNone;
  std::function<void()> on_abort_;
  std::atomic<bool> open_{true};
  std::atomic<int> queued_{0};
};

// ---------------------------------------------------------------------------------------------
class ServerImpl : public Server {
 public:
  ServerImpl(const ServerOptions& opts, std::shared_ptr<Handler> handler)
      : acceptor_(net::make_strand(ioc_)), accept_timer_(acceptor_.get_executor()), work_(net::make_work_guard(ioc_)) {
    sh_ = std::make_shared<Shared>();
    sh_->opts = opts;
    sh_->handler = std::move(handler);
  }
  ~ServerImpl() override { stop(); }

  Status listen() {
    std::string host;
    uint16_t port = 0;
    RAGD_RETURN_IF_ERROR(parse_listen(sh_->opts.listen, &host, &port));
    if (host == "localhost") host = "127.0.0.1";
    beast::error_code ec;
    auto addr = net::ip::make_address(host, ec);
    if (ec) return Status::InvalidArgument("server.listen: bad address '" + host + "': " + ec.message());
    tcp::endpoint ep(addr, port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) return Status::IOError("cannot listen on " + sh_->opts.listen + ": " + ec.message());
    auto local = acceptor_.local_endpoint(ec);
    port_ = local.port();
    address_ = local.address().to_string() + ":" + std::to_string(port_);
    set_connection_cap();
    do_accept();
    threads_n_ = sh_->opts.threads > 0 ? sh_->opts.threads : static_cast<int>(std::max(2u, std::thread::hardware_concurrency()));
    for (int i = 0; i < threads_n_; ++i) threads_.emplace_back([this] { ioc_.run(); });
    return Status::OK();
  }

  uint16_t port() const override { return port_; }
  std::string address() const override { return address_; }
  int open_connections() const override { return sh_->connections.load(); }
  int threads() const override { return threads_n_; }
  int max_connections() const override { return cap_; }

  void stop_accepting() override {
    std::promise<void> done;
    auto fut = done.get_future();
    net::dispatch(acceptor_.get_executor(), [this, &done] {
      beast::error_code ec;
      if (acceptor_.is_open()) acceptor_.close(ec);
      accept_timer_.cancel();
      done.set_value();
    });
    if (!threads_.empty()) fut.wait();
  }

  void stop() override {
    std::lock_guard<std::mutex> l(stop_mu_);
    if (stopped_) return;
    stopped_ = true;
    stop_accepting();
    // Take strong references under the lock, act outside it: a session's destructor takes the
    // same lock to unregister.
    std::vector<std::pair<SessionBase*, std::shared_ptr<void>>> live;
    {
      std::lock_guard<std::mutex> sl(sh_->mu);
      for (SessionBase* s : sh_->sessions)
        if (auto ref = s->keep_alive()) live.emplace_back(s, std::move(ref));
    }
    for (auto& [s, ref] : live) s->shutdown();
    live.clear();
    // Let sessions flush their close frames / final bytes briefly, then stop the loop.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(500);
    while (sh_->connections.load() > 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    work_.reset();
    ioc_.stop();
    for (auto& t : threads_) t.join();
    threads_.clear();
  }

 private:
  // Every connection holds a descriptor: the cap leaves kReservedFds to the rest of the process and
  // room for the health slots under the open-file limit.
  void set_connection_cap() {
    const int configured = sh_->opts.max_connections;
    cap_ = configured;
    limit_text_ = "connection limit reached: server.max_connections = " + std::to_string(configured);
    rlimit rl{};
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) return;
    const int nofile = static_cast<int>(std::min<rlim_t>(rl.rlim_cur, INT_MAX));
    const int by_fds = std::max(1, nofile - kReservedFds - 2 * kHealthSlots);
    if (by_fds >= configured) return;
    cap_ = by_fds;
    limit_text_ = "connection limit reached: " + std::to_string(cap_) + " open connections (server.max_connections = " +
                  std::to_string(configured) + ", lowered to fit the open-file limit " + std::to_string(nofile) + ")";
    log::daemon()->warn("server.max_connections = {} does not fit the open-file limit {}: capping connections at {}",
                        configured, nofile, cap_);
  }

  void do_accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (ec) {
        if (ec == net::error::operation_aborted || !acceptor_.is_open()) return;
        // Out of descriptors (or memory): the pending connection stays in the backlog and the
        // listening socket stays readable; retrying at once would spin.
        const bool resources = ec == net::error::no_descriptors || ec == net::error::no_buffer_space ||
                               ec == net::error::no_memory ||
                               ec == beast::error_code(ENFILE, boost::system::system_category());
        if (should_log()) log::daemon()->warn("accept failed: {}", ec.message());
        if (!resources) return do_accept();
        accept_timer_.expires_after(std::chrono::milliseconds(100));
        accept_timer_.async_wait([this](beast::error_code tec) {
          if (!tec && acceptor_.is_open()) do_accept();
        });
        return;
      }
      admit(std::move(socket));
      do_accept();
    });
  }

  // Acceptor strand only.
  void admit(tcp::socket socket) {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    std::string client = ec ? std::string("?") : ep.address().to_string();
    std::string limit;
    const int per_client_cap = sh_->opts.max_connections_per_client;
    if (sh_->connections.load() - sh_->over_cap.load() >= cap_) {
      limit = limit_text_;
    } else if (per_client_cap > 0 && sh_->client_connections(client) >= per_client_cap) {
      limit = "connection limit reached: server.max_connections_per_client = " + std::to_string(per_client_cap) +
              " from " + client;
    }
    if (limit.empty()) {
      auto ticket = std::make_unique<ConnTicket>(sh_, client, false);
      std::make_shared<HttpSession>(std::move(socket), sh_, std::move(ticket), std::string())->run();
      return;
    }
    // Above a cap: a health slot, made free if need be by closing the slot that has waited longest
    // without sending a byte.
    std::erase_if(health_slots_, [](const std::weak_ptr<HttpSession>& w) { return w.expired(); });
    if (sh_->over_cap.load() >= 2 * kHealthSlots) {
      if (should_log()) log::daemon()->warn("{}; health slots full: closing new connections at once", limit);
      socket.close(ec);
      return;
    }
    if (static_cast<int>(health_slots_.size()) >= kHealthSlots) {
      if (auto oldest = health_slots_.front().lock()) oldest->evict_if_idle();
      health_slots_.pop_front();
    }
    if (should_log()) log::daemon()->warn("{}; new connections are served /healthz and /readyz only", limit);
    auto ticket = std::make_unique<ConnTicket>(sh_, client, true);
    auto session = std::make_shared<HttpSession>(std::move(socket), sh_, std::move(ticket), std::move(limit));
    health_slots_.push_back(session);
    session->run();
  }

  // At most one warning per 5 s about refused or capped connections (acceptor strand only).
  bool should_log() {
    auto now = std::chrono::steady_clock::now();
    if (now - last_warn_ < std::chrono::seconds(5)) return false;
    last_warn_ = now;
    return true;
  }

  net::io_context ioc_;
  tcp::acceptor acceptor_;
  net::steady_timer accept_timer_;  // accept back-off after running out of descriptors
  net::executor_work_guard<net::io_context::executor_type> work_;
  std::shared_ptr<Shared> sh_;
  std::vector<std::thread> threads_;
  int threads_n_ = 0;
  int cap_ = 0;
  std::string limit_text_;  // what a connection above cap_ is told
  // acceptor-strand state
  std::deque<std::weak_ptr<HttpSession>> health_slots_;  // connections above a cap, oldest first
  std::chrono::steady_clock::time_point last_warn_{};
  uint16_t port_ = 0;
  std::string address_;
  std::mutex stop_mu_;
  bool stopped_ = false;  // guarded by stop_mu_
};

}  // namespace

void CancelSignal::on_cancel(std::function<void()> f) {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (done_) return;
    if (!cancelled_) {
      fn_ = std::move(f);
      return;
    }
  }
  f();
}

void CancelSignal::reset() {
  std::function<void()> drop;
  std::lock_guard<std::mutex> l(mu_);
  done_ = true;
  drop.swap(fn_);
}

void CancelSignal::cancel() {
  std::function<void()> f;
  {
    std::lock_guard<std::mutex> l(mu_);
    if (cancelled_ || done_) return;
    cancelled_ = true;
    f.swap(fn_);
  }
  if (f) f();
}

const std::string& HttpRequest::header(const std::string& name) const {
  static const std::string kEmpty;
  auto it = headers.find(name);
  return it == headers.end() ? kEmpty : it->second;
}

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& opts, std::shared_ptr<Handler> handler) {
  auto s = std::make_unique<ServerImpl>(opts, std::move(handler));
  RAGD_RETURN_IF_ERROR(s->listen());
  return std::unique_ptr<Server>(std::move(s));
}

}  // namespace ragd::daemon
