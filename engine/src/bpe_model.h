// BpeModel: the vocabulary and merge table of a BPE tokenizer and the merge loop that turns one
// pre-token into ids. Private to the engine (tokenizer.cpp, bpe_trainer.cpp).
// Thread-safety: immutable after construction; apply() is safe from any thread.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "ragd/common/utf8.h"  // utf8_char_len, sanitize_utf8

namespace ragd::engine::bpe {

// GPT-2's reversible byte <-> printable-unicode mapping used by byte-level BPE vocabularies:
// bytes 33..126, 161..172, 174..255 stand for themselves, the other 68 map to U+0100 onwards.
const std::array<std::string, 256>& byte_to_unicode();  // UTF-8 text of each byte's symbol
// Inverse over a token string; false when it contains a character outside the mapping.
bool unicode_to_bytes(std::string_view token, std::string* out);

// Transparent hash: unordered_map<std::string, ...> lookups by string_view without a copy.
struct StringHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>()(s); }
};

struct MergeRule {
  int32_t rank = 0;
  int32_t merged = 0;
};

class BpeModel {
 public:
  // Initial symbols of a piece: ids of its bytes (byte-level) or of its characters, with byte
  // fallback (<0xNN>) or unk for characters outside the vocabulary.
  struct Options {
    bool byte_level = true;
    bool byte_fallback = false;
    bool ignore_merges = false;  // a piece that is itself a vocabulary entry maps to that entry
    int32_t unk_id = -1;         // -1: unknown characters are dropped
    bool fuse_unk = false;
  };

  BpeModel() = default;
  void set_options(const Options& o) { opts_ = o; }
  const Options& options() const { return opts_; }

  // `key` is the lookup form of a token: raw bytes for byte-level vocabularies, the token string
  // otherwise.
  void add_token(int32_t id, std::string key);
  void add_merge(int32_t left, int32_t right, int32_t merged);  // rank = insertion order
  void reserve(size_t tokens, size_t merges) {
    key_to_id_.reserve(tokens);
    merges_.reserve(merges);
  }
  // Call once after all tokens are added: resolves byte symbols and <0xNN> fallbacks.
  void finalize();

  int32_t find(std::string_view key) const {
    auto it = key_to_id_.find(key);
    return it == key_to_id_.end() ? -1 : it->second;
  }
  // Appends the ids of one pre-token (raw bytes after normalization) to out.
  void apply(std::string_view piece, std::vector<int32_t>* out) const;

 private:
  void initial_symbols(std::string_view piece, std::vector<int32_t>* syms) const;

  Options opts_;
  std::unordered_map<std::string, int32_t, StringHash, std::equal_to<>> key_to_id_;
  std::unordered_map<uint64_t, MergeRule> merges_;
  std::array<int32_t, 256> byte_id_{};      // byte-level: id of each byte's symbol (-1 if absent)
  std::array<int32_t, 256> fallback_id_{};  // <0xNN> token ids (-1 if absent)
};

}  // namespace ragd::engine::bpe
