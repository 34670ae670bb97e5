#include "ragd/engine/kv_cache.h"

#include <algorithm>
#include <string>

#include "ragd/common/check.h"

namespace ragd::engine {

// ---- KvPool -------------------------------------------------------------------------------------

KvPool::KvPool(std::unique_ptr<KvStorage> storage) : storage_(std::move(storage)) {
  const size_t num_blocks = storage_->num_blocks();
  refcount_.assign(num_blocks, 0);
  free_.reserve(num_blocks);
  // Pop from the back: hand out low block ids first.
  for (size_t b = num_blocks; b > 0; --b) free_.push_back(static_cast<int32_t>(b - 1));
}

Result<std::unique_ptr<KvPool>> KvPool::create(const KvLayout& layout, size_t num_blocks) {
  auto storage = HostKvStorage::create(layout, num_blocks);
  if (!storage.ok()) return storage.status().with_context("KvPool");
  return create(std::move(storage).value());
}

Result<std::unique_ptr<KvPool>> KvPool::create(std::unique_ptr<KvStorage> storage) {
  if (storage == nullptr) return Status::InvalidArgument("KvPool: no storage");
  RAGD_RETURN_IF_ERROR(storage->layout().validate().with_context("KvPool"));
  if (storage->num_blocks() == 0 || storage->num_blocks() > static_cast<size_t>(INT32_MAX)) {
    return Status::InvalidArgument("KvPool: num_blocks must be in [1, 2^31), got " +
                                   std::to_string(storage->num_blocks()));
  }
  return std::unique_ptr<KvPool>(new KvPool(std::move(storage)));
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

// ---- BlockTable ---------------------------------------------------------------------------------

namespace {
int blocks_for(int tokens, int bs) { return (tokens + bs - 1) / bs; }

// Distinct block indices of `slots`, ascending.
std::vector<int> block_indices(std::span<const int32_t> slots, int bs) {
  std::vector<int> idx;
  idx.reserve(slots.size());
  for (int32_t s : slots) idx.push_back(s / bs);
  std::sort(idx.begin(), idx.end());
  idx.erase(std::unique(idx.begin(), idx.end()), idx.end());
  return idx;
}
}  // namespace

bool BlockTable::needs_cow(const KvPool& pool) const {
  const int bs = pool.layout().block_size;
  if (num_tokens_ % bs == 0) return false;  // the next write starts a fresh block
  const int32_t last = blocks_[num_tokens_ / bs];
  return pool.refcount(last) > 1;
}

void BlockTable::copy_on_write(KvPool& pool, int idx) {
  const int32_t old = blocks_[idx];
  const std::optional<int32_t> fresh = pool.allocate();
  RAGD_CHECK(fresh.has_value()) << "copy-on-write without a free block (reserve checks first)";
  pool.storage().copy_block(*fresh, old);
  pool.release(old);
  blocks_[idx] = *fresh;
}

void BlockTable::normalize_positions() {
  for (size_t i = 0; i < positions_.size(); ++i) {
    if (positions_[i] != static_cast<int32_t>(i)) return;
  }
  positions_.clear();
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
  if (needs_cow(pool)) copy_on_write(pool, num_tokens_ / bs);
  while (static_cast<int>(blocks_.size()) < blocks_for(num_tokens_ + n, bs)) blocks_.push_back(*pool.allocate());
  reserved_ = std::max(reserved_, num_tokens_ + n);
  return true;
}

void BlockTable::commit(int n) {
  RAGD_CHECK(n >= 0 && num_tokens_ + n <= reserved_) << "commit of " << n << " tokens beyond the reservation ("
                                                     << num_tokens_ << " + " << n << " > " << reserved_ << ")";
  if (!positions_.empty()) {
    for (int i = 0; i < n; ++i) positions_.push_back(num_tokens_ + i);
  }
  num_tokens_ += n;
}

int BlockTable::blocks_needed(const KvPool& pool, std::span<const int32_t> slots) const {
  if (slots.empty()) return 0;
  const int bs = pool.layout().block_size;
  const int32_t max_slot = *std::max_element(slots.begin(), slots.end());
  const int have = static_cast<int>(blocks_.size());
  int need = std::max(0, blocks_for(max_slot + 1, bs) - have);
  for (int idx : block_indices(slots, bs)) {
    if (idx < have && pool.refcount(blocks_[idx]) > 1) ++need;
  }
  return need;
}

bool BlockTable::reserve_slots(KvPool& pool, std::span<const int32_t> slots) {
  if (slots.empty()) return true;
  for (int32_t s : slots) RAGD_CHECK(s >= 0) << "reserve of slot " << s;
  if (static_cast<size_t>(blocks_needed(pool, slots)) > pool.free_blocks()) return false;
  const int bs = pool.layout().block_size;
  const int have = static_cast<int>(blocks_.size());
  for (int idx : block_indices(slots, bs)) {
    if (idx < have && pool.refcount(blocks_[idx]) > 1) copy_on_write(pool, idx);
  }
  const int32_t max_slot = *std::max_element(slots.begin(), slots.end());
  while (static_cast<int>(blocks_.size()) < blocks_for(max_slot + 1, bs)) blocks_.push_back(*pool.allocate());
  reserved_ = std::max(reserved_, max_slot + 1);
  return true;
}

void BlockTable::commit_slots(std::span<const int32_t> slots, std::span<const int32_t> positions) {
  RAGD_CHECK(slots.size() == positions.size()) << "commit_slots: " << slots.size() << " slots, " << positions.size()
                                               << " positions";
  if (slots.empty()) return;
  int new_len = num_tokens_;
  bool identity = positions_.empty();
  int appended = 0;  // slots at or past the old end
  for (size_t i = 0; i < slots.size(); ++i) {
    RAGD_CHECK(slots[i] >= 0 && slots[i] < reserved_) << "commit of slot " << slots[i] << " beyond the reservation (" << reserved_
                                     << ")";
    new_len = std::max(new_len, slots[i] + 1);
    if (positions[i] != slots[i]) identity = false;
    if (slots[i] >= num_tokens_) ++appended;
  }
  // Distinct slots (checked by the caller): every new slot written exactly once means no holes.
  if (identity && appended == new_len - num_tokens_) {
    num_tokens_ = new_len;
    return;
  }
  if (positions_.empty()) {
    positions_.resize(num_tokens_);
    for (int i = 0; i < num_tokens_; ++i) positions_[i] = i;
  }
  positions_.resize(new_len, kNoPosition);
  for (size_t i = 0; i < slots.size(); ++i) positions_[slots[i]] = positions[i];
  num_tokens_ = new_len;
  normalize_positions();
}

void BlockTable::set_positions(int slot0, std::span<const int32_t> pos) {
  const int n = static_cast<int>(pos.size());
  RAGD_CHECK(slot0 >= 0 && slot0 + n <= num_tokens_) << "set_positions of slots [" << slot0 << ", " << slot0 + n
                                                      << ") of " << num_tokens_;
  if (n == 0) return;
  if (positions_.empty()) {
    positions_.resize(num_tokens_);
    for (int i = 0; i < num_tokens_; ++i) positions_[i] = i;
  }
  std::copy(pos.begin(), pos.end(), positions_.begin() + slot0);
  normalize_positions();
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
  if (!positions_.empty()) {
    t.positions_.assign(positions_.begin(), positions_.begin() + n);
    t.normalize_positions();
  }
  return t;
}

int BlockTable::range_base(const KvPool& pool, int begin) {
  const int bs = pool.layout().block_size;
  return begin / bs * bs;
}

BlockTable BlockTable::fork_range(KvPool& pool, int begin, int end) const {
  RAGD_CHECK(begin >= 0 && begin <= end && end <= num_tokens_)
      << "fork_range(" << begin << ", " << end << ") of a table with " << num_tokens_ << " tokens";
  const int bs = pool.layout().block_size;
  const int base = range_base(pool, begin);
  BlockTable t;
  for (int i = base / bs, nb = blocks_for(end, bs); i < nb; ++i) {
    pool.retain(blocks_[i]);
    t.blocks_.push_back(blocks_[i]);
  }
  t.num_tokens_ = end - base;
  t.reserved_ = t.num_tokens_;
  if (!positions_.empty()) {
    t.positions_.assign(positions_.begin() + base, positions_.begin() + end);
    t.normalize_positions();
  } else if (base > 0) {
    t.positions_.resize(end - base);
    for (int i = 0; i < end - base; ++i) t.positions_[i] = base + i;
  }
  return t;
}

void BlockTable::append_shared(KvPool& pool, const BlockTable& src, int from, int n) {
  const int bs = pool.layout().block_size;
  RAGD_CHECK(from >= 0 && n >= 0 && from + n <= src.num_tokens_)
      << "append_shared of slots [" << from << ", " << from + n << ") of a table with " << src.num_tokens_;
  RAGD_CHECK(from % bs == num_tokens_ % bs) << "append_shared: slot " << from << " does not line up with slot " << num_tokens_;
  RAGD_CHECK(reserved_ == num_tokens_) << "append_shared with " << reserved_ - num_tokens_ << " tokens reserved";
  if (n == 0) return;
  int i = from / bs;
  if (num_tokens_ % bs != 0) {  // the partial last block: src's copy of it holds the same earlier slots
    pool.retain(src.blocks_[i]);
    pool.release(blocks_.back());
    blocks_.back() = src.blocks_[i];
    ++i;
  }
  for (const int nb = blocks_for(from + n, bs); i < nb; ++i) {
    pool.retain(src.blocks_[i]);
    blocks_.push_back(src.blocks_[i]);
  }
  const int old = num_tokens_;
  num_tokens_ += n;
  reserved_ = num_tokens_;
  // Positions stay implicit while the appended slots hold their own slot numbers (a path joined
  // node by node: O(n) per call, not O(the table)); otherwise they become explicit. A table with
  // explicit positions never turns into the identity by appending (normalize_positions would have
  // cleared an identity prefix), so no normalization is needed.
  bool implicit = positions_.empty();
  for (int k = 0; implicit && k < n; ++k) implicit = src.position(from + k) == old + k;
  if (implicit) return;
  if (positions_.empty()) {
    positions_.resize(old);
    for (int k = 0; k < old; ++k) positions_[k] = k;
  }
  positions_.resize(num_tokens_);
  for (int k = 0; k < n; ++k) positions_[old + k] = src.position(from + k);
}

void BlockTable::truncate(KvPool& pool, int n) {
  RAGD_CHECK(n >= 0) << "truncate to " << n;
  if (n >= num_tokens_) return;
  num_tokens_ = n;
  reserved_ = n;
  if (!positions_.empty()) {
    positions_.resize(n);
    normalize_positions();
  }
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
  positions_.clear();
}

void BlockTable::read(const KvPool& pool, int layer, int t0, int n, float* k_dst, float* v_dst) const {
  RAGD_CHECK(t0 >= 0 && n >= 0 && t0 + n <= num_tokens_) << "read [" << t0 << ", " << t0 + n << ") of " << num_tokens_;
  pool.storage().read_tokens(layer, blocks_, t0, n, k_dst, v_dst);
}

void BlockTable::read_all_layers(const KvPool& pool, int t0, int n, float* k_dst, float* v_dst) const {
  RAGD_CHECK(t0 >= 0 && n >= 0 && t0 + n <= num_tokens_) << "read [" << t0 << ", " << t0 + n << ") of " << num_tokens_;
  pool.storage().read_tokens_all_layers(blocks_, t0, n, k_dst, v_dst);
}

void BlockTable::check_writable(const KvPool& pool, int t0, int n) const {
  const KvLayout& lay = pool.layout();
  RAGD_CHECK(t0 >= 0 && n >= 0 && t0 + n <= static_cast<int>(blocks_.size()) * lay.block_size)
      << "write [" << t0 << ", " << t0 + n << ") beyond reserved blocks";
  for (int b = t0 / lay.block_size; n > 0 && b <= (t0 + n - 1) / lay.block_size; ++b) {
    RAGD_CHECK(pool.refcount(blocks_[b]) == 1) << "write into shared block " << blocks_[b]
                                               << " (reserve() copies it first)";
  }
}

void BlockTable::write(KvPool& pool, int layer, int t0, int n, const float* k_src, const float* v_src) {
  check_writable(pool, t0, n);
  pool.storage().write_tokens(layer, blocks_, t0, n, k_src, v_src);
}

bool BlockTable::append(KvPool& pool, int n, const float* k_src, const float* v_src) {
  return append_with(pool, n, [&](KvStorage& st, std::span<const int32_t> blocks, int t0) {
    st.write_tokens_all_layers(blocks, t0, n, k_src, v_src);
  });
}

bool BlockTable::append_with(KvPool& pool, int n,
                             const std::function<void(KvStorage&, std::span<const int32_t>, int)>& write) {
  if (!reserve(pool, n)) return false;
  check_writable(pool, num_tokens_, n);
  write(pool.storage(), blocks_, num_tokens_);
  commit(n);
  return true;
}

}  // namespace ragd::engine
