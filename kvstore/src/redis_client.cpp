// RedisClient over hiredis 0.14 (blocking contexts with SO_RCVTIMEO / SO_SNDTIMEO): single server or
// Redis Cluster with a client-side slot map. See redis_client.h for the contract.
#include "ragd/kvstore/redis_client.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include "ragd/common/log.h"
#include "redis_url.h"

namespace ragd::kvstore {

namespace {

using redis_detail::parse_int;
using redis_detail::trim;

constexpr int kNumSlots = 16384;

// CRC16-XMODEM (poly 0x1021, init 0, no reflection), the variant Redis Cluster uses.
constexpr std::array<uint16_t, 256> make_crc16_table() {
  std::array<uint16_t, 256> t{};
  for (int i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b) crc = (crc & 0x8000) ? static_cast<uint16_t>((crc << 1) ^ 0x1021) : static_cast<uint16_t>(crc << 1);
    t[static_cast<size_t>(i)] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kCrc16Table = make_crc16_table();

uint16_t crc16_xmodem(std::string_view s) {
  uint16_t crc = 0;
  for (unsigned char c : s) crc = static_cast<uint16_t>((crc << 8) ^ kCrc16Table[((crc >> 8) ^ c) & 0xff]);
  return crc;
}
static_assert(kCrc16Table[1] == 0x1021);


// Blocks SIGPIPE on this thread while a pipeline runs: hiredis writes with write(2), and a server
// that resets the connection in the middle of a multi-write request would otherwise kill a process
// that does not ignore SIGPIPE. A SIGPIPE raised meanwhile is consumed; the write error remains.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    sigset_t pending;
    sigemptyset(&pending);
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
    blocked_ = pthread_sigmask(SIG_BLOCK, &pipe_, &old_) == 0;
  }
  ~SigpipeBlock() {
    if (!blocked_) return;
    if (!was_pending_) {
      sigset_t pending;
      sigemptyset(&pending);
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        const timespec zero{};
        while (sigtimedwait(&pipe_, nullptr, &zero) == -1 && errno == EINTR) {
        }
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  SigpipeBlock(const SigpipeBlock&) = delete;
  SigpipeBlock& operator=(const SigpipeBlock&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
  bool blocked_ = false;
};

struct ReplyDeleter {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using ReplyPtr = std::unique_ptr<redisReply, ReplyDeleter>;

std::string_view reply_str(const redisReply* r) { return {r->str, r->len}; }

// One command's argv, binary-safe (views into caller-owned storage).
struct Cmd {
  std::vector<const char*> argv;
  std::vector<size_t> argvlen;
  void add(std::string_view a) {
    argv.push_back(a.data());
    argvlen.push_back(a.size());
  }
};

struct Redirect {
  bool ask = false;
  int slot = -1;
  RedisEndpoint target;
};

// "MOVED 3999 127.0.0.1:6381" / "ASK 3999 127.0.0.1:6381"; Redis 7 may leave the host empty
// (":6381"), meaning the host of the node that answered.
std::optional<Redirect> parse_redirect(const redisReply* r, const RedisEndpoint& from) {
  if (r->type != REDIS_REPLY_ERROR) return std::nullopt;
  std::string_view s = reply_str(r);
  Redirect rd;
  if (s.starts_with("MOVED ")) {
    s.remove_prefix(6);
  } else if (s.starts_with("ASK ")) {
    rd.ask = true;
    s.remove_prefix(4);
  } else {
    return std::nullopt;
  }
  const size_t sp = s.find(' ');
  if (sp == std::string_view::npos) return std::nullopt;
  long long slot = 0;
  if (!parse_int(s.substr(0, sp), slot) || slot < 0 || slot >= kNumSlots) return std::nullopt;
  std::string_view addr = s.substr(sp + 1);
  const size_t colon = addr.rfind(':');
  if (colon == std::string_view::npos) return std::nullopt;
  long long port = 0;
  if (!parse_int(addr.substr(colon + 1), port) || port < 1 || port > 65535) return std::nullopt;
  rd.slot = static_cast<int>(slot);
  rd.target.host = colon == 0 ? from.host : std::string(addr.substr(0, colon));
  if (rd.target.host.size() > 2 && rd.target.host.front() == '[' && rd.target.host.back() == ']') {
    rd.target.host = rd.target.host.substr(1, rd.target.host.size() - 2);
  }
  rd.target.port = static_cast<int>(port);
  return rd;
}

void render_reply(const redisReply* r, std::string& out) {
  switch (r->type) {
    case REDIS_REPLY_STRING:
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
      out.append(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out += std::to_string(r->integer);
      break;
    case REDIS_REPLY_NIL:
      out += "(nil)";
      break;
    case REDIS_REPLY_ARRAY:
      for (size_t i = 0; i < r->elements; ++i) {
        if (i > 0) out += '\n';
        render_reply(r->element[i], out);
      }
      break;
    default:
      out += "(unknown reply)";
  }
}

}  // namespace

uint16_t redis_key_slot(std::string_view key) {
  const size_t open = key.find('{');
  if (open != std::string_view::npos) {
    const size_t close = key.find('}', open + 1);
    if (close != std::string_view::npos && close != open + 1) {
      return static_cast<uint16_t>(crc16_xmodem(key.substr(open + 1, close - open - 1)) & (kNumSlots - 1));
    }
  }
  return static_cast<uint16_t>(crc16_xmodem(key) & (kNumSlots - 1));
}

struct RedisClient::Impl {
  RedisOptions opts;
  bool cluster = false;
  RedisEndpoint first;                               // the seed that answered at connect()
  std::vector<RedisEndpoint> nodes;                  // every master seen; slot_node indexes it
  std::array<int32_t, kNumSlots> slot_node{};        // -1 = no known owner
  std::unordered_map<std::string, redisContext*> conns;  // "host:port" -> open connection
  std::unordered_set<std::string> dropped;           // nodes whose connection was dropped on error
  bool reload_pending = false;                       // a node failed: re-read the map next call
  std::string failed_node;                           // the node that failed (not asked on reload)
  RedisClientStats stats;

  Impl() { slot_node.fill(-1); }
  ~Impl() {
    for (auto& [_, c] : conns) redisFree(c);
  }

  timeval tv() const {
    const auto ms = opts.timeout.count();
    timeval t{};
    t.tv_sec = static_cast<time_t>(ms / 1000);
    t.tv_usec = static_cast<suseconds_t>((ms % 1000) * 1000);
    return t;
  }

  void drop(const std::string& name) {
    auto it = conns.find(name);
    if (it == conns.end()) return;
    redisFree(it->second);
    conns.erase(it);
    dropped.insert(name);
  }

  std::string cause(const redisContext* c) const {
    // hiredis reports a SO_RCVTIMEO / SO_SNDTIMEO expiry as EAGAIN's strerror.
    if (c->err == REDIS_ERR_IO && (std::strcmp(c->errstr, std::strerror(EAGAIN)) == 0 ||
                                   std::strcmp(c->errstr, std::strerror(EWOULDBLOCK)) == 0)) {
      return fmt::format("no reply within {} ms", opts.timeout.count());
    }
    return c->errstr[0] != '\0' ? std::string(c->errstr) : std::string("connection error");
  }

  Result<redisContext*> conn(const RedisEndpoint& ep) {
    const std::string name = ep.to_string();
    if (auto it = conns.find(name); it != conns.end()) return it->second;
    const timeval t = tv();
    redisContext* c = redisConnectWithTimeout(ep.host.c_str(), ep.port, t);
    if (c == nullptr) return Status::Unavailable(fmt::format("redis {}: cannot allocate a connection", name));
    if (c->err != 0) {
      std::string why = c->errstr;
      if (c->err == REDIS_ERR_IO && (why == std::strerror(EINPROGRESS) || why == std::strerror(ETIMEDOUT) ||
                                     why.find("timed out") != std::string::npos)) {
        why = fmt::format("connect timed out after {} ms", opts.timeout.count());
      }
      redisFree(c);
      return Status::Unavailable(fmt::format("redis {}: connect: {}", name, why));
    }
    if (redisSetTimeout(c, t) != REDIS_OK) {
      std::string why = cause(c);
      redisFree(c);
      return Status::Unavailable(fmt::format("redis {}: setting the timeout: {}", name, why));
    }
    if (!opts.password.empty()) {
      // AUTH [username] password (Redis 6 ACLs; the default user without a username).
      std::vector<const char*> argv = {"AUTH"};
      std::vector<size_t> lens = {4};
      if (!opts.username.empty()) {
        argv.push_back(opts.username.c_str());
        lens.push_back(opts.username.size());
      }
      argv.push_back(opts.password.c_str());
      lens.push_back(opts.password.size());
      auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()));
      if (r == nullptr) {
        std::string why = cause(c);
        redisFree(c);
        return Status::Unavailable(fmt::format("redis {}: AUTH: {}", name, why));
      }
      const bool ok = r->type == REDIS_REPLY_STATUS;
      const std::string msg = r->str ? std::string(r->str, r->len) : std::string();
      freeReplyObject(r);
      if (!ok) {
        redisFree(c);
        // The server's words (WRONGPASS ...) never echo the password.
        return Status::PermissionDenied(fmt::format("redis {}: AUTH refused: {}", name, msg));
      }
    }
    if (dropped.erase(name) > 0) {
      ++stats.reconnects;
      log::kvstore()->info("redis {}: reconnected", name);
    }
    conns.emplace(name, c);
    return c;
  }

  // Sends cmds[idx...] to `ep` in one pipeline (each preceded by ASKING when `asking`), returns
  // their replies in order. Any transport error drops the connection: Unavailable.
  Result<std::vector<ReplyPtr>> pipeline(const RedisEndpoint& ep, const std::vector<Cmd>& cmds,
                                         const std::vector<size_t>& idx, bool asking) {
    RAGD_ASSIGN_OR_RETURN(redisContext* c, conn(ep));
    const std::string name = ep.to_string();
    const SigpipeBlock no_sigpipe;
    static const char* kAsking = "ASKING";
    static const size_t kAskingLen = 6;
    for (size_t i : idx) {
      if (asking && redisAppendCommandArgv(c, 1, &kAsking, &kAskingLen) != REDIS_OK) goto fail;
      const Cmd& cmd = cmds[i];
      if (redisAppendCommandArgv(c, static_cast<int>(cmd.argv.size()), const_cast<const char**>(cmd.argv.data()), cmd.argvlen.data()) != REDIS_OK) {
        goto fail;
      }
    }
    stats.commands += idx.size();
    {
      std::vector<ReplyPtr> out;
      out.reserve(idx.size());
      for (size_t k = 0; k < idx.size(); ++k) {
        void* raw = nullptr;
        if (asking) {
          if (redisGetReply(c, &raw) != REDIS_OK) goto fail;
          freeReplyObject(raw);  // +OK of ASKING
          raw = nullptr;
        }
        if (redisGetReply(c, &raw) != REDIS_OK) goto fail;
        out.emplace_back(static_cast<redisReply*>(raw));
      }
      return out;
    }
  fail:
    Status st = Status::Unavailable(fmt::format("redis {}: {}", name, cause(c)));
    drop(name);
    if (cluster) {
      reload_pending = true;
      failed_node = name;
    }
    return st;
  }

  int node_index(const RedisEndpoint& ep) {
    for (size_t i = 0; i < nodes.size(); ++i) {
      if (nodes[i].host == ep.host && nodes[i].port == ep.port) return static_cast<int>(i);
    }
    nodes.push_back(ep);
    return static_cast<int>(nodes.size() - 1);
  }

  // Replaces the slot map from a CLUSTER SLOTS reply given by `from`. False on a malformed reply.
  bool apply_slots(const redisReply* r, const RedisEndpoint& from) {
    if (r->type != REDIS_REPLY_ARRAY) return false;
    std::array<int32_t, kNumSlots> next;
    next.fill(-1);
    for (size_t i = 0; i < r->elements; ++i) {
      const redisReply* e = r->element[i];
      if (e->type != REDIS_REPLY_ARRAY || e->elements < 3) return false;
      const redisReply* lo = e->element[0];
      const redisReply* hi = e->element[1];
      const redisReply* m = e->element[2];
      if (lo->type != REDIS_REPLY_INTEGER || hi->type != REDIS_REPLY_INTEGER || m->type != REDIS_REPLY_ARRAY ||
          m->elements < 2 || m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_INTEGER) {
        return false;
      }
      RedisEndpoint ep;
      ep.host = std::string(reply_str(m->element[0]));
      if (ep.host == "?") continue;  // unknown endpoint (cluster-preferred-endpoint-type)
      if (ep.host.empty()) ep.host = from.host;
      ep.port = static_cast<int>(m->element[1]->integer);
      const long long a = lo->integer, b = hi->integer;
      if (a < 0 || b >= kNumSlots || a > b) return false;
      const int n = node_index(ep);
      for (long long s = a; s <= b; ++s) next[static_cast<size_t>(s)] = n;
    }
    slot_node = next;
    return true;
  }

  Result<ReplyPtr> one(const RedisEndpoint& ep, std::initializer_list<std::string_view> args) {
    std::vector<Cmd> cmds(1);
    for (auto a : args) cmds[0].add(a);
    RAGD_ASSIGN_OR_RETURN(std::vector<ReplyPtr> r, pipeline(ep, cmds, {0}, false));
    return std::move(r[0]);
  }

  // Re-reads the slot map, asking `preferred` first, then nodes with an open connection, then the
  // rest of the known nodes and the seeds; `skip` (a node that just failed) is not asked. Best
  // effort: the old map stays when nobody answers.
  void reload_slots(const RedisEndpoint* preferred, const std::string& skip = {}) {
    std::vector<RedisEndpoint> order;
    std::unordered_set<std::string> seen;
    auto push = [&](const RedisEndpoint& ep) {
      const std::string n = ep.to_string();
      if (n == skip || !seen.insert(n).second) return;
      order.push_back(ep);
    };
    if (preferred) push(*preferred);
    for (const auto& ep : nodes) {
      if (conns.count(ep.to_string())) push(ep);
    }
    for (const auto& ep : nodes) push(ep);
    for (const auto& ep : opts.seeds) push(ep);
    for (const auto& ep : order) {
      auto r = one(ep, {"CLUSTER", "SLOTS"});
      if (!r.ok()) continue;
      if (apply_slots(r->get(), ep)) {
        ++stats.slot_reloads;
        return;
      }
    }
    log::kvstore()->warn("redis cluster: no node answered CLUSTER SLOTS; keeping the old slot map");
  }

  Result<RedisEndpoint> route(int slot) {
    if (!cluster || slot < 0) return first;
    if (reload_pending) {
      reload_pending = false;
      reload_slots(nullptr, failed_node);
    }
    if (slot_node[static_cast<size_t>(slot)] < 0) reload_slots(nullptr);
    const int n = slot_node[static_cast<size_t>(slot)];
    if (n < 0) return Status::Unavailable(fmt::format("redis cluster: slot {} has no known master", slot));
    return nodes[static_cast<size_t>(n)];
  }

  // Runs every command of a batch (all keys in `slot`; -1 = the first node), following MOVED / ASK
  // per command: only the redirected commands are resent, to their target, so a batch caught
  // mid-migration reads each key where it lives. Replies in command order; `from` names the node
  // that gave each.
  Result<std::vector<ReplyPtr>> execute(int slot, const std::vector<Cmd>& cmds, std::vector<std::string>* from) {
    std::vector<ReplyPtr> out(cmds.size());
    if (from) from->assign(cmds.size(), {});
    struct Group {
      RedisEndpoint ep;
      bool asking = false;
      std::vector<size_t> idx;
    };
    RAGD_ASSIGN_OR_RETURN(RedisEndpoint start, route(slot));
    std::vector<Group> todo(1);
    todo[0].ep = std::move(start);
    for (size_t i = 0; i < cmds.size(); ++i) todo[0].idx.push_back(i);
    std::string last;
    for (int hop = 0;; ++hop) {
      std::vector<Group> next;
      std::optional<RedisEndpoint> moved_to;
      for (const Group& g : todo) {
        RAGD_ASSIGN_OR_RETURN(std::vector<ReplyPtr> replies, pipeline(g.ep, cmds, g.idx, g.asking));
        for (size_t k = 0; k < g.idx.size(); ++k) {
          std::optional<Redirect> rd = cluster ? parse_redirect(replies[k].get(), g.ep) : std::nullopt;
          if (!rd) {
            out[g.idx[k]] = std::move(replies[k]);
            if (from) (*from)[g.idx[k]] = g.ep.to_string();
            continue;
          }
          last = std::string(reply_str(replies[k].get()));
          if (!rd->ask) {
            slot_node[static_cast<size_t>(rd->slot)] = node_index(rd->target);
            moved_to = rd->target;
          }
          auto it = std::find_if(next.begin(), next.end(), [&](const Group& n) {
            return n.asking == rd->ask && n.ep.host == rd->target.host && n.ep.port == rd->target.port;
          });
          if (it == next.end()) {
            next.push_back(Group{rd->target, rd->ask, {}});
            it = next.end() - 1;
          }
          it->idx.push_back(g.idx[k]);
        }
      }
      if (next.empty()) return out;
      if (hop >= opts.max_redirects) {
        return Status::Unavailable(fmt::format("redis cluster: more than {} redirects (last: {})", opts.max_redirects, last));
      }
      for (const Group& g : next) ++(g.asking ? stats.ask : stats.moved);
      if (moved_to) reload_slots(&*moved_to);
      todo = std::move(next);
    }
  }

  Status fail(Status st) {
    ++stats.errors;
    return st;
  }

  Status check_one_slot(const char* what, size_t n, const std::function<std::string_view(size_t)>& key, int& slot) {
    slot = -1;
    for (size_t i = 0; i < n; ++i) {
      const int s = redis_key_slot(key(i));
      if (slot < 0) {
        slot = s;
      } else if (s != slot) {
        return Status::InvalidArgument(fmt::format(
            "redis {}: keys {} and {} hash to different slots ({} and {}); use a common {{hash tag}}", what, 0, i, slot, s));
      }
    }
    return Status::OK();
  }
};

RedisClient::RedisClient() : impl_(std::make_unique<Impl>()) {}
RedisClient::~RedisClient() = default;

Result<std::unique_ptr<RedisClient>> RedisClient::connect(const RedisOptions& opts) {
  if (opts.seeds.empty()) return Status::InvalidArgument("redis: no seed endpoint");
  if (opts.timeout.count() <= 0) {
    return Status::InvalidArgument(fmt::format("redis: timeout must be > 0 ms, got {}", opts.timeout.count()));
  }
  if (opts.max_redirects < 0) {
    return Status::InvalidArgument(fmt::format("redis: max_redirects must be >= 0, got {}", opts.max_redirects));
  }
  std::unique_ptr<RedisClient> client(new RedisClient());
  Impl& m = *client->impl_;
  m.opts = opts;
  std::string errors;
  for (const RedisEndpoint& seed : opts.seeds) {
    auto r = m.one(seed, {"CLUSTER", "SLOTS"});
    if (!r.ok()) {
      errors += (errors.empty() ? "" : "; ") + r.status().message();
      continue;
    }
    const redisReply* rep = r->get();
    m.first = seed;
    if (rep->type == REDIS_REPLY_ERROR) {
      const std::string_view msg = reply_str(rep);
      if (msg.find("cluster support disabled") == std::string_view::npos) {
        return Status::IOError(fmt::format("redis {}: CLUSTER SLOTS: {}", seed.to_string(), msg));
      }
      m.cluster = false;
      m.nodes = {seed};
      return client;
    }
    m.cluster = true;
    if (!m.apply_slots(rep, seed)) {
      return Status::IOError(fmt::format("redis {}: malformed CLUSTER SLOTS reply", seed.to_string()));
    }
    ++m.stats.slot_reloads;
    return client;
  }
  return Status::Unavailable(fmt::format("redis: no seed answered ({})", errors));
}

bool RedisClient::cluster() const { return impl_->cluster; }

Status RedisClient::set_many(std::span<const std::pair<std::string, std::string>> kvs, uint32_t ttl_s) {
  Impl& m = *impl_;
  if (kvs.empty()) return Status::OK();
  int slot = -1;
  if (Status st = m.check_one_slot("set_many", kvs.size(), [&](size_t i) { return std::string_view(kvs[i].first); }, slot);
      !st.ok()) {
    return m.fail(std::move(st));
  }
  const std::string ttl = std::to_string(ttl_s);
  std::vector<Cmd> cmds(kvs.size());
  for (size_t i = 0; i < kvs.size(); ++i) {
    cmds[i].add("SET");
    cmds[i].add(kvs[i].first);
    cmds[i].add(kvs[i].second);
    if (ttl_s > 0) {
      cmds[i].add("EX");
      cmds[i].add(ttl);
    }
  }
  std::vector<std::string> from;
  auto r = m.execute(slot, cmds, &from);
  if (!r.ok()) return m.fail(r.status());
  for (size_t i = 0; i < r->size(); ++i) {
    const redisReply* rep = (*r)[i].get();
    if (rep->type == REDIS_REPLY_ERROR) {
      return m.fail(Status::IOError(fmt::format("redis {}: SET: {}", from[i], reply_str(rep))));
    }
    if (rep->type != REDIS_REPLY_STATUS || reply_str(rep) != "OK") {
      return m.fail(Status::IOError(fmt::format("redis {}: SET: unexpected reply type {}", from[i], rep->type)));
    }
  }
  return Status::OK();
}

Result<std::vector<std::optional<std::string>>> RedisClient::get_many(std::span<const std::string> keys) {
  Impl& m = *impl_;
  std::vector<std::optional<std::string>> out;
  if (keys.empty()) return out;
  int slot = -1;
  if (Status st = m.check_one_slot("get_many", keys.size(), [&](size_t i) { return std::string_view(keys[i]); }, slot);
      !st.ok()) {
    return m.fail(std::move(st));
  }
  std::vector<Cmd> cmds(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    cmds[i].add("GET");
    cmds[i].add(keys[i]);
  }
  std::vector<std::string> from;
  auto r = m.execute(slot, cmds, &from);
  if (!r.ok()) return m.fail(r.status());
  out.reserve(keys.size());
  for (size_t i = 0; i < r->size(); ++i) {
    const redisReply* rep = (*r)[i].get();
    switch (rep->type) {
      case REDIS_REPLY_STRING:
        out.emplace_back(std::string(reply_str(rep)));
        break;
      case REDIS_REPLY_NIL:
        out.emplace_back(std::nullopt);
        break;
      case REDIS_REPLY_ERROR:
        return m.fail(Status::IOError(fmt::format("redis {}: GET: {}", from[i], reply_str(rep))));
      default:
        return m.fail(Status::IOError(fmt::format("redis {}: GET: unexpected reply type {}", from[i], rep->type)));
    }
  }
  return out;
}

Result<int64_t> RedisClient::del_many(std::span<const std::string> keys) {
  Impl& m = *impl_;
  if (keys.empty()) return int64_t{0};
  int slot = -1;
  if (Status st = m.check_one_slot("del_many", keys.size(), [&](size_t i) { return std::string_view(keys[i]); }, slot);
      !st.ok()) {
    return m.fail(std::move(st));
  }
  std::vector<Cmd> cmds(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    cmds[i].add("DEL");
    cmds[i].add(keys[i]);
  }
  std::vector<std::string> from;
  auto r = m.execute(slot, cmds, &from);
  if (!r.ok()) return m.fail(r.status());
  int64_t n = 0;
  for (size_t i = 0; i < r->size(); ++i) {
    const redisReply* rep = (*r)[i].get();
    if (rep->type == REDIS_REPLY_ERROR) {
      return m.fail(Status::IOError(fmt::format("redis {}: DEL: {}", from[i], reply_str(rep))));
    }
    if (rep->type != REDIS_REPLY_INTEGER) {
      return m.fail(Status::IOError(fmt::format("redis {}: DEL: unexpected reply type {}", from[i], rep->type)));
    }
    n += rep->integer;
  }
  return n;
}

Status RedisClient::ping() {
  Impl& m = *impl_;
  std::vector<RedisEndpoint> targets;
  if (!m.cluster) {
    targets.push_back(m.first);
  } else {
    if (m.reload_pending) {
      m.reload_pending = false;
      m.reload_slots(nullptr, m.failed_node);
    }
    std::vector<bool> used(m.nodes.size(), false);
    for (int32_t n : m.slot_node) {
      if (n >= 0) used[static_cast<size_t>(n)] = true;
    }
    for (size_t i = 0; i < m.nodes.size(); ++i) {
      if (used[i]) targets.push_back(m.nodes[i]);
    }
    if (targets.empty()) return m.fail(Status::Unavailable("redis cluster: no known master"));
  }
  for (const RedisEndpoint& ep : targets) {
    auto r = m.one(ep, {"PING"});
    if (!r.ok()) return m.fail(r.status());
    const redisReply* rep = r->get();
    if (rep->type == REDIS_REPLY_ERROR) {
      return m.fail(Status::IOError(fmt::format("redis {}: PING: {}", ep.to_string(), reply_str(rep))));
    }
  }
  return Status::OK();
}

Result<std::string> RedisClient::command(std::span<const std::string> args, std::string_view route_key) {
  Impl& m = *impl_;
  if (args.empty()) return m.fail(Status::InvalidArgument("redis command: no arguments"));
  std::vector<Cmd> cmds(1);
  for (const std::string& a : args) cmds[0].add(a);
  std::vector<std::string> from;
  auto r = m.execute(route_key.empty() ? -1 : redis_key_slot(route_key), cmds, &from);
  if (!r.ok()) return m.fail(r.status());
  const redisReply* rep = (*r)[0].get();
  if (rep->type == REDIS_REPLY_ERROR) {
    return m.fail(Status::IOError(fmt::format("redis {}: {}: {}", from[0], args[0], reply_str(rep))));
  }
  std::string out;
  render_reply(rep, out);
  return out;
}

RedisClientStats RedisClient::stats() const { return impl_->stats; }

}  // namespace ragd::kvstore
