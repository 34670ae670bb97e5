#include "term_counter.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>
#include <xapian.h>

namespace ragd::retrieval {

namespace {

constexpr size_t kMaxWordBytes = 64;            // TermGenerator's default max_word_length
constexpr size_t kMaxCachedWords = size_t{1} << 18;  // stem cache bound (~20 MB of short strings)

bool word_byte(unsigned char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}
bool upper_byte(unsigned char c) { return c >= 'A' && c <= 'Z'; }
bool digit_byte(unsigned char c) { return c >= '0' && c <= '9'; }
char lower_byte(unsigned char c) { return static_cast<char>(upper_byte(c) ? c + ('a' - 'A') : c); }
bool space_byte(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

}  // namespace

struct TermCounter::Impl {
  struct Stemmed {
    std::string term;  // the stem; empty: not indexed (a stopword)
  };

  Xapian::Stem stem{"english"};
  Xapian::SimpleStopper stopper;
  Xapian::TermGenerator tg;  // the fallback for fields with non-ASCII bytes
  std::unordered_set<std::string> stop;
  std::unordered_map<std::string, Stemmed> cache;  // lower-cased word -> its term
  std::unordered_set<std::string> other;           // terms from the fallback (stable addresses)
  std::unordered_map<const std::string*, uint32_t> counts;
  std::string word;     // the word being read (reused)
  std::string nonascii; // the fields of one add_text() call that hold non-ASCII bytes

  explicit Impl(std::span<const char* const> stopwords) : stopper(stopwords.begin(), stopwords.end()) {
    for (const char* w : stopwords) stop.insert(w);
    tg.set_stemmer(stem);
    tg.set_stopper(&stopper);
    tg.set_stemming_strategy(Xapian::TermGenerator::STEM_ALL);
    tg.set_stopper_strategy(Xapian::TermGenerator::STOP_ALL);
  }

  void count(const std::string& w, unsigned wdf_inc) {
    if (w.size() > kMaxWordBytes) return;
    auto it = cache.find(w);
    if (it == cache.end()) {
      Stemmed s;
      if (!stop.contains(w)) s.term = stem(w);
      it = cache.emplace(w, std::move(s)).first;
    }
    if (it->second.term.empty()) return;
    counts[&it->second.term] += wdf_inc;
  }

  // One whitespace-free ASCII field, by TermGenerator's rules for ASCII text.
  void parse_ascii(std::string_view t, unsigned wdf_inc) {
    const size_t n = t.size();
    size_t i = 0;
    auto at = [&](size_t k) { return static_cast<unsigned char>(t[k]); };
    while (true) {
      while (i < n && !word_byte(at(i))) ++i;
      if (i == n) return;
      word.clear();
      // Initials separated by '.' ("U.S.A", with or without the final '.'): one word, unless a
      // word character follows them.
      if (upper_byte(at(i))) {
        size_t p = i;
        do {
          word += lower_byte(at(p++));
        } while (p < n && at(p) == '.' && ++p < n && upper_byte(at(p)));
        if (word.size() > 1 && (p == n || !word_byte(at(p)))) {
          i = p;
          count(word, wdf_inc);
          continue;
        }
        word.clear();
      }
      bool at_end = false;
      while (true) {
        unsigned char prev = 0;
        do {
          word += lower_byte(at(i));
          prev = at(i);
          if (++i == n) {
            at_end = true;
            break;
          }
        } while (word_byte(at(i)));
        if (at_end) break;
        // at(i) is not a word byte: it joins two words when a word byte follows and it is ' or &
        // (or , . ; between digits).
        if (i + 1 == n || !word_byte(at(i + 1))) break;
        const unsigned char infix = at(i), next = at(i + 1);
        const bool joins = (digit_byte(prev) && digit_byte(next)) ? (infix == ',' || infix == '.' || infix == ';')
                                                                  : (infix == '\'' || infix == '&');
        if (!joins) break;
        word += static_cast<char>(infix);
        ++i;
      }
      if (!at_end) {
        // Up to three '+' or '#' end a word ("C++", "C#"), unless a word byte follows them.
        const size_t len = word.size();
        unsigned suffixes = 0;
        while (at(i) == '+' || at(i) == '#') {
          if (++suffixes > 3) {
            word.resize(len);
            break;
          }
          word += static_cast<char>(at(i));
          if (++i == n) {
            at_end = true;
            break;
          }
        }
        if (!at_end && word_byte(at(i))) word.resize(len);
      }
      count(word, wdf_inc);
    }
  }

  void add_text(std::string_view text, unsigned wdf_inc) {
    nonascii.clear();
    size_t i = 0;
    const size_t n = text.size();
    while (i < n) {
      while (i < n && space_byte(static_cast<unsigned char>(text[i]))) ++i;
      size_t j = i;
      bool ascii = true;
      while (j < n && !space_byte(static_cast<unsigned char>(text[j]))) {
        ascii = ascii && static_cast<unsigned char>(text[j]) < 0x80;
        ++j;
      }
      if (j > i) {
        if (ascii) {
          parse_ascii(text.substr(i, j - i), wdf_inc);
        } else {
          nonascii.append(text.data() + i, j - i);
          nonascii += ' ';
        }
      }
      i = j;
    }
    if (nonascii.empty()) return;
    Xapian::Document scratch;
    tg.set_document(scratch);
    tg.index_text_without_positions(nonascii, wdf_inc);
    for (auto t = scratch.termlist_begin(); t != scratch.termlist_end(); ++t) {
      const std::string& term = *other.insert(*t).first;
      counts[&term] += t.get_wdf();
    }
  }
};

TermCounter::TermCounter(std::span<const char* const> stopwords) : impl_(std::make_unique<Impl>(stopwords)) {}
TermCounter::~TermCounter() = default;

void TermCounter::clear() {
  impl_->counts.clear();
  impl_->other.clear();
  if (impl_->cache.size() > kMaxCachedWords) impl_->cache.clear();
}

void TermCounter::add_text(std::string_view text, unsigned wdf_inc) { impl_->add_text(text, wdf_inc); }

std::vector<std::pair<std::string, uint32_t>> TermCounter::terms() const {
  // Two spellings (the cache's and the fallback's) can make the same term: merged here.
  std::vector<std::pair<std::string, uint32_t>> out;
  out.reserve(impl_->counts.size());
  for (const auto& [term, wdf] : impl_->counts) out.emplace_back(*term, wdf);
  std::sort(out.begin(), out.end());
  size_t w = 0;
  for (size_t r = 0; r < out.size(); ++r) {
    if (w > 0 && out[w - 1].first == out[r].first) {
      out[w - 1].second += out[r].second;
    } else {
      if (w != r) out[w] = std::move(out[r]);
      ++w;
    }
  }
  out.resize(w);
  return out;
}

}  // namespace ragd::retrieval
