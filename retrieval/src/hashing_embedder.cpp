#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "ragd/common/hash.h"
#include "ragd/retrieval/embedder.h"

namespace ragd::retrieval {

namespace {

const std::unordered_set<std::string_view>& stop_words() {
  static const std::unordered_set<std::string_view> s = {
      "a", "an", "the", "and", "or", "but", "if", "of", "to", "in", "on", "at", "by", "for", "with",
      "from", "as", "is", "are", "was", "were", "be", "been", "being", "it", "its", "this", "that",
      "these", "those", "there", "their", "they", "them", "he", "she", "his", "her", "we", "our",
      "you", "your", "i", "me", "my", "not", "no", "so", "than", "then", "too", "very", "can",
      "will", "would", "should", "could", "do", "does", "did", "has", "have", "had", "which",
      "who", "whom", "what", "when", "where", "why", "how", "all", "any", "each", "also", "into",
      "about", "over", "such", "only", "own", "same", "other", "more", "most", "some", "up", "out"};
  return s;
}

// Folds common English plural endings so that "glaciers" and "glacier" are one feature:
// -ies -> -y, -sses -> -ss, -(sh|ch|x|z)es -> drop "es", -s -> drop (not -ss, -us, -is).
// Words shorter than 4 bytes are left alone.
std::string_view fold_plural(std::string_view w, std::string* buf) {
  const size_t n = w.size();
  if (n < 4 || w.back() != 's') return w;
  auto ends = [&](std::string_view suf) { return n >= suf.size() && w.substr(n - suf.size()) == suf; };
  if (ends("ss") || ends("us") || ends("is")) return w;
  if (ends("ies") && n > 4) {
    buf->assign(w.substr(0, n - 3));
    buf->push_back('y');
    return *buf;
  }
  if (ends("sses")) return w.substr(0, n - 2);
  if (ends("shes") || ends("ches") || ends("xes") || ends("zes")) return w.substr(0, n - 2);
  return w.substr(0, n - 1);
}

// Feature hash: index in [0, dim) and a sign, from one 64-bit xxh3.
struct Feature {
  uint32_t index;
  float sign;
};
Feature feature(uint64_t h, int dim) {
  return Feature{static_cast<uint32_t>(h % static_cast<uint64_t>(dim)), ((h >> 40) & 1) ? -1.0f : 1.0f};
}

class HashingEmbedder final : public Embedder {
 public:
  explicit HashingEmbedder(const HashingEmbedderOptions& o) : opts_(o) {}
  std::string_view name() const override { return "hashing"; }
  std::string identity() const override {
    return "hashing-v2/d=" + std::to_string(opts_.dim) + (opts_.bigrams ? "/uni+bi" : "/uni");
  }
  int dim() const override { return opts_.dim; }

  Status embed(std::span<const std::string_view> texts, std::vector<float>* out) const override {
    const size_t d = static_cast<size_t>(opts_.dim);
    out->assign(texts.size() * d, 0.0f);
    std::unordered_map<uint64_t, int> tf;
    for (size_t t = 0; t < texts.size(); ++t) {
      tf.clear();
      std::vector<std::string> words = hashing_words(texts[t]);
      std::string buf;
      for (auto& w : words) {
        std::string_view f = fold_plural(w, &buf);
        if (f.size() != w.size() || f.data() != w.data()) w = std::string(f);
      }
      const auto& stop = stop_words();
      for (size_t i = 0; i < words.size(); ++i) {
        if (!stop.count(words[i])) ++tf[xxh3_64(words[i].data(), words[i].size())];
        if (opts_.bigrams && i + 1 < words.size()) {
          std::string bi = words[i];
          bi.push_back('\x1f');
          bi += words[i + 1];
          ++tf[xxh3_64(bi.data(), bi.size())];
        }
      }
      float* row = out->data() + t * d;
      for (const auto& [h, n] : tf) {
        Feature f = feature(h, opts_.dim);
        row[f.index] += f.sign * (1.0f + std::log(static_cast<float>(n)));
      }
      double norm = 0;
      for (size_t k = 0; k < d; ++k) norm += static_cast<double>(row[k]) * row[k];
      if (norm > 0) {
        float inv = static_cast<float>(1.0 / std::sqrt(norm));
        for (size_t k = 0; k < d; ++k) row[k] *= inv;
      }
    }
    return Status::OK();
  }

 private:
  HashingEmbedderOptions opts_;
};

}  // namespace

std::vector<std::string> hashing_words(std::string_view text) {
  std::vector<std::string> words;
  std::string cur;
  for (size_t i = 0; i < text.size(); ++i) {
    unsigned char c = static_cast<unsigned char>(text[i]);
    bool word_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c >= 0x80;
    if (word_char) {
      cur.push_back(static_cast<char>((c >= 'A' && c <= 'Z') ? c + 32 : c));
    } else if (c == '\'' && !cur.empty() && i + 1 < text.size() && std::isalpha(static_cast<unsigned char>(text[i + 1]))) {
      // don't, it's: keep the word whole
      cur.push_back('\'');
    } else if (!cur.empty()) {
      words.push_back(std::move(cur));
      cur.clear();
    }
  }
  if (!cur.empty()) words.push_back(std::move(cur));
  return words;
}

Result<std::unique_ptr<Embedder>> make_hashing_embedder(const HashingEmbedderOptions& opts) {
  if (opts.dim < 16 || opts.dim > 65536)
    return Status::InvalidArgument("hashing embedder: dim must be in [16, 65536], got " + std::to_string(opts.dim));
  return std::unique_ptr<Embedder>(new HashingEmbedder(opts));
}

}  // namespace ragd::retrieval
