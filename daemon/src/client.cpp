#include "ragd/daemon/client.h"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <random>

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace ragd::daemon {
namespace {

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

Result<int> dial(const std::string& host, uint16_t port, int timeout_ms) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  std::string p = std::to_string(port);
  int rc = getaddrinfo(host.c_str(), p.c_str(), &hints, &res);
  if (rc != 0) return Status::IOError(host + ": cannot resolve: " + gai_strerror(rc));
  int fd = -1;
  std::string err = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    timeval tv{timeout_ms / 1000, (timeout_ms % 1000) * 1000};
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) break;
    err = std::strerror(errno);
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) return Status::IOError("cannot connect to " + host + ":" + p + ": " + err);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

Status write_all(int fd, std::string_view b) {
  while (!b.empty()) {
    ssize_t n = ::send(fd, b.data(), b.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(std::string("send failed: ") + std::strerror(errno));
    }
    b.remove_prefix(static_cast<size_t>(n));
  }
  return Status::OK();
}

// Reads more bytes into buf; Unavailable on timeout, IOError on EOF/error.
Status recv_more(int fd, std::string* buf, int timeout_ms) {
  pollfd pfd{fd, POLLIN, 0};
  for (;;) {
    int pr = ::poll(&pfd, 1, timeout_ms);
    if (pr < 0 && errno == EINTR) return Status::Cancelled("interrupted");
    if (pr == 0) return Status::Unavailable("timed out waiting for the server");
    if (pr < 0) return Status::IOError(std::string("poll failed: ") + std::strerror(errno));
    char tmp[16384];
    ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
    if (n < 0 && errno == EINTR) return Status::Cancelled("interrupted");
    if (n < 0) return Status::IOError(std::string("recv failed: ") + std::strerror(errno));
    if (n == 0) return Status::IOError("connection closed by the server");
    buf->append(tmp, static_cast<size_t>(n));
    return Status::OK();
  }
}

std::string base64_encode(const uint8_t* p, size_t n) {
  static const char* k = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    uint32_t v = p[i] << 16;
    if (i + 1 < n) v |= p[i + 1] << 8;
    if (i + 2 < n) v |= p[i + 2];
    out += k[v >> 18];
    out += k[(v >> 12) & 63];
    out += i + 1 < n ? k[(v >> 6) & 63] : '=';
    out += i + 2 < n ? k[v & 63] : '=';
  }
  return out;
}

// Parses "HTTP/1.1 200 OK\r\nName: v\r\n..." (without the final blank line).
Result<ClientResponse> parse_head(const std::string& head) {
  ClientResponse r;
  size_t eol = head.find("\r\n");
  std::string status_line = head.substr(0, eol);
  if (status_line.compare(0, 5, "HTTP/") != 0 || status_line.size() < 12)
    return Status::IOError("bad HTTP status line: '" + status_line + "'");
  r.status = std::atoi(status_line.c_str() + 9);
  size_t pos = eol == std::string::npos ? head.size() : eol + 2;
  while (pos < head.size()) {
    size_t e = head.find("\r\n", pos);
    if (e == std::string::npos) e = head.size();
    std::string line = head.substr(pos, e - pos);
    auto colon = line.find(':');
    if (colon != std::string::npos) {
      std::string v = line.substr(colon + 1);
      while (!v.empty() && v.front() == ' ') v.erase(v.begin());
      r.headers[lower(line.substr(0, colon))] = v;
    }
    pos = e + 2;
  }
  return r;
}

}  // namespace

const std::string& ClientResponse::header(const std::string& name) const {
  static const std::string kEmpty;
  auto it = headers.find(lower(name));
  return it == headers.end() ? kEmpty : it->second;
}

Result<Url> parse_url(const std::string& s) {
  Url u;
  std::string rest = s;
  auto sep = s.find("://");
  if (sep != std::string::npos) {
    u.scheme = lower(s.substr(0, sep));
    rest = s.substr(sep + 3);
  } else {
    u.scheme = "http";
  }
  if (u.scheme != "http" && u.scheme != "ws")
    return Status::InvalidArgument("url '" + s + "': only http:// and ws:// are supported");
  auto slash = rest.find('/');
  std::string hostport = rest.substr(0, slash);
  u.target = slash == std::string::npos ? "/" : rest.substr(slash);
  auto colon = hostport.rfind(':');
  if (colon != std::string::npos) {
    u.host = hostport.substr(0, colon);
    int p = -1;
    auto ps = hostport.substr(colon + 1);
    auto [e, ec] = std::from_chars(ps.data(), ps.data() + ps.size(), p);
    if (ec != std::errc() || e != ps.data() + ps.size() || p <= 0 || p > 65535)
      return Status::InvalidArgument("url '" + s + "': bad port '" + ps + "'");
    u.port = static_cast<uint16_t>(p);
  } else {
    u.host = hostport;
    u.port = 80;
  }
  if (u.host.size() >= 2 && u.host.front() == '[') u.host = u.host.substr(1, u.host.size() - 2);
  if (u.host.empty()) return Status::InvalidArgument("url '" + s + "': missing host");
  return u;
}

// ---------------------------------------------------------------------------------------------
HttpClient::HttpClient(std::string host, uint16_t port, int timeout_ms)
    : host_(std::move(host)), port_(port), timeout_ms_(timeout_ms) {}
HttpClient::~HttpClient() { close(); }

void HttpClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buf_.clear();
}

Status HttpClient::connect() {
  close();
  RAGD_ASSIGN_OR_RETURN(fd_, dial(host_, port_, timeout_ms_));
  return Status::OK();
}

Status HttpClient::send_raw(std::string_view bytes) {
  if (fd_ < 0) RAGD_RETURN_IF_ERROR(connect());
  return write_all(fd_, bytes);
}

Status HttpClient::read_some(std::string* buf) { return recv_more(fd_, buf, timeout_ms_); }

Result<ClientResponse> HttpClient::read_head() {
  for (;;) {
    auto end = buf_.find("\r\n\r\n");
    if (end != std::string::npos) {
      std::string head = buf_.substr(0, end);
      buf_.erase(0, end + 4);
      return parse_head(head);
    }
    if (buf_.size() > (1u << 20)) return Status::IOError("response head larger than 1 MiB");
    RAGD_RETURN_IF_ERROR(read_some(&buf_));
  }
}

Result<ClientResponse> HttpClient::request(const std::string& method, const std::string& target,
                                           const std::string& body, const Headers& headers) {
  std::string out;
  auto res = request_stream(method, target, body, headers, [&](std::string_view d) {
    out.append(d);
    return true;
  });
  if (!res.ok()) return res.status();
  res->body = std::move(out);
  return res;
}

Result<ClientResponse> HttpClient::request_stream(const std::string& method, const std::string& target,
                                                  const std::string& body, const Headers& headers,
                                                  const std::function<bool(std::string_view)>& on_data) {
  std::string req = method + " " + target + " HTTP/1.1\r\nHost: " + host_ + ":" + std::to_string(port_) + "\r\n";
  bool has_ct = false;
  for (const auto& [k, v] : headers) {
    req += k + ": " + v + "\r\n";
    has_ct = has_ct || lower(k) == "content-type";
  }
  if (!body.empty() && !has_ct) req += "Content-Type: application/json\r\n";
  if (!body.empty() || method == "POST" || method == "PUT") req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  req += "\r\n";
  req += body;
  // A kept-alive connection may have been closed by the server: retry once on a fresh one.
  bool fresh = fd_ < 0;
  if (fd_ < 0) RAGD_RETURN_IF_ERROR(connect());
  Status ws = write_all(fd_, req);
  Result<ClientResponse> head = ws.ok() ? read_head() : Result<ClientResponse>(ws);
  if (!head.ok() && !fresh && head.status().code() == StatusCode::kIOError) {
    RAGD_RETURN_IF_ERROR(connect());
    RAGD_RETURN_IF_ERROR(write_all(fd_, req));
    head = read_head();
  }
  if (!head.ok()) {
    close();
    return head.status();
  }
  ClientResponse r = std::move(head).value();
  bool keep = lower(r.header("connection")) != "close";
  if (method == "HEAD" || r.status == 204 || r.status == 304) return r;
  if (lower(r.header("transfer-encoding")).find("chunked") != std::string::npos) {
    for (;;) {
      size_t eol;
      while ((eol = buf_.find("\r\n")) == std::string::npos) RAGD_RETURN_IF_ERROR(read_some(&buf_));
      size_t size = std::strtoul(buf_.substr(0, eol).c_str(), nullptr, 16);
      buf_.erase(0, eol + 2);
      while (buf_.size() < size + 2) {
        Status st = read_some(&buf_);
        if (!st.ok()) {
          close();
          return st;
        }
      }
      if (size == 0) {
        buf_.erase(0, 2);
        break;
      }
      bool more = on_data(std::string_view(buf_.data(), size));
      buf_.erase(0, size + 2);
      if (!more) {
        close();
        return r;
      }
    }
  } else if (!r.header("content-length").empty()) {
    size_t len = std::strtoull(r.header("content-length").c_str(), nullptr, 10);
    while (buf_.size() < len) RAGD_RETURN_IF_ERROR(read_some(&buf_));
    on_data(std::string_view(buf_.data(), len));
    buf_.erase(0, len);
  } else {
    for (;;) {
      if (!buf_.empty()) {
        if (!on_data(buf_)) break;
        buf_.clear();
      }
      Status st = read_some(&buf_);
      if (!st.ok()) break;
    }
    keep = false;
  }
  if (!keep) close();
  return r;
}

// ---------------------------------------------------------------------------------------------
void SseParser::feed(std::string_view bytes) {
  for (char c : bytes) {
    if (c != '\n') {
      line_ += c;
      continue;
    }
    if (!line_.empty() && line_.back() == '\r') line_.pop_back();
    if (line_.empty()) {
      if (has_data_) on_event_(event_, data_);
      event_.clear();
      data_.clear();
      has_data_ = false;
    } else if (line_[0] != ':') {
      auto colon = line_.find(':');
      std::string field = line_.substr(0, colon);
      std::string value = colon == std::string::npos ? "" : line_.substr(colon + 1);
      if (!value.empty() && value[0] == ' ') value.erase(0, 1);
      if (field == "event") {
        event_ = value;
      } else if (field == "data") {
        if (has_data_) data_ += '\n';
        data_ += value;
        has_data_ = true;
      }
    }
    line_.clear();
  }
}

// ---------------------------------------------------------------------------------------------
WsClient::~WsClient() {
  if (fd_ >= 0) ::close(fd_);
}

Status WsClient::connect(const std::string& host, uint16_t port, const std::string& target, const Headers& headers,
                         int timeout_ms) {
  RAGD_ASSIGN_OR_RETURN(fd_, dial(host, port, timeout_ms));
  std::random_device rd;
  rng_ = (static_cast<uint64_t>(rd()) << 32) | rd();
  uint8_t key[16];
  for (auto& k : key) k = static_cast<uint8_t>(rd());
  std::string req = "GET " + target + " HTTP/1.1\r\nHost: " + host + ":" + std::to_string(port) +
                    "\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Key: " +
                    base64_encode(key, 16) + "\r\n";
  for (const auto& [k, v] : headers) req += k + ": " + v + "\r\n";
  req += "\r\n";
  RAGD_RETURN_IF_ERROR(write_all(fd_, req));
  for (;;) {
    auto end = buf_.find("\r\n\r\n");
    if (end != std::string::npos) {
      RAGD_ASSIGN_OR_RETURN(ClientResponse r, parse_head(buf_.substr(0, end)));
      buf_.erase(0, end + 4);
      upgrade_status_ = r.status;
      if (r.status != 101) {
        size_t len = std::strtoull(r.header("content-length").c_str(), nullptr, 10);
        while (buf_.size() < len && recv_more(fd_, &buf_, timeout_ms).ok()) {
        }
        std::string body = buf_.substr(0, len);
        ::close(fd_);
        fd_ = -1;
        return Status::Unavailable("WebSocket upgrade refused: HTTP " + std::to_string(r.status) + " " + body);
      }
      return Status::OK();
    }
    RAGD_RETURN_IF_ERROR(recv_more(fd_, &buf_, timeout_ms));
  }
}

Status WsClient::send_frame(uint8_t opcode, std::string_view payload) {
  if (fd_ < 0) return Status::FailedPrecondition("WebSocket is not connected");
  std::string f;
  f += static_cast<char>(0x80 | opcode);
  size_t n = payload.size();
  if (n < 126) {
    f += static_cast<char>(0x80 | n);
  } else if (n < 65536) {
    f += static_cast<char>(0x80 | 126);
    f += static_cast<char>(n >> 8);
    f += static_cast<char>(n & 0xff);
  } else {
    f += static_cast<char>(0x80 | 127);
    for (int i = 7; i >= 0; --i) f += static_cast<char>((static_cast<uint64_t>(n) >> (8 * i)) & 0xff);
  }
  rng_ ^= rng_ << 13;
  rng_ ^= rng_ >> 7;
  rng_ ^= rng_ << 17;
  uint8_t mask[4] = {static_cast<uint8_t>(rng_), static_cast<uint8_t>(rng_ >> 8), static_cast<uint8_t>(rng_ >> 16),
                     static_cast<uint8_t>(rng_ >> 24)};
  f.append(reinterpret_cast<const char*>(mask), 4);
  for (size_t i = 0; i < n; ++i) f += static_cast<char>(payload[i] ^ mask[i & 3]);
  return write_all(fd_, f);
}

Status WsClient::send_text(std::string_view text) { return send_frame(0x1, text); }

Status WsClient::close(uint16_t code, std::string_view reason) {
  std::string p;
  p += static_cast<char>(code >> 8);
  p += static_cast<char>(code & 0xff);
  p += reason;
  return send_frame(0x8, p);
}

Status WsClient::fill(size_t n, int timeout_ms, bool* timed_out) {
  *timed_out = false;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  while (buf_.size() < n) {
    int left = static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count());
    if (left <= 0) {
      *timed_out = true;
      return Status::OK();
    }
    Status st = recv_more(fd_, &buf_, left);
    if (st.code() == StatusCode::kUnavailable) {
      *timed_out = true;
      return Status::OK();
    }
    RAGD_RETURN_IF_ERROR(st);
  }
  return Status::OK();
}

Result<WsClient::Message> WsClient::read(int timeout_ms) {
  if (fd_ < 0) return Status::FailedPrecondition("WebSocket is not connected");
  std::string assembled;
  for (;;) {
    bool to = false;
    RAGD_RETURN_IF_ERROR(fill(2, timeout_ms, &to));
    if (to) return Message{Message::Kind::kTimeout, "", 0, ""};
    uint8_t b0 = static_cast<uint8_t>(buf_[0]), b1 = static_cast<uint8_t>(buf_[1]);
    size_t hdr = 2;
    uint64_t len = b1 & 0x7f;
    if (len == 126) hdr = 4;
    if (len == 127) hdr = 10;
    bool masked = b1 & 0x80;
    if (masked) hdr += 4;
    RAGD_RETURN_IF_ERROR(fill(hdr, timeout_ms, &to));
    if (to) return Message{Message::Kind::kTimeout, "", 0, ""};
    if (len == 126) len = (static_cast<uint8_t>(buf_[2]) << 8) | static_cast<uint8_t>(buf_[3]);
    if (len == 127) {
      len = 0;
      for (int i = 0; i < 8; ++i) len = (len << 8) | static_cast<uint8_t>(buf_[2 + i]);
    }
    if (len > (256u << 20)) return Status::IOError("WebSocket frame larger than 256 MiB");
    RAGD_RETURN_IF_ERROR(fill(hdr + len, timeout_ms, &to));
    if (to) return Message{Message::Kind::kTimeout, "", 0, ""};
    std::string payload = buf_.substr(hdr, len);
    if (masked) {
      const char* m = buf_.data() + hdr - 4;
      for (size_t i = 0; i < payload.size(); ++i) payload[i] ^= m[i & 3];
    }
    buf_.erase(0, hdr + len);
    uint8_t op = b0 & 0x0f;
    bool fin = b0 & 0x80;
    if (op == 0x9) {  // ping
      RAGD_RETURN_IF_ERROR(send_frame(0xA, payload));
      continue;
    }
    if (op == 0xA) continue;  // pong
    if (op == 0x8) {
      Message m{Message::Kind::kClose, "", 1005, ""};
      if (payload.size() >= 2) {
        m.close_code = static_cast<uint16_t>((static_cast<uint8_t>(payload[0]) << 8) | static_cast<uint8_t>(payload[1]));
        m.close_reason = payload.substr(2);
      }
      (void)send_frame(0x8, payload.substr(0, 2));
      ::close(fd_);
      fd_ = -1;
      return m;
    }
    assembled += payload;
    if (fin) return Message{Message::Kind::kText, std::move(assembled), 0, ""};
  }
}

}  // namespace ragd::daemon
