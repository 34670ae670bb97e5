// Test helpers for retrieval: a small word-level tokenizer with a fixed vocabulary (so token ids
// and token_bytes are pure functions), synthetic text, temp directories.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "ragd/engine/tokenizer.h"
#include "ragd/retrieval/corpus.h"

namespace ragd::retrieval::testing {

// Tokens: " word" / "word" when the word is in the vocabulary, otherwise one token per byte;
// every other byte (punctuation, whitespace) is its own token. Ids 0..255 are bytes, then words,
// then space-prefixed words. Concatenating token_bytes() of an encoding gives the text back.
class WordTokenizer final : public engine::Tokenizer {
 public:
  explicit WordTokenizer(const std::vector<std::string>& words) {
    for (int b = 0; b < 256; ++b) bytes_.push_back(std::string(1, static_cast<char>(b)));
    for (const auto& w : words)
      if (!ids_.count(w)) {
        ids_[w] = static_cast<int32_t>(bytes_.size());
        bytes_.push_back(w);
      }
    for (const auto& w : words)
      if (!ids_.count(" " + w)) {
        ids_[" " + w] = static_cast<int32_t>(bytes_.size());
        bytes_.push_back(" " + w);
      }
  }
  std::vector<int32_t> encode(std::string_view text, bool add_bos = false, bool = true) const override {
    std::vector<int32_t> out;
    size_t i = 0;
    auto word_char = [](unsigned char c) { return std::isalnum(c) || c >= 0x80; };
    while (i < text.size()) {
      unsigned char c = static_cast<unsigned char>(text[i]);
      size_t ws = (c == ' ' && i + 1 < text.size() && word_char(static_cast<unsigned char>(text[i + 1]))) ? 1 : 0;
      if (ws || word_char(c)) {
        size_t j = i + ws;
        while (j < text.size() && word_char(static_cast<unsigned char>(text[j]))) ++j;
        std::string tok(text.substr(i, j - i));
        auto it = ids_.find(tok);
        if (it != ids_.end()) {
          out.push_back(it->second);
        } else {
          for (char b : tok) out.push_back(static_cast<unsigned char>(b));
        }
        i = j;
      } else {
        out.push_back(c);
        ++i;
      }
    }
    return out;
  }
  std::string decode(std::span<const int32_t> ids, bool = false) const override {
    std::string s;
    for (int32_t id : ids) s += token_bytes(id);
    return s;
  }
  std::string token_bytes(int32_t id) const override {
    return id >= 0 && static_cast<size_t>(id) < bytes_.size() ? bytes_[static_cast<size_t>(id)] : std::string();
  }
  std::optional<int32_t> token_to_id(std::string_view t) const override {
    auto it = ids_.find(std::string(t));
    if (it == ids_.end()) return std::nullopt;
    return it->second;
  }
  bool is_special(int32_t) const override { return false; }
  int32_t vocab_size() const override { return static_cast<int32_t>(bytes_.size()); }
  std::optional<int32_t> bos_id() const override { return std::nullopt; }
  std::vector<int32_t> eos_ids() const override { return {}; }

 private:
  std::map<std::string, int32_t> ids_;
  std::vector<std::string> bytes_;
};

// Pseudo-words from syllables; deterministic for a seed.
inline std::vector<std::string> make_vocabulary(size_t n, uint64_t seed) {
  static const char* syl[] = {"ka", "lo", "mi", "ne", "ru", "ta", "vo", "zi", "pe", "sa", "do", "gu",
                              "ri", "fe", "ba", "no", "te", "li", "mo", "xu", "wa", "che", "shi", "qua"};
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  std::map<std::string, bool> seen;
  while (out.size() < n) {
    int len = 2 + static_cast<int>(rng() % 3);
    std::string w;
    for (int i = 0; i < len; ++i) w += syl[rng() % (sizeof syl / sizeof syl[0])];
    if (!seen[w]) {
      seen[w] = true;
      out.push_back(w);
    }
  }
  return out;
}

// A document of `paragraphs` paragraphs of 2..6 sentences of 5..14 words drawn from `topic`
// words (70 %) and `common` words (30 %).
inline std::string make_text(std::mt19937_64& rng, const std::vector<std::string>& topic,
                             const std::vector<std::string>& common, int paragraphs) {
  std::string t;
  for (int p = 0; p < paragraphs; ++p) {
    int sentences = 2 + static_cast<int>(rng() % 5);
    for (int s = 0; s < sentences; ++s) {
      int words = 5 + static_cast<int>(rng() % 10);
      for (int w = 0; w < words; ++w) {
        const auto& src = (rng() % 10 < 7) ? topic : common;
        std::string word = src[rng() % src.size()];
        if (w == 0) word[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(word[0])));
        t += word;
        if (w + 1 < words) t += (rng() % 12 == 0) ? ", " : " ";
      }
      t += (rng() % 8 == 0) ? "? " : ". ";
    }
    t.back() = '\n';
    t += "\n";
  }
  return t;
}

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "ragd-retrieval-XXXXXX").string();
    path_ = ::mkdtemp(tmpl.data()) ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string operator/(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Writes `bytes` to `path`, creating its folders.
inline void write_file(const std::string& path, const std::string& bytes) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << bytes;
}

// The writer of the crash / replica tests, in a forked child: opens the corpus in `dir`, ingests
// `docs` in batches of `batch`, writes each acknowledged batch's ids (one per line) to `fd`, then
// _exit(0) without destructors (the index is not saved at exit either). With `remove_behind`,
// after each batch from the third on it also removes the first document of the batch two before,
// announcing it first ("~<id>") and acknowledging it after ("-<id>"). Exit codes: 3 open failed,
// 4 an ingest failed, 5 the pipe write failed, 6 a removal failed.
[[noreturn]] inline void child_ingest(const std::string& dir, const CorpusOptions& opts,
                                      std::shared_ptr<const engine::Tokenizer> tok, const std::vector<Document>& docs,
                                      size_t batch, int fd, bool remove_behind = false) {
  auto c = Corpus::open(dir, opts, std::move(tok));
  if (!c.ok()) {
    std::fprintf(stderr, "child open: %s\n", c.status().to_string().c_str());
    _exit(3);
  }
  auto say = [&](const std::string& line) {
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size())) _exit(5);
  };
  for (size_t b = 0; b < docs.size(); b += batch) {
    const size_t e = std::min(docs.size(), b + batch);
    auto s = (*c)->ingest(std::span<const Document>(docs.data() + b, e - b));
    if (!s.ok()) _exit(4);
    std::string ack;
    for (size_t i = b; i < e; ++i) ack += docs[i].id + "\n";
    say(ack);
    if (remove_behind && b >= 2 * batch) {
      const std::string& victim = docs[b - 2 * batch].id;
      say("~" + victim + "\n");
      auto r = (*c)->remove_document(victim);
      if (!r.ok() || !*r) _exit(6);
      say("-" + victim + "\n");
    }
  }
  _exit(0);
}

}  // namespace ragd::retrieval::testing
