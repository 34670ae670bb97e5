// GGUF v3 container writing (gguf_file.h).
#include "gguf_file.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <simdjson.h>

namespace ragd::tools::gguf {
namespace {

namespace fs = std::filesystem;
using engine::TensorView;
using engine::f32_to_bf16;
using engine::f32_to_f16;

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" little-endian
constexpr uint32_t kGgufVersion = 3;
constexpr uint64_t kAlignment = 32;  // general.alignment default
constexpr int64_t kQ8Block = 32;
constexpr int64_t kQ8BlockBytes = 2 + kQ8Block;  // f16 d + 32 int8
constexpr size_t kChunkElems = size_t{1} << 20;   // f32 values converted per write

uint64_t type_bytes(GgmlType t, int64_t rows, int64_t cols) {
  const auto n = static_cast<uint64_t>(rows) * static_cast<uint64_t>(cols);
  switch (t) {
    case GgmlType::kF32: return 4 * n;
    case GgmlType::kF16:
    case GgmlType::kBF16: return 2 * n;
    case GgmlType::kQ8_0: return n / kQ8Block * kQ8BlockBytes;
  }
  return 0;
}


// Rows of one chunk, converted from f32 into the tensor's type, appended to out.
void encode(const float* x, int64_t rows, int64_t cols, GgmlType t, std::vector<uint8_t>& out) {
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(cols);
  const size_t at = out.size();
  out.resize(at + type_bytes(t, rows, cols));
  uint8_t* dst = out.data() + at;
  switch (t) {
    case GgmlType::kF32: std::memcpy(dst, x, 4 * n); break;
    case GgmlType::kF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_f16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case GgmlType::kBF16:
      for (size_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_bf16(x[i]);
        std::memcpy(dst + 2 * i, &h, 2);
      }
      break;
    case GgmlType::kQ8_0:
      // As ggml's quantize_row_q8_0_ref: the int8 values use the f32 scale, the block stores it as f16.
      for (size_t b = 0; b < n / kQ8Block; ++b) {
        const float* xb = x + b * kQ8Block;
        float amax = 0.0f;
        for (int64_t j = 0; j < kQ8Block; ++j) amax = std::max(amax, std::fabs(xb[j]));
        const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint8_t* blk = dst + b * kQ8BlockBytes;
        const uint16_t dh = f32_to_f16(d);
        std::memcpy(blk, &dh, 2);
        for (int64_t j = 0; j < kQ8Block; ++j) {
          const auto q = static_cast<int8_t>(std::lround(xb[j] * id));
          std::memcpy(blk + 2 + j, &q, 1);
        }
      }
      break;
  }
}

// HF Llama checkpoints rotate the two halves of each head (x_i with x_{i + d/2}); llama.cpp's
// "llama" architecture rotates adjacent pairs (x_{2i} with x_{2i+1}). Row h*d + 2i + j of the
// output is row h*d + j*d/2 + i of the input (j in {0, 1}), as in llama.cpp's convert script.
void permute_rows(const float* in, int64_t rows, int64_t cols, int64_t head_dim, float* out) {
  const int64_t half = head_dim / 2;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_dim, k = r % head_dim, i = k / 2, j = k % 2;
    const int64_t src = h * head_dim + j * half + i;
    std::memcpy(out + r * cols, in + src * cols, static_cast<size_t>(cols) * 4);
  }
}

// Streams one tensor's data, converting about kChunkElems values at a time. The caller checks f.
void write_tensor_data(const Planned& p, std::ofstream& f) {
  std::vector<float> buf, perm;
  std::vector<uint8_t> bytes;
  if (!p.generated.empty()) {
    encode(p.generated.data(), p.rows, p.cols, p.type, bytes);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return;
  }
  const int64_t group = p.permute_heads > 0 ? p.rows / p.permute_heads : 1;  // rows kept together
  const int64_t want = std::max<int64_t>(1, static_cast<int64_t>(kChunkElems) / p.cols);
  const int64_t chunk = std::max<int64_t>(group, want / group * group);
  const size_t row_bytes = static_cast<size_t>(p.cols) * dtype_size(p.view.dtype);
  for (int64_t r0 = 0; r0 < p.rows; r0 += chunk) {
    const int64_t n = std::min(chunk, p.rows - r0);
    TensorView part;
    part.dtype = p.view.dtype;
    part.shape = {n, p.cols};
    part.data = static_cast<const uint8_t*>(p.view.data) + static_cast<size_t>(r0) * row_bytes;
    part.nbytes = static_cast<size_t>(n) * row_bytes;
    buf.resize(static_cast<size_t>(n * p.cols));
    part.to_f32(buf.data());
    const float* src = buf.data();
    if (p.permute_heads > 0) {
      perm.resize(buf.size());
      permute_rows(buf.data(), n, p.cols, group, perm.data());
      src = perm.data();
    }
    bytes.clear();
    encode(src, n, p.cols, p.type, bytes);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  }
}

void pad_to(std::ofstream& f, uint64_t pos, uint64_t align) {
  static const char kZeros[64] = {};
  const uint64_t pad = (align - pos % align) % align;
  f.write(kZeros, static_cast<std::streamsize>(pad));
}


}  // namespace

GgmlType ggml_type(GgufType t) {
  switch (t) {
    case GgufType::kF32: return GgmlType::kF32;
    case GgufType::kF16: return GgmlType::kF16;
    case GgufType::kBF16: return GgmlType::kBF16;
    case GgufType::kQ8_0: return GgmlType::kQ8_0;
  }
  return GgmlType::kF32;
}

uint32_t file_type(GgufType t) {  // llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16
  switch (t) {
    case GgufType::kF32: return 0;
    case GgufType::kF16: return 1;
    case GgufType::kQ8_0: return 7;
    case GgufType::kBF16: return 32;
  }
  return 0;
}

std::string shape_str(const std::vector<int64_t>& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) r += fmt::format("{}{}", i ? ", " : "", s[i]);
  return r + "]";
}


void KvWriter::head(std::string_view key, ValueType t) {
  w_.str(key);
  w_.u32(static_cast<uint32_t>(t));
  ++count_;
}
void KvWriter::u32(std::string_view key, uint32_t v) {
  head(key, ValueType::kU32);
  w_.u32(v);
}
void KvWriter::f32(std::string_view key, float v) {
  head(key, ValueType::kF32);
  w_.f32(v);
}
void KvWriter::boolean(std::string_view key, bool v) {
  head(key, ValueType::kBool);
  w_.u8(v ? 1 : 0);
}
void KvWriter::str(std::string_view key, std::string_view v) {
  head(key, ValueType::kString);
  w_.str(v);
}
void KvWriter::str_array(std::string_view key, const std::vector<std::string>& v) {
  head(key, ValueType::kArray);
  w_.u32(static_cast<uint32_t>(ValueType::kString));
  w_.u64(v.size());
  for (const auto& s : v) w_.str(s);
}
void KvWriter::i32_array(std::string_view key, const std::vector<int32_t>& v) {
  head(key, ValueType::kArray);
  w_.u32(static_cast<uint32_t>(ValueType::kI32));
  w_.u64(v.size());
  for (int32_t x : v) w_.i32(x);
}

Status plan_tensor(const engine::WeightStore& weights, GgufType type, std::string name, const std::string& source,
                   std::vector<int64_t> shape, std::vector<Planned>* out, int permute_heads) {
  if (!weights.contains(source))
    return Status::NotFound(fmt::format("weights: missing tensor '{}' (GGUF {})", source, name));
  RAGD_ASSIGN_OR_RETURN(TensorView v, weights.get(source));
  if (v.shape != shape)
    return Status::InvalidArgument(
        fmt::format("weights: tensor '{}' has shape {}, the config needs {}", source, shape_str(v.shape), shape_str(shape)));
  Planned p;
  p.name = std::move(name);
  p.source = source;
  p.view = v;
  p.rows = shape[0];
  p.cols = shape.size() == 2 ? shape[1] : 1;
  p.matrix = shape.size() == 2;
  p.permute_heads = permute_heads;
  p.type = p.matrix ? ggml_type(type) : GgmlType::kF32;
  if (p.type == GgmlType::kQ8_0 && p.cols % kQ8Block != 0)
    return Status::InvalidArgument(fmt::format(
        "weights: tensor '{}' has rows of {} values, not a multiple of 32: q8_0 needs whole blocks of 32 (use f16, "
        "bf16 or f32)",
        source, p.cols));
  if (permute_heads > 0 && (p.rows % permute_heads != 0 || (p.rows / permute_heads) % 2 != 0))
    return Status::InvalidArgument(
        fmt::format("weights: tensor '{}': {} rows do not split into {} heads of even size", source, p.rows, permute_heads));
  out->push_back(std::move(p));
  return Status::OK();
}

Status write_file(const KvWriter& kv, std::vector<Planned>& tensors, const std::string& out_path,
                  uint64_t* file_bytes) {
  // Tensor infos: dims innermost first (ggml ne[0] = row length), offsets aligned in the data section.
  ByteWriter infos;
  uint64_t data_bytes = 0;
  for (Planned& p : tensors) {
    p.nbytes = type_bytes(p.type, p.rows, p.cols);
    p.offset = (data_bytes + kAlignment - 1) / kAlignment * kAlignment;
    data_bytes = p.offset + p.nbytes;
    infos.str(p.name);
    if (p.matrix) {
      infos.u32(2);
      infos.u64(static_cast<uint64_t>(p.cols));
      infos.u64(static_cast<uint64_t>(p.rows));
    } else {
      infos.u32(1);
      infos.u64(static_cast<uint64_t>(p.rows * p.cols));
    }
    infos.u32(static_cast<uint32_t>(p.type));
    infos.u64(p.offset);
  }
  ByteWriter header;
  header.u32(kGgufMagic);
  header.u32(kGgufVersion);
  header.u64(tensors.size());
  header.u64(static_cast<uint64_t>(kv.count()));

  const std::string tmp = out_path + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  if (!f) return Status::IOError(fmt::format("{}: cannot create: {}", tmp, std::strerror(errno)));
  auto fail = [&](Status st) {
    f.close();
    std::error_code ec;
    fs::remove(tmp, ec);
    return st;
  };
  f.write(header.bytes().data(), static_cast<std::streamsize>(header.bytes().size()));
  f.write(kv.bytes().data(), static_cast<std::streamsize>(kv.bytes().size()));
  f.write(infos.bytes().data(), static_cast<std::streamsize>(infos.bytes().size()));
  const uint64_t head_bytes = header.bytes().size() + kv.bytes().size() + infos.bytes().size();
  pad_to(f, head_bytes, kAlignment);
  const uint64_t data_start = (head_bytes + kAlignment - 1) / kAlignment * kAlignment;
  uint64_t pos = 0;
  for (const Planned& p : tensors) {
    pad_to(f, pos, kAlignment);
    write_tensor_data(p, f);
    pos = p.offset + p.nbytes;
    if (!f) return fail(Status::IOError(fmt::format("{}: write failed at tensor {}", tmp, p.name)));
  }
  f.close();
  if (!f) return fail(Status::IOError(fmt::format("{}: write failed", tmp)));
  std::error_code ec;
  fs::rename(tmp, out_path, ec);
  if (ec) return fail(Status::IOError(fmt::format("{}: cannot rename to {}: {}", tmp, out_path, ec.message())));
  if (file_bytes) *file_bytes = data_start + data_bytes;
  return Status::OK();
}

Result<Vocab> read_vocab(std::string_view json, int vocab_size, std::string_view model_type) {
  auto bad = [](std::string_view what) { return Status::InvalidArgument(fmt::format("tokenizer.json: {}", what)); };
  simdjson::dom::parser parser;
  simdjson::padded_string text(json);
  simdjson::dom::element doc;
  if (auto err = parser.parse(text).get(doc)) return bad(fmt::format("invalid JSON: {}", simdjson::error_message(err)));
  simdjson::dom::object model;
  if (doc["model"].get_object().get(model) != simdjson::SUCCESS) return bad("missing object 'model'");
  std::string_view type;
  if (model["type"].get_string().get(type) == simdjson::SUCCESS && type != model_type)
    return bad(fmt::format("model.type '{}' is not {} (the tokenizer this model converts with)", type, model_type));

  Vocab v;
  std::string_view unk;
  if (model["unk_token"].get_string().get(unk) == simdjson::SUCCESS) v.unk_token = std::string(unk);
  v.tokens.resize(static_cast<size_t>(vocab_size));
  v.types.assign(static_cast<size_t>(vocab_size), 0);
  auto put = [&](int64_t id, std::string_view tok, int32_t tt) -> Status {
    if (id < 0 || id >= vocab_size)
      return bad(fmt::format("token '{}' has id {}, outside the model's vocab_size {}", tok, id, vocab_size));
    v.tokens[static_cast<size_t>(id)] = std::string(tok);
    v.types[static_cast<size_t>(id)] = tt;
    return Status::OK();
  };
  simdjson::dom::object vocab;
  if (model["vocab"].get_object().get(vocab) != simdjson::SUCCESS) return bad("missing object 'model.vocab'");
  for (auto field : vocab) {
    int64_t id = 0;
    if (field.value.get_int64().get(id) != simdjson::SUCCESS)
      return bad(fmt::format("model.vocab['{}'] is not an integer id", field.key));
    RAGD_RETURN_IF_ERROR(put(id, field.key, kNormal));
  }
  simdjson::dom::array added;
  if (doc["added_tokens"].get_array().get(added) == simdjson::SUCCESS) {
    size_t i = 0;
    for (auto e : added) {
      int64_t id = 0;
      std::string_view content;
      bool special = false;
      if (e["id"].get_int64().get(id) != simdjson::SUCCESS || e["content"].get_string().get(content) != simdjson::SUCCESS)
        return bad(fmt::format("added_tokens[{}] needs 'id' and 'content'", i));
      if (e["special"].get_bool().get(special) != simdjson::SUCCESS) special = false;
      RAGD_RETURN_IF_ERROR(put(id, content, special ? kControl : kUserDefined));
      ++i;
    }
  }
  simdjson::dom::array merges;
  if (model["merges"].get_array().get(merges) == simdjson::SUCCESS) {
    size_t i = 0;
    for (auto m : merges) {
      std::string_view s;
      simdjson::dom::array pair;
      if (m.get_string().get(s) == simdjson::SUCCESS) {
        v.merges.emplace_back(s);  // "left right"
      } else if (m.get_array().get(pair) == simdjson::SUCCESS && pair.size() == 2) {
        std::string_view a, b;
        if (pair.at(0).get_string().get(a) != simdjson::SUCCESS || pair.at(1).get_string().get(b) != simdjson::SUCCESS)
          return bad(fmt::format("model.merges[{}] must hold two strings", i));
        v.merges.push_back(fmt::format("{} {}", a, b));
      } else {
        return bad(fmt::format("model.merges[{}] is neither \"a b\" nor [\"a\", \"b\"]", i));
      }
      ++i;
    }
  }
  // Embedding rows the tokenizer does not name (padding up to vocab_size) become unused tokens.
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    if (v.types[id] != 0) continue;
    v.tokens[id] = fmt::format("[PAD{}]", id);
    v.types[id] = kUnused;
  }
  return v;
}

}  // namespace ragd::tools::gguf
