#include "cuda_kv_storage.h"

#include <algorithm>
#include <string>

#include "ragd/common/check.h"
#include "ragd/kernels/cuda/elementwise.h"
#include "ragd/kernels/cuda/paged_kv.h"
#include "ragd/kernels/kv_dtype.h"

namespace ragd::engine {

namespace cu = kernels::cuda;

// Pinned staging (and device rows) a segment write uses at most per group of layers.
constexpr size_t kSegmentStagingBytes = size_t{64} << 20;

namespace {

void check_ok(const Status& st, const char* what) { RAGD_CHECK(st.ok()) << what << ": " << st.to_string(); }


}  // namespace

CudaKvStorage::CudaKvStorage(const KvLayout& layout, size_t num_blocks, int device, std::shared_ptr<cu::Stream> stream)
    : KvStorage(layout, num_blocks), device_(device), name_("cuda:" + std::to_string(device)), stream_(std::move(stream)) {}

Result<std::unique_ptr<CudaKvStorage>> CudaKvStorage::create(const KvLayout& layout, size_t num_blocks, int device,
                                                             std::shared_ptr<cu::Stream> stream) {
  RAGD_RETURN_IF_ERROR(layout.validate());
  if (layout.dtype != kernels::KvDtype::kBF16) {
    return Status::InvalidArgument("cuda KV storage: KV is stored as bf16 on the GPU, not " +
                                   std::string(kernels::kv_dtype_name(layout.dtype)) + " (set kv_dtype = \"bf16\")");
  }
  if (num_blocks == 0 || num_blocks > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("cuda KV storage: num_blocks must be in [1, 2^31), got " + std::to_string(num_blocks));
  }
  if (!stream) return Status::InvalidArgument("cuda KV storage: no stream");
  RAGD_RETURN_IF_ERROR(cu::set_device(device));
  std::unique_ptr<CudaKvStorage> s(new CudaKvStorage(layout, num_blocks, device, std::move(stream)));
  const size_t bytes = layout.block_floats() * num_blocks * sizeof(uint16_t);
  for (int l = 0; l < layout.num_layers; ++l) {
    RAGD_ASSIGN_OR_RETURN(cu::DeviceBuffer k, cu::DeviceBuffer::alloc(bytes));
    RAGD_ASSIGN_OR_RETURN(cu::DeviceBuffer v, cu::DeviceBuffer::alloc(bytes));
    RAGD_RETURN_IF_ERROR(cu::fill_zero(k.get(), bytes, s->stream_->get()));
    RAGD_RETURN_IF_ERROR(cu::fill_zero(v.get(), bytes, s->stream_->get()));
    s->k_.push_back(std::move(k));
    s->v_.push_back(std::move(v));
  }
  RAGD_ASSIGN_OR_RETURN(s->staging_, cu::PinnedBuffer::alloc(2 * layout.block_floats() * sizeof(uint16_t)));
  RAGD_ASSIGN_OR_RETURN(s->copy_stream_, cu::Stream::create());
  for (UploadHalf& h : s->up_) {
    RAGD_ASSIGN_OR_RETURN(h.done, cu::Event::create());
  }
  RAGD_ASSIGN_OR_RETURN(s->compute_mark_, cu::Event::create());
  for (int l = 0; l < layout.num_layers; ++l) {
    RAGD_ASSIGN_OR_RETURN(cu::Event e, cu::Event::create());
    s->layer_ready_.push_back(std::move(e));
  }
  s->pending_.assign(layout.num_layers, 0);
  RAGD_RETURN_IF_ERROR(s->stream_->sync());
  return s;
}

CudaKvStorage::~CudaKvStorage() {
  // The copy stream may still read the staging halves and write the layers being freed.
  if (copy_stream_.get() != nullptr && cu::set_device(device_).ok()) (void)copy_stream_.sync();
}

void CudaKvStorage::wait_layer(int layer) const {
  if (!pending_[layer]) return;
  check_ok(layer_ready_[layer].wait(stream_->get()), "cuda KV upload wait");
  pending_[layer] = 0;
}

void CudaKvStorage::wait_uploads() const {
  if (!any_pending_) return;
  for (int l = 0; l < layout().num_layers; ++l) wait_layer(l);
  any_pending_ = false;
}

size_t CudaKvStorage::offset(int32_t block, int slot) const {
  RAGD_CHECK(block >= 0 && static_cast<size_t>(block) < num_blocks()) << "block " << block << " of " << num_blocks();
  return layout().block_floats() * static_cast<size_t>(block) + static_cast<size_t>(slot) * layout().token_floats();
}

void CudaKvStorage::copy_block(int32_t dst, int32_t src) {
  check_ok(cu::set_device(device_), "cuda KV copy_block");
  wait_uploads();
  const size_t bytes = layout().block_floats() * sizeof(uint16_t);
  const size_t d = offset(dst, 0), s = offset(src, 0);
  for (int l = 0; l < layout().num_layers; ++l) {
    check_ok(cu::copy_on_device(k_layer(l) + d, k_layer(l) + s, bytes, stream_->get()), "cuda KV copy_block");
    check_ok(cu::copy_on_device(v_layer(l) + d, v_layer(l) + s, bytes, stream_->get()), "cuda KV copy_block");
  }
}

void CudaKvStorage::read(int layer, int32_t block, int slot, int n, float* k, float* v) const {
  RAGD_CHECK(slot >= 0 && n >= 0 && slot + n <= layout().block_size) << "read of slots [" << slot << ", " << slot + n
                                                                      << ") of a block";
  if (n == 0) return;
  check_ok(cu::set_device(device_), "cuda KV read");
  wait_uploads();
  const size_t count = static_cast<size_t>(n) * layout().token_floats();
  const size_t e = offset(block, slot);
  uint16_t* sk = staging_.as<uint16_t>();
  uint16_t* sv = sk + layout().block_floats();
  check_ok(cu::copy_to_host(sk, k_layer(layer) + e, count * sizeof(uint16_t), stream_->get()), "cuda KV read");
  check_ok(cu::copy_to_host(sv, v_layer(layer) + e, count * sizeof(uint16_t), stream_->get()), "cuda KV read");
  check_ok(stream_->sync(), "cuda KV read");
  kernels::kv_load_values(kernels::KvDtype::kBF16, count, layout().head_dim, sk, nullptr, k);
  kernels::kv_load_values(kernels::KvDtype::kBF16, count, layout().head_dim, sv, nullptr, v);
}

void CudaKvStorage::write(int layer, int32_t block, int slot, int n, const float* k, const float* v) {
  RAGD_CHECK(slot >= 0 && n >= 0 && slot + n <= layout().block_size) << "write of slots [" << slot << ", " << slot + n
                                                                      << ") of a block";
  if (n == 0) return;
  check_ok(cu::set_device(device_), "cuda KV write");
  wait_uploads();
  const size_t count = static_cast<size_t>(n) * layout().token_floats();
  const size_t e = offset(block, slot);
  uint16_t* sk = staging_.as<uint16_t>();
  uint16_t* sv = sk + layout().block_floats();
  check_ok(stream_->sync(), "cuda KV write");  // the staging buffer's previous copy is done
  const int nkv = layout().num_kv_heads, hd = layout().head_dim;
  const size_t row = layout().token_floats();
  kernels::kv_store_rows(kernels::KvDtype::kBF16, n, nkv, hd, k, row, sk, nullptr);
  kernels::kv_store_rows(kernels::KvDtype::kBF16, n, nkv, hd, v, row, sv, nullptr);
  check_ok(cu::copy_to_device(k_layer(layer) + e, sk, count * sizeof(uint16_t), stream_->get()), "cuda KV write");
  check_ok(cu::copy_to_device(v_layer(layer) + e, sv, count * sizeof(uint16_t), stream_->get()), "cuda KV write");
  check_ok(stream_->sync(), "cuda KV write");
}

void CudaKvStorage::stage(std::span<const int32_t> blocks, int t0, int n, size_t value_bytes) const {
  const size_t slot_bytes = static_cast<size_t>(n) * sizeof(int32_t);
  check_ok(stream_->sync(), "cuda KV staging");  // the previous copies out of the staging are done
  check_ok(staging_.reserve(value_bytes + slot_bytes), "cuda KV staging");
  check_ok(rows_dev_.reserve(value_bytes), "cuda KV staging");
  check_ok(slots_dev_.reserve(slot_bytes), "cuda KV staging");
  int32_t* slots = reinterpret_cast<int32_t*>(staging_.as<unsigned char>() + value_bytes);
  fill_slots(blocks, t0, n, slots);
  check_ok(cu::copy_to_device(slots_dev_.get(), slots, slot_bytes, stream_->get()), "cuda KV slots");
}

void CudaKvStorage::fill_slots(std::span<const int32_t> blocks, int t0, int n, int32_t* slots) const {
  const int bs = layout().block_size;
  for (int i = 0; i < n; ++i) {
    const int t = t0 + i;
    slots[i] = blocks[t / bs] * bs + t % bs;
  }
}

void CudaKvStorage::to_bf16_rows(int n, int g, const float* k, const float* v, uint16_t* dst) const {
  const int nkv = layout().num_kv_heads, hd = layout().head_dim;
  const size_t row = layout().token_floats(), count = static_cast<size_t>(n) * row;
  // The pool's one f32 -> stored-row conversion (vectorised), layers in parallel.
#pragma omp parallel for schedule(static) if (g > 1)
  for (int i = 0; i < g; ++i) {
    kernels::kv_store_rows(kernels::KvDtype::kBF16, n, nkv, hd, k + i * count, row, dst + 2 * i * count, nullptr);
    kernels::kv_store_rows(kernels::KvDtype::kBF16, n, nkv, hd, v + i * count, row, dst + (2 * i + 1) * count, nullptr);
  }
}

int CudaKvStorage::layers_per_copy(int n) const {
  const size_t layer_bytes = 2 * static_cast<size_t>(n) * layout().token_floats() * sizeof(uint16_t);
  return static_cast<int>(std::clamp<size_t>(kSegmentStagingBytes / layer_bytes, 1, layout().num_layers));
}

void CudaKvStorage::upload_layers(std::span<const int32_t> blocks, int t0, int n, int l0, int g, const float* k,
                                  const float* v) {
  const int nkv = layout().num_kv_heads, hd = layout().head_dim;
  const size_t row = layout().token_floats(), count = static_cast<size_t>(n) * row;
  stage(blocks, t0, n, 2 * g * count * sizeof(uint16_t));  // waits for the previous copy out of the staging
  uint16_t* hk = staging_.as<uint16_t>();
  to_bf16_rows(n, g, k, v, hk);
  uint16_t* dk = rows_dev_.as<uint16_t>();
  check_ok(cu::copy_to_device(dk, hk, 2 * g * count * sizeof(uint16_t), stream_->get()), "cuda KV write");
  for (int i = 0; i < g; ++i) {
    check_ok(cu::kv_write(dk + 2 * i * count, dk + (2 * i + 1) * count, n, static_cast<int>(row), nkv, hd,
                          slots_dev_.as<int32_t>(), k_layer(l0 + i), v_layer(l0 + i), stream_->get()),
             "cuda KV scatter");
  }
}

void CudaKvStorage::download_layers(std::span<const int32_t> blocks, int t0, int n, int l0, int g, float* k,
                                    float* v) const {
  const int hd = layout().head_dim;
  const size_t row = layout().token_floats(), count = static_cast<size_t>(n) * row;
  const int pool_rows = static_cast<int>(num_blocks() * layout().block_size);
  stage(blocks, t0, n, 2 * g * count * sizeof(uint16_t));
  uint16_t* dk = rows_dev_.as<uint16_t>();
  for (int i = 0; i < g; ++i) {
    for (int kv = 0; kv < 2; ++kv) {
      check_ok(cu::embedding_gather(cu::DType::kBf16, kv == 0 ? k_layer(l0 + i) : v_layer(l0 + i), pool_rows,
                                    static_cast<int>(row), slots_dev_.as<int32_t>(), n, dk + (2 * i + kv) * count,
                                    nullptr, stream_->get()),
               "cuda KV gather");
    }
  }
  uint16_t* hk = staging_.as<uint16_t>();
  check_ok(cu::copy_to_host(hk, dk, 2 * g * count * sizeof(uint16_t), stream_->get()), "cuda KV read");
  check_ok(stream_->sync(), "cuda KV read");
#pragma omp parallel for schedule(static) if (g > 1)
  for (int i = 0; i < g; ++i) {
    kernels::kv_load_values(kernels::KvDtype::kBF16, count, hd, hk + 2 * i * count, nullptr, k + i * count);
    kernels::kv_load_values(kernels::KvDtype::kBF16, count, hd, hk + (2 * i + 1) * count, nullptr, v + i * count);
  }
}

void CudaKvStorage::read_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const {
  if (n <= 0) return;
  check_ok(cu::set_device(device_), "cuda KV read");
  wait_uploads();
  download_layers(blocks, t0, n, layer, 1, k, v);
}

void CudaKvStorage::write_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, const float* k,
                                 const float* v) {
  if (n <= 0) return;
  check_ok(cu::set_device(device_), "cuda KV write");
  wait_uploads();
  upload_layers(blocks, t0, n, layer, 1, k, v);
  check_ok(stream_->sync(), "cuda KV write");
}

void CudaKvStorage::write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k,
                                            const float* v) {
  if (n <= 0) return;
  check_ok(cu::set_device(device_), "cuda KV write");
  if (!cu::switch_off("RAGD_CUDA_KV_OVERLAP")) return upload_segment_async(blocks, t0, n, k, v);
  wait_uploads();
  const int layers = layout().num_layers, group = layers_per_copy(n);
  const size_t count = static_cast<size_t>(n) * layout().token_floats();
  for (int l0 = 0; l0 < layers; l0 += group) {
    upload_layers(blocks, t0, n, l0, std::min(group, layers - l0), k + l0 * count, v + l0 * count);
  }
  check_ok(stream_->sync(), "cuda KV write");
}

void CudaKvStorage::read_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const {
  if (n <= 0) return;
  check_ok(cu::set_device(device_), "cuda KV read");
  wait_uploads();
  const int layers = layout().num_layers, group = layers_per_copy(n);
  const size_t count = static_cast<size_t>(n) * layout().token_floats();
  for (int l0 = 0; l0 < layers; l0 += group) {
    download_layers(blocks, t0, n, l0, std::min(group, layers - l0), k + l0 * count, v + l0 * count);
  }
}

void CudaKvStorage::upload_segment_async(std::span<const int32_t> blocks, int t0, int n, const float* k,
                                         const float* v) {
  const int layers = layout().num_layers, group = layers_per_copy(n);
  const int nkv = layout().num_kv_heads, hd = layout().head_dim;
  const size_t row = layout().token_floats(), count = static_cast<size_t>(n) * row;
  void* cs = copy_stream_.get();
  // The previous segment's copies are done (its staging halves and slots are free) ...
  check_ok(copy_stream_.sync(), "cuda KV upload");
  // ... and this one's start after what the compute stream has enqueued so far: a block of this
  // segment may have been freed by a table whose last step is still reading it.
  check_ok(compute_mark_.record(stream_->get()), "cuda KV upload");
  check_ok(compute_mark_.wait(cs), "cuda KV upload");
  const size_t slot_bytes = static_cast<size_t>(n) * sizeof(int32_t);
  check_ok(up_slots_host_.reserve(slot_bytes), "cuda KV upload");
  check_ok(up_slots_dev_.reserve(slot_bytes), "cuda KV upload");
  int32_t* slots = up_slots_host_.as<int32_t>();
  fill_slots(blocks, t0, n, slots);
  check_ok(cu::copy_to_device(up_slots_dev_.get(), slots, slot_bytes, cs), "cuda KV upload");
  for (int gi = 0, l0 = 0; l0 < layers; ++gi, l0 += group) {
    const int g = std::min(group, layers - l0);
    UploadHalf& h = up_[gi % 2];
    if (gi >= 2) check_ok(h.done.sync(), "cuda KV upload");  // its previous group is on the device
    const size_t bytes = 2 * static_cast<size_t>(g) * count * sizeof(uint16_t);
    check_ok(h.host.reserve(bytes), "cuda KV upload");
    check_ok(h.dev.reserve(bytes), "cuda KV upload");
    uint16_t* hk = h.host.as<uint16_t>();
    to_bf16_rows(n, g, k + static_cast<size_t>(l0) * count, v + static_cast<size_t>(l0) * count, hk);
    uint16_t* dk = h.dev.as<uint16_t>();
    check_ok(cu::copy_to_device(dk, hk, bytes, cs), "cuda KV upload");
    for (int i = 0; i < g; ++i) {
      check_ok(cu::kv_write(dk + 2 * i * count, dk + (2 * i + 1) * count, n, static_cast<int>(row), nkv, hd,
                            up_slots_dev_.as<int32_t>(), k_layer(l0 + i), v_layer(l0 + i), cs),
               "cuda KV upload scatter");
      check_ok(layer_ready_[l0 + i].record(cs), "cuda KV upload");
      pending_[l0 + i] = 1;
    }
    check_ok(h.done.record(cs), "cuda KV upload");
  }
  any_pending_ = true;
}

}  // namespace ragd::engine
