#include "ragd/seqparallel/kv_spill.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "ragd/common/check.h"
#include "ragd/common/hash.h"
#include "ragd/kernels/attention.h"
#include "ragd/kernels/lse_merge.h"

namespace ragd::seqparallel {

namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

constexpr int64_t kAlign = 4096;  // direct I/O: offsets, lengths and buffers
int64_t align_up(int64_t n, int64_t a) { return (n + a - 1) / a * a; }

struct AlignedFree {
  void operator()(unsigned char* p) const noexcept { std::free(p); }
};
using AlignedBytes = std::unique_ptr<unsigned char[], AlignedFree>;
AlignedBytes aligned_bytes(int64_t n) {
  void* p = std::aligned_alloc(kAlign, static_cast<size_t>(std::max<int64_t>(kAlign, align_up(n, kAlign))));
  RAGD_CHECK(p != nullptr) << "KvSpill: cannot allocate " << n << " bytes";
  return AlignedBytes(static_cast<unsigned char*>(p));
}

std::string errno_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// Reads `len` bytes at `off` (loops over short reads).
Status read_fully(int fd, unsigned char* dst, int64_t len, int64_t off) {
  while (len > 0) {
    const ssize_t r = ::pread(fd, dst, static_cast<size_t>(len), off);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return Status::IOError(r < 0 ? errno_text("KV spill: read") : "KV spill: read past the end of the file");
    dst += r;
    len -= r;
    off += r;
  }
  return Status::OK();
}

Status write_fully(int fd, const unsigned char* src, int64_t len, int64_t off) {
  while (len > 0) {
    const ssize_t w = ::pwrite(fd, src, static_cast<size_t>(len), off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Status::IOError(errno_text("KV spill: write"));
    src += w;
    len -= w;
    off += w;
  }
  return Status::OK();
}

}  // namespace

// One append(): n rows of every layer, in memory or at `offset` in the file.
struct KvSpill::Extent {
  int64_t n = 0;
  int64_t first = 0;       // index of its first row in positions_
  int32_t max_pos = -1;
  int64_t value_bytes = 0;  // K (or V) bytes, rounded up to 8
  int64_t section = 0;      // one layer's bytes: K, V, scales
  int64_t region = 0;       // one layer's bytes in the file (section rounded up to kAlign)
  bool on_ssd = false;
  std::vector<AlignedBytes> layers;  // in memory: [layer] -> section bytes
  int64_t offset = 0;                // on SSD: layer l at offset + l * region
  int64_t buffer_offset = 0;         // on SSD: where its region sits in a read buffer
  std::vector<uint64_t> checksum;    // on SSD: [layer] xxh3-64 of the section
};

// The read-ahead thread: one job at a time, reading one layer of every SSD extent into a buffer.
class KvSpill::Reader {
 public:
  explicit Reader(KvSpill& spill) : spill_(spill), thread_([this] { loop(); }) {}
  ~Reader() {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Starts reading `layer` into buffer b (no job may be pending).
  void post(int layer, int b) {
    std::lock_guard<std::mutex> lk(mu_);
    job_layer_ = layer;
    job_buf_ = b;
    busy_ = true;
    cv_.notify_all();
  }
  // Waits for the pending job (if any); its layer (-1 = none) and status.
  int wait(Status* st, int* buf) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return !busy_; });
    *st = job_status_;
    *buf = job_buf_;
    const int l = job_layer_;
    job_layer_ = -1;
    return l;
  }
  double read_seconds() {
    std::lock_guard<std::mutex> lk(mu_);
    return read_s_;
  }
  bool pending() {
    std::lock_guard<std::mutex> lk(mu_);
    return busy_ || job_layer_ >= 0;
  }

  AlignedBytes buf[2];
  int64_t buf_bytes = 0;  // capacity of each buffer

 private:
  void loop() {
    std::unique_lock<std::mutex> lk(mu_);
    while (true) {
      cv_.wait(lk, [&] { return stop_ || busy_; });
      if (stop_) return;
      const int layer = job_layer_, b = job_buf_;
      lk.unlock();
      const auto t = Clock::now();
      Status st = spill_.read_layer(layer, buf[b].get());
      const double s = since(t);
      lk.lock();
      read_s_ += s;
      job_status_ = st;
      busy_ = false;
      cv_.notify_all();
    }
  }

  KvSpill& spill_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false, busy_ = false;
  int job_layer_ = -1, job_buf_ = 0;
  Status job_status_;
  double read_s_ = 0;
  std::thread thread_;  // last: starts after the members it uses
};

KvSpill::KvSpill(const engine::KvLayout& layout, const SpillOptions& options) : layout_(layout), opt_(options) {}

KvSpill::~KvSpill() {
  reader_.reset();
  if (direct_fd_ >= 0 && direct_fd_ != fd_) ::close(direct_fd_);
  if (fd_ >= 0) ::close(fd_);
}

Result<std::unique_ptr<KvSpill>> KvSpill::create(const engine::KvLayout& layout, const SpillOptions& options) {
  RAGD_RETURN_IF_ERROR(layout.validate());
  if (!options.enabled()) return Status::InvalidArgument("KV spill: neither host memory nor an SSD folder is configured");
  if (options.dram_bytes < 0) return Status::InvalidArgument("KV spill: dram_bytes must be >= 0");
  std::unique_ptr<KvSpill> s(new KvSpill(layout, options));
  if (!options.dir.empty()) RAGD_RETURN_IF_ERROR(s->open_file());
  return s;
}

Status KvSpill::open_file() {
  fd_ = ::open(opt_.dir.c_str(), O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
  if (fd_ < 0) {
    // File systems without O_TMPFILE: a named file, unlinked at once.
    std::string path = opt_.dir + "/ragd-kv-spill-XXXXXX";
    fd_ = ::mkstemp(path.data());
    if (fd_ < 0) return Status::IOError(errno_text("KV spill: cannot create a file in " + opt_.dir));
    ::unlink(path.c_str());
  }
  direct_fd_ = fd_;
  if (opt_.direct_io) {
    const std::string self = "/proc/self/fd/" + std::to_string(fd_);
    const int d = ::open(self.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
    if (d >= 0) {
      direct_fd_ = d;
      stats_.direct_io = true;
    }
  }
  return Status::OK();
}

SpillStats KvSpill::stats() const {
  SpillStats s = stats_;
  if (reader_ != nullptr) s.read_s = reader_->read_seconds();
  return s;
}

Status KvSpill::append(const engine::KvPool& pool, const engine::BlockTable& table, int n) {
  const auto* host = dynamic_cast<const engine::HostKvStorage*>(&pool.storage());
  if (host == nullptr) return Status::Unimplemented("KV spill: the pool's storage is not host memory (" +
                                                    std::string(pool.storage().device()) + ")");
  if (n <= 0 || n > table.num_tokens()) {
    return Status::InvalidArgument("KV spill: cannot move " + std::to_string(n) + " of a table's " +
                                   std::to_string(table.num_tokens()) + " slots");
  }
  for (int i = 0; i < n; ++i) {
    const int32_t p = table.position(i);
    const int32_t prev = any_order_ ? -1 : i > 0 ? table.position(i - 1) : max_pos_;
    if (p == engine::kNoPosition || p <= prev) {
      return Status::InvalidArgument("KV spill: slot " + std::to_string(i) + " holds position " +
                                     (p == engine::kNoPosition ? std::string("none") : std::to_string(p)) +
                                     ", not above the spilled position " + std::to_string(prev));
    }
  }
  // The next reads cover the new extent: finish the one in flight and forget what it read.
  if (reader_ != nullptr && reader_->pending()) {
    Status ignored;
    int b;
    reader_->wait(&ignored, &b);
  }
  current_layer_ = -1;

  const engine::KvLayout& L = layout_;
  const int64_t row = static_cast<int64_t>(L.token_floats()), vb = kernels::kv_dtype_bytes(L.dtype);
  const bool scaled = kernels::kv_dtype_scaled(L.dtype);
  Extent e;
  e.n = n;
  e.first = tokens_;
  e.value_bytes = align_up(n * row * vb, 8);
  e.section = 2 * e.value_bytes + (scaled ? 2 * int64_t{n} * L.num_kv_heads * 4 : 0);
  e.region = align_up(e.section, kAlign);
  const int64_t mem = e.section * L.num_layers;
  e.on_ssd = stats_.dram_bytes + mem > opt_.dram_bytes;
  if (e.on_ssd && fd_ < 0) {
    return Status::ResourceExhausted("KV spill: " + std::to_string(mem) + " more bytes do not fit the host budget of " +
                                     std::to_string(opt_.dram_bytes) + " bytes (" + std::to_string(stats_.dram_bytes) +
                                     " used) and no SSD tier is configured");
  }
  e.offset = file_end_;
  AlignedBytes staging;
  if (e.on_ssd) staging = aligned_bytes(e.region);
  // One layer's section: the rows block by block, straight from the pool's arrays.
  const int bs = L.block_size;
  const size_t row_bytes = static_cast<size_t>(row * vb), scale_row = sizeof(float) * L.num_kv_heads;
  for (int l = 0; l < L.num_layers; ++l) {
    AlignedBytes mine;
    unsigned char* dst = e.on_ssd ? staging.get() : (mine = aligned_bytes(e.section)).get();
    const auto* k = static_cast<const unsigned char*>(host->k_layer(l));
    const auto* v = static_cast<const unsigned char*>(host->v_layer(l));
    for (int s = 0; s < n; s += bs) {
      const int cnt = std::min(bs, n - s);
      const size_t src = static_cast<size_t>(table.blocks()[s / bs]) * bs;
      std::memcpy(dst + s * row_bytes, k + src * row_bytes, cnt * row_bytes);
      std::memcpy(dst + e.value_bytes + s * row_bytes, v + src * row_bytes, cnt * row_bytes);
      if (scaled) {
        unsigned char* ks = dst + 2 * e.value_bytes;
        std::memcpy(ks + s * scale_row, host->k_scale(l) + src * L.num_kv_heads, cnt * scale_row);
        std::memcpy(ks + n * scale_row + s * scale_row, host->v_scale(l) + src * L.num_kv_heads, cnt * scale_row);
      }
    }
    if (e.on_ssd) {
      std::memset(dst + e.section, 0, static_cast<size_t>(e.region - e.section));
      e.checksum.push_back(xxh3_64(dst, static_cast<size_t>(e.section)));
      RAGD_RETURN_IF_ERROR(write_fully(fd_, dst, e.region, e.offset + l * e.region));
    } else {
      e.layers.push_back(std::move(mine));
    }
  }
  if (e.on_ssd) {
    // On the device, and out of the page cache: later reads measure the SSD, not memory.
    if (::fdatasync(fd_) != 0) return Status::IOError(errno_text("KV spill: fdatasync"));
    ::posix_fadvise(fd_, e.offset, e.region * L.num_layers, POSIX_FADV_DONTNEED);
    file_end_ += e.region * L.num_layers;
    stats_.ssd_tokens += n;
    stats_.ssd_bytes += e.region * L.num_layers;
  } else {
    stats_.dram_tokens += n;
    stats_.dram_bytes += mem;
  }
  positions_.resize(tokens_ + n);
  for (int i = 0; i < n; ++i) positions_[tokens_ + i] = table.position(i);
  e.max_pos = *std::max_element(positions_.begin() + tokens_, positions_.end());
  max_pos_ = std::max(max_pos_, e.max_pos);
  tokens_ += n;
  extents_.push_back(std::move(e));
  ++stats_.extents;
  // Read buffers: every SSD extent's region of one layer, back to back.
  int64_t ssd_layer = 0;
  for (Extent& x : extents_) {
    if (!x.on_ssd) continue;
    x.buffer_offset = ssd_layer;
    ssd_layer += x.region;
  }
  if (ssd_layer > 0) {
    if (reader_ == nullptr) reader_ = std::make_unique<Reader>(*this);
    if (reader_->buf_bytes < ssd_layer) {
      for (auto& b : reader_->buf) b = aligned_bytes(ssd_layer);
      reader_->buf_bytes = ssd_layer;
    }
  }
  return Status::OK();
}

Status KvSpill::read_layer(int layer, unsigned char* dst) const {
  for (size_t i = 0; i < extents_.size(); ++i) {
    const Extent& e = extents_[i];
    if (!e.on_ssd) continue;
    unsigned char* p = dst + e.buffer_offset;
    RAGD_RETURN_IF_ERROR(read_fully(direct_fd_, p, e.region, e.offset + layer * e.region));
    if (xxh3_64(p, static_cast<size_t>(e.section)) != e.checksum[layer]) {
      return Status::Corruption("KV spill: layer " + std::to_string(layer) + " of extent " + std::to_string(i) +
                                " does not match its checksum");
    }
  }
  return Status::OK();
}

Status KvSpill::load(int layer) {
  if (reader_ == nullptr || layer == current_layer_) return Status::OK();
  const auto w = Clock::now();
  Status st;
  int b = 0;
  const int got = reader_->pending() ? reader_->wait(&st, &b) : -1;
  if (got != layer) {
    // Not the layer read ahead (the first call, or layers out of order): read it now.
    b = got >= 0 ? b ^ 1 : 0;
    reader_->post(layer, b);
    reader_->wait(&st, &b);
  }
  stats_.wait_s += since(w);
  current_layer_ = -1;
  RAGD_RETURN_IF_ERROR(st);
  current_layer_ = layer;
  current_buf_ = b;
  for (const Extent& e : extents_) {
    if (e.on_ssd) stats_.bytes_read += e.region;
  }
  reader_->post((layer + 1) % layout_.num_layers, b ^ 1);
  return Status::OK();
}

KvSpill::Rows KvSpill::rows(int layer, size_t extent) const {
  const Extent& e = extents_[extent];
  const unsigned char* base = e.on_ssd ? reader_->buf[current_buf_].get() + e.buffer_offset : e.layers[layer].get();
  Rows r;
  r.n = e.n;
  r.k = base;
  r.v = base + e.value_bytes;
  if (kernels::kv_dtype_scaled(layout_.dtype)) {
    r.k_scale = reinterpret_cast<const float*>(base + 2 * e.value_bytes);
    r.v_scale = r.k_scale + e.n * layout_.num_kv_heads;
  }
  r.pos = positions_.data() + e.first;
  return r;
}

Status KvSpill::for_each_rows(int layer, const std::function<Status(const Rows&)>& fn) {
  RAGD_RETURN_IF_ERROR(load(layer));
  for (size_t e = 0; e < extents_.size(); ++e) RAGD_RETURN_IF_ERROR(fn(rows(layer, e)));
  return Status::OK();
}

Status KvSpill::attend(int layer, const float* q, int n_q, int num_heads, const int32_t* q_pos, float scale,
                       float* out, float* lse) {
  if (extents_.empty() || n_q <= 0) return Status::OK();
  const auto t0 = Clock::now();
  RAGD_RETURN_IF_ERROR(load(layer));
  const int hd = layout_.head_dim;
  int32_t min_q = kernels::kMaxPosition;
  for (int i = 0; i < n_q; ++i) min_q = std::min(min_q, q_pos[i]);
  o_.resize(static_cast<size_t>(n_q) * num_heads * hd);
  l_.resize(static_cast<size_t>(n_q) * num_heads);
  const int32_t zero_block = 0;
  for (size_t x = 0; x < extents_.size(); ++x) {
    const Rows r = rows(layer, x);
    kernels::PagedKv kv;
    kv.k = r.k;
    kv.v = r.v;
    kv.k_scale = r.k_scale;
    kv.v_scale = r.v_scale;
    kv.dtype = layout_.dtype;
    kv.block_table = &zero_block;
    kv.block_size = static_cast<int>(r.n);
    kv.num_kv_heads = layout_.num_kv_heads;
    kv.head_dim = hd;
    kv.kv_len = static_cast<int>(r.n);
    // Every query after the extent's last key sees all of it: no mask (the common case: spilled KV
    // is older than every query).
    const bool all_visible = extents_[x].max_pos <= min_q;
    if (!all_visible) kv.key_pos = r.pos;
    if (n_q == 1) {
      kernels::DecodeItem it;
      it.q = q;
      it.kv = kv;
      it.out = o_.data();
      it.lse = l_.data();
      it.q_pos = all_visible ? kernels::kMaxPosition : q_pos[0];
      RAGD_RETURN_IF_ERROR(kernels::attention_decode(std::span<const kernels::DecodeItem>(&it, 1), num_heads, scale, 0));
    } else if (all_visible) {
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill(q, n_q, num_heads, kv, scale, false, 0, o_.data(), l_.data()));
    } else {
      RAGD_RETURN_IF_ERROR(kernels::attention_prefill_positions(q, n_q, num_heads, kv, scale, q_pos, o_.data(), l_.data()));
    }
    kernels::merge_states(n_q * num_heads, hd, out, lse, o_.data(), l_.data(), out, lse);
  }
  stats_.attend_s += since(t0);
  return Status::OK();
}

}  // namespace ragd::seqparallel
