// StreamDecoder: emits decoded text as soon as it forms complete UTF-8 characters. Invalid bytes
// become U+FFFD exactly as Tokenizer::decode renders them, so the concatenation of push() outputs
// and flush() equals decode() of the same ids.
#include "ragd/engine/tokenizer.h"

#include "ragd/common/utf8.h"

namespace ragd::engine {

namespace {

// True when s[i..] is a proper prefix of a valid UTF-8 sequence (more bytes could complete it).
bool incomplete_prefix(std::string_view s, size_t i) {
  const auto c = static_cast<unsigned char>(s[i]);
  size_t need;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) need = 2;
  else if (c >= 0xE0 && c <= 0xEF) {
    need = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    need = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  const size_t have = s.size() - i;
  if (have >= need) return false;
  for (size_t k = 1; k < have; ++k) {
    const auto cc = static_cast<unsigned char>(s[i + k]);
    if (k == 1 ? (cc < lo || cc > hi) : (cc & 0xC0) != 0x80) return false;
  }
  return true;
}

}  // namespace

std::string StreamDecoder::push(int32_t id) {
  if (id < 0 || id >= tok_.vocab_size()) return {};
  if (skip_special_ && tok_.is_special(id)) return {};
  std::string b = tok_.token_bytes(id);
  if (!started_) {
    started_ = true;
    size_t k = 0;
    while (k < b.size() && k < static_cast<size_t>(tok_.leading_strip()) && b[k] == ' ') ++k;
    b.erase(0, k);
  }
  pending_ += b;
  std::string out;
  size_t i = 0;
  while (i < pending_.size()) {
    const auto c = static_cast<unsigned char>(pending_[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
      continue;
    }
    const size_t n = utf8_char_len(pending_, i);
    if (n > 1) {
      out.append(pending_, i, n);
      i += n;
    } else if (incomplete_prefix(pending_, i)) {
      break;  // wait for the rest of the character
    } else {
      out += "\xEF\xBF\xBD";
      ++i;
    }
  }
  pending_.erase(0, i);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out = sanitize_utf8(pending_);
  pending_.clear();
  return out;
}

}  // namespace ragd::engine
