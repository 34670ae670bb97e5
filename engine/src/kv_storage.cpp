#include "ragd/engine/kv_storage.h"

#include <cstring>
#include <string>

#include "ragd/common/check.h"

namespace ragd::engine {

Status KvLayout::validate() const {
  if (num_layers <= 0 || num_kv_heads <= 0 || head_dim <= 0 || block_size <= 0) {
    return Status::InvalidArgument("KvLayout: needs positive num_layers, num_kv_heads, head_dim and block_size (got " +
                                   std::to_string(num_layers) + ", " + std::to_string(num_kv_heads) + ", " +
                                   std::to_string(head_dim) + ", " + std::to_string(block_size) + ")");
  }
  return Status::OK();
}

HostKvStorage::HostKvStorage(const KvLayout& layout, size_t num_blocks) : KvStorage(layout, num_blocks) {
  // Zeroed here, so every page is mapped before serving: a block's first write on the prefill path
  // takes no page fault (with cached KV holding blocks, new requests keep reaching fresh ones).
  const size_t floats = layout.block_floats() * num_blocks;
  for (int l = 0; l < layout.num_layers; ++l) {
    k_.emplace_back(new float[floats]());
    v_.emplace_back(new float[floats]());
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
  const size_t bf = layout().block_floats();
  for (int l = 0; l < layout().num_layers; ++l) {
    std::memcpy(k_[l].get() + bf * dst, k_[l].get() + bf * src, bf * sizeof(float));
    std::memcpy(v_[l].get() + bf * dst, v_[l].get() + bf * src, bf * sizeof(float));
  }
}

void HostKvStorage::read(int layer, int32_t block, int slot, int n, float* k, float* v) const {
  RAGD_CHECK(slot >= 0 && n >= 0 && slot + n <= layout().block_size) << "read of slots [" << slot << ", " << slot + n
                                                                      << ") of a block";
  const size_t off = layout().block_floats() * block + static_cast<size_t>(slot) * layout().token_floats();
  const size_t len = static_cast<size_t>(n) * layout().token_floats() * sizeof(float);
  std::memcpy(k, k_[layer].get() + off, len);
  std::memcpy(v, v_[layer].get() + off, len);
}

void HostKvStorage::write(int layer, int32_t block, int slot, int n, const float* k, const float* v) {
  RAGD_CHECK(slot >= 0 && n >= 0 && slot + n <= layout().block_size) << "write of slots [" << slot << ", "
                                                                      << slot + n << ") of a block";
  const size_t off = layout().block_floats() * block + static_cast<size_t>(slot) * layout().token_floats();
  const size_t len = static_cast<size_t>(n) * layout().token_floats() * sizeof(float);
  std::memcpy(k_[layer].get() + off, k, len);
  std::memcpy(v_[layer].get() + off, v, len);
}

}  // namespace ragd::engine
