#include "file_tier.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

namespace ragd::kvstore::testing {

namespace fs = std::filesystem;

namespace {

Status io_error(std::string_view what, const std::string& path) {
  return Status::IOError(fmt::format("file tier: {} {}: {}", what, path, std::strerror(errno)));
}

// Reads exactly n bytes at `offset`; NotFound when the file is shorter (a truncated record).
Status pread_all(int fd, void* dst, size_t n, uint64_t offset, const std::string& path) {
  auto* p = static_cast<char*>(dst);
  while (n > 0) {
    const ssize_t r = ::pread(fd, p, n, static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      return io_error("read", path);
    }
    if (r == 0) return Status::NotFound(fmt::format("file tier: {} ends early", path));
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
  return Status::OK();
}

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

}  // namespace

Result<std::unique_ptr<FileTier>> FileTier::open(std::string dir, const KvFormat& fmt) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("file tier: cannot create {}: {}", dir, ec.message()));
  for (const auto& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".tmp") fs::remove(e.path(), ec);  // a write a crash cut short
  if (ec) return Status::IOError(fmt::format("file tier: cannot list {}: {}", dir, ec.message()));
  return std::unique_ptr<FileTier>(new FileTier(std::move(dir), segment_header_size(static_cast<uint32_t>(fmt.num_layers))));
}

std::string FileTier::path_of(const Hash128& key) const { return (fs::path(dir_) / (key.to_hex() + ".seg")).string(); }

Status FileTier::store(const SegmentRef& seg) {
  const std::string path = path_of(seg->header().key);
  const std::string tmp = path.substr(0, path.size() - 4) + ".tmp";
  Status st = [&]() -> Status {
    Fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (fd.get() < 0) return io_error("create", tmp);
    const auto* p = reinterpret_cast<const char*>(seg->bytes().data());
    size_t left = seg->size();
    while (left > 0) {
      const ssize_t w = ::write(fd.get(), p, left);
      if (w < 0) {
        if (errno == EINTR) continue;
        return io_error("write", tmp);
      }
      p += w;
      left -= static_cast<size_t>(w);
    }
    if (::fdatasync(fd.get()) != 0) return io_error("sync", tmp);
    if (::rename(tmp.c_str(), path.c_str()) != 0) return io_error("rename", tmp);
    return Status::OK();
  }();
  if (!st.ok()) {
    errors_ += 1;
    ::unlink(tmp.c_str());
    return st;
  }
  stores_ += 1;
  store_bytes_ += seg->size();
  return st;
}

Status FileTier::evict(const Hash128& key, uint32_t num_layers) {
  (void)num_layers;
  const std::string path = path_of(key);
  if (::unlink(path.c_str()) != 0 && errno != ENOENT) {
    errors_ += 1;
    return io_error("remove", path);
  }
  evictions_ += 1;
  return Status::OK();
}

Status FileTier::load(const Hash128& key, const KvFormat& fmt, SegmentSink& sink) {
  const std::string path = path_of(key);
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    if (errno == ENOENT) return Status::NotFound(fmt::format("file tier: no segment {}", key.to_hex()));
    errors_ += 1;
    return io_error("open", path);
  }
  // The header first (its layer table gives every layer's offsets), then layer by layer.
  std::string header(header_bytes_, '\0');
  Status st = pread_all(fd.get(), header.data(), header.size(), 0, path);
  if (st.code() == StatusCode::kNotFound) st = Status::Corruption(st.message());
  Result<SegmentHeader> h = st.ok() ? decode_segment_header({reinterpret_cast<const std::byte*>(header.data()), header.size()})
                                    : Result<SegmentHeader>(st);
  uint64_t bytes = 0;
  if (h.ok()) {
    st = load_layered(
        key, fmt, sink,
        [&](std::string* out) {
          *out = header;
          return Status::OK();
        },
        [&](uint32_t l, size_t lb, std::byte* k, std::byte* v) {
          if (l >= h->layers.size()) return Status::Corruption(fmt::format("file tier: {} has no layer {}", path, l));
          bytes += 2 * lb;
          RAGD_RETURN_IF_ERROR(pread_all(fd.get(), k, lb, h->layers[l].k_offset, path));
          return pread_all(fd.get(), v, lb, h->layers[l].v_offset, path);
        });
  } else {
    st = h.status();
  }
  if (!st.ok()) {
    errors_ += 1;
    return st;
  }
  loads_ += 1;
  load_bytes_ += bytes;
  return st;
}

Status FileTier::scan(const std::function<void(const Hash128& key, std::span<const std::byte> header)>& fn) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir_, ec)) {
    if (e.path().extension() != ".seg") continue;
    Hash128 key;
    if (!Hash128::from_hex(e.path().stem().string(), &key)) continue;  // not one of ours
    const std::string path = e.path().string();
    Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) return io_error("open", path);
    std::string header(header_bytes_, '\0');
    Status st = pread_all(fd.get(), header.data(), header.size(), 0, path);
    if (st.code() == StatusCode::kNotFound) header.resize(0);  // truncated: the store drops it as corrupt
    else RAGD_RETURN_IF_ERROR(st);
    fn(key, {reinterpret_cast<const std::byte*>(header.data()), header.size()});
  }
  if (ec) return Status::IOError(fmt::format("file tier: cannot list {}: {}", dir_, ec.message()));
  return Status::OK();
}

TierIoStats FileTier::io_stats() const {
  TierIoStats s;
  s.loads = loads_.load();
  s.load_bytes = load_bytes_.load();
  s.stores = stores_.load();
  s.store_bytes = store_bytes_.load();
  s.evictions = evictions_.load();
  s.errors = errors_.load();
  return s;
}

TierRegistration FileTier::registration(std::string dir, uint64_t capacity_bytes) {
  TierRegistration r;
  r.name = "file";
  r.capacity_bytes = capacity_bytes;
  r.open = [dir = std::move(dir)](const KvFormat& fmt) -> Result<std::unique_ptr<KvTier>> {
    RAGD_ASSIGN_OR_RETURN(std::unique_ptr<FileTier> t, FileTier::open(dir, fmt));
    return std::unique_ptr<KvTier>(std::move(t));
  };
  return r;
}

}  // namespace ragd::kvstore::testing
