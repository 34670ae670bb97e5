#include "ragd/pipelines/length_features.h"

#include <algorithm>
#include <cctype>
#include <cmath>

#include "ragd/common/hash.h"

namespace ragd::pipelines {

std::string length_prompt_text(std::string_view prompt) {
  constexpr size_t kTail = 256;
  if (prompt.size() <= kTail) return std::string(prompt);
  size_t from = prompt.size() - kTail;
  while (from < prompt.size() && prompt[from] != ' ' && prompt[from] != '\n') ++from;
  return std::string(prompt.substr(from));
}

std::vector<std::string> length_words(std::string_view text, size_t max_words) {
  std::vector<std::string> words;
  std::string cur;
  auto flush = [&] {
    if (!cur.empty() && words.size() < max_words) words.push_back(cur);
    cur.clear();
  };
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) || c >= 0x80) {
      cur += static_cast<char>(c < 0x80 ? std::tolower(c) : c);
    } else {
      flush();
      if (words.size() >= max_words) break;
    }
  }
  flush();
  return words;
}

namespace {

int log2_bin(int v) { return v <= 0 ? -1 : static_cast<int>(std::floor(std::log2(static_cast<double>(v)))); }

}  // namespace

SparseRow length_feature_row(const LengthFeatures& f, uint32_t dim) {
  dim = std::max<uint32_t>(1, dim);
  std::vector<uint32_t> slots;
  auto add = [&](std::string_view kind, std::string_view a, std::string_view b = {}) {
    std::string key;
    key.reserve(kind.size() + a.size() + b.size() + 2);
    key.append(kind).push_back(':');
    key.append(a);
    if (!b.empty()) key.append("_").append(b);
    slots.push_back(kLengthDenseFeatures + static_cast<uint32_t>(xxh3_64(key.data(), key.size()) % dim));
  };
  add("p", f.pipeline);
  add("pl", std::to_string(log2_bin(f.prompt_tokens)));
  add("mt", std::to_string(log2_bin(f.max_tokens)));
  const std::vector<std::string> w = length_words(f.text);
  for (size_t i = 0; i < w.size(); ++i) {
    add("w", w[i]);
    if (i + 1 < w.size()) add("b", w[i], w[i + 1]);
  }
  if (!w.empty()) add("f", w[0]);
  if (w.size() > 1) add("f2", w[0], w[1]);
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  SparseRow row;
  row.reserve(slots.size() + kLengthDenseFeatures);
  row.emplace_back(0, 1.0f);
  row.emplace_back(1, static_cast<float>(std::log1p(std::max(0, f.prompt_tokens)) / 8.0));
  row.emplace_back(2, static_cast<float>(std::log1p(std::max(0, f.max_tokens)) / 8.0));
  for (uint32_t s : slots) row.emplace_back(s, 1.0f);
  return row;
}

}  // namespace ragd::pipelines
