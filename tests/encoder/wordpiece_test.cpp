// WordPiece tokenization against an independent Python implementation of the same tokenizer.json
// (bert_reference.py, unicodedata-based) on texts with accents, CJK, punctuation, long words,
// unknown and control characters, plus hand-checked cases.
#include <gtest/gtest.h>

#include <simdjson.h>

#include "encoder_test_util.h"
#include "ragd/engine/tokenizer.h"
#include "ragd/engine/wordpiece.h"

namespace ragd::engine {
namespace {

using namespace ragd::encoder_testing;

const std::vector<std::string>& texts() {
  static const std::vector<std::string> t = {
      "Hello, World! This is a TEST of the tokenizer.",
      "Café naïve résumé Ångström façade coöperate ÉCOLE",
      "北京欢迎你 and 東京 mixed日本語text 한국어 텍스트",
      "Don't stop-believing... (really?) #hashtag @user $5.99 100% a+b=c <tag> ~x^2 `code` |pipe|",
      std::string(150, 'a') + " pneumonoultramicroscopicsilicovolcanoconiosis supercalifragilistic",
      "emoji 😀 and ☃ snowman, Ωmega ΣΊΣΥΦΟΣ λόγος",
      "tab\there\nnew\r\nline\u200bzero\u00a0nbsp\u3000ideo\x01ctl\xef\xbf\xbdrep\xff\xfe bad",
      "İstanbul ǅ ß Straße ﬁ ligature Ⅻ ｆｕｌｌ",
      "[CLS] special [SEP] inside [MASK] tokens[PAD]",
      "",
      "   ",
      "مَرْحَبًا بالعالم עִבְרִית",
      "e\u0301 combining n\u0303 marks a\u0308",
      "the quick brown fox jumps over the lazy dog; THE QUICK BROWN FOX.",
  };
  return t;
}

std::string sample() {
  return std::string(builtin_training_text()) +
         " café naïve résumé ångström façade école 北 京 欢 迎 你 東 日 本 語 한 국 어 ω λόγος straße "
         "stop believing hashtag user tokenizer tokenizer world world hello hello";
}

// {"ids": [...], "type_ids": [...]} lists from the reference's output.
std::vector<EncoderInput> parse_reference(const std::string& json) {
  simdjson::dom::parser p;
  simdjson::dom::element doc = p.parse(json);
  std::vector<EncoderInput> out;
  for (auto e : doc.get_array()) {
    EncoderInput in;
    for (auto v : e["ids"].get_array()) in.ids.push_back(static_cast<int32_t>(int64_t(v)));
    for (auto v : e["type_ids"].get_array()) in.type_ids.push_back(static_cast<int32_t>(int64_t(v)));
    out.push_back(std::move(in));
  }
  return out;
}

// Tokenizes `items` (strings, or pairs as [a, b]) with both implementations and compares.
void compare_with_reference(const std::string& tok_json, const std::vector<std::vector<std::string>>& items,
                            int max_len, const std::string& tag) {
  auto dir = temp_dir("wp_" + tag);
  write_file(dir / "tokenizer.json", tok_json);
  std::string list = "[";
  for (size_t i = 0; i < items.size(); ++i) {
    list += i ? "," : "";
    if (items[i].size() == 1) {
      list += json_quote(items[i][0]);
    } else {
      list += "[" + json_quote(items[i][0]) + "," + json_quote(items[i][1]) + "]";
    }
  }
  write_file(dir / "texts.json", list + "]");
  const int rc = run_reference("tokenize " + quote_arg(dir / "tokenizer.json") + " " + quote_arg(dir / "texts.json") +
                               " " + std::to_string(max_len) + " " + quote_arg(dir / "out.json"));
  if (rc == -1) GTEST_SKIP() << "no /usr/bin/python3 for the reference tokenizer";
  ASSERT_EQ(rc, 0) << "reference tokenizer failed";
  auto ref = parse_reference(read_file(dir / "out.json"));
  ASSERT_EQ(ref.size(), items.size());
  auto tok = WordPieceTokenizer::from_json_wordpiece(tok_json, "tokenizer.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  for (size_t i = 0; i < items.size(); ++i) {
    EncoderInput got = items[i].size() == 1 ? (*tok)->encode_single(items[i][0], max_len)
                                            : (*tok)->encode_pair(items[i][0], items[i][1], max_len);
    EXPECT_EQ(got.ids, ref[i].ids) << tag << ": item " << i << " '" << items[i][0] << "'";
    EXPECT_EQ(got.type_ids, ref[i].type_ids) << tag << ": item " << i;
  }
  std::filesystem::remove_all(dir);
}

std::vector<std::vector<std::string>> singles() {
  std::vector<std::vector<std::string>> v;
  for (const auto& t : texts()) v.push_back({t});
  return v;
}

TEST(WordPiece, MatchesReferenceDefaultNormalizer) {
  auto json = build_wordpiece_tokenizer_json(sample(), {});
  ASSERT_TRUE(json.ok()) << json.status().to_string();
  compare_with_reference(*json, singles(), 0, "default");
  compare_with_reference(*json, singles(), 12, "truncated");
}

TEST(WordPiece, MatchesReferenceCasedKeepAccents) {
  auto json = build_wordpiece_tokenizer_json(sample(), {});
  ASSERT_TRUE(json.ok());
  std::string cased = *json;
  const std::string from = "\"strip_accents\": null, \"lowercase\": true";
  ASSERT_NE(cased.find(from), std::string::npos);
  cased.replace(cased.find(from), from.size(), "\"strip_accents\": false, \"lowercase\": false");
  compare_with_reference(cased, singles(), 0, "cased");
  std::string strip_only = *json;
  strip_only.replace(strip_only.find(from), from.size(), "\"strip_accents\": true, \"lowercase\": false");
  compare_with_reference(strip_only, singles(), 0, "strip_only");
  std::string no_chinese = *json;
  const std::string ch = "\"handle_chinese_chars\": true";
  no_chinese.replace(no_chinese.find(ch), ch.size(), "\"handle_chinese_chars\": false");
  compare_with_reference(no_chinese, singles(), 0, "no_chinese");
}

TEST(WordPiece, PairsAndTokenTypesMatchReference) {
  auto json = build_wordpiece_tokenizer_json(sample(), {});
  ASSERT_TRUE(json.ok());
  std::vector<std::vector<std::string>> pairs;
  for (size_t i = 0; i + 1 < texts().size(); ++i) pairs.push_back({texts()[i], texts()[i + 1]});
  compare_with_reference(*json, pairs, 0, "pairs");
  compare_with_reference(*json, pairs, 16, "pairs_truncated");
  compare_with_reference(*json, pairs, 9, "pairs_tight");
}

// A small hand-written vocabulary with BertProcessing: exact ids checked by hand.
std::string tiny_json(std::string_view normalizer = R"({"type": "BertNormalizer", "lowercase": true})") {
  return std::string(R"({"added_tokens": [{"id": 0, "content": "[PAD]", "special": true},
      {"id": 1, "content": "[UNK]", "special": true}, {"id": 2, "content": "[CLS]", "special": true},
      {"id": 3, "content": "[SEP]", "special": true}],
    "normalizer": )") + std::string(normalizer) + R"(,
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "post_processor": {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]},
    "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
      "max_input_chars_per_word": 10,
      "vocab": {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "un": 4, "##aff": 5, "##able": 6,
                "cafe": 7, ",": 8, "play": 9, "##ing": 10, "!": 11, "北": 12, "京": 13, "##s": 14}}})";
}

TEST(WordPiece, HandCheckedIds) {
  auto tok = WordPieceTokenizer::from_json_wordpiece(tiny_json(), "tiny.json");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto& t = **tok;
  EXPECT_EQ(t.encode("unaffable", false, true), (std::vector<int32_t>{4, 5, 6}));
  // Accents stripped with lowercase; punctuation isolated; CJK split per character.
  EXPECT_EQ(t.encode("Café, PLAYING!北京", false, true), (std::vector<int32_t>{7, 8, 9, 10, 11, 12, 13}));
  // A word that cannot be spelled is one [UNK], a word over max_input_chars_per_word too.
  EXPECT_EQ(t.encode("unaffx plays playingsssss", false, true), (std::vector<int32_t>{1, 9, 14, 1}));
  EXPECT_EQ(t.encode("cafe", true, true), (std::vector<int32_t>{2, 7, 3}));
  auto pair = t.encode_pair("cafe", "plays", 0);
  EXPECT_EQ(pair.ids, (std::vector<int32_t>{2, 7, 3, 9, 14, 3}));
  EXPECT_EQ(pair.type_ids, (std::vector<int32_t>{0, 0, 0, 1, 1, 1}));
  auto single = t.encode_single("un un un un", 4);
  EXPECT_EQ(single.ids, (std::vector<int32_t>{2, 4, 4, 3}));
  EXPECT_EQ(t.special_tokens_single(), 2);
  EXPECT_EQ(t.special_tokens_pair(), 3);
  EXPECT_EQ(t.decode(std::vector<int32_t>{2, 4, 5, 6, 8, 9, 10, 11, 3}, true), "unaffable, playing!");
  EXPECT_EQ(t.bos_id(), 2);
  EXPECT_EQ(t.unk_id(), 1);
  EXPECT_EQ(t.pad_id(), 0);
  // Through the generic seam.
  auto generic = Tokenizer::from_json(tiny_json(), "tiny.json");
  ASSERT_TRUE(generic.ok());
  EXPECT_NE(dynamic_cast<const WordPieceTokenizer*>(generic->get()), nullptr);
  EXPECT_EQ((*generic)->encode("unaffable", false, true), (std::vector<int32_t>{4, 5, 6}));
}

TEST(WordPiece, BadFilesNameTheProblem) {
  std::string no_unk = tiny_json();
  no_unk.replace(no_unk.find("\"unk_token\": \"[UNK]\""), 20, "\"unk_token\": \"[NOPE]\"");
  auto r = WordPieceTokenizer::from_json_wordpiece(no_unk, "bad/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("bad/tokenizer.json"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("[NOPE]"), std::string::npos) << r.status().message();
  auto r2 = WordPieceTokenizer::from_json_wordpiece(tiny_json(R"({"type": "NFKC"})"), "x/tokenizer.json");
  ASSERT_FALSE(r2.ok());
  EXPECT_NE(r2.status().message().find("NFKC"), std::string::npos);
}

TEST(WordPiece, BuiltVocabularyShape) {
  auto json = build_wordpiece_tokenizer_json(sample(), {});
  ASSERT_TRUE(json.ok());
  auto tok = WordPieceTokenizer::from_json_wordpiece(*json, "built");
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 30522);
  EXPECT_EQ((*tok)->token_to_id("[CLS]"), 101);
  EXPECT_EQ((*tok)->token_to_id("[SEP]"), 102);
  EXPECT_EQ((*tok)->unk_id(), 100);
  // Frequent words are whole tokens; the sample's accented words are spelled without [UNK].
  auto ids = (*tok)->encode("the model and the café", false, true);
  for (int32_t id : ids) EXPECT_NE(id, 100);
}

}  // namespace
}  // namespace ragd::engine
