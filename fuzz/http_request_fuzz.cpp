// HTTP/1.1 request bytes as the daemon reads them: the real transport (Beast's request parser
// with the daemon's header and body limits, its Transfer-Encoding check, keep-alive and
// pipelining, WebSocket upgrades and the frames after them) in front of the real Api, on a
// loopback port. Each input is written on a fresh connection whose sending side is then shut
// down; the target reads until the server closes it. A server that neither answers nor closes
// within kDeadlineMs is a hang and aborts.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>

#include "daemon_support.h"

namespace {

constexpr int kDeadlineMs = 8000;

ragd::daemon::Server& server() {
  static ragd::daemon::Server* s = [] {
    ragd::fuzz::quiet_logs();
    ragd::daemon::ServerOptions opts;
    opts.listen = "127.0.0.1:0";
    opts.threads = 2;
    // Small limits so that the 413 / 431 paths are reachable with fuzzer-sized inputs.
    opts.max_body_bytes = 2048;
    opts.max_header_bytes = 1024;
    opts.first_byte_timeout_ms = 2000;
    opts.read_timeout_ms = 2000;
    opts.idle_timeout_ms = 2000;
    // The Api lives as long as the process: hand the server a non-owning pointer.
    std::shared_ptr<ragd::daemon::Handler> h(&ragd::fuzz::fuzz_api(false), [](ragd::daemon::Handler*) {});
    auto r = ragd::daemon::Server::start(opts, h);
    if (!r.ok()) {
      std::fprintf(stderr, "http_request: cannot start the server: %s\n", r.status().to_string().c_str());
      std::abort();
    }
    return r.value().release();  // never stopped: io threads run for the whole process
  }();
  return *s;
}

[[noreturn]] void hang(const char* what) {
  std::fprintf(stderr, "http_request: %s within %d ms\n", what, kDeadlineMs);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const uint16_t port = server().port();
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return 0;
  // Close with a reset: no TIME_WAIT, so thousands of connections a second do not run out of ports.
  linger lg{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kDeadlineMs);
  auto ms_left = [&] {
    auto d = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now()).count();
    return static_cast<int>(d < 0 ? 0 : d);
  };
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 && errno != EINPROGRESS) {
    ::close(fd);
    return 0;
  }
  // Write the input while reading whatever comes back (the server may answer before the end).
  size_t sent = 0;
  bool peer_closed = false;
  char buf[16384];
  while (sent < size && !peer_closed) {
    pollfd p{fd, static_cast<short>(POLLOUT | POLLIN), 0};
    int n = ::poll(&p, 1, ms_left());
    if (n == 0) hang("the server neither read the request nor closed");
    if (n < 0) continue;
    if (p.revents & POLLIN) {
      ssize_t r = ::recv(fd, buf, sizeof buf, 0);
      if (r == 0) peer_closed = true;
    }
    if (p.revents & (POLLERR | POLLHUP)) peer_closed = true;
    if (!peer_closed && (p.revents & POLLOUT)) {
      ssize_t w = ::send(fd, data + sent, size - sent, MSG_NOSIGNAL);
      if (w > 0) sent += static_cast<size_t>(w);
      else if (w < 0 && errno != EAGAIN && errno != EINTR) peer_closed = true;
    }
  }
  ::shutdown(fd, SHUT_WR);
  while (!peer_closed) {
    pollfd p{fd, POLLIN, 0};
    int n = ::poll(&p, 1, ms_left());
    if (n == 0) hang("the server neither answered nor closed the connection");
    if (n < 0) continue;
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) peer_closed = true;
  }
  ::close(fd);
  return 0;
}
