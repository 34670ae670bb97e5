// Safetensors reading (mmap, zero-copy) and writing, single file or sharded with
// model.safetensors.index.json. Every malformed input is a Status naming the file and the problem
// (header length beyond file, bad JSON, offsets out of range or overlapping, size != shape x dtype,
// unknown dtype, duplicate tensor).
// Thread-safety: a loaded WeightStore is immutable and safe to read from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/hash.h"
#include "ragd/common/status.h"

namespace ragd::engine {

// Names: the safetensors spelling ("F32", "F16", "BF16"; canonical), torch's and ragd's as aliases.
enum class DType : uint8_t { kF32, kF16, kBF16 };
inline constexpr auto kDTypeNames = make_enum_names<DType>(
    "dtype", {{DType::kF32, "F32"},        {DType::kF16, "F16"},           {DType::kBF16, "BF16"},
              {DType::kF32, "float32"},    {DType::kF16, "float16"},       {DType::kBF16, "bfloat16"},
              {DType::kF32, "f32"},        {DType::kF16, "f16"},           {DType::kBF16, "bf16"},
              {DType::kF32, "torch.float32"}, {DType::kF16, "torch.float16"}, {DType::kBF16, "torch.bfloat16"}});
constexpr const auto& ragd_enum_names(DType) { return kDTypeNames; }
static_assert(enum_names_valid(kDTypeNames));
inline std::string_view dtype_name(DType d) { return enum_name(d); }  // "F32", "F16", "BF16"
size_t dtype_size(DType d);
// Converts n values of type d at `data` (any alignment) to f32 into dst.
void dtype_to_f32(DType d, const void* data, size_t n, float* dst);
inline Result<DType> parse_dtype(std::string_view s) { return parse_enum<DType>(s); }

// A read-only view of one tensor's bytes (row-major). Not owning.
struct TensorView {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t nbytes = 0;
  int64_t numel() const;
  // Converts to f32 into dst (numel() floats).
  void to_f32(float* dst) const;
};

// An owning in-memory tensor, for writers and tests.
struct OwnedTensor {
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

// All tensors of a model directory: model.safetensors, or the shards named by
// model.safetensors.index.json. Memory-mapped; views stay valid while the store lives.
class WeightStore {
 public:
  virtual ~WeightStore() = default;
  static Result<std::unique_ptr<WeightStore>> open_dir(const std::string& dir);
  static Result<std::unique_ptr<WeightStore>> open_file(const std::string& path);
  // Tensors held in memory (converters, tests, benchmarks). Its checksum equals that of a file
  // holding the same tensors.
  static std::unique_ptr<WeightStore> from_tensors(std::map<std::string, OwnedTensor> tensors);

  // NotFound naming the tensor when absent.
  virtual Result<TensorView> get(const std::string& name) const = 0;
  virtual bool contains(const std::string& name) const = 0;
  virtual std::vector<std::string> names() const = 0;
  // xxh3-128 over (name, dtype, shape, bytes) of every tensor in name order.
  virtual Hash128 checksum() const = 0;
};

// Writes tensors into one safetensors file ("__metadata__" optional).
Status write_safetensors(const std::string& path, const std::map<std::string, OwnedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata = {});

// Streaming writers, for models too large to hold in memory (make-model writes 8B-parameter
// checkpoints through these). Tensors are laid out in the order given.
struct TensorSpec {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  size_t nbytes() const;  // numel x dtype_size
};
// Fills dst (spec.nbytes() bytes) with the tensor's data.
using TensorFill = std::function<Status(const TensorSpec& spec, std::span<uint8_t> dst)>;

// Writes one safetensors file, calling fill once per tensor in order.
Status write_safetensors_streamed(const std::string& path, const std::vector<TensorSpec>& specs,
                                  const TensorFill& fill, const std::map<std::string, std::string>& metadata = {});

// Writes a model directory's weights: model.safetensors when the total is <= max_shard_bytes,
// otherwise model-0000i-of-0000n.safetensors shards plus model.safetensors.index.json.
Status write_safetensors_dir(const std::string& dir, const std::vector<TensorSpec>& specs, const TensorFill& fill,
                             size_t max_shard_bytes = 2ull << 30,
                             const std::map<std::string, std::string>& metadata = {});

// Converts n f32 values into dtype bytes at dst (n x dtype_size bytes).
void convert_from_f32(const float* src, size_t n, DType dtype, void* dst);

// f32 <-> f16 / bf16 conversions (round to nearest even); the kernels' scalar conversions.
uint16_t f32_to_bf16(float f);
float bf16_to_f32(uint16_t h);
uint16_t f32_to_f16(float f);
float f16_to_f32(uint16_t h);

}  // namespace ragd::engine
