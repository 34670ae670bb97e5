// BPE merge loop: a min-heap of adjacent pairs keyed by (merge rank, position) over a doubly linked
// list of symbols; stale heap entries are skipped when popped. O(n log n) per pre-token.
#include "bpe_model.h"

#include <fmt/format.h>

#include <queue>

namespace ragd::engine::bpe {

namespace {

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_cp;  // code point -> byte, -1 when unmapped (all mapped cps < 512)
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = keep ? static_cast<uint32_t>(b) : next++;
      append_utf8(to_unicode[b], cp);
      from_cp[cp] = static_cast<uint8_t>(b);
    }
  }
};

const ByteTables& tables() {
  static const ByteTables t;
  return t;
}

}  // namespace

const std::array<std::string, 256>& byte_to_unicode() { return tables().to_unicode; }

bool unicode_to_bytes(std::string_view token, std::string* out) {
  const auto& from = tables().from_cp;
  out->clear();
  for (size_t i = 0; i < token.size();) {
    size_t n;
    const char32_t c = utf8_decode_at(token, i, &n);
    const uint32_t cp = n == 1 ? static_cast<unsigned char>(token[i]) : c;  // an invalid byte stands for itself
    if (cp >= from.size() || from[cp] < 0) return false;
    out->push_back(static_cast<char>(from[cp]));
    i += n;
  }
  return true;
}

void BpeModel::add_token(int32_t id, std::string key) { key_to_id_.emplace(std::move(key), id); }

void BpeModel::add_merge(int32_t left, int32_t right, int32_t merged) {
  const uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) | static_cast<uint32_t>(right);
  merges_.emplace(k, MergeRule{static_cast<int32_t>(merges_.size()), merged});
}

void BpeModel::finalize() {
  for (int b = 0; b < 256; ++b) {
    byte_id_[b] = find(std::string(1, static_cast<char>(b)));
    fallback_id_[b] = find(fmt::format("<0x{:02X}>", b));
  }
}

void BpeModel::initial_symbols(std::string_view piece, std::vector<int32_t>* syms) const {
  if (opts_.byte_level) {
    for (unsigned char c : piece)
      if (byte_id_[c] >= 0) syms->push_back(byte_id_[c]);
    return;
  }
  for (size_t i = 0; i < piece.size();) {
    const size_t n = utf8_char_len(piece, i);
    const int32_t id = find(piece.substr(i, n));
    if (id >= 0) {
      syms->push_back(id);
    } else if (opts_.byte_fallback && fallback_id_[static_cast<unsigned char>(piece[i])] >= 0) {
      for (size_t k = 0; k < n; ++k) syms->push_back(fallback_id_[static_cast<unsigned char>(piece[i + k])]);
    } else if (opts_.unk_id >= 0) {
      if (!(opts_.fuse_unk && !syms->empty() && syms->back() == opts_.unk_id)) syms->push_back(opts_.unk_id);
    }
    i += n;
  }
}

void BpeModel::apply(std::string_view piece, std::vector<int32_t>* out) const {
  if (piece.empty()) return;
  if (opts_.ignore_merges) {
    const int32_t whole = find(piece);
    if (whole >= 0) {
      out->push_back(whole);
      return;
    }
  }
  std::vector<int32_t> ids;
  ids.reserve(piece.size());
  initial_symbols(piece, &ids);
  const int n = static_cast<int>(ids.size());
  if (n <= 1 || merges_.empty()) {
    out->insert(out->end(), ids.begin(), ids.end());
    return;
  }
  std::vector<int> prev(n), next(n);
  for (int i = 0; i < n; ++i) {
    prev[i] = i - 1;
    next[i] = i + 1 < n ? i + 1 : -1;
  }
  struct Cand {
    int32_t rank;
    int pos;
    int32_t left, right, merged;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto push = [&](int i) {
    if (i < 0 || next[i] < 0) return;
    const int j = next[i];
    const uint64_t k = (static_cast<uint64_t>(static_cast<uint32_t>(ids[i])) << 32) | static_cast<uint32_t>(ids[j]);
    auto it = merges_.find(k);
    if (it != merges_.end()) heap.push({it->second.rank, i, ids[i], ids[j], it->second.merged});
  };
  for (int i = 0; i + 1 < n; ++i) push(i);
  std::vector<char> alive(n, 1);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const int i = c.pos;
    if (!alive[i] || next[i] < 0) continue;
    const int j = next[i];
    if (ids[i] != c.left || ids[j] != c.right) continue;  // stale
    ids[i] = c.merged;
    alive[j] = 0;
    next[i] = next[j];
    if (next[j] >= 0) prev[next[j]] = i;
    push(prev[i]);
    push(i);
  }
  for (int i = 0; i >= 0; i = next[i]) out->push_back(ids[i]);
}

}  // namespace ragd::engine::bpe
