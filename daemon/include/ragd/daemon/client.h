// Blocking HTTP/1.1 and WebSocket clients over POSIX sockets (no Boost), for `ragctl query`,
// `ragctl stream` and the daemon's integration tests. Plain http:// and ws:// only.
// Thread-safety: a client object is used by one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/common/status.h"

namespace ragd::daemon {

struct Url {
  std::string scheme;  // "http" | "ws"
  std::string host;
  uint16_t port = 80;
  std::string target = "/";  // path + query
};
// "http://127.0.0.1:8080/v1/x", "ws://host:port/v1/stream", "127.0.0.1:8080" (http assumed).
[[nodiscard]] Result<Url> parse_url(const std::string& s);

struct ClientResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // lower-case names
  std::string body;
  const std::string& header(const std::string& name) const;
};

using Headers = std::vector<std::pair<std::string, std::string>>;

class HttpClient {
 public:
  HttpClient(std::string host, uint16_t port, int timeout_ms = 60000);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // One request on the kept-alive connection (reconnects when the server closed it).
  [[nodiscard]] Result<ClientResponse> request(const std::string& method, const std::string& target,
                                               const std::string& body = "", const Headers& headers = {});
  // Like request() but hands the (de-chunked) body to on_data as it arrives; on_data returns
  // false to stop early (the connection is then closed). The returned body is empty.
  [[nodiscard]] Result<ClientResponse> request_stream(const std::string& method, const std::string& target,
                                                      const std::string& body, const Headers& headers,
                                                      const std::function<bool(std::string_view)>& on_data);
  void close();
  // Raw access for tests that misbehave on purpose (send garbage, stop reading).
  [[nodiscard]] Status connect();
  [[nodiscard]] Status send_raw(std::string_view bytes);
  int fd() const { return fd_; }

 private:
  Status read_some(std::string* buf);
  Result<ClientResponse> read_head();
  std::string host_;
  uint16_t port_;
  int timeout_ms_;
  int fd_ = -1;
  std::string buf_;  // bytes read past the current position
};

// Incremental Server-Sent Events parser: feed() bytes, get (event, data) per blank-line-ended event.
class SseParser {
 public:
  explicit SseParser(std::function<void(const std::string& event, const std::string& data)> on_event)
      : on_event_(std::move(on_event)) {}
  void feed(std::string_view bytes);

 private:
  std::function<void(const std::string&, const std::string&)> on_event_;
  std::string line_, event_, data_;
  bool has_data_ = false;
};

class WsClient {
 public:
  struct Message {
    enum class Kind { kText, kClose, kTimeout } kind = Kind::kText;
    std::string text;
    uint16_t close_code = 0;
    std::string close_reason;
  };
  WsClient() = default;
  ~WsClient();
  WsClient(const WsClient&) = delete;
  WsClient& operator=(const WsClient&) = delete;

  // Opens the connection and performs the upgrade. A non-101 answer is an error whose message
  // carries the status and body (e.g. 401 with the JSON error).
  [[nodiscard]] Status connect(const std::string& host, uint16_t port, const std::string& target,
                               const Headers& headers = {}, int timeout_ms = 10000);
  [[nodiscard]] Status send_text(std::string_view text);
  // Next complete message; answers pings; kTimeout when nothing arrived within timeout_ms.
  [[nodiscard]] Result<Message> read(int timeout_ms);
  [[nodiscard]] Status close(uint16_t code = 1000, std::string_view reason = "");
  int fd() const { return fd_; }
  int upgrade_status() const { return upgrade_status_; }

 private:
  Status send_frame(uint8_t opcode, std::string_view payload);
  Status fill(size_t n, int timeout_ms, bool* timed_out);
  int fd_ = -1;
  int upgrade_status_ = 0;
  std::string buf_;
  uint64_t rng_ = 0x9E3779B97F4A7C15ull;
};

}  // namespace ragd::daemon
