#include "peer_watch.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <thread>

namespace ragd::seqparallel {

namespace {

constexpr size_t kKeyBytes = 16;
constexpr auto kSetupTimeout = std::chrono::seconds(60);
constexpr char kFail = 'F';
constexpr char kBye = 'B';

// What rank 0 hands every rank through the broadcast.
struct Rendezvous {
  char host[256] = {};
  uint16_t port = 0;
  uint8_t key[kKeyBytes] = {};
  int32_t ok = 0;  // rank 0 could listen: the others connect only then
};

// What a rank sends first on its connection.
struct Hello {
  uint8_t key[kKeyBytes] = {};
  int32_t rank = 0;
};

Status sys_error(const std::string& what) { return Status::Unavailable("peer watch: " + what + ": " + std::strerror(errno)); }

bool write_all(int fd, const void* data, size_t bytes) {
  const char* p = static_cast<const char*>(data);
  while (bytes > 0) {
    const ssize_t n = ::send(fd, p, bytes, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// Reads exactly `bytes` before `deadline`; false on EOF, error or time out.
bool read_all(int fd, void* data, size_t bytes, std::chrono::steady_clock::time_point deadline) {
  char* p = static_cast<char*>(data);
  while (bytes > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd q{fd, POLLIN, 0};
    const int r = ::poll(&q, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    const ssize_t n = ::recv(fd, p, bytes, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

Result<int> connect_to(const std::string& host, uint16_t port, std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0)
    return Status::Unavailable("peer watch: resolving " + host + ": " + ::gai_strerror(rc));
  std::unique_ptr<addrinfo, void (*)(addrinfo*)> guard(res, ::freeaddrinfo);
  for (;;) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return sys_error("socket");
    if (::connect(fd, res->ai_addr, res->ai_addrlen) == 0) return fd;
    const int err = errno;
    ::close(fd);
    if (std::chrono::steady_clock::now() >= deadline) {
      errno = err;
      return sys_error("connecting to rank 0 at " + host + ":" + std::to_string(port));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace

Result<std::unique_ptr<PeerWatch>> PeerWatch::create(int rank, int size, bool same_host, const Broadcast& bcast) {
  std::unique_ptr<PeerWatch> w(new PeerWatch(rank, size));
  const auto deadline = std::chrono::steady_clock::now() + kSetupTimeout;
  Rendezvous rv;
  int listener = -1;
  Status local = Status::OK();
  if (rank == 0) {
    listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(same_host ? INADDR_LOOPBACK : INADDR_ANY);
    socklen_t len = sizeof a;
    if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, size) != 0 ||
        ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      local = sys_error("listening");
    } else if (::getrandom(rv.key, sizeof rv.key, 0) != static_cast<ssize_t>(sizeof rv.key)) {
      local = sys_error("getrandom");
    } else {
      if (same_host) {
        std::strcpy(rv.host, "127.0.0.1");
      } else if (::gethostname(rv.host, sizeof rv.host - 1) != 0) {
        local = sys_error("gethostname");
      }
      rv.port = ntohs(a.sin_port);
      rv.ok = local.ok() ? 1 : 0;
    }
  }
  if (Status st = bcast(&rv, sizeof rv); !st.ok()) {
    if (listener >= 0) ::close(listener);
    return st;
  }
  if (rank == 0) {
    if (!local.ok()) {
      if (listener >= 0) ::close(listener);
      return local;
    }
    // Every other rank, each once, with the key; strangers are dropped.
    w->fds_.assign(static_cast<size_t>(size - 1), -1);
    int connected = 0;
    while (connected < size - 1) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      pollfd q{listener, POLLIN, 0};
      const int r = left.count() > 0 ? ::poll(&q, 1, static_cast<int>(left.count())) : 0;
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) {
        ::close(listener);
        return Status::Unavailable("peer watch: " + std::to_string(size - 1 - connected) +
                                   " rank(s) did not connect to rank 0 in time");
      }
      const int fd = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
      if (fd < 0) continue;
      Hello h;
      const bool got = read_all(fd, &h, sizeof h, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::seconds(5)));
      if (!got || std::memcmp(h.key, rv.key, kKeyBytes) != 0 || h.rank <= 0 || h.rank >= size ||
          w->fds_[static_cast<size_t>(h.rank - 1)] >= 0) {
        ::close(fd);
        continue;
      }
      w->fds_[static_cast<size_t>(h.rank - 1)] = fd;
      ++connected;
    }
    ::close(listener);
  } else {
    if (rv.ok == 0) return Status::Unavailable("peer watch: rank 0 could not listen for its peers");
    RAGD_ASSIGN_OR_RETURN(int fd, connect_to(rv.host, rv.port, deadline));
    Hello h;
    std::memcpy(h.key, rv.key, kKeyBytes);
    h.rank = rank;
    if (!write_all(fd, &h, sizeof h)) {
      ::close(fd);
      return sys_error("greeting rank 0");
    }
    w->fds_.push_back(fd);
  }
  for (int fd : w->fds_) {
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  w->inbox_.assign(w->fds_.size(), std::string());
  w->said_bye_.assign(w->fds_.size(), false);
  if (::pipe2(w->wake_, O_CLOEXEC) != 0) return sys_error("pipe");
  w->thread_ = std::thread([p = w.get()] { p->monitor(); });
  return w;
}

PeerWatch::~PeerWatch() {
  if (thread_.joinable()) {
    const char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
  }
  for (int fd : fds_)
    if (fd >= 0) ::close(fd);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

Status PeerWatch::failure() const {
  if (!failed()) return Status::OK();
  std::lock_guard<std::mutex> l(mu_);
  return failure_;
}

void PeerWatch::mark_failed(const Status& why) {
  std::lock_guard<std::mutex> l(mu_);
  if (failed_.load(std::memory_order_relaxed)) return;
  failure_ = why;
  failed_.store(true, std::memory_order_release);
}

void PeerWatch::send_to(int fd, char kind, const std::string& text) {
  if (fd < 0) return;
  const std::string body = text.substr(0, 60000);
  const uint16_t len = static_cast<uint16_t>(body.size());
  std::string msg(1, kind);
  msg.append(reinterpret_cast<const char*>(&len), sizeof len);
  msg += body;
  (void)write_all(fd, msg.data(), msg.size());  // a peer that is gone cannot be told
}

void PeerWatch::tell(const std::string& text, size_t except) {
  std::lock_guard<std::mutex> l(mu_);
  for (size_t i = 0; i < fds_.size(); ++i)
    if (i != except) send_to(fds_[i], kFail, text);
}

void PeerWatch::fail(const Status& why) {
  mark_failed(why);
  tell(why.to_string(), kNobody);
}

void PeerWatch::peer_failed(size_t from, const Status& why) {
  mark_failed(why);
  if (rank_ == 0) tell(why.to_string(), from);  // the hub passes it on
}

void PeerWatch::goodbye() {
  std::lock_guard<std::mutex> l(mu_);
  for (int fd : fds_) send_to(fd, kBye, "");
}

void PeerWatch::on_message(size_t peer, char kind, const std::string& text) {
  if (kind == kBye) {
    std::lock_guard<std::mutex> l(mu_);
    said_bye_[peer] = true;
    return;
  }
  peer_failed(peer, Status::Unavailable(text));
}

void PeerWatch::monitor() {
  std::vector<pollfd> q;
  std::vector<size_t> which;
  char buf[4096];
  for (;;) {
    q.assign(1, pollfd{wake_[0], POLLIN, 0});
    which.clear();
    {
      std::lock_guard<std::mutex> l(mu_);
      for (size_t i = 0; i < fds_.size(); ++i) {
        if (fds_[i] < 0) continue;
        q.push_back(pollfd{fds_[i], POLLIN, 0});
        which.push_back(i);
      }
    }
    const int r = ::poll(q.data(), q.size(), -1);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0 || (q[0].revents & POLLIN) != 0) return;
    for (size_t k = 1; k < q.size(); ++k) {
      if (q[k].revents == 0) continue;
      const size_t i = which[k - 1];
      const ssize_t n = ::recv(q[k].fd, buf, sizeof buf, 0);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) {
        bool bye;
        {
          std::lock_guard<std::mutex> l(mu_);
          ::close(fds_[i]);
          fds_[i] = -1;
          bye = said_bye_[i];
        }
        if (!bye) {
          const int peer = rank_ == 0 ? static_cast<int>(i) + 1 : 0;
          peer_failed(i, Status::Unavailable("sequence-parallel rank " + std::to_string(peer) +
                                             " exited or lost its connection (seen by rank " + std::to_string(rank_) + ")"));
        }
        continue;
      }
      std::string& in = inbox_[i];
      in.append(buf, static_cast<size_t>(n));
      while (in.size() >= 3) {
        uint16_t len = 0;
        std::memcpy(&len, in.data() + 1, sizeof len);
        if (in.size() < 3u + len) break;
        const char kind = in[0];
        const std::string text = in.substr(3, len);
        in.erase(0, 3u + len);
        on_message(i, kind, text);
      }
    }
  }
}

}  // namespace ragd::seqparallel
