// Model: a Llama-family transformer (Llama 2/3, Mistral, Qwen2) bound to a backend.
//
// forward() runs ONE batched step over several sequences of different lengths, mixing prefill
// chunks and single-token decodes, writing new K/V into each sequence's block table and producing
// logits only for the rows that ask for them. A step names, per sequence, the tokens, their
// positions and the KV slots they write; contiguous append at the end of the sequence is the
// default and the fast path.
//
// Thread-safety: a Model is used by one thread at a time (the scheduler thread); weights are
// immutable after load.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "ragd/common/enum_names.h"
#include "ragd/common/hash.h"
#include "ragd/common/option_checks.h"
#include "ragd/common/status.h"
#include "ragd/engine/kv_cache.h"
#include "ragd/engine/layer_hook.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/safetensors.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/sentence_pooling.h"

namespace ragd::engine {

// How weights are kept in memory. kAuto keeps the checkpoint's dtype (bf16 / f16 stay 16-bit, no
// upcast copy); kQ8 quantizes at load into blocks of 32 int8 weights with one f16 scale each
// (Q8_0-like). Norm weights and biases are always f32.
enum class WeightFormat : uint8_t { kAuto, kF32, kBF16, kF16, kQ8 };
inline constexpr auto kWeightFormatNames = make_enum_names<WeightFormat>(
    "weights", {{WeightFormat::kAuto, "auto"},
                {WeightFormat::kF32, "f32"},
                {WeightFormat::kBF16, "bf16"},
                {WeightFormat::kF16, "f16"},
                {WeightFormat::kQ8, "q8"}});
constexpr const auto& ragd_enum_names(WeightFormat) { return kWeightFormatNames; }
static_assert(enum_names_valid(kWeightFormatNames));
inline std::string_view weight_format_name(WeightFormat f) { return enum_name(f); }  // "auto", "f32", ...
// Accepts the names above; InvalidArgument listing them otherwise.
inline Result<WeightFormat> parse_weight_format(std::string_view s) { return parse_enum<WeightFormat>(s); }

// Where a model runs: "cpu", or "cuda" / "cuda:N" (N a device index; "cuda" = "cuda:0").
enum class DeviceKind : uint8_t { kCpu, kCuda };
inline constexpr auto kDeviceKindNames =
    make_enum_names<DeviceKind>("device", {{DeviceKind::kCpu, "cpu"}, {DeviceKind::kCuda, "cuda"}});
constexpr const auto& ragd_enum_names(DeviceKind) { return kDeviceKindNames; }
static_assert(enum_names_valid(kDeviceKindNames));
struct DeviceSpec {
  DeviceKind kind = DeviceKind::kCpu;
  int index = 0;  // CUDA device index
};
// The syntax of a device name (header-only: configuration checks it before anything loads);
// InvalidArgument naming the value otherwise. Whether this build has CUDA is Model::load's check.
inline Result<DeviceSpec> parse_device_spec(std::string_view s) {
  const size_t colon = s.find(':');
  auto kind = enum_from_name<DeviceKind>(s.substr(0, colon));
  std::string_view n = colon == std::string_view::npos ? std::string_view{} : s.substr(colon + 1);
  const bool index_ok = colon == std::string_view::npos ||
                        (kind == DeviceKind::kCuda && !n.empty() && n.size() <= 4 &&
                         n.find_first_not_of("0123456789") == std::string_view::npos);
  if (!kind || !index_ok)
    return Status::InvalidArgument("device must be \"cpu\", \"cuda\" or \"cuda:N\" (N a device index); got '" +
                                   std::string(s.substr(0, 64)) + "'");
  DeviceSpec d{*kind, 0};
  for (char c : n) d.index = d.index * 10 + (c - '0');
  return d;
}

struct ModelOptions {
  std::string device = "cpu";  // "cpu" or "cuda:N" (parse_device_spec)
  WeightFormat weights = WeightFormat::kAuto;
  int kv_block_size = 16;      // tokens per KV block
  size_t kv_pool_bytes = 512ull << 20;  // bytes of KV pool (K+V, all layers); default 512 MiB
  // How the pool stores K and V (kernels/kv_dtype.h): f32 (exact), bf16 (half the bytes), int8
  // (a quarter plus a scale per token and head). The pool holds kv_pool_bytes / block bytes blocks.
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF32;
  int num_threads = 0;         // OpenMP threads for the CPU backend; 0 = all cores

  // Syntax and ranges, InvalidArgument naming the daemon's config key ("runtime.kv_block_size:
  // must be > 0, got 0"; a bad device: "runtime: device must be ..."). Header-only like
  // parse_device_spec, so configuration checks it without linking the engine. Whether this build
  // has CUDA is Model::load's check.
  Status validate() const {
    if (auto dev = parse_device_spec(device); !dev.ok()) return dev.status().with_context("runtime");
    RAGD_RETURN_IF_ERROR(check_enum_known("runtime.weights", weights));
    RAGD_RETURN_IF_ERROR(check_enum_known("runtime.kv_dtype", kv_dtype));
    RAGD_RETURN_IF_ERROR(check_at_least("runtime.kv_block_size", kv_block_size, 1));
    return check_at_least("runtime.num_threads", num_threads, 0);
  }
};

// The KV pool layout a model of `cfg` gets under `opts` (its bytes per token size the pool).
KvLayout kv_layout(const ModelConfig& cfg, const ModelOptions& opts);

// One sequence's part of a batched step.
//
// Placement of token i (n = tokens.size()):
//   slots empty, positions empty: slot = position = table->num_tokens() + i  (contiguous append)
//   slots empty, positions set:   slot = table->num_tokens() + i, position = positions[i]
//                                 (e.g. a zigzag shard appending non-contiguous positions)
//   slots set, positions empty:   slot = position = slots[i]  (sparse recompute / rewrite)
//   both set:                     as given
// Slots must be distinct and >= 0; a slot < num_tokens() is rewritten (copy-on-write if its block
// is shared), a slot past the end grows the sequence and slots skipped on the way stay holes
// (never attended to) until written. Positions are in [0, 2^31 - 2]. A token at position p attends
// to every key of its sequence whose stored position is <= p, including this step's own tokens,
// whatever their slots or their order in `tokens`.
struct SeqStep {
  BlockTable* table = nullptr;         // its KV
  std::span<const int32_t> tokens;     // token ids
  // kLast = the logits row of the tokens' last entry; kGreedy = only its greedy pick (argmax, lowest
  // id on ties, and its natural-log probability; engine::greedy_pick), no row: on a GPU 8 bytes come
  // back instead of the vocabulary's floats.
  enum class Logits : uint8_t { kNone, kLast, kAll, kGreedy } logits = Logits::kLast;
  std::span<const int32_t> positions = {};  // [n] or empty (see above)
  std::span<const int32_t> slots = {};      // [n] or empty (see above)
};

struct StepOutput {
  // Rows of vocab_size floats, in batch order: 0 rows for kNone and kGreedy, 1 for kLast, n for kAll.
  std::vector<float> logits;
  std::vector<int> row_begin;  // per SeqStep, index of its first row in `logits`
  std::vector<SampleResult> picks;  // per SeqStep: its greedy pick for kGreedy, token -1 otherwise
  int vocab_size = 0;
  std::span<const float> row(int r) const {
    return {logits.data() + static_cast<size_t>(r) * vocab_size, static_cast<size_t>(vocab_size)};
  }
};

// What loading cost, for logs and `--verbose` tools.
struct ModelLoadInfo {
  std::string weights;        // weight type in memory: "f32", "bf16", "f16", "q8"
  std::string kernels;        // instruction set of the CPU kernels and the features seen
  std::string kv_dtype;       // how the KV pool stores K and V: "f32", "bf16", "int8"
  size_t weight_bytes = 0;    // bytes of weights in memory (read once per decode step)
  double seconds = 0.0;       // load + conversion + KV pool allocation
  size_t resident_bytes = 0;  // process resident set right after loading
};

class Model {
 public:
  virtual ~Model() = default;

  // Loads config.json + safetensors weights from an HF model directory.
  static Result<std::unique_ptr<Model>> load(const std::string& dir, const ModelOptions& opts = {});
  // Builds from a config and an already opened weight store (tests, converters).
  static Result<std::unique_ptr<Model>> create(const ModelConfig& cfg, std::unique_ptr<WeightStore> weights,
                                               const ModelOptions& opts = {});

  virtual const ModelConfig& config() const = 0;
  // xxh3-128 over architecture, shapes, RoPE config and the weight checksum. Keys in kvstore.
  virtual Hash128 fingerprint() const = 0;
  virtual KvPool& kv_pool() = 0;
  virtual std::string_view device() const = 0;
  // Empty for models that were not loaded from weights (test doubles).
  virtual const ModelLoadInfo& load_info() const {
    static const ModelLoadInfo none;
    return none;
  }

  // Runs one batched step. Reserves KV slots for every sequence first; ResourceExhausted (and
  // nothing changed) when the pool cannot hold them; InvalidArgument (nothing changed) on bad
  // tokens, positions or slots. On success every table has committed its new tokens. On a later
  // failure the tables are not committed and the contents of the step's slots are unspecified.
  virtual Status forward(std::span<SeqStep> batch, StepOutput* out) = 0;

  // forward() with a per-layer hook (layer_hook.h): the hook sees and may change each layer's
  // fresh Q/K/V before they are written, may narrow the rows that continue, and may replace the
  // layer's attention. A hook that changes nothing gives bit-identical results to forward().
  // Unimplemented for models without hook support (the default, e.g. test doubles).
  virtual Status forward_with_hook(std::span<SeqStep> batch, LayerHook& hook, StepOutput* out) {
    return Status::Unimplemented("forward_with_hook: this model does not support layer hooks");
  }

  // Re-rotates post-RoPE keys k: [rows, num_key_value_heads, head_dim] f32 (e.g. every layer of a
  // stored segment, rows = layers · tokens) from position p to p + delta, for position-shifted KV
  // reuse: RoPE is a rotation, so one delta rotation suffices (exact up to fp32 rounding).
  // Unimplemented for models without a RoPE re-rotation (the default, e.g. test doubles).
  virtual Status rerotate_keys(float* k, size_t rows, int64_t delta) const {
    return Status::Unimplemented("rerotate_keys: this model does not support position-shifted KV reuse");
  }

  // Appends n tokens of imported KV of every layer to `table` (k, v as BlockTable::append) whose
  // keys were rotated for positions `delta` lower than the slots they land in: re-rotated on the way
  // (the same bits as rerotate_keys, then BlockTable::append), k and v are not changed.
  // ResourceExhausted (table unchanged) when the pool has no room; Unimplemented as rerotate_keys.
  virtual Status append_shifted(BlockTable& table, int n, const float* k, const float* v, int64_t delta) {
    return Status::Unimplemented("append_shifted: this model does not support position-shifted KV reuse");
  }

  // Attention of n_q given queries over one layer of a sequence's KV, masked by position: query i
  // sees the keys of `table` whose stored position is <= q_pos[i]. q: [n_q, num_attention_heads,
  // head_dim] post-RoPE f32; out: same shape; lse: [n_q, num_attention_heads] natural log (-inf
  // when no key is visible). For sequence parallelism: a shard answers another worker's queries
  // over the KV it holds (sharded decode). Reads KV only; the table is not changed.
  // InvalidArgument on a bad layer, size or position; Unimplemented for models without it.
  virtual Status attend(const BlockTable& table, int layer, std::span<const float> q, std::span<const int32_t> q_pos,
                        float* out, float* lse) {
    return Status::Unimplemented("attend: this model does not answer external attention queries");
  }

  // The final hidden states (after the last norm) of `tokens`, pooled for embedding: the mean over
  // all positions (default), the first position (kCls) or the last (kLastToken, decoder embedders
  // such as Qwen3-Embedding); [hidden_size]. Not normalised.
  virtual Status embed(std::span<const int32_t> tokens, std::vector<float>* out,
                       SentencePooling pooling = SentencePooling::kMean) = 0;
  // A second model over the same weights (no copy: they are immutable) with a KV pool and step
  // state of its own, so that two threads step the two at once — a long sequence beside the
  // batch. Its pool has the layout of this one's and kv_pool_bytes / block bytes blocks;
  // num_threads as ModelOptions'. Unimplemented where the backend cannot share its weights (CUDA)
  // or for test doubles.
  virtual Result<std::unique_ptr<Model>> sibling(size_t kv_pool_bytes, int num_threads) const {
    (void)kv_pool_bytes;
    (void)num_threads;
    return Status::Unimplemented("this model cannot make a sibling over its weights");
  }
};

}  // namespace ragd::engine
