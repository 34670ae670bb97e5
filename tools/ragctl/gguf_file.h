// The GGUF v3 container as ragd's exporters write it (gguf_writer.cpp: Llama / Qwen2 decoders,
// gguf_bert.cpp: BERT encoders): key/value pairs, a tensor plan checked against the weights, and
// one pass that writes header, pairs, tensor infos and the aligned data section, converting a
// bounded chunk of rows at a time into the target type (a model never needs to fit in memory as
// f32). The file is written under a temporary name and renamed into place when complete; nothing is
// left at the output path on error.
// Thread-safety: KvWriter and plans are plain values; concurrent writes need different paths.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "gguf_writer.h"
#include "ragd/common/status.h"
#include "ragd/engine/safetensors.h"

namespace ragd::tools::gguf {

// ggml_type of tensors.
enum class GgmlType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// llama_token_type.
enum TokenType : int32_t { kNormal = 1, kControl = 3, kUserDefined = 4, kUnused = 5 };

GgmlType ggml_type(GgufType t);
uint32_t file_type(GgufType t);  // llama_ftype: ALL_F32, MOSTLY_F16, MOSTLY_Q8_0, MOSTLY_BF16
std::string shape_str(const std::vector<int64_t>& s);

// Little-endian byte sink for the header part of the file.
class ByteWriter {
 public:
  void u32(uint32_t v) { raw(&v, 4); }
  void i32(int32_t v) { raw(&v, 4); }
  void u64(uint64_t v) { raw(&v, 8); }
  void f32(float v) { raw(&v, 4); }
  void u8(uint8_t v) { raw(&v, 1); }
  void str(std::string_view s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { bytes_.append(static_cast<const char*>(p), n); }
  const std::string& bytes() const { return bytes_; }

 private:
  std::string bytes_;
};

// The key/value section; counts its pairs.
class KvWriter {
 public:
  void u32(std::string_view key, uint32_t v);
  void f32(std::string_view key, float v);
  void boolean(std::string_view key, bool v);
  void str(std::string_view key, std::string_view v);
  void str_array(std::string_view key, const std::vector<std::string>& v);
  void i32_array(std::string_view key, const std::vector<int32_t>& v);
  int64_t count() const { return count_; }
  const std::string& bytes() const { return w_.bytes(); }

 private:
  enum class ValueType : uint32_t { kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8, kArray = 9 };
  void head(std::string_view key, ValueType t);
  ByteWriter w_;
  int64_t count_ = 0;
};

// One output tensor.
struct Planned {
  std::string name;                // GGUF name
  std::string source;              // HF name; empty for generated tensors
  engine::TensorView view;         // source bytes (when source is set)
  std::vector<float> generated;    // data of a generated tensor (rope_freqs)
  int64_t rows = 1, cols = 1;      // row-major [rows, cols]; a 1-D tensor of n is [n, 1]
  bool matrix = false;             // 2-D: written in the target type; else f32
  int permute_heads = 0;           // > 0: HF -> llama.cpp RoPE row permutation over this many heads
  GgmlType type = GgmlType::kF32;
  uint64_t offset = 0;             // in the data section
  uint64_t nbytes = 0;
};

// Checks `source` in `weights` against `shape` ([rows, cols] or [n]) and appends its plan: 2-D in
// the target type (q8_0 needs rows of whole 32-value blocks), 1-D as f32. NotFound / InvalidArgument
// name the tensor.
Status plan_tensor(const engine::WeightStore& weights, GgufType type, std::string name, const std::string& source,
                   std::vector<int64_t> shape, std::vector<Planned>* out, int permute_heads = 0);

// A tokenizer.json vocabulary in llama.cpp's terms: tokens by id (model.vocab, then added_tokens:
// special ones as control tokens, others user-defined), ids the file does not name (embedding rows
// padded up to vocab_size) as unused "[PAD<id>]", BPE merges as "left right". InvalidArgument names
// the problem (a model.type other than `model_type`, an id outside vocab_size, a malformed entry).
struct Vocab {
  std::vector<std::string> tokens;  // [vocab_size], as spelled in the file
  std::vector<int32_t> types;       // [vocab_size] TokenType
  std::vector<std::string> merges;  // "left right" (BPE)
  std::string unk_token;            // model.unk_token; "" when absent
};
Result<Vocab> read_vocab(std::string_view tokenizer_json, int vocab_size, std::string_view model_type);

// Writes header, `kv`, the infos and data of `tensors` (offsets assigned here) to out_path.
// *file_bytes: the file size.
Status write_file(const KvWriter& kv, std::vector<Planned>& tensors, const std::string& out_path,
                  uint64_t* file_bytes);

}  // namespace ragd::tools::gguf
