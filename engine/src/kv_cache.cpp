#include "ragd/engine/kv_cache.h"

#include <algorithm>
#include <cstring>
#include <string>

#include "ragd/common/check.h"

namespace ragd::engine {

// ---- KvPool -------------------------------------------------------------------------------------

KvPool::KvPool(const KvLayout& layout, size_t num_blocks) : layout_(layout) {
  const size_t floats = layout.block_floats() * num_blocks;
  for (int l = 0; l < layout.num_layers; ++l) {
    k_.emplace_back(new float[floats]);
    v_.emplace_back(new float[floats]);
  }
  refcount_.assign(num_blocks, 0);
  free_.reserve(num_blocks);
  // Pop from the back: hand out low block ids first.
  for (size_t b = num_blocks; b > 0; --b) free_.push_back(static_cast<int32_t>(b - 1));
}

Result<std::unique_ptr<KvPool>> KvPool::create(const KvLayout& layout, size_t num_blocks) {
  if (layout.num_layers <= 0 || layout.num_kv_heads <= 0 || layout.head_dim <= 0 || layout.block_size <= 0) {
    return Status::InvalidArgument("KvPool: layout needs positive num_layers, num_kv_heads, head_dim and block_size "
                                   "(got " + std::to_string(layout.num_layers) + ", " +
                                   std::to_string(layout.num_kv_heads) + ", " + std::to_string(layout.head_dim) +
                                   ", " + std::to_string(layout.block_size) + ")");
  }
  if (num_blocks == 0 || num_blocks > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("KvPool: num_blocks must be in [1, 2^31), got " + std::to_string(num_blocks));
  }
  return std::unique_ptr<KvPool>(new KvPool(layout, num_blocks));
}

size_t KvPool::bytes() const {
  return 2 * sizeof(float) * layout_.block_floats() * num_blocks() * static_cast<size_t>(layout_.num_layers);
}

std::optional<int32_t> KvPool::allocate() {
  if (free_.empty()) return std::nullopt;
  const int32_t b = free_.back();
  free_.pop_back();
  refcount_[b] = 1;
  return b;
}

void KvPool::retain(int32_t block) {
  RAGD_CHECK(block >= 0 && static_cast<size_t>(block) < refcount_.size() && refcount_[block] > 0)
      << "retain of free or invalid block " << block;
  ++refcount_[block];
}

void KvPool::release(int32_t block) {
  RAGD_CHECK(block >= 0 && static_cast<size_t>(block) < refcount_.size() && refcount_[block] > 0)
      << "release of free or invalid block " << block;
  if (--refcount_[block] == 0) free_.push_back(block);
}

float* KvPool::k(int layer, int32_t block) { return k_[layer].get() + layout_.block_floats() * block; }
float* KvPool::v(int layer, int32_t block) { return v_[layer].get() + layout_.block_floats() * block; }
const float* KvPool::k(int layer, int32_t block) const { return k_[layer].get() + layout_.block_floats() * block; }
const float* KvPool::v(int layer, int32_t block) const { return v_[layer].get() + layout_.block_floats() * block; }

// ---- BlockTable ---------------------------------------------------------------------------------

namespace {
int blocks_for(int tokens, int bs) { return (tokens + bs - 1) / bs; }
}  // namespace

bool BlockTable::needs_cow(const KvPool& pool) const {
  const int bs = pool.layout().block_size;
  if (num_tokens_ % bs == 0) return false;  // the next write starts a fresh block
  const int32_t last = blocks_[num_tokens_ / bs];
  return pool.refcount(last) > 1;
}

int BlockTable::blocks_needed(const KvPool& pool, int n) const {
  const int bs = pool.layout().block_size;
  const int have = static_cast<int>(blocks_.size());
  const int want = blocks_for(num_tokens_ + n, bs);
  return std::max(0, want - have) + (n > 0 && needs_cow(pool) ? 1 : 0);
}

bool BlockTable::reserve(KvPool& pool, int n) {
  RAGD_CHECK(n >= 0) << "reserve of " << n << " tokens";
  if (n == 0) return true;
  if (static_cast<size_t>(blocks_needed(pool, n)) > pool.free_blocks()) return false;
  const int bs = pool.layout().block_size;
  if (needs_cow(pool)) {
    const int idx = num_tokens_ / bs;
    const int32_t old = blocks_[idx];
    const int32_t fresh = *pool.allocate();
    const size_t bf = pool.layout().block_floats();
    for (int l = 0; l < pool.layout().num_layers; ++l) {
      std::memcpy(pool.k(l, fresh), pool.k(l, old), bf * sizeof(float));
      std::memcpy(pool.v(l, fresh), pool.v(l, old), bf * sizeof(float));
    }
    pool.release(old);
    blocks_[idx] = fresh;
  }
  while (static_cast<int>(blocks_.size()) < blocks_for(num_tokens_ + n, bs)) blocks_.push_back(*pool.allocate());
  reserved_ = std::max(reserved_, num_tokens_ + n);
  return true;
}

void BlockTable::commit(int n) {
  RAGD_CHECK(n >= 0 && num_tokens_ + n <= reserved_) << "commit of " << n << " tokens beyond the reservation ("
                                                     << num_tokens_ << " + " << n << " > " << reserved_ << ")";
  num_tokens_ += n;
}

BlockTable BlockTable::fork(KvPool& pool) const { return fork_prefix(pool, num_tokens_); }

BlockTable BlockTable::fork_prefix(KvPool& pool, int n) const {
  RAGD_CHECK(n >= 0 && n <= num_tokens_) << "fork_prefix(" << n << ") of a table with " << num_tokens_ << " tokens";
  BlockTable t;
  const int nb = blocks_for(n, pool.layout().block_size);
  for (int i = 0; i < nb; ++i) {
    pool.retain(blocks_[i]);
    t.blocks_.push_back(blocks_[i]);
  }
  t.num_tokens_ = n;
  t.reserved_ = n;
  return t;
}

void BlockTable::truncate(KvPool& pool, int n) {
  RAGD_CHECK(n >= 0) << "truncate to " << n;
  if (n >= num_tokens_) return;
  num_tokens_ = n;
  reserved_ = n;
  const int nb = blocks_for(n, pool.layout().block_size);
  while (static_cast<int>(blocks_.size()) > nb) {
    pool.release(blocks_.back());
    blocks_.pop_back();
  }
}

void BlockTable::release(KvPool& pool) {
  for (int32_t b : blocks_) pool.release(b);
  blocks_.clear();
  num_tokens_ = 0;
  reserved_ = 0;
}

void BlockTable::read(const KvPool& pool, int layer, int t0, int n, float* k_dst, float* v_dst) const {
  RAGD_CHECK(t0 >= 0 && n >= 0 && t0 + n <= num_tokens_) << "read [" << t0 << ", " << t0 + n << ") of " << num_tokens_;
  const KvLayout& lay = pool.layout();
  const size_t tf = lay.token_floats();
  for (int i = 0; i < n; ++i) {
    const int t = t0 + i;
    const size_t off = static_cast<size_t>(t % lay.block_size) * tf;
    const int32_t b = blocks_[t / lay.block_size];
    std::memcpy(k_dst + i * tf, pool.k(layer, b) + off, tf * sizeof(float));
    std::memcpy(v_dst + i * tf, pool.v(layer, b) + off, tf * sizeof(float));
  }
}

void BlockTable::write(KvPool& pool, int layer, int t0, int n, const float* k_src, const float* v_src) {
  const KvLayout& lay = pool.layout();
  RAGD_CHECK(t0 >= 0 && n >= 0 && t0 + n <= static_cast<int>(blocks_.size()) * lay.block_size)
      << "write [" << t0 << ", " << t0 + n << ") beyond reserved blocks";
  const size_t tf = lay.token_floats();
  for (int i = 0; i < n; ++i) {
    const int t = t0 + i;
    const int32_t b = blocks_[t / lay.block_size];
    RAGD_CHECK(pool.refcount(b) == 1) << "write into shared block " << b << " (reserve() copies it first)";
    const size_t off = static_cast<size_t>(t % lay.block_size) * tf;
    std::memcpy(pool.k(layer, b) + off, k_src + i * tf, tf * sizeof(float));
    std::memcpy(pool.v(layer, b) + off, v_src + i * tf, tf * sizeof(float));
  }
}

bool BlockTable::append(KvPool& pool, int n, const float* k_src, const float* v_src) {
  if (!reserve(pool, n)) return false;
  const size_t per_layer = static_cast<size_t>(n) * pool.layout().token_floats();
  for (int l = 0; l < pool.layout().num_layers; ++l) {
    write(pool, l, num_tokens_, n, k_src + l * per_layer, v_src + l * per_layer);
  }
  commit(n);
  return true;
}

}  // namespace ragd::engine
