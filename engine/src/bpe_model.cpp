// BPE merge loop: a min-heap of adjacent pairs keyed by (merge rank, position) over a doubly linked
// list of symbols; stale heap entries are skipped when popped. O(n log n) per pre-token.
#include "bpe_model.h"

#include <fmt/format.h>

#include <queue>

namespace ragd::engine::bpe {

namespace {

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

struct ByteTables {
  std::array<std::string, 256> to_unicode;
  std::array<int16_t, 512> from_cp;  // code point -> byte, -1 when unmapped (all mapped cps < 512)
  ByteTables() {
    from_cp.fill(-1);
    uint32_t next = 256;
    for (int b = 0; b < 256; ++b) {
      const bool keep = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      const uint32_t cp = keep ? static_cast<uint32_t>(b) : next++;
      append_utf8(cp, &to_unicode[b]);
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

size_t utf8_char_len(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t n;
  uint32_t cp;
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) { n = 2; cp = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { n = 3; cp = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { n = 4; cp = c & 0x07; }
  else return 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if ((cc & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (cc & 0x3F);
  }
  if ((n == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) || (n == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
    return 1;
  return n;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const size_t n = utf8_char_len(s, i);
    if (n == 1 && static_cast<unsigned char>(s[i]) >= 0x80) {
      out += "\xEF\xBF\xBD";
    } else {
      out.append(s.data() + i, n);
    }
    i += n;
  }
  return out;
}

bool unicode_to_bytes(std::string_view token, std::string* out) {
  const auto& from = tables().from_cp;
  out->clear();
  for (size_t i = 0; i < token.size();) {
    const size_t n = utf8_char_len(token, i);
    uint32_t cp = static_cast<unsigned char>(token[i]);
    if (n > 1) {
      cp &= (0xFF >> (n + 1));
      for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(token[i + k]) & 0x3F);
    }
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
