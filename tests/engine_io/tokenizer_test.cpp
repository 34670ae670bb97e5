// Tokenizer: byte-level (trained) and SentencePiece-style (hand-built fixture) round trips on random
// Unicode, BPE against a naive reference, added/special tokens, StreamDecoder, chat templates,
// malformed tokenizer.json cases.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>
#include <random>

#include <simdjson.h>

#include "ragd/common/utf8.h"
#include "ragd/engine/tokenizer.h"

using namespace ragd::engine;
using ::testing::HasSubstr;

namespace {

// Random valid UTF-8 mixing ASCII words, whitespace runs, accents, combining marks, CJK, emoji,
// supplementary planes and arbitrary code points.
std::string random_unicode(std::mt19937_64& rng, int n_chars) {
  std::string s;
  std::uniform_int_distribution<int> kind(0, 11);
  auto in = [&](uint32_t lo, uint32_t hi) { return std::uniform_int_distribution<uint32_t>(lo, hi)(rng); };
  for (int i = 0; i < n_chars; ++i) {
    uint32_t cp;
    switch (kind(rng)) {
      case 0: case 1: case 2: cp = in('a', 'z'); break;
      case 3: cp = " \n\t\r  "[in(0, 5)]; break;
      case 4: cp = in(0x21, 0x7E); break;
      case 5: cp = in(0xC0, 0x17F); break;            // Latin-1 / Latin Extended-A
      case 6: cp = in(0x300, 0x36F); break;           // combining marks
      case 7: cp = in(0x4E00, 0x9FFF); break;         // CJK
      case 8: cp = in(0x1F300, 0x1F64F); break;       // emoji
      case 9: cp = in(0x20000, 0x2A6DF); break;       // plane 2
      case 10: cp = in(0x0, 0x1F); break;             // control characters
      default:
        do cp = in(0x80, 0x10FFFF); while (cp >= 0xD800 && cp <= 0xDFFF);
    }
    ragd::append_utf8(s, cp);
  }
  return s;
}

const Tokenizer& trained() {
  static std::unique_ptr<Tokenizer> t = [] {
    BpeTrainOptions o;
    o.vocab_size = 700;
    auto json = train_byte_level_bpe(builtin_training_text(), o);
    EXPECT_TRUE(json.ok()) << json.status().to_string();
    auto r = Tokenizer::from_json(*json, "trained.json");
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return std::move(r).value();
  }();
  return *t;
}

// SentencePiece-style (Llama-2 layout): <unk> <s> </s>, byte fallback tokens, ▁, a-z, merges.
std::string spm_json(bool metaspace_pretokenizer) {
  std::vector<std::string> vocab = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    vocab.push_back(buf);
  }
  const std::string sp = "\xE2\x96\x81";
  vocab.push_back(sp);
  for (char c = 'a'; c <= 'z'; ++c) vocab.push_back(std::string(1, c));
  for (const char* c : {"\xC3\xA9", "\xE4\xB8\xAD", ".", ","}) vocab.push_back(c);  // é 中
  std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {sp, "t"}, {sp + "t", "he"}, {"i", "n"}, {sp, "a"}, {"o", "r"}, {sp, "w"}, {sp + "w", "or"},
      {"l", "d"}, {sp + "wor", "ld"}, {"e", "r"}, {sp, "in"}, {sp, sp}};
  for (auto& [a, b] : merges) vocab.push_back(a + b);
  std::string v, m;
  for (size_t i = 0; i < vocab.size(); ++i) v += (i ? ",\"" : "\"") + vocab[i] + "\":" + std::to_string(i);
  for (size_t i = 0; i < merges.size(); ++i) m += (i ? ",\"" : "\"") + merges[i].first + " " + merges[i].second + "\"";
  std::string norm = metaspace_pretokenizer
                         ? "null"
                         : R"({"type":"Sequence","normalizers":[{"type":"Prepend","prepend":"▁"},{"type":"Replace","pattern":{"String":" "},"content":"▁"}]})";
  std::string pre = metaspace_pretokenizer
                        ? R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true})"
                        : "null";
  std::string dec = metaspace_pretokenizer
                        ? R"({"type":"Metaspace","replacement":"▁","prepend_scheme":"first","split":true})"
                        : R"({"type":"Sequence","decoders":[{"type":"Replace","pattern":{"String":"▁"},"content":" "},{"type":"ByteFallback"},{"type":"Fuse"},{"type":"Strip","content":" ","start":1,"stop":0}]})";
  return R"({"version":"1.0","added_tokens":[{"id":0,"content":"<unk>","special":true},{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],
    "normalizer":)" + norm + R"(,"pre_tokenizer":)" + pre +
         R"(,"post_processor":{"type":"TemplateProcessing","single":[{"SpecialToken":{"id":"<s>","type_id":0}},{"Sequence":{"id":"A","type_id":0}}]},
    "decoder":)" + dec + R"(,"model":{"type":"BPE","unk_token":"<unk>","byte_fallback":true,"fuse_unk":true,"vocab":{)" + v +
         R"(},"merges":[)" + m + "]}}";
}

std::unique_ptr<Tokenizer> load(const std::string& json) {
  auto r = Tokenizer::from_json(json, "spm.json");
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

std::string load_err(const std::string& json) {
  auto r = Tokenizer::from_json(json, "tokenizer.json");
  EXPECT_FALSE(r.ok());
  return r.ok() ? "" : r.status().message();
}

bool valid_utf8_no_replacement(const std::string& s) {
  return simdjson::validate_utf8(s.data(), s.size()) && s.find("\xEF\xBF\xBD") == std::string::npos;
}

}  // namespace

TEST(TokenizerByteLevel, RoundTripsRandomUnicode) {
  const Tokenizer& t = trained();
  std::mt19937_64 rng(42);
  for (int it = 0; it < 300; ++it) {
    std::string s = random_unicode(rng, 1 + it % 97);
    auto ids = t.encode(s);
    ASSERT_EQ(t.decode(ids), s) << "iteration " << it;
    for (int32_t id : ids) ASSERT_FALSE(t.is_special(id));
  }
}

TEST(TokenizerByteLevel, MatchesNaiveBpeOnWords) {
  // Letters-only words are a single pre-token, so encode() must equal a naive BPE (repeatedly merge
  // the lowest-rank adjacent pair, leftmost first) computed from the merges in the JSON.
  BpeTrainOptions o;
  o.vocab_size = 700;
  auto json = train_byte_level_bpe(builtin_training_text(), o);
  ASSERT_TRUE(json.ok());
  simdjson::dom::parser p;
  simdjson::dom::element doc = p.parse(*json);
  std::map<std::pair<std::string, std::string>, int> rank;
  int r = 0;
  for (auto m : doc["model"]["merges"].get_array()) {
    rank[{std::string(m.at(0).get_string().value()), std::string(m.at(1).get_string().value())}] = r++;
  }
  ASSERT_GT(r, 200);
  const Tokenizer& t = trained();
  std::mt19937_64 rng(5);
  const std::string common = "etaoinshrdlucmfwyp";
  for (int it = 0; it < 500; ++it) {
    std::string w;
    int len = 1 + static_cast<int>(rng() % 14);
    for (int i = 0; i < len; ++i) w += common[rng() % common.size()];
    std::vector<std::string> syms;
    for (char c : w) syms.push_back(std::string(1, c));
    while (true) {
      int best = -1, best_rank = INT32_MAX;
      for (size_t i = 0; i + 1 < syms.size(); ++i) {
        auto f = rank.find({syms[i], syms[i + 1]});
        if (f != rank.end() && f->second < best_rank) best_rank = f->second, best = static_cast<int>(i);
      }
      if (best < 0) break;
      syms[best] += syms[best + 1];
      syms.erase(syms.begin() + best + 1);
    }
    auto ids = t.encode(w);
    ASSERT_EQ(ids.size(), syms.size()) << w;
    for (size_t i = 0; i < ids.size(); ++i) ASSERT_EQ(t.token_bytes(ids[i]), syms[i]) << w;
  }
}

TEST(TokenizerByteLevel, PreTokenizerSplitsLikeLlama3) {
  const Tokenizer& t = trained();
  // Numbers split into groups of at most three digits; no token spans a letter/digit boundary.
  auto ids = t.encode("abc1234567 x");
  // Token boundaries must include every pre-token boundary: abc|123|456|7| x
  std::set<size_t> cuts;
  size_t off = 0;
  for (int32_t id : ids) cuts.insert(off += t.token_bytes(id).size());
  for (size_t c : {3u, 6u, 9u, 10u, 12u}) EXPECT_TRUE(cuts.count(c)) << c;
  EXPECT_EQ(off, 12u);
  // Frequent words in the training text are single tokens, with their leading space.
  auto the = t.encode(" the");
  ASSERT_EQ(the.size(), 1u);
  EXPECT_EQ(t.token_bytes(the[0]), " the");
}

TEST(TokenizerByteLevel, SpecialTokens) {
  const Tokenizer& t = trained();
  auto bot = t.token_to_id("<|begin_of_text|>");
  auto eot = t.token_to_id("<|eot_id|>");
  ASSERT_TRUE(bot && eot);
  EXPECT_EQ(t.bos_id(), bot);
  EXPECT_TRUE(t.is_special(*eot));
  auto eos = t.eos_ids();
  EXPECT_NE(std::find(eos.begin(), eos.end(), *eot), eos.end());
  const std::string text = "<|begin_of_text|>Hi there<|eot_id|> again<|eot_id";
  auto ids = t.encode(text);
  EXPECT_EQ(ids.front(), *bot);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *eot), 1);
  EXPECT_EQ(t.decode(ids), text);
  EXPECT_EQ(t.decode(ids, /*skip_special=*/true), "Hi there again<|eot_id");
  // parse_special = false: the markers are ordinary text.
  auto plain = t.encode(text, false, false);
  for (int32_t id : plain) EXPECT_FALSE(t.is_special(id));
  EXPECT_EQ(t.decode(plain), text);
  // add_bos prepends exactly one BOS.
  auto with_bos = t.encode("Hi", true);
  EXPECT_EQ(with_bos.front(), *bot);
  EXPECT_EQ(with_bos.size(), t.encode("Hi").size() + 1);
}

TEST(TokenizerByteLevel, PaddedReservedTokens) {
  BpeTrainOptions o;
  o.vocab_size = 400;
  o.pad_to = 1000;
  auto json = train_byte_level_bpe(builtin_training_text(), o);
  ASSERT_TRUE(json.ok());
  auto t = load(*json);
  ASSERT_TRUE(t);
  EXPECT_EQ(t->vocab_size(), 1000);
  EXPECT_TRUE(t->is_special(999));
  auto id = t->token_to_id("<|reserved_special_token_5|>");
  ASSERT_TRUE(id);
  EXPECT_EQ(t->encode("a<|reserved_special_token_5|>b").at(1), *id);
}

TEST(TokenizerSentencePiece, EncodesWithMergesAndByteFallback) {
  for (bool metaspace : {false, true}) {
    auto t = load(spm_json(metaspace));
    ASSERT_TRUE(t);
    auto ids = t->encode("the world");
    std::vector<std::string> toks;
    for (int32_t id : ids) toks.push_back(t->token_bytes(id));
    EXPECT_EQ(toks, (std::vector<std::string>{" the", " world"})) << metaspace;
    EXPECT_EQ(t->decode(ids), "the world");
    // "Q" is not in the vocab: byte fallback <0x51>.
    auto q = t->encode("Q");
    ASSERT_EQ(q.size(), 2u);
    EXPECT_EQ(q[1], *t->token_to_id("<0x51>"));
    EXPECT_EQ(t->bos_id(), t->token_to_id("<s>"));
    EXPECT_EQ(t->decode(t->encode("hello, é 中 😀", true), true), "hello, é 中 😀");
  }
}

TEST(TokenizerSentencePiece, RoundTripsRandomUnicode) {
  for (bool metaspace : {false, true}) {
    auto t = load(spm_json(metaspace));
    ASSERT_TRUE(t);
    std::mt19937_64 rng(metaspace ? 11 : 12);
    for (int it = 0; it < 300; ++it) {
      // A leading space is lost by the Metaspace decoder (as in the reference implementation).
      std::string s = (metaspace ? "x" : "") + random_unicode(rng, 1 + it % 61);
      ASSERT_EQ(t->decode(t->encode(s)), s) << "iteration " << it << " metaspace " << metaspace;
    }
  }
}

TEST(StreamDecoder, ConcatenationEqualsDecodeAndNeverSplitsCharacters) {
  std::mt19937_64 rng(3);
  auto spm = load(spm_json(false));
  for (const Tokenizer* t : std::vector<const Tokenizer*>{&trained(), spm.get()}) {
    for (int it = 0; it < 200; ++it) {
      std::string s = random_unicode(rng, 1 + it % 50);
      auto ids = t->encode(s);
      StreamDecoder sd(*t, /*skip_special=*/false);
      std::string acc;
      for (int32_t id : ids) {
        std::string piece = sd.push(id);
        ASSERT_TRUE(valid_utf8_no_replacement(piece)) << "iteration " << it;
        acc += piece;
      }
      acc += sd.flush();
      ASSERT_EQ(acc, t->decode(ids));
      ASSERT_EQ(acc, s);
    }
  }
}

TEST(StreamDecoder, InvalidBytesMatchDecode) {
  const Tokenizer& t = trained();
  // Byte tokens in a random order (lone continuation bytes, truncated sequences).
  std::mt19937_64 rng(9);
  for (int it = 0; it < 200; ++it) {
    std::vector<int32_t> ids;
    for (int i = 0; i < 12; ++i) {
      std::string b(1, static_cast<char>(rng() % 256));
      ids.push_back(t.encode(b, false, false).at(0));
    }
    StreamDecoder sd(t);
    std::string acc;
    for (int32_t id : ids) acc += sd.push(id);
    acc += sd.flush();
    ASSERT_EQ(acc, t.decode(ids));
  }
}

TEST(ChatTemplate, Llama3Golden) {
  std::vector<ChatMessage> m = {{"system", "You are terse."}, {"user", " Hi! "}, {"assistant", "Hello."}, {"user", "Bye"}};
  EXPECT_EQ(apply_chat_template(ChatTemplate::kLlama3, m),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are terse.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplate, ChatMLGolden) {
  std::vector<ChatMessage> m = {{"system", "Be brief."}, {"user", "What is 2+2?"}};
  EXPECT_EQ(apply_chat_template(ChatTemplate::kChatML, m),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(apply_chat_template(ChatTemplate::kChatML, m, false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWhat is 2+2?<|im_end|>\n");
}

TEST(ChatTemplate, MistralGolden) {
  std::vector<ChatMessage> m = {{"system", "Sys."}, {"user", "Hi"}, {"assistant", "Hello"}, {"user", "Again"}};
  EXPECT_EQ(apply_chat_template(ChatTemplate::kMistral, m), "<s>[INST] Sys.\n\nHi [/INST] Hello</s>[INST] Again [/INST]");
  EXPECT_TRUE(parse_chat_template("chatml").ok());
  EXPECT_EQ(parse_chat_template("jinja").status().message(),
            "chat_template must be one of llama3 | chatml | mistral | none; got 'jinja'");
  for (ChatTemplate t : ragd::enum_values<ChatTemplate>()) EXPECT_EQ(*parse_chat_template(ragd::enum_name(t)), t);
  EXPECT_EQ(*parse_chat_template("qwen2"), ChatTemplate::kChatML);  // aliases
  EXPECT_EQ(*parse_chat_template("raw"), ChatTemplate::kNone);
}

TEST(ChatTemplate, EncodesSpecialMarkersAsSingleTokens) {
  const Tokenizer& t = trained();
  std::vector<ChatMessage> m = {{"user", "Hi"}};
  auto ids = t.encode(apply_chat_template(ChatTemplate::kLlama3, m));
  EXPECT_EQ(ids.front(), *t.bos_id());
  EXPECT_EQ(std::count(ids.begin(), ids.end(), *t.token_to_id("<|start_header_id|>")), 2);
}

TEST(TokenizerErrors, MalformedJson) {
  EXPECT_THAT(load_err("{\"model\": {"), HasSubstr("tokenizer.json: invalid JSON"));
}

TEST(TokenizerErrors, UnknownModelType) {
  EXPECT_THAT(load_err(R"({"model":{"type":"Unigram","vocab":{"a":0}}})"),
              HasSubstr("model.type 'Unigram' is not supported"));
  // WordPiece goes to the WordPiece tokenizer (wordpiece.h), whose errors name the problem.
  EXPECT_THAT(load_err(R"({"model":{"type":"WordPiece","vocab":{"a":0}}})"),
              HasSubstr("model.unk_token '[UNK]' is not in the vocabulary"));
}

TEST(TokenizerErrors, MissingModelOrVocab) {
  EXPECT_THAT(load_err(R"({"added_tokens":[]})"), HasSubstr("field 'model' is missing"));
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","merges":[]}})"), HasSubstr("model.vocab is missing"));
}

// Found by fuzzing: a byte-fallback entry whose hex digits are not hex stays an ordinary token (it
// threw out of the parser), and a vocabulary whose ids are far from dense is refused (one id of 62
// million made a 2 KB file allocate gigabytes).
TEST(TokenizerErrors, BadByteFallbackEntryAndSparseIds) {
  auto t = Tokenizer::from_json(R"({"model":{"type":"BPE","byte_fallback":true,"vocab":{"<0xZZ>":0,"a":1},"merges":[]}})",
                                "tokenizer.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  const std::vector<int32_t> zero{0};
  EXPECT_EQ((*t)->decode(zero), "<0xZZ>");
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0,"b":62222222},"merges":[]}})"),
              HasSubstr("largest id 62222222 is far beyond the 2 entries"));
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":50000000,"content":"<x>"}]})"),
              HasSubstr("added_tokens[0].id 50000000 is far beyond"));
}

TEST(TokenizerErrors, MergeNamesUnknownToken) {
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b","a zz"]}})"),
              HasSubstr("model.merges[1]: 'zz' is not in the vocab"));
}

TEST(TokenizerErrors, MergedTokenMissing) {
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1},"merges":[["a","b"]]}})"),
              HasSubstr("model.merges[0]: merged token 'ab' is not in the vocab"));
}

TEST(TokenizerErrors, MalformedMergeEntry) {
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["ab"]}})"),
              HasSubstr("model.merges[0]: 'ab' is not two tokens"));
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[7]}})"), HasSubstr("model.merges[0]: expected"));
}

TEST(TokenizerErrors, BadVocabId) {
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":-3}}})"), HasSubstr("model.vocab['a']"));
  EXPECT_THAT(load_err(R"({"model":{"type":"BPE","vocab":{"a":0,"b":0}}})"), HasSubstr("id 0 is used by both"));
}

TEST(TokenizerErrors, BadRegexAndUnsupportedParts) {
  EXPECT_THAT(load_err(R"({"pre_tokenizer":{"type":"Split","pattern":{"Regex":"(ab"},"behavior":"Isolated"},"model":{"type":"BPE","vocab":{"a":0}}})"),
              HasSubstr("pre_tokenizer.pattern: regex error"));
  EXPECT_THAT(load_err(R"({"pre_tokenizer":{"type":"BertPreTokenizer"},"model":{"type":"BPE","vocab":{"a":0}}})"),
              HasSubstr("pre-tokenizer type 'BertPreTokenizer' is not supported"));
  EXPECT_THAT(load_err(R"({"normalizer":{"type":"Lowercase"},"model":{"type":"BPE","vocab":{"a":0}}})"),
              HasSubstr("normalizer type 'Lowercase' is not supported"));
}

TEST(TokenizerErrors, MissingFile) {
  auto r = Tokenizer::from_file("/nonexistent/tokenizer.json");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("/nonexistent/tokenizer.json"));
}
