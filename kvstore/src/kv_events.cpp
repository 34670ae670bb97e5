#include "ragd/kvstore/kv_events.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <zmq.hpp>
#include <zmq_addon.hpp>

#include "msgpack_writer.h"
#include "ragd/common/log.h"
#include "ragd/common/text_file.h"
#include "ragd/kvstore/keys.h"

namespace ragd::kvstore {

const char* event_medium(Tier t) {
  if (t == Tier::kHbm) return "GPU";
  if (t == Tier::kDram) return "CPU";
  if (t == Tier::kSsd || static_cast<int>(t) >= kNumBuiltinTiers) return "DISK";  // registered tiers are stored
  return nullptr;
}

// ---- encoding ------------------------------------------------------------------------------------

namespace {

void write_medium(MsgpackWriter& w, const char* m) {
  if (m) w.str(m);
  else w.nil();
}

void write_event(MsgpackWriter& w, const KvEvent& e) {
  switch (e.kind) {
    case KvEvent::Kind::kBlockStored:
      // ["BlockStored", block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium]
      w.array(7).str("BlockStored");
      w.array(e.block_hashes.size());
      for (uint64_t h : e.block_hashes) w.uint(h);
      if (e.parent_block_hash) w.uint(*e.parent_block_hash);
      else w.nil();
      w.array(e.token_ids.size());
      for (int32_t t : e.token_ids) w.integer(t);
      w.integer(e.block_size);
      w.nil();  // lora_id
      write_medium(w, e.medium);
      return;
    case KvEvent::Kind::kBlockRemoved:
      // ["BlockRemoved", block_hashes, medium]
      w.array(3).str("BlockRemoved");
      w.array(e.block_hashes.size());
      for (uint64_t h : e.block_hashes) w.uint(h);
      write_medium(w, e.medium);
      return;
    case KvEvent::Kind::kAllBlocksCleared:
      w.array(1).str("AllBlocksCleared");
      return;
  }
}

}  // namespace

std::string encode_event_batch(double ts, std::span<const KvEvent> events, int data_parallel_rank) {
  MsgpackWriter w;
  w.array(3).float64(ts).array(events.size());
  for (const KvEvent& e : events) write_event(w, e);
  w.integer(data_parallel_rank);
  return w.take();
}

// ---- block mapping -------------------------------------------------------------------------------

NodeBlocks map_node_blocks(const BlockChainEnd& parent, std::span<const int32_t> tokens, int block_size,
                           const Hash128& scope_root) {
  NodeBlocks nb;
  nb.parent_hash = parent.last_hash;
  std::vector<int32_t> buf;
  buf.reserve(parent.tail.size() + tokens.size());
  buf.insert(buf.end(), parent.tail.begin(), parent.tail.end());
  buf.insert(buf.end(), tokens.begin(), tokens.end());
  const size_t bs = static_cast<size_t>(std::max(1, block_size));
  const size_t full = buf.size() / bs;
  std::optional<uint64_t> prev = parent.last_hash;
  for (size_t b = 0; b < full; ++b) {
    std::span<const int32_t> blk(buf.data() + b * bs, bs);
    prev = event_block_hash(prev, blk, scope_root);
    nb.hashes.push_back(*prev);
  }
  nb.token_ids.assign(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(full * bs));
  nb.end.last_hash = prev;
  nb.end.tail.assign(buf.begin() + static_cast<std::ptrdiff_t>(full * bs), buf.end());
  return nb;
}

// ---- tracker -------------------------------------------------------------------------------------

KvEventTracker::KvEventTracker(int block_size, Sink sink, size_t limbo)
    : block_size_(std::max(1, block_size)), sink_(std::move(sink)), limbo_max_(limbo) {}

void KvEventTracker::set_tokens(const Hash128& key, const Hash128& parent_key, bool parent_is_root,
                                const Hash128& scope_root, std::span<const int32_t> tokens, bool in_tree) {
  if (tokens.empty() || entries_.count(key)) return;
  BlockChainEnd start;
  uint32_t depth = 0;
  if (!parent_is_root) {
    auto pit = entries_.find(parent_key);
    if (pit == entries_.end()) return;  // the parent's tokens are unknown: no chain
    start = pit->second.blocks.end;
    depth = pit->second.depth + 1;
  }
  Entry e;
  e.blocks = map_node_blocks(start, tokens, block_size_, scope_root);
  e.depth = depth;
  entries_.emplace(key, std::move(e));
  if (in_tree) return;
  // Not placed yet (it may never be, or only later by a copy): forgotten after limbo_max_ others.
  limbo_.push_back(key);
  while (limbo_.size() > limbo_max_) {
    auto it = entries_.find(limbo_.front());
    limbo_.pop_front();
    if (it != entries_.end() && it->second.announced == 0) entries_.erase(it);
  }
}

KvEvent KvEventTracker::stored(const Entry& e, Tier t) const {
  KvEvent ev;
  ev.kind = KvEvent::Kind::kBlockStored;
  ev.block_hashes = e.blocks.hashes;
  ev.parent_block_hash = e.blocks.parent_hash;
  ev.token_ids = e.blocks.token_ids;
  ev.block_size = block_size_;
  ev.medium = event_medium(t);
  return ev;
}

void KvEventTracker::on_tier_change(const TreeNodeInfo& node, Tier t, bool entered) {
  auto it = entries_.find(node.key);
  if (it == entries_.end()) return;
  Entry& e = it->second;
  const uint8_t bit = tier_bit(t);
  if (entered) {
    e.announced |= bit;
    if (!e.blocks.hashes.empty()) sink_(stored(e, t));
    return;
  }
  if (e.announced & bit) {
    e.announced &= static_cast<uint8_t>(~bit);
    if (!e.blocks.hashes.empty()) {
      KvEvent ev;
      ev.kind = KvEvent::Kind::kBlockRemoved;
      ev.block_hashes = e.blocks.hashes;
      ev.medium = event_medium(t);
      sink_(std::move(ev));
    }
  }
  if (node.tiers == 0) entries_.erase(it);
}

std::vector<KvEvent> KvEventTracker::resync_events() const {
  std::vector<KvEvent> out(1);
  out[0].kind = KvEvent::Kind::kAllBlocksCleared;
  std::vector<const Entry*> order;
  for (const auto& [k, e] : entries_)
    if (e.announced && !e.blocks.hashes.empty()) order.push_back(&e);
  std::stable_sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) { return a->depth < b->depth; });
  for (const Entry* e : order)
    for (int t = 0; t < kMaxTiers; ++t)
      if (e->announced & tier_bit(static_cast<Tier>(t))) out.push_back(stored(*e, static_cast<Tier>(t)));
  return out;
}

void KvEventTracker::clear_all() {
  KvEvent ev;
  ev.kind = KvEvent::Kind::kAllBlocksCleared;
  sink_(std::move(ev));
}

const NodeBlocks* KvEventTracker::blocks(const Hash128& key) const {
  auto it = entries_.find(key);
  return it == entries_.end() ? nullptr : &it->second.blocks;
}

// ---- publisher -----------------------------------------------------------------------------------

// Publisher thread only, after start().
struct KvEventPublisher::Sockets {
  zmq::context_t ctx{1};
  // The ZAP handler (ZeroMQ's authentication protocol, RFC 27) with CURVE: bound before the
  // sockets it guards, so that no handshake is ever answered without it.
  std::optional<zmq::socket_t> zap;
  std::set<std::string> allowed;  // client public keys, 32 raw bytes each
  zmq::socket_t pub{ctx, zmq::socket_type::pub};
  std::optional<zmq::socket_t> replay;
  std::deque<std::pair<uint64_t, std::string>> buffer;  // (seq, payload)
  uint64_t next_seq = 0;
};

namespace {

// vLLM's rule (ZmqEventPublisher): bind a wildcard / IPC / in-process endpoint, connect otherwise.
bool should_bind(const std::string& ep, KvEventsSocketMode mode) {
  if (mode == KvEventsSocketMode::kBind) return true;
  if (mode == KvEventsSocketMode::kConnect) return false;
  return ep.find('*') != std::string::npos || ep.find("::") != std::string::npos || ep.rfind("ipc://", 0) == 0 ||
         ep.rfind("inproc://", 0) == 0;
}

// An IPv6 address ("tcp://[::1]:P", "tcp://[::]:P") needs the socket's IPv6 option, without which
// libzmq answers ENODEV.
void open_endpoint(zmq::socket_t& sock, const std::string& ep, bool bind) {
  if (ep.find('[') != std::string::npos || ep.find("::") != std::string::npos) sock.set(zmq::sockopt::ipv6, 1);
  if (bind) sock.bind(ep);
  else sock.connect(ep);
}

Result<std::string> read_small_file(const std::string& path, const char* what) {
  auto s = read_text_file(path, std::string(what) + " file");
  if (!s.ok()) return Status::InvalidArgument("kv events: " + s.status().message());
  if (s->size() > (1u << 20)) return Status::InvalidArgument(fmt::format("kv events: the {} file '{}' is over 1 MiB", what, path));
  return s;
}

std::string trim(std::string_view s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return std::string(s.substr(b, e - b));
}

// 40 Z85 characters -> 32 bytes.
Result<std::string> z85_key(const std::string& z85, const std::string& where) {
  if (z85.size() != 40)
    return Status::InvalidArgument(fmt::format("kv events: {}: a CURVE key is 40 Z85 characters, got {}", where, z85.size()));
  std::string raw(32, '\0');
  if (zmq_z85_decode(reinterpret_cast<uint8_t*>(raw.data()), z85.c_str()) == nullptr)
    return Status::InvalidArgument(fmt::format("kv events: {}: not a Z85 key", where));
  return raw;
}

std::string be64(uint64_t v) {
  std::string s(8, '\0');
  for (int i = 7; i >= 0; --i) {
    s[static_cast<size_t>(i)] = static_cast<char>(v & 0xff);
    v >>= 8;
  }
  return s;
}

double unix_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

}  // namespace

KvEventPublisher::KvEventPublisher(const KvEventsOptions& opts) : opt_(opts), sock_(std::make_unique<Sockets>()) {}

Result<CurveKeyPair> make_curve_keypair() {
  char pub[41] = {}, sec[41] = {};
  if (zmq_curve_keypair(pub, sec) != 0)
    return Status::InvalidArgument(fmt::format("CURVE key pair: {} (libzmq without CURVE?)", zmq_strerror(zmq_errno())));
  return CurveKeyPair{pub, sec};
}

Result<std::string> curve_public_key(const std::string& secret_z85) {
  RAGD_RETURN_IF_ERROR(z85_key(secret_z85, "secret key").status());
  char pub[41] = {};
  if (zmq_curve_public(pub, secret_z85.c_str()) != 0)
    return Status::InvalidArgument(fmt::format("CURVE public key: {}", zmq_strerror(zmq_errno())));
  return std::string(pub);
}

Result<std::unique_ptr<KvEventPublisher>> KvEventPublisher::start(const KvEventsOptions& opts) {
  if (opts.endpoint.empty()) return Status::InvalidArgument("kv events: no endpoint");
  if (opts.block_size <= 0) return Status::InvalidArgument("kv events: block_size must be positive");
  if (opts.max_queue == 0) return Status::InvalidArgument("kv events: max_queue must be positive");
  const bool curve = !opts.curve_secret_key_file.empty();
  if (!curve && !opts.curve_allowed_clients_file.empty())
    return Status::InvalidArgument("kv events: curve_allowed_clients_file is set without curve_secret_key_file");
  std::unique_ptr<KvEventPublisher> p(new KvEventPublisher(opts));
  Sockets& s = *p->sock_;
  std::string secret;
  if (curve) {
    if (!zmq_has("curve")) return Status::InvalidArgument("kv events: this libzmq was built without CURVE");
    if (opts.curve_allowed_clients_file.empty())
      return Status::InvalidArgument(
          "kv events: CURVE needs curve_allowed_clients_file (the public keys of the routers allowed to subscribe)");
    RAGD_ASSIGN_OR_RETURN(std::string sf, read_small_file(opts.curve_secret_key_file, "CURVE secret key"));
    secret = trim(sf);
    RAGD_RETURN_IF_ERROR(z85_key(secret, "curve_secret_key_file").status());
    RAGD_ASSIGN_OR_RETURN(std::string af, read_small_file(opts.curve_allowed_clients_file, "CURVE allowed clients"));
    std::istringstream lines(af);
    std::string line;
    for (int n = 1; std::getline(lines, line); ++n) {
      line = trim(line);
      if (line.empty() || line[0] == '#') continue;  // whole-line comments only: '#' is a Z85 digit
      RAGD_ASSIGN_OR_RETURN(std::string raw, z85_key(line, fmt::format("curve_allowed_clients_file line {}", n)));
      s.allowed.insert(std::move(raw));
    }
    if (s.allowed.empty())
      return Status::InvalidArgument(fmt::format("kv events: no client key in '{}'", opts.curve_allowed_clients_file));
  }
  const bool bind = should_bind(opts.endpoint, opts.mode);
  try {
    if (curve) {
      s.zap.emplace(s.ctx, zmq::socket_type::rep);
      s.zap->set(zmq::sockopt::linger, 0);
      s.zap->bind("inproc://zeromq.zap.01");
    }
    auto secure = [&](zmq::socket_t& sock) {
      if (!curve) return;
      sock.set(zmq::sockopt::curve_server, 1);
      sock.set(zmq::sockopt::curve_secretkey, secret);
      sock.set(zmq::sockopt::zap_domain, "ragd-kv-events");
    };
    s.pub.set(zmq::sockopt::linger, 1000);
    secure(s.pub);
    open_endpoint(s.pub, opts.endpoint, bind);
    if (!opts.replay_endpoint.empty()) {
      s.replay.emplace(s.ctx, zmq::socket_type::router);
      s.replay->set(zmq::sockopt::linger, 0);
      secure(*s.replay);
      open_endpoint(*s.replay, opts.replay_endpoint, /*bind=*/true);
    }
  } catch (const zmq::error_t& e) {
    return Status::InvalidArgument(fmt::format("kv events: endpoint {} / replay {}: {}", opts.endpoint,
                                               opts.replay_endpoint, e.what()));
  }
  log::kvstore()->info("kv events: {} {} (topic '{}', {}, token ids {}), replay on {}",
                       bind ? "publishing on" : "publishing to (connected)", opts.endpoint, opts.topic,
                       curve ? fmt::format("CURVE, {} allowed client keys", s.allowed.size()) : "plaintext: no authentication",
                       opts.token_ids ? "included" : "left out",
                       opts.replay_endpoint.empty() ? "-" : opts.replay_endpoint);
  p->thread_ = std::thread([raw = p.get()] { raw->run(); });
  return p;
}

KvEventPublisher::~KvEventPublisher() { stop(); }

void KvEventPublisher::publish(KvEvent e) {
  if (!opt_.token_ids) e.token_ids.clear();
  std::lock_guard<std::mutex> l(mu_);
  if (stopping_) return;
  if (queue_.size() >= opt_.max_queue) {
    dropped_.fetch_add(1, std::memory_order_relaxed);
    resync_.store(true);
    return;
  }
  queue_.push_back(std::move(e));
  if (queue_.size() == 1) cv_.notify_one();
}

void KvEventPublisher::publish_unbounded(std::vector<KvEvent> events) {
  std::lock_guard<std::mutex> l(mu_);
  if (stopping_) return;
  for (KvEvent& e : events) {
    if (!opt_.token_ids) e.token_ids.clear();
    queue_.push_back(std::move(e));
  }
  cv_.notify_one();
}

void KvEventPublisher::stop() {
  {
    std::lock_guard<std::mutex> l(mu_);
    if (stopping_ && !thread_.joinable()) return;
    stopping_ = true;
    cv_.notify_one();
  }
  if (thread_.joinable()) thread_.join();
}

KvEventCounters KvEventPublisher::counters() const {
  return {batches_.load(), events_.load(), dropped_.load(), replays_.load(), auth_denied_.load()};
}

void KvEventPublisher::run() {
  Sockets& s = *sock_;
  const zmq::const_buffer topic = zmq::buffer(opt_.topic);
  auto serve_replays = [&] {
    while (s.replay) {
      std::vector<zmq::message_t> req;
      zmq::recv_result_t r;
      try {
        r = zmq::recv_multipart(*s.replay, std::back_inserter(req), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        log::kvstore()->warn("kv events: replay request: {}", e.what());
        return;
      }
      if (!r) return;
      replays_.fetch_add(1, std::memory_order_relaxed);
      if (req.size() != 3 || req[2].size() != 8) {
        log::kvstore()->warn("kv events: malformed replay request ({} frames)", req.size());
        continue;
      }
      uint64_t start = 0;
      for (size_t i = 0; i < 8; ++i) start = (start << 8) | static_cast<uint8_t>(req[2].data<char>()[i]);
      const std::string id = req[0].to_string();
      try {
        // (identity, "", seq as 8 bytes big-endian, payload) per batch from `start`, then the end
        // marker (identity, "", -1 as 8 bytes big-endian, "").
        auto answer = [&](const std::string& seq_bytes, const std::string& payload) {
          const auto more = zmq::send_flags::sndmore | zmq::send_flags::dontwait;
          s.replay->send(zmq::buffer(id), more);
          s.replay->send(zmq::const_buffer(), more);
          s.replay->send(zmq::buffer(seq_bytes), more);
          s.replay->send(zmq::buffer(payload), zmq::send_flags::dontwait);
        };
        for (const auto& [seq, payload] : s.buffer)
          if (seq >= start) answer(be64(seq), payload);
        answer(be64(~uint64_t{0}), std::string());
      } catch (const zmq::error_t& e) {
        log::kvstore()->warn("kv events: replay answer: {}", e.what());
      }
    }
  };
  // ZAP requests (RFC 27): [version, request id, domain, address, identity, mechanism, client key];
  // the answer [version, request id, status, text, user id, metadata].
  auto serve_zap = [&] {
    while (s.zap) {
      std::vector<zmq::message_t> req;
      zmq::recv_result_t r;
      try {
        r = zmq::recv_multipart(*s.zap, std::back_inserter(req), zmq::recv_flags::dontwait);
      } catch (const zmq::error_t& e) {
        log::kvstore()->warn("kv events: ZAP request: {}", e.what());
        return;
      }
      if (!r) return;
      bool ok = req.size() >= 7 && req[5].to_string_view() == "CURVE" && req[6].size() == 32 &&
                s.allowed.count(req[6].to_string()) > 0;
      if (!ok) {
        auth_denied_.fetch_add(1, std::memory_order_relaxed);
        log::kvstore()->warn("kv events: refused a subscriber from {}: its key is not in the allowed list",
                             req.size() > 3 ? req[3].to_string() : std::string("?"));
      }
      const std::string version = req.empty() ? "1.0" : req[0].to_string();
      const std::string id = req.size() > 1 ? req[1].to_string() : std::string();
      try {
        const auto more = zmq::send_flags::sndmore;
        s.zap->send(zmq::buffer(version), more);
        s.zap->send(zmq::buffer(id), more);
        s.zap->send(ok ? zmq::str_buffer("200") : zmq::str_buffer("400"), more);
        s.zap->send(ok ? zmq::str_buffer("OK") : zmq::str_buffer("key not allowed"), more);
        s.zap->send(zmq::str_buffer("router"), more);
        s.zap->send(zmq::const_buffer(), zmq::send_flags::none);
      } catch (const zmq::error_t& e) {
        log::kvstore()->warn("kv events: ZAP answer: {}", e.what());
      }
    }
  };
  const bool polled = s.replay.has_value() || s.zap.has_value();
  std::vector<KvEvent> batch;
  for (;;) {
    bool stopping = false;
    {
      std::unique_lock<std::mutex> l(mu_);
      if (!polled) cv_.wait_for(l, std::chrono::milliseconds(10), [&] { return stopping_ || !queue_.empty(); });
      stopping = stopping_;
      batch.swap(queue_);
    }
    if (polled && !stopping && batch.empty()) {
      zmq::pollitem_t items[2];
      int n = 0;
      if (s.replay) items[n++] = {s.replay->handle(), 0, ZMQ_POLLIN, 0};
      if (s.zap) items[n++] = {s.zap->handle(), 0, ZMQ_POLLIN, 0};
      try {
        zmq::poll(items, n, std::chrono::milliseconds(5));
      } catch (const zmq::error_t&) {
      }
      serve_zap();
      serve_replays();
      std::lock_guard<std::mutex> l(mu_);
      stopping = stopping_;
      batch.swap(queue_);
    }
    if (!batch.empty()) {
      const std::string payload = encode_event_batch(unix_seconds(), batch);
      const uint64_t seq = s.next_seq++;
      const std::string seq_bytes = be64(seq);
      try {
        s.pub.send(topic, zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        s.pub.send(zmq::buffer(seq_bytes), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        s.pub.send(zmq::buffer(payload), zmq::send_flags::dontwait);
      } catch (const zmq::error_t& e) {
        log::kvstore()->warn("kv events: publish: {}", e.what());
      }
      batches_.fetch_add(1, std::memory_order_relaxed);
      events_.fetch_add(batch.size(), std::memory_order_relaxed);
      if (s.replay) {
        s.buffer.emplace_back(seq, payload);
        while (s.buffer.size() > opt_.buffer_batches) s.buffer.pop_front();
      }
      batch.clear();
    }
    serve_zap();
    if (s.replay) serve_replays();
    if (stopping) {
      std::lock_guard<std::mutex> l(mu_);
      if (queue_.empty()) break;
    }
  }
}

}  // namespace ragd::kvstore
