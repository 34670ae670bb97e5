// build_wordpiece_tokenizer_json (wordpiece.h): a deterministic WordPiece vocabulary from a sample.
#include <algorithm>
#include <map>
#include <set>
#include <unordered_set>

#include <fmt/format.h>

#include "ragd/common/json_writer.h"
#include "ragd/engine/wordpiece.h"
#include "wordpiece_text.h"

namespace ragd::engine {

namespace {

// Characters every vocabulary spells, whatever the sample: ASCII digits, lower-case letters and
// punctuation.
std::vector<std::string> base_characters() {
  std::vector<std::string> v;
  for (char c = 33; c < 127; ++c)
    if (!(c >= 'A' && c <= 'Z')) v.emplace_back(1, c);
  return v;
}

std::vector<std::pair<std::string, int>> by_count(const std::map<std::string, int>& counts, int min_count) {
  std::vector<std::pair<std::string, int>> v;
  for (const auto& [k, n] : counts)
    if (n >= min_count) v.emplace_back(k, n);
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  return v;
}

}  // namespace

Result<std::string> build_wordpiece_tokenizer_json(std::string_view sample, const WordPieceVocabOptions& opts) {
  constexpr int kFirstFree = 104;  // after [PAD], [unused0..98], [UNK], [CLS], [SEP], [MASK]
  if (opts.vocab_size < kFirstFree + 200)
    return Status::InvalidArgument(fmt::format("wordpiece vocabulary: vocab_size {} is below {}", opts.vocab_size,
                                               kFirstFree + 200));
  std::vector<std::string> tokens(kFirstFree);
  tokens[0] = "[PAD]";
  for (int i = 1; i < 100; ++i) tokens[i] = fmt::format("[unused{}]", i - 1);
  tokens[100] = "[UNK]", tokens[101] = "[CLS]", tokens[102] = "[SEP]", tokens[103] = "[MASK]";
  std::unordered_set<std::string> have(tokens.begin(), tokens.end());
  const size_t cap = static_cast<size_t>(opts.vocab_size);
  auto add = [&](const std::string& t) {
    if (tokens.size() < cap && have.insert(t).second) tokens.push_back(t);
  };

  std::u32string text = utf8_decode(sample);
  wordpiece::normalize(&text, wordpiece::NormalizerOptions{});
  std::vector<std::string> words;
  wordpiece::pre_tokenize(text, /*split_punctuation=*/true, &words);

  std::set<std::string> chars;
  for (const auto& c : base_characters()) chars.insert(c);
  std::map<std::string, int> word_counts, suffix_counts;
  for (const auto& w : words) {
    ++word_counts[w];
    const std::u32string cps = utf8_decode(w);
    for (char32_t c : cps) {
      std::string s;
      append_utf8(s, c);
      chars.insert(s);
    }
    for (size_t len = 2; len <= 4 && len < cps.size(); ++len) {
      std::string s = "##";
      for (size_t k = cps.size() - len; k < cps.size(); ++k) append_utf8(s, cps[k]);
      ++suffix_counts[s];
    }
  }
  for (const auto& c : chars) add(c);
  for (const auto& c : chars) add("##" + c);
  for (const auto& [w, n] : by_count(word_counts, opts.min_word_count)) add(w);
  for (const auto& [s, n] : by_count(suffix_counts, 2)) add(s);
  for (int i = 99; tokens.size() < cap; ++i) add(fmt::format("[unused{}]", i));

  std::string out = "{\n  \"version\": \"1.0\",\n  \"truncation\": null,\n  \"padding\": null,\n  \"added_tokens\": [";
  const char* names[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
  const int ids[] = {0, 100, 101, 102, 103};
  for (int i = 0; i < 5; ++i)
    out += fmt::format("{}\n    {{\"id\": {}, \"content\": \"{}\", \"single_word\": false, \"lstrip\": false, "
                       "\"rstrip\": false, \"normalized\": false, \"special\": true}}",
                       i ? "," : "", ids[i], names[i]);
  out +=
      "\n  ],\n  \"normalizer\": {\"type\": \"BertNormalizer\", \"clean_text\": true, \"handle_chinese_chars\": true, "
      "\"strip_accents\": null, \"lowercase\": true},\n"
      "  \"pre_tokenizer\": {\"type\": \"BertPreTokenizer\"},\n"
      "  \"post_processor\": {\"type\": \"TemplateProcessing\",\n"
      "    \"single\": [{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
      "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}],\n"
      "    \"pair\": [{\"SpecialToken\": {\"id\": \"[CLS]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"A\", "
      "\"type_id\": 0}}, {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 0}}, {\"Sequence\": {\"id\": \"B\", "
      "\"type_id\": 1}}, {\"SpecialToken\": {\"id\": \"[SEP]\", \"type_id\": 1}}],\n"
      "    \"special_tokens\": {\"[CLS]\": {\"id\": \"[CLS]\", \"ids\": [101], \"tokens\": [\"[CLS]\"]}, "
      "\"[SEP]\": {\"id\": \"[SEP]\", \"ids\": [102], \"tokens\": [\"[SEP]\"]}}},\n"
      "  \"decoder\": {\"type\": \"WordPiece\", \"prefix\": \"##\", \"cleanup\": true},\n"
      "  \"model\": {\"type\": \"WordPiece\", \"unk_token\": \"[UNK]\", \"continuing_subword_prefix\": \"##\", "
      "\"max_input_chars_per_word\": 100,\n    \"vocab\": {";
  for (size_t i = 0; i < tokens.size(); ++i) {
    out += i ? ",\n      " : "\n      ";
    json_escape(out, tokens[i]);
    out += fmt::format(": {}", i);
  }
  out += "\n    }\n  }\n}\n";
  return out;
}

}  // namespace ragd::engine
