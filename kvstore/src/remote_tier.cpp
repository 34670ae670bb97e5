#include "ragd/kvstore/remote_tier.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_set>
#include <utility>
#include <vector>


#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ragd/common/log.h"
#include "ragd/common/text_file.h"
#include "ragd/kvstore/redis_client.h"

namespace ragd::kvstore {

namespace {
using Clock = std::chrono::steady_clock;
constexpr std::chrono::milliseconds kMaxBackoff{30000};
}  // namespace


namespace {

// A secret or password from a file: the whole file, less one trailing newline (as `echo` or
// `openssl rand -hex` write it). Errors name the option and the path, never the contents.
Result<std::string> read_secret(const std::string& path, const char* option) {
  auto r = read_text_file(path, option);
  if (!r.ok()) return Status::InvalidArgument(r.status().message());
  std::string s = std::move(r).value();
  if (s.size() > 4096) return Status::InvalidArgument(fmt::format("{}: '{}' is over 4 KiB", option, path));
  if (!s.empty() && s.back() == '\n') s.pop_back();
  if (!s.empty() && s.back() == '\r') s.pop_back();
  if (s.empty()) return Status::InvalidArgument(fmt::format("{}: '{}' is empty", option, path));
  return s;
}

}  // namespace

struct RemoteTier::Impl {
  RemoteOptions opt;
  KvFormat fmt;
  RedisOptions ro;
  std::optional<ValueMac> mac;  // unset only with trust_unauthenticated

  // Connections for get(): one per concurrent reader.
  std::mutex cmu;
  std::vector<std::unique_ptr<RedisClient>> idle;  // guarded by cmu

  // Stats and the breaker.
  mutable std::mutex smu;
  RemoteStats st;                                   // guarded by smu
  std::atomic<bool> open_{false};
  Clock::time_point next_probe{};                   // guarded by smu
  std::chrono::milliseconds backoff{1000};          // guarded by smu

  // Writer + probe thread.
  std::mutex wmu;
  std::condition_variable wcv, drained;
  std::deque<SegmentRef> queue;                     // guarded by wmu
  uint64_t queued_bytes = 0;                        // guarded by wmu
  bool writing = false;                             // guarded by wmu
  bool stop = false;                                // guarded by wmu
  std::thread worker;
  std::unique_ptr<RedisClient> wclient;             // the worker's own
  // Keys written or read recently (bounded, oldest forgotten first): not written again, so a node
  // that moves between the local tiers, or came from Redis, costs no second write.
  static constexpr size_t kRecent = 65536;
  std::unordered_set<Hash128, Hash128Hasher> recent;  // guarded by wmu
  std::deque<Hash128> recent_order;                   // guarded by wmu

  // wmu held. True when `key` was not recent (and now is).
  bool remember_locked(const Hash128& key) {
    if (!recent.insert(key).second) return false;
    recent_order.push_back(key);
    if (recent_order.size() > kRecent) {
      recent.erase(recent_order.front());
      recent_order.pop_front();
    }
    return true;
  }

  std::string piece_key(const Hash128& key, uint32_t i) const {
    return fmt::format("{}{{{}}}:{}", opt.key_prefix, key.to_hex(), i);
  }

  void count(uint64_t RemoteStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> l(smu);
    st.*field += n;
  }

  // A network failure: opens the breaker (first failure) and schedules the probe.
  void trip(const Status& why) {
    std::lock_guard<std::mutex> l(smu);
    st.errors += 1;
    st.last_error = why.to_string();
    if (open_.exchange(true)) return;
    st.breaker_trips += 1;
    next_probe = Clock::now() + backoff;
    log::kvstore()->warn("remote KV tier unavailable ({}): serving by recompute, probing again in {} ms", st.last_error,
                         backoff.count());
    wcv.notify_all();
  }

  void fail(const Status& s) {
    if (s.code() == StatusCode::kUnavailable) trip(s);
    else count(&RemoteStats::errors);
  }

  // A failure that came back well before the timeout: a closed connection, not a slow server.
  bool fast(Clock::time_point t0) const { return Clock::now() - t0 < std::chrono::milliseconds(opt.timeout_ms) / 2; }

  Result<std::unique_ptr<RedisClient>> checkout() {
    {
      std::lock_guard<std::mutex> l(cmu);
      if (!idle.empty()) {
        auto c = std::move(idle.back());
        idle.pop_back();
        return c;
      }
    }
    return RedisClient::connect(ro);
  }
  void checkin(std::unique_ptr<RedisClient> c) {
    std::lock_guard<std::mutex> l(cmu);
    if (idle.size() < 16) idle.push_back(std::move(c));
  }

  Result<SegmentRef> get(const Hash128& key) {
    count(&RemoteStats::gets);
    if (open_.load()) {
      count(&RemoteStats::skipped);
      return Status::Unavailable("remote kv tier: circuit breaker open");
    }
    Result<std::unique_ptr<RedisClient>> cr = checkout();
    if (!cr.ok()) {
      trip(cr.status());
      return cr.status();
    }
    std::unique_ptr<RedisClient> client = std::move(cr).value();
    const auto t0 = Clock::now();
    Result<SegmentRef> r = read(*client, key);
    if (!r.ok() && r.status().code() == StatusCode::kUnavailable && fast(t0)) {
      // An idle connection the server closed (a restart): one more try on a new one.
      auto fresh = RedisClient::connect(ro);
      if (fresh.ok()) {
        client = std::move(fresh).value();
        r = read(*client, key);
      } else {
        r = fresh.status();
      }
    }
    if (!r.ok() && r.status().code() == StatusCode::kUnavailable) {
      trip(r.status());
      return r.status();  // the connection is dropped with the client
    }
    checkin(std::move(client));
    if (r.ok()) {
      {
        std::lock_guard<std::mutex> l(wmu);
        remember_locked(key);
      }
      std::lock_guard<std::mutex> l(smu);
      st.hits += 1;
      st.hit_bytes += (*r)->size();
    } else if (r.status().code() == StatusCode::kNotFound) {
      count(&RemoteStats::misses);
    } else if (r.status().code() == StatusCode::kUnauthenticated) {
      count(&RemoteStats::mac_failures);
      log::kvstore()->error("remote kv tier: value under {} refused: {} (a miss: recompute; the value is ignored)",
                            key.to_hex(), r.status().message());
    } else if (r.status().code() == StatusCode::kCorruption) {
      count(&RemoteStats::checksum_failures);
      log::kvstore()->error("remote kv tier: {} (a miss: recompute)", r.status().to_string());
    } else if (r.status().code() == StatusCode::kFailedPrecondition) {
      count(&RemoteStats::format_rejects);
      log::kvstore()->error("remote kv tier: {} (a miss: recompute)", r.status().to_string());
    } else {
      count(&RemoteStats::errors);
    }
    return r;
  }

  Result<SegmentRef> read(RedisClient& client, const Hash128& key) {
    const std::string k0 = piece_key(key, 0);
    RAGD_ASSIGN_OR_RETURN(auto first, client.get_many(std::span<const std::string>(&k0, 1)));
    if (first.empty() || !first[0]) return Status::NotFound("remote kv tier: no segment " + key.to_hex());
    std::string buf = std::move(*first[0]);
    // Sealed values start with the MAC envelope; nothing but the header's length is used before
    // the MAC is checked over the whole value.
    const size_t env = mac ? ValueMac::kEnvelopeBytes : 0;
    if (mac && !ValueMac::looks_sealed({reinterpret_cast<const std::byte*>(buf.data()), buf.size()}))
      return Status::Unauthenticated("not a sealed value (no MAC envelope): written without the fleet secret, or not by ragd");
    const auto* b = reinterpret_cast<const std::byte*>(buf.data());
    auto hr = decode_segment_header({b + env, buf.size() - env});
    if (!hr.ok()) {
      if (mac) return Status::Unauthenticated("sealed value with an unreadable segment header: " + hr.status().message());
      return hr.status();
    }
    const SegmentHeader h = *hr;
    const uint64_t total = env + h.total_bytes();
    const uint64_t piece = buf.size();
    if (piece > total) return Status::Corruption(fmt::format("remote kv segment {}: first piece longer than the segment", key.to_hex()));
    const uint64_t n = (total + piece - 1) / piece;
    if (n > 1) {
      std::vector<std::string> keys;
      for (uint64_t i = 1; i < n; ++i) keys.push_back(piece_key(key, static_cast<uint32_t>(i)));
      RAGD_ASSIGN_OR_RETURN(auto rest, client.get_many(keys));
      buf.reserve(total);
      for (uint64_t i = 1; i < n; ++i) {
        auto& v = rest[i - 1];
        if (!v) {
          count(&RemoteStats::partial_misses);
          return Status::NotFound(fmt::format("remote kv segment {}: piece {} of {} is gone (evicted)", key.to_hex(), i, n));
        }
        const uint64_t want = i + 1 < n ? piece : total - piece * (n - 1);
        if (v->size() != want)
          return Status::Corruption(fmt::format("remote kv segment {}: piece {} has {} bytes, expected {}", key.to_hex(), i,
                                                v->size(), want));
        buf += *v;
      }
    }
    const std::span<const std::byte> whole{reinterpret_cast<const std::byte*>(buf.data()), buf.size()};
    if (mac) RAGD_RETURN_IF_ERROR(mac->verify(piece_key(key, 0), whole.first(env), whole.subspan(env)));
    RAGD_RETURN_IF_ERROR(check_segment_format(h, fmt));
    if (h.key != key)
      return Status::FailedPrecondition(
          fmt::format("remote kv segment under {} carries key {}", key.to_hex(), h.key.to_hex()));
    RAGD_ASSIGN_OR_RETURN(std::shared_ptr<SegmentBuffer> seg, SegmentBuffer::parse(whole.subspan(env), /*verify_payload=*/true));
    return SegmentRef(std::move(seg));
  }

  bool put(SegmentRef seg) {
    if (!seg) return false;
    if (open_.load()) {
      count(&RemoteStats::puts_dropped);
      return false;
    }
    {
      std::lock_guard<std::mutex> l(wmu);
      if (recent.count(seg->header().key)) return true;  // written (or read) recently
      if (!stop && queued_bytes + seg->size() <= opt.write_queue_bytes) {
        remember_locked(seg->header().key);
        queued_bytes += seg->size();
        queue.push_back(std::move(seg));
        wcv.notify_one();
        return true;
      }
    }
    count(&RemoteStats::puts_dropped);
    return false;
  }

  Status write(const SegmentBuffer& seg) {
    if (!wclient) {
      RAGD_ASSIGN_OR_RETURN(wclient, RedisClient::connect(ro));
    }
    // The stored value is [envelope][segment]; pieces are cut from that concatenation directly.
    const auto seg_bytes = seg.bytes();
    const std::string envelope = mac ? mac->seal(piece_key(seg.header().key, 0), seg_bytes) : std::string();
    const uint64_t total = envelope.size() + seg_bytes.size();
    const uint64_t piece = opt.max_value_bytes;
    const uint64_t n = (total + piece - 1) / piece;
    std::vector<std::pair<std::string, std::string>> kvs;
    kvs.reserve(n);
    for (uint64_t i = n; i-- > 0;) {  // piece 0 last: a reader that finds it finds the rest
      const uint64_t at = i * piece;
      const uint64_t len = std::min<uint64_t>(piece, total - at);
      std::string value;
      value.reserve(len);
      if (at < envelope.size()) value.append(envelope, at, std::min<uint64_t>(len, envelope.size() - at));
      if (value.size() < len) {
        const uint64_t from = at + value.size() - envelope.size();  // offset into the segment
        value.append(reinterpret_cast<const char*>(seg_bytes.data()) + from, len - value.size());
      }
      kvs.emplace_back(piece_key(seg.header().key, static_cast<uint32_t>(i)), std::move(value));
    }
    const auto t0 = Clock::now();
    Status s = wclient->set_many(kvs, static_cast<uint32_t>(opt.ttl_s));
    if (s.code() == StatusCode::kUnavailable && fast(t0)) {
      // A connection the server closed (a restart): one more try on a new one.
      auto fresh = RedisClient::connect(ro);
      if (!fresh.ok()) {
        wclient.reset();
        return fresh.status();
      }
      wclient = std::move(fresh).value();
      s = wclient->set_many(kvs, static_cast<uint32_t>(opt.ttl_s));
    }
    if (s.code() == StatusCode::kUnavailable) wclient.reset();
    return s;
  }

  // The background thread: writes queued segments, and probes while the breaker is open.
  void run() {
    std::unique_lock<std::mutex> l(wmu);
    for (;;) {
      if (open_.load()) {
        Clock::time_point at;
        {
          std::lock_guard<std::mutex> sl(smu);
          at = next_probe;
        }
        // Nothing is written while the breaker is open.
        while (!queue.empty()) {
          recent.erase(queue.front()->header().key);
          queued_bytes -= queue.front()->size();
          queue.pop_front();
          count(&RemoteStats::puts_dropped);
        }
        drained.notify_all();
        if (stop) return;
        if (Clock::now() < at) {
          wcv.wait_until(l, at);
          continue;
        }
        l.unlock();
        probe();
        l.lock();
        continue;
      }
      if (queue.empty()) {
        drained.notify_all();
        if (stop) return;
        wcv.wait(l);
        continue;
      }
      SegmentRef seg = std::move(queue.front());
      queue.pop_front();
      writing = true;
      l.unlock();
      Status s = write(*seg);
      if (s.ok()) {
        std::lock_guard<std::mutex> sl(smu);
        st.puts += 1;
        st.put_bytes += seg->size();
      } else {
        count(&RemoteStats::puts_dropped);
        log::kvstore()->warn("remote kv tier: write of {} failed: {}", seg->header().key.to_hex(), s.to_string());
        fail(s);
      }
      l.lock();
      if (!s.ok()) {  // may be written again later
        recent.erase(seg->header().key);
      }
      writing = false;
      queued_bytes -= seg->size();
    }
  }

  void probe() {
    Status s = Status::OK();
    if (!wclient) {
      auto c = RedisClient::connect(ro);
      if (c.ok()) wclient = std::move(c).value();
      else s = c.status();
    }
    if (s.ok()) s = wclient->ping();
    std::lock_guard<std::mutex> sl(smu);
    if (s.ok()) {
      open_.store(false);
      backoff = std::chrono::milliseconds(opt.breaker_backoff_ms);
      log::kvstore()->info("remote KV tier reachable again: reads and writes resume");
      return;
    }
    wclient.reset();
    st.errors += 1;
    st.last_error = s.to_string();
    backoff = std::min(backoff * 2, kMaxBackoff);
    next_probe = Clock::now() + backoff;
  }
};

RemoteTier::RemoteTier() : impl_(std::make_unique<Impl>()) {}
RemoteTier::~RemoteTier() { close(); }

Result<std::unique_ptr<RemoteTier>> RemoteTier::open(const RemoteOptions& opts, const KvFormat& fmt) {
  RAGD_RETURN_IF_ERROR(opts.validate());
  if (opts.url.empty()) return Status::InvalidArgument("kvstore.remote.url is empty");
  RAGD_ASSIGN_OR_RETURN(std::vector<RedisEndpoint> seeds, parse_redis_urls(opts.url));
  std::unique_ptr<RemoteTier> t(new RemoteTier());
  Impl& m = *t->impl_;
  m.opt = opts;
  m.fmt = fmt;
  m.ro.seeds = std::move(seeds);
  m.ro.timeout = std::chrono::milliseconds(opts.timeout_ms);
  if (!opts.secret_file.empty()) {
    RAGD_ASSIGN_OR_RETURN(std::string secret, read_secret(opts.secret_file, "kvstore.remote.secret_file"));
    RAGD_ASSIGN_OR_RETURN(ValueMac mac, ValueMac::from_secret(secret, opts.mac));
    m.mac = mac;
  } else {
    log::kvstore()->warn("remote KV tier: trust_unauthenticated: values from {} are used without a MAC; anyone who can "
                         "write to it can put KV into any tenant's prompt", opts.url);
  }
  if (!opts.password_file.empty()) {
    RAGD_ASSIGN_OR_RETURN(m.ro.password, read_secret(opts.password_file, "kvstore.remote.password_file"));
    m.ro.username = opts.username;
  }
  m.backoff = std::chrono::milliseconds(opts.breaker_backoff_ms);
  m.st.enabled = true;
  auto c = RedisClient::connect(m.ro);
  if (c.ok()) {
    m.wclient = std::move(c).value();
    log::kvstore()->info("remote KV tier on {} ({})", opts.url, m.wclient->cluster() ? "Redis Cluster" : "one Redis server");
  } else {
    m.trip(c.status());
  }
  m.worker = std::thread([&m] {
    // Background priority (nice 19): writes behind take only what serving leaves over.
    (void)setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 19);
    m.run();
  });
  return t;
}

bool RemoteTier::put(SegmentRef seg) { return impl_->put(std::move(seg)); }
Result<SegmentRef> RemoteTier::get(const Hash128& key) { return impl_->get(key); }
bool RemoteTier::available() const { return !impl_->open_.load(); }

void RemoteTier::drain() {
  Impl& m = *impl_;
  std::unique_lock<std::mutex> l(m.wmu);
  m.drained.wait(l, [&] { return m.queue.empty() && !m.writing; });
}

void RemoteTier::close() {
  Impl& m = *impl_;
  {
    std::lock_guard<std::mutex> l(m.wmu);
    if (m.stop && !m.worker.joinable()) return;
    m.stop = true;
    m.wcv.notify_all();
  }
  if (m.worker.joinable()) m.worker.join();
}

RemoteStats RemoteTier::stats() const {
  const Impl& m = *impl_;
  RemoteStats s;
  {
    std::lock_guard<std::mutex> l(m.smu);
    s = m.st;
  }
  s.breaker = m.open_.load() ? "open" : "closed";
  {
    std::lock_guard<std::mutex> l(const_cast<Impl&>(m).wmu);
    s.queued_bytes = m.queued_bytes;
  }
  return s;
}

std::string RemoteTier::piece_key(const Hash128& key, uint32_t piece) const { return impl_->piece_key(key, piece); }

// ---- KvTier ----------------------------------------------------------------------------------------

Status RemoteTier::store(const SegmentRef& seg) {
  if (put(seg)) return Status::OK();
  return Status::Unavailable("remote kv tier: put dropped (queue full, breaker open or closed)");
}

Status RemoteTier::evict(const Hash128& key, uint32_t num_layers) {
  (void)key;
  (void)num_layers;
  return Status::OK();  // Redis evicts by its maxmemory policy; other replicas may still use the value
}

Status RemoteTier::load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) {
  RAGD_ASSIGN_OR_RETURN(SegmentRef seg, get(key));
  RAGD_RETURN_IF_ERROR(check_segment_format(seg->header(), fmt));
  sink.begin(seg);
  sink.layers_ready(static_cast<int>(seg->header().num_layers));  // get() verified every layer
  return Status::OK();
}

TierIoStats RemoteTier::io_stats() const {
  const RemoteStats r = stats();
  TierIoStats s;
  s.loads = r.hits;
  s.load_bytes = r.hit_bytes;
  s.stores = r.puts;
  s.store_bytes = r.put_bytes;
  s.errors = r.errors;
  return s;
}

}  // namespace ragd::kvstore
