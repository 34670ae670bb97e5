// Safetensors: dtype conversions, header validation, mmap-backed WeightStore, writers.
//
// File layout: [u64 little-endian header length N][N bytes of JSON header][data]. The header maps
// tensor names to {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to the
// start of the data; tensors must tile the data exactly (no gaps, no overlaps, nothing trailing).
#include "ragd/engine/safetensors.h"
#include "ragd/kernels/half.h"

#include "ragd/common/check.h"
#include "ragd/common/json_writer.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <fmt/format.h>
#include <simdjson.h>

namespace ragd::engine {

namespace fs = std::filesystem;

// ---- dtypes -----------------------------------------------------------------------------------

size_t dtype_size(DType d) { return d == DType::kF32 ? 4 : 2; }

uint16_t f32_to_bf16(float f) { return kernels::f32_to_bf16(f); }
float bf16_to_f32(uint16_t h) { return kernels::bf16_to_f32(h); }
uint16_t f32_to_f16(float f) { return kernels::f32_to_f16(f); }
float f16_to_f32(uint16_t h) { return kernels::f16_to_f32(h); }

void convert_from_f32(const float* src, size_t n, DType dtype, void* dst) {
  if (n == 0) return;
  switch (dtype) {
    case DType::kF32: std::memcpy(dst, src, n * 4); break;
    case DType::kF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_f16(src[i]);
      break;
    }
    case DType::kBF16: {
      auto* d = static_cast<uint16_t*>(dst);
      for (size_t i = 0; i < n; ++i) d[i] = f32_to_bf16(src[i]);
      break;
    }
  }
}

int64_t TensorView::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void dtype_to_f32(DType d, const void* data, size_t n, float* dst) {
  if (n == 0) return;
  const auto* s = static_cast<const uint8_t*>(data);
  switch (d) {
    case DType::kF32: std::memcpy(dst, data, n * 4); break;
    case DType::kF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = f16_to_f32(h);
      }
      break;
    case DType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, s + 2 * i, 2);
        dst[i] = bf16_to_f32(h);
      }
      break;
  }
}

void TensorView::to_f32(float* dst) const { dtype_to_f32(dtype, data, static_cast<size_t>(numel()), dst); }

size_t TensorSpec::nbytes() const {
  size_t n = dtype_size(dtype);
  for (int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

// ---- reading ------------------------------------------------------------------------------------

namespace {

// A read-only memory map of a whole file.
class MappedFile {
 public:
  static Result<std::unique_ptr<MappedFile>> open(const std::string& path) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return Status::NotFound(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      ::close(fd);
      return Status::IOError(fmt::format("{}: fstat failed: {}", path, std::strerror(errno)));
    }
    auto mf = std::unique_ptr<MappedFile>(new MappedFile());
    mf->path_ = path;
    mf->size_ = static_cast<size_t>(st.st_size);
    if (mf->size_ > 0) {
      void* p = ::mmap(nullptr, mf->size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        ::close(fd);
        return Status::IOError(fmt::format("{}: mmap failed: {}", path, std::strerror(errno)));
      }
      mf->data_ = static_cast<const uint8_t*>(p);
    }
    ::close(fd);
    return mf;
  }
  ~MappedFile() {
    if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
  }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  MappedFile() = default;
  std::string path_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

struct TensorEntry {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  size_t begin = 0;  // absolute file offsets
  size_t end = 0;
  int file = 0;
};

constexpr size_t kMaxHeaderBytes = 100ull << 20;

// Parses and validates one file's header; entries get absolute offsets.
Status parse_header(const MappedFile& mf, int file_index, std::map<std::string, TensorEntry>* out) {
  const std::string& path = mf.path();
  if (mf.size() < 8)
    return Status::InvalidArgument(fmt::format("{}: file is {} bytes, shorter than the 8-byte header length", path, mf.size()));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | mf.data()[i];
  if (n > mf.size() - 8)
    return Status::InvalidArgument(
        fmt::format("{}: header length {} exceeds the file size ({} bytes after the length)", path, n, mf.size() - 8));
  if (n > kMaxHeaderBytes) return Status::InvalidArgument(fmt::format("{}: header length {} is larger than 100 MiB", path, n));
  const size_t data_start = 8 + n;
  const size_t data_size = mf.size() - data_start;

  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(reinterpret_cast<const char*>(mf.data() + 8), n, true).get(doc); err)
    return Status::InvalidArgument(fmt::format("{}: header is not valid JSON: {}", path, simdjson::error_message(err)));
  simdjson::dom::object root;
  if (doc.get_object().get(root) != simdjson::SUCCESS)
    return Status::InvalidArgument(fmt::format("{}: header must be a JSON object", path));

  std::vector<std::pair<std::string, TensorEntry>> entries;
  std::map<std::string, bool> seen;
  for (auto field : root) {
    std::string name(field.key);
    if (name == "__metadata__") {
      if (!field.value.is_object() && !field.value.is_null())
        return Status::InvalidArgument(fmt::format("{}: __metadata__ must be an object", path));
      continue;
    }
    auto bad = [&](std::string_view what) {
      return Status::InvalidArgument(fmt::format("{}: tensor '{}': {}", path, name, what));
    };
    if (!seen.emplace(name, true).second) return bad("duplicate tensor name");
    simdjson::dom::object t;
    if (field.value.get_object().get(t) != simdjson::SUCCESS) return bad("entry must be an object");
    std::string_view dtype_s;
    if (t["dtype"].get_string().get(dtype_s) != simdjson::SUCCESS) return bad("missing or non-string 'dtype'");
    auto dt = parse_dtype(dtype_s);
    if (!dt.ok()) return bad(dt.status().message());
    TensorEntry e;
    e.dtype = *dt;
    e.file = file_index;
    simdjson::dom::array shape;
    if (t["shape"].get_array().get(shape) != simdjson::SUCCESS) return bad("missing or non-list 'shape'");
    size_t numel = 1;
    for (auto d : shape) {
      int64_t v = 0;
      if (d.get_int64().get(v) != simdjson::SUCCESS || v < 0) return bad("shape entries must be non-negative integers");
      if (v > 0 && numel > (SIZE_MAX / 8) / static_cast<size_t>(v)) return bad("shape is too large");
      numel *= static_cast<size_t>(v);
      e.shape.push_back(v);
    }
    simdjson::dom::array offs;
    if (t["data_offsets"].get_array().get(offs) != simdjson::SUCCESS || offs.size() != 2)
      return bad("missing 'data_offsets' [begin, end]");
    uint64_t b = 0, en = 0;
    if (offs.at(0).get_uint64().get(b) != simdjson::SUCCESS || offs.at(1).get_uint64().get(en) != simdjson::SUCCESS)
      return bad("data_offsets must be non-negative integers");
    if (b > en) return bad(fmt::format("data_offsets [{}, {}] end before begin", b, en));
    if (en > data_size)
      return bad(fmt::format("data_offsets [{}, {}] out of range (the data section is {} bytes)", b, en, data_size));
    const size_t need = numel * dtype_size(e.dtype);
    if (need != en - b)
      return bad(fmt::format("shape x dtype is {} bytes but data_offsets [{}, {}] span {} bytes", need, b, en, en - b));
    e.begin = data_start + b;
    e.end = data_start + en;
    entries.emplace_back(std::move(name), std::move(e));
  }
  // The tensors must tile the data section: sorted by begin, each starts where the previous ended.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return std::pair(entries[a].second.begin, entries[a].second.end) < std::pair(entries[b].second.begin, entries[b].second.end);
  });
  size_t pos = data_start;
  const std::string* prev = nullptr;
  for (size_t i : order) {
    const auto& [name, e] = entries[i];
    if (e.begin < pos)
      return Status::InvalidArgument(fmt::format("{}: tensors '{}' and '{}' overlap (data_offsets)", path, *prev, name));
    if (e.begin > pos)
      return Status::InvalidArgument(fmt::format("{}: tensor '{}': bytes [{}, {}) before it are not covered by any tensor",
                                                 path, name, pos - data_start, e.begin - data_start));
    pos = e.end;
    prev = &name;
  }
  if (pos != mf.size())
    return Status::InvalidArgument(
        fmt::format("{}: {} trailing data bytes are not covered by any tensor", path, mf.size() - pos));
  for (auto& [name, e] : entries) out->emplace(std::move(name), std::move(e));
  return Status::OK();
}

// xxh3-128 over (name, dtype, shape, bytes) of every tensor in name order; the same for mapped
// and in-memory stores.
Hash128 weights_checksum(const WeightStore& w) {
  const std::vector<std::string> names = w.names();
  Hasher128 h;
  h.str("ragd.weights.v1").u64(names.size());
  for (const auto& name : names) {
    auto v = w.get(name);
    RAGD_CHECK(v.ok()) << name;
    h.str(name).u64(static_cast<uint64_t>(v->dtype)).u64(v->shape.size());
    for (int64_t d : v->shape) h.u64(static_cast<uint64_t>(d));
    h.u64(v->nbytes).bytes(v->data, v->nbytes);
  }
  return h.digest();
}

class MappedWeightStore final : public WeightStore {
 public:
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::map<std::string, TensorEntry> tensors_;

  Result<TensorView> get(const std::string& name) const override {
    auto it = tensors_.find(name);
    if (it == tensors_.end()) return Status::NotFound(fmt::format("tensor '{}' not found in the weights", name));
    const TensorEntry& e = it->second;
    TensorView v;
    v.dtype = e.dtype;
    v.shape = e.shape;
    v.data = files_[e.file]->data() + e.begin;
    v.nbytes = e.end - e.begin;
    return v;
  }
  bool contains(const std::string& name) const override { return tensors_.count(name) != 0; }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    n.reserve(tensors_.size());
    for (const auto& [k, _] : tensors_) n.push_back(k);
    return n;
  }
  Hash128 checksum() const override { return weights_checksum(*this); }
};

class MemoryWeightStore final : public WeightStore {
 public:
  explicit MemoryWeightStore(std::map<std::string, OwnedTensor> t) : t_(std::move(t)) {}
  Result<TensorView> get(const std::string& name) const override {
    auto it = t_.find(name);
    if (it == t_.end()) return Status::NotFound(fmt::format("tensor '{}' not found in the weights", name));
    TensorView v;
    v.dtype = it->second.dtype;
    v.shape = it->second.shape;
    v.data = it->second.bytes.data();
    v.nbytes = it->second.bytes.size();
    return v;
  }
  bool contains(const std::string& name) const override { return t_.count(name) != 0; }
  std::vector<std::string> names() const override {
    std::vector<std::string> n;
    n.reserve(t_.size());
    for (const auto& [k, _] : t_) n.push_back(k);
    return n;
  }
  Hash128 checksum() const override { return weights_checksum(*this); }

 private:
  std::map<std::string, OwnedTensor> t_;
};

Result<std::string> read_text_file(const std::string& path) {
  RAGD_ASSIGN_OR_RETURN(auto mf, MappedFile::open(path));
  return std::string(reinterpret_cast<const char*>(mf->data()), mf->size());
}

}  // namespace

std::unique_ptr<WeightStore> WeightStore::from_tensors(std::map<std::string, OwnedTensor> tensors) {
  return std::make_unique<MemoryWeightStore>(std::move(tensors));
}

Result<std::unique_ptr<WeightStore>> WeightStore::open_file(const std::string& path) {
  auto store = std::make_unique<MappedWeightStore>();
  RAGD_ASSIGN_OR_RETURN(auto mf, MappedFile::open(path));
  RAGD_RETURN_IF_ERROR(parse_header(*mf, 0, &store->tensors_));
  store->files_.push_back(std::move(mf));
  return std::unique_ptr<WeightStore>(std::move(store));
}

Result<std::unique_ptr<WeightStore>> WeightStore::open_dir(const std::string& dir) {
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  const std::string single_path = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;
  if (!fs::exists(index_path, ec)) {
    if (!fs::exists(single_path, ec))
      return Status::NotFound(fmt::format("{}: no model.safetensors or model.safetensors.index.json", dir));
    return open_file(single_path);
  }
  RAGD_ASSIGN_OR_RETURN(std::string text, read_text_file(index_path));
  simdjson::dom::parser parser;
  simdjson::dom::element doc;
  if (auto err = parser.parse(text).get(doc); err)
    return Status::InvalidArgument(fmt::format("{}: invalid JSON: {}", index_path, simdjson::error_message(err)));
  simdjson::dom::object weight_map;
  if (doc["weight_map"].get_object().get(weight_map) != simdjson::SUCCESS)
    return Status::InvalidArgument(fmt::format("{}: field 'weight_map' missing or not an object", index_path));

  auto store = std::make_unique<MappedWeightStore>();
  std::unordered_map<std::string, int> shard_index;
  std::vector<std::map<std::string, TensorEntry>> shard_tensors;
  for (auto field : weight_map) {
    std::string name(field.key);
    std::string_view shard;
    if (field.value.get_string().get(shard) != simdjson::SUCCESS)
      return Status::InvalidArgument(fmt::format("{}: weight_map['{}'] must be a file name", index_path, name));
    if (shard.find('/') != std::string_view::npos || shard == ".." || shard.empty())
      return Status::InvalidArgument(fmt::format("{}: weight_map['{}']: '{}' is not a plain file name", index_path, name, shard));
    auto it = shard_index.find(std::string(shard));
    if (it == shard_index.end()) {
      const std::string shard_path = (fs::path(dir) / shard).string();
      if (!fs::exists(shard_path, ec))
        return Status::InvalidArgument(fmt::format("{}: tensor '{}' names shard '{}', which does not exist", index_path,
                                                   name, shard));
      RAGD_ASSIGN_OR_RETURN(auto mf, MappedFile::open(shard_path));
      const int fi = static_cast<int>(store->files_.size());
      shard_tensors.emplace_back();
      RAGD_RETURN_IF_ERROR(parse_header(*mf, fi, &shard_tensors.back()));
      store->files_.push_back(std::move(mf));
      it = shard_index.emplace(std::string(shard), fi).first;
    }
    auto& tensors = shard_tensors[it->second];
    auto t = tensors.find(name);
    if (t == tensors.end())
      return Status::InvalidArgument(fmt::format("{}: tensor '{}' is not in its shard '{}'", index_path, name, shard));
    if (!store->tensors_.emplace(name, t->second).second)
      return Status::InvalidArgument(fmt::format("{}: duplicate tensor '{}' in weight_map", index_path, name));
  }
  if (store->tensors_.empty()) return Status::InvalidArgument(fmt::format("{}: weight_map is empty", index_path));
  return std::unique_ptr<WeightStore>(std::move(store));
}

// ---- writing ------------------------------------------------------------------------------------

namespace {

}  // namespace

Status write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs, const TensorFill& fill,
                                  const std::map<std::string, std::string>& metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    bool first = true;
    for (const auto& [k, v] : metadata) {
      header += fmt::format("{}{}:{}", first ? "" : ",", json_quote(k), json_quote(v));
      first = false;
    }
    header += "}";
  }
  size_t off = 0;
  std::map<std::string, bool> seen;
  for (const auto& s : specs) {
    if (!seen.emplace(s.name, true).second)
      return Status::InvalidArgument(fmt::format("{}: duplicate tensor '{}'", path, s.name));
    std::string shape;
    for (size_t i = 0; i < s.shape.size(); ++i) shape += fmt::format("{}{}", i ? "," : "", s.shape[i]);
    const size_t nb = s.nbytes();
    header += fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":[{}],\"data_offsets\":[{},{}]}}",
                          header.size() > 1 ? "," : "", json_quote(s.name), dtype_name(s.dtype), shape, off, off + nb);
    off += nb;
  }
  header += "}";
  while ((8 + header.size()) % 8 != 0) header += ' ';  // keeps the data 8-byte aligned

  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) return Status::IOError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  auto fail = [&](std::string what) {
    std::fclose(f);
    std::remove(path.c_str());
    return Status::IOError(fmt::format("{}: {}", path, what));
  };
  uint8_t len[8];
  uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
  if (std::fwrite(len, 1, 8, f) != 8 || std::fwrite(header.data(), 1, header.size(), f) != header.size())
    return fail("write failed");
  std::vector<uint8_t> buf;
  for (const auto& s : specs) {
    buf.assign(s.nbytes(), 0);
    Status st = fill(s, buf);
    if (!st.ok()) {
      std::fclose(f);
      std::remove(path.c_str());
      return st;
    }
    if (!buf.empty() && std::fwrite(buf.data(), 1, buf.size(), f) != buf.size())
      return fail(fmt::format("write of tensor '{}' failed: {}", s.name, std::strerror(errno)));
  }
  if (std::fclose(f) != 0) {
    std::remove(path.c_str());
    return Status::IOError(fmt::format("{}: close failed: {}", path, std::strerror(errno)));
  }
  return Status::OK();
}

Status write_safetensors_dir(const std::string& dir, const std::vector<TensorSpec>& specs, const TensorFill& fill,
                             size_t max_shard_bytes, const std::map<std::string, std::string>& metadata) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::IOError(fmt::format("{}: cannot create directory: {}", dir, ec.message()));
  size_t total = 0;
  for (const auto& s : specs) total += s.nbytes();
  if (total <= max_shard_bytes) {
    fs::remove(fs::path(dir) / "model.safetensors.index.json", ec);
    return write_safetensors_streamed((fs::path(dir) / "model.safetensors").string(), specs, fill, metadata);
  }
  // Greedy packing in order; a tensor larger than the limit gets a shard of its own.
  std::vector<std::vector<TensorSpec>> shards(1);
  size_t cur = 0;
  for (const auto& s : specs) {
    if (!shards.back().empty() && cur + s.nbytes() > max_shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(s);
    cur += s.nbytes();
  }
  std::string weight_map;
  for (size_t i = 0; i < shards.size(); ++i) {
    const std::string fname = fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, shards.size());
    RAGD_RETURN_IF_ERROR(write_safetensors_streamed((fs::path(dir) / fname).string(), shards[i], fill, metadata));
    for (const auto& s : shards[i])
      weight_map += fmt::format("{}    {}: {}", weight_map.empty() ? "" : ",\n", json_quote(s.name), json_quote(fname));
  }
  fs::remove(fs::path(dir) / "model.safetensors", ec);
  const std::string index = fmt::format("{{\n  \"metadata\": {{\"total_size\": {}}},\n  \"weight_map\": {{\n{}\n  }}\n}}\n",
                                        total, weight_map);
  const std::string index_path = (fs::path(dir) / "model.safetensors.index.json").string();
  std::FILE* f = std::fopen(index_path.c_str(), "wb");
  if (!f) return Status::IOError(fmt::format("{}: cannot create: {}", index_path, std::strerror(errno)));
  const bool ok = std::fwrite(index.data(), 1, index.size(), f) == index.size();
  if (std::fclose(f) != 0 || !ok) return Status::IOError(fmt::format("{}: write failed", index_path));
  return Status::OK();
}

Status write_safetensors(const std::string& path, const std::map<std::string, OwnedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) {
    TensorSpec s{name, t.dtype, t.shape};
    if (s.nbytes() != t.bytes.size())
      return Status::InvalidArgument(fmt::format("{}: tensor '{}': shape x dtype is {} bytes but it holds {}", path, name,
                                                 s.nbytes(), t.bytes.size()));
    specs.push_back(std::move(s));
  }
  return write_safetensors_streamed(
      path, specs,
      [&](const TensorSpec& s, std::span<uint8_t> dst) {
        const auto& b = tensors.at(s.name).bytes;
        if (!b.empty()) std::memcpy(dst.data(), b.data(), b.size());
        return Status::OK();
      },
      metadata);
}

}  // namespace ragd::engine
