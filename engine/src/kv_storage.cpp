#include "ragd/engine/kv_storage.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "layer_loop.h"
#include "ragd/common/check.h"

namespace ragd::engine {

Status KvLayout::validate() const {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0 || block_size <= 0) {
    return Status::InvalidArgument("KvLayout: needs positive num_layers, num_kv_heads, head_dim and block_size (got " +
                                   std::to_string(num_layers) + ", " + std::to_string(num_kv_heads) + ", " +
                                   std::to_string(head_dim) + ", " + std::to_string(block_size) + ")");
  }
  if (kernels::kv_dtype_bytes(dtype) == 0) {
    return Status::InvalidArgument("KvLayout: unknown dtype code " + std::to_string(static_cast<int>(dtype)));
  }
  return Status::OK();
}

namespace {

// Calls f(block, slot, run, i) for each block-sized run of tokens [t0, t0 + n): tokens
// [t0 + i, t0 + i + run) sit in slots [slot, slot + run) of `block`.
template <typename F>
void for_each_block_run(std::span<const int32_t> blocks, int block_size, int t0, int n, F f) {
  for (int i = 0; i < n;) {
    const int t = t0 + i, slot = t % block_size, run = std::min(block_size - slot, n - i);
    f(blocks[t / block_size], slot, run, i);
    i += run;
  }
}

}  // namespace

void KvStorage::read_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const {
  const size_t tf = layout_.token_floats();
  for_each_block_run(blocks, layout_.block_size, t0, n, [&](int32_t b, int slot, int run, int i) {
    read(layer, b, slot, run, k + i * tf, v + i * tf);
  });
}

void KvStorage::write_tokens(int layer, std::span<const int32_t> blocks, int t0, int n, const float* k, const float* v) {
  const size_t tf = layout_.token_floats();
  for_each_block_run(blocks, layout_.block_size, t0, n, [&](int32_t b, int slot, int run, int i) {
    write(layer, b, slot, run, k + i * tf, v + i * tf);
  });
}

void KvStorage::write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k,
                                        const float* v) {
  const size_t per_layer = static_cast<size_t>(n) * layout_.token_floats();
  for (int l = 0; l < layout_.num_layers; ++l) write_tokens(l, blocks, t0, n, k + l * per_layer, v + l * per_layer);
}

void KvStorage::read_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, float* k, float* v) const {
  const size_t per_layer = static_cast<size_t>(n) * layout_.token_floats();
  for (int l = 0; l < layout_.num_layers; ++l) read_tokens(l, blocks, t0, n, k + l * per_layer, v + l * per_layer);
}

void HostKvStorage::write_tokens_all_layers(std::span<const int32_t> blocks, int t0, int n, const float* k,
                                            const float* v) {
  const size_t per_layer = static_cast<size_t>(n) * layout().token_floats();
  for_each_layer(layout().num_layers, per_layer,
                 [&](int l) { write_tokens(l, blocks, t0, n, k + l * per_layer, v + l * per_layer); });
}

HostKvStorage::HostKvStorage(const KvLayout& layout, size_t num_blocks) : KvStorage(layout, num_blocks) {
  // calloc of a large array maps zero pages without touching them: a page becomes resident when a
  // block on it is first written (one fault per 4 KiB, next to a prefill's compute noise), so an
  // idle or lightly used pool costs no memory. KvPool hands out block 0 first, so the pages in
  // use stay packed at the front of every layer's array.
  const size_t values = layout.block_floats() * num_blocks;
  const size_t bytes = values * kernels::kv_dtype_bytes(layout.dtype);
  const bool scaled = kernels::kv_dtype_scaled(layout.dtype);
  const size_t scales = static_cast<size_t>(layout.block_size) * layout.num_kv_heads * num_blocks;
  auto zeroed = [](size_t n) {
    void* p = std::calloc(n, 1);
    RAGD_CHECK(p != nullptr) << "HostKvStorage: cannot allocate " << n << " bytes";
    return p;
  };
  for (int l = 0; l < layout.num_layers; ++l) {
    k_.emplace_back(static_cast<std::byte*>(zeroed(bytes)));
    v_.emplace_back(static_cast<std::byte*>(zeroed(bytes)));
    if (scaled) {
      ks_.emplace_back(static_cast<float*>(zeroed(sizeof(float) * scales)));
      vs_.emplace_back(static_cast<float*>(zeroed(sizeof(float) * scales)));
    }
  }
}

void HostKvStorage::FreeDeleter::operator()(void* p) const noexcept { std::free(p); }

void HostKvStorage::discard(std::span<const int32_t> blocks) {
  const KvLayout& L = layout();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t value_block = L.block_floats() * value_bytes();
  const size_t scale_block = sizeof(float) * static_cast<size_t>(L.block_size) * L.num_kv_heads;
  // Runs of consecutive block ids: the pages inside [first, last + 1) of each array.
  std::vector<int32_t> ids(blocks.begin(), blocks.end());
  std::sort(ids.begin(), ids.end());
  auto drop = [&](void* base, size_t per_block, int32_t first, int32_t end) {
    const auto b = reinterpret_cast<uintptr_t>(base);
    const uintptr_t lo = (b + first * per_block + page - 1) / page * page, hi = (b + end * per_block) / page * page;
    if (hi > lo) ::madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
  };
  for (size_t i = 0; i < ids.size();) {
    size_t j = i + 1;
    while (j < ids.size() && ids[j] == ids[j - 1] + 1) ++j;
    for (int l = 0; l < L.num_layers; ++l) {
      drop(k_[l].get(), value_block, ids[i], ids[j - 1] + 1);
      drop(v_[l].get(), value_block, ids[i], ids[j - 1] + 1);
      if (!ks_.empty()) {
        drop(ks_[l].get(), scale_block, ids[i], ids[j - 1] + 1);
        drop(vs_[l].get(), scale_block, ids[i], ids[j - 1] + 1);
      }
    }
    i = j;
  }
}

Result<std::unique_ptr<HostKvStorage>> HostKvStorage::create(const KvLayout& layout, size_t num_blocks) {
  RAGD_RETURN_IF_ERROR(layout.validate());
  if (num_blocks == 0 || num_blocks > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("KvStorage: num_blocks must be in [1, 2^31), got " + std::to_string(num_blocks));
  }
  return std::unique_ptr<HostKvStorage>(new HostKvStorage(layout, num_blocks));
}

void HostKvStorage::copy_block(int32_t dst, int32_t src) {
  const size_t bb = layout().block_floats() * value_bytes();
  const size_t sb = static_cast<size_t>(layout().block_size) * layout().num_kv_heads;
  for (int l = 0; l < layout().num_layers; ++l) {
    std::memcpy(k_[l].get() + bb * dst, k_[l].get() + bb * src, bb);
    std::memcpy(v_[l].get() + bb * dst, v_[l].get() + bb * src, bb);
    if (!ks_.empty()) {
      std::memcpy(ks_[l].get() + sb * dst, ks_[l].get() + sb * src, sb * sizeof(float));
      std::memcpy(vs_[l].get() + sb * dst, vs_[l].get() + sb * src, sb * sizeof(float));
    }
  }
}

void HostKvStorage::read(int layer, int32_t block, int slot, int n, float* k, float* v) const {
  RAGD_CHECK(slot >= 0 && n >= 0 && slot + n <= layout().block_size) << "read of slots [" << slot << ", " << slot + n
                                                                      << ") of a block";
  const size_t e = layout().block_floats() * block + static_cast<size_t>(slot) * layout().token_floats();
  const size_t count = static_cast<size_t>(n) * layout().token_floats();
  const int hd = layout().head_dim;
  const float* ks = ks_.empty() ? nullptr : ks_[layer].get() + e / hd;
  const float* vs = vs_.empty() ? nullptr : vs_[layer].get() + e / hd;
  kernels::kv_load_values(layout().dtype, count, hd, k_[layer].get() + e * value_bytes(), ks, k);
  kernels::kv_load_values(layout().dtype, count, hd, v_[layer].get() + e * value_bytes(), vs, v);
}

void HostKvStorage::store(int layer, int32_t block, int slot, int rows, const float* k, const float* v,
                          size_t stride) {
  RAGD_CHECK(slot >= 0 && rows >= 0 && slot + rows <= layout().block_size)
      << "write of slots [" << slot << ", " << slot + rows << ") of a block";
  const size_t e = layout().block_floats() * block + static_cast<size_t>(slot) * layout().token_floats();
  const int kvh = layout().num_kv_heads, hd = layout().head_dim;
  float* ks = ks_.empty() ? nullptr : ks_[layer].get() + e / hd;
  float* vs = vs_.empty() ? nullptr : vs_[layer].get() + e / hd;
  kernels::kv_store_rows(layout().dtype, rows, kvh, hd, k, stride, k_[layer].get() + e * value_bytes(), ks);
  kernels::kv_store_rows(layout().dtype, rows, kvh, hd, v, stride, v_[layer].get() + e * value_bytes(), vs);
}

void HostKvStorage::write(int layer, int32_t block, int slot, int n, const float* k, const float* v) {
  store(layer, block, slot, n, k, v, layout().token_floats());
}

}  // namespace ragd::engine
