// Constrained decoding (grammar.h, token_constraint.h, constraint_matcher.h) against naive
// references: the NFA simulation of the grammar (Grammar::accepts / accepts_prefix) decides, token
// by token, whether prefix + token can still become an accepted output; the matcher's mask must
// say the same for every id, on random vocabularies of odd sizes, along random walks, after
// rollbacks. Number ranges against brute force; the sampler's masked draw against
// sample_reference.
#include <gtest/gtest.h>
#include <fmt/format.h>

#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "ragd/engine/constraint_cache.h"
#include "ragd/engine/constraint_matcher.h"
#include "ragd/engine/grammar.h"
#include "ragd/engine/sampler.h"
#include "ragd/engine/token_constraint.h"

namespace ragd::engine {
namespace {

ConstraintSpec schema(std::string s, int ws = 0) { return ConstraintSpec{"json_schema", std::move(s), {}, ws}; }
ConstraintSpec regex(std::string s) { return ConstraintSpec{"regex", std::move(s), {}, 0}; }

std::shared_ptr<const Grammar> compile(const ConstraintSpec& spec) {
  auto g = compile_grammar(spec);
  EXPECT_TRUE(g.ok()) << spec.source << ": " << g.status().to_string();
  return g.ok() ? *g : nullptr;
}

TEST(ConstraintGrammar, RegexMatchesWholeText) {
  struct Case {
    const char* pattern;
    const char* text;
    bool ok;
  } cases[] = {
      {"a(b|c)*d", "abcbd", true},     {"a(b|c)*d", "abx", false},     {"^\\d{3}-\\d{4}$", "555-1234", true},
      {"\\d{3}-\\d{4}", "55-1234", false}, {"[A-Z][a-z]+", "Hello", true}, {"[A-Z][a-z]+", "hello", false},
      {"(?:yes|no)", "yes", true},     {"(?P<x>ab)+", "ababab", true},  {"x{2,3}", "xxxx", false},
      {"x{2,}", "xxxxxxx", true},      {"[^0-9]+", "abc", true},         {"[^0-9]+", "a1", false},
      {"\\w+@\\w+\\.com", "me@site.com", true}, {".", "\n", false},     {"é+", "éé", true},
      {"[α-ω]{2}", "βγ", true},        {"a|", "", true},                 {"a{,2}", "aa", true},
      {"\\.", ".", true},              {"[a\\-z]", "-", true},           {"colou?r", "color", true},
  };
  for (const auto& c : cases) {
    auto g = compile(regex(c.pattern));
    ASSERT_TRUE(g);
    EXPECT_EQ(g->accepts(c.text), c.ok) << c.pattern << " on '" << c.text << "'";
  }
}

TEST(ConstraintGrammar, UnsupportedConstructsAreNamed) {
  struct Case {
    ConstraintSpec spec;
    const char* needle;
  } cases[] = {
      {regex("(a)\\1"), "\\1"},
      {regex("(?=a)a"), "(?="},
      {regex("a\\b"), "\\b"},
      {regex("(ab"), "')'"},
      {schema(R"({"type":"integer","multipleOf":3})"), "multipleOf"},
      {schema(R"({"not":{"type":"string"}})"), "'not'"},
      {schema(R"({"type":"object","properties":{"a":{"type":"array","uniqueItems":true}}})"), "/properties/a/uniqueItems"},
      {schema(R"({"type":"string","format":"hostname"})"), "hostname"},
      {schema(R"({"oneOf":[{"type":"string"},{"type":"string","maxLength":3}]})"), "oneOf"},
      {schema(R"({"$ref":"http://x/y"})"), "local"},
      {schema(R"({"type":"integer","minimum":5,"maximum":2})"), "minimum"},
      {schema("{"), "not valid JSON"},
      {ConstraintSpec{"yaml", "", {}, 0}, "json_schema"},
  };
  for (const auto& c : cases) {
    auto g = compile_grammar(c.spec);
    ASSERT_FALSE(g.ok()) << c.spec.source;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(c.needle), std::string::npos) << g.status().message();
  }
}

TEST(ConstraintGrammar, JsonSchemaShapes) {
  auto g = compile(schema(R"({"type":"object","properties":{"name":{"type":"string","maxLength":5},
      "age":{"type":"integer","minimum":0,"maximum":150},"tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
      "required":["name"],"additionalProperties":false})"));
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->accepts(R"({"name":"bob"})"));
  EXPECT_TRUE(g->accepts(R"({"name":"bob","age":42,"tags":["a","b"]})"));
  EXPECT_TRUE(g->accepts(R"({"name":"b\"\u00e9","tags":[]})"));
  EXPECT_FALSE(g->accepts(R"({"age":42})"));                       // name is required
  EXPECT_FALSE(g->accepts(R"({"name":"bob","age":151})"));
  EXPECT_FALSE(g->accepts(R"({"name":"bobbie"})"));                 // maxLength
  EXPECT_FALSE(g->accepts(R"({"name":"bob","tags":["a","b","a"]})"));  // maxItems
  EXPECT_FALSE(g->accepts(R"({"name": "bob"})"));                   // compact by default
  EXPECT_FALSE(g->accepts(R"({"age":1,"name":"bob"})"));            // schema order
  EXPECT_FALSE(g->accepts("{\"name\":\"a\\ud800\"}"));              // no lone surrogate escapes
  auto w = compile(schema(R"({"type":"object","properties":{"a":{"type":"boolean"}}})", 2));
  EXPECT_TRUE(w->accepts("{ \"a\" :\n true }"));
  EXPECT_FALSE(w->accepts("{   \"a\":true}"));  // at most 2
  // Recursion through $ref, bounded.
  auto t = compile(schema(R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
      "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"]}},"$ref":"#/$defs/node"})"));
  EXPECT_TRUE(t->accepts(R"({"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]})"));
  // oneOf told apart by a discriminator; anyOf of a type and null.
  auto o = compile(schema(R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"},"x":{"type":"integer"}},"required":["k"]},
      {"type":"object","properties":{"k":{"const":"b"},"y":{"type":"boolean"}},"required":["k"]}]})"));
  EXPECT_TRUE(o->accepts(R"({"k":"b","y":true})"));
  EXPECT_FALSE(o->accepts(R"({"k":"b","x":1})"));
  auto n = compile(schema(R"({"anyOf":[{"type":"string","format":"date"},{"type":"null"}]})"));
  EXPECT_TRUE(n->accepts(R"("2024-02-28")"));
  EXPECT_TRUE(n->accepts("null"));
  EXPECT_FALSE(n->accepts(R"("2024-02-30")"));
  auto any = compile(ConstraintSpec{"json_object", "", {}, 0});
  EXPECT_TRUE(any->accepts(R"({"a":[1,{"b":null}],"c":-0.5})"));
  EXPECT_FALSE(any->accepts("[1]"));
  auto ch = compile(ConstraintSpec{"choice", "", {"yes", "no", "maybe"}, 0});
  EXPECT_TRUE(ch->accepts("maybe"));
  EXPECT_FALSE(ch->accepts("ye"));
  EXPECT_TRUE(ch->accepts_prefix("ye"));
}

// Hostile input: random patterns and mutated schemas compile or are refused with InvalidArgument,
// never crash; deep nesting is refused, not a stack overflow.
TEST(ConstraintGrammar, RandomAndHostileInputsAreRefusedCleanly) {
  std::mt19937_64 rng(99);
  const std::string meta = "ab()[]{}|*+?.^$\\-,0123456789dws:P<>=!";
  for (int k = 0; k < 3000; ++k) {
    std::string p;
    for (size_t n = rng() % 24; n > 0; --n) p.push_back(meta[rng() % meta.size()]);
    auto g = compile_grammar(regex(p));
    if (!g.ok()) EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << p;
  }
  const std::string base = R"({"type":"object","properties":{"a":{"type":"array","items":{"enum":[1,"x"]},"maxItems":3},)"
                           R"("b":{"anyOf":[{"type":"string","pattern":"^[a-z]+$"},{"$ref":"#/$defs/n"}]}},"required":["a"],)"
                           R"("$defs":{"n":{"type":"integer","minimum":-5,"maximum":5}}})";
  const std::string junk = "{}[]:,\"0123456789-.etruanlf ";
  for (int k = 0; k < 3000; ++k) {
    std::string s = base;
    for (int m = 1 + static_cast<int>(rng() % 3); m > 0; --m) {
      const size_t at = rng() % s.size();
      switch (rng() % 3) {
        case 0: s.erase(at, 1); break;
        case 1: s.insert(at, 1, junk[rng() % junk.size()]); break;
        default: s[at] = junk[rng() % junk.size()]; break;
      }
    }
    auto g = compile_grammar(schema(s));
    if (!g.ok()) EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument) << s;
  }
  auto deep = compile_grammar(regex(std::string(100000, '(') + "a" + std::string(100000, ')')));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("nested"), std::string::npos) << deep.status().message();
  std::string nested = "true";
  for (int d = 0; d < 5000; ++d) nested = R"({"type":"array","items":)" + nested + "}";
  auto deep_schema = compile_grammar(schema(nested));
  EXPECT_FALSE(deep_schema.ok());  // beyond simdjson's 1024 levels: not valid JSON to the parser
  auto huge = compile_grammar(regex("((a{1000}){1000}){1000}"));
  ASSERT_FALSE(huge.ok());
  EXPECT_NE(huge.status().message().find("exceeds"), std::string::npos) << huge.status().message();
}

TEST(ConstraintGrammar, IntegerRangesMatchBruteForce) {
  std::mt19937_64 rng(7);
  for (int round = 0; round < 60; ++round) {
    std::uniform_int_distribution<int> d(-1200, 1200);
    int lo = d(rng), hi = d(rng);
    if (lo > hi) std::swap(lo, hi);
    const bool excl = round % 3 == 0;
    const std::string s = excl ? fmt::format(R"({{"type":"integer","exclusiveMinimum":{},"maximum":{}}})", lo, hi)
                               : fmt::format(R"({{"type":"integer","minimum":{},"maximum":{}}})", lo, hi);
    auto g = compile_grammar(schema(s));
    const int first = excl ? lo + 1 : lo;
    if (first > hi) {
      EXPECT_FALSE(g.ok()) << s;
      continue;
    }
    ASSERT_TRUE(g.ok()) << s << ": " << g.status().to_string();
    for (int v = lo - 40; v <= hi + 40; ++v)
      ASSERT_EQ((*g)->accepts(std::to_string(v)), v >= first && v <= hi) << s << " on " << v;
    EXPECT_FALSE((*g)->accepts("-0"));
    EXPECT_FALSE((*g)->accepts("0" + std::to_string(std::abs(hi) + 1)));  // leading zero
  }
}

TEST(ConstraintGrammar, NumberRangesAreSound) {
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> d(-300, 300);
  for (int round = 0; round < 40; ++round) {
    double lo = std::round(d(rng) * 4) / 4, hi = std::round(d(rng) * 4) / 4;
    if (lo > hi) std::swap(lo, hi);
    if (hi - lo < 2) hi = lo + 2;
    const bool lo_ex = round % 2 == 1, hi_ex = round % 4 >= 2;
    const std::string s = fmt::format(R"({{"type":"number","{}":{},"{}":{}}})", lo_ex ? "exclusiveMinimum" : "minimum", lo,
                                      hi_ex ? "exclusiveMaximum" : "maximum", hi);
    auto g = compile(schema(s));
    ASSERT_TRUE(g);
    int accepted = 0;
    std::uniform_int_distribution<int> frac_digits(0, 3);
    for (int k = 0; k < 3000; ++k) {
      const double x = std::uniform_real_distribution<double>(lo - 3, hi + 3)(rng);
      const int fd = frac_digits(rng);
      std::string text = fmt::format("{:.{}f}", x, fd);
      if (text == "-0" || text.rfind("-0.", 0) == 0) continue;
      const double v = std::stod(text);
      if (g->accepts(text)) {
        ++accepted;
        EXPECT_TRUE((lo_ex ? v > lo : v >= lo) && (hi_ex ? v < hi : v <= hi)) << s << " accepted " << text;
      }
    }
    EXPECT_GT(accepted, 0) << s;
  }
}

// A random vocabulary of odd size over the bytes JSON and the test patterns use, every single
// byte among them, some multi-byte characters cut inside, id 0 reserved as the stop id (no bytes).
std::vector<std::string> random_vocab(size_t n, uint64_t seed) {
  const std::string alphabet = "{}[]\":,0123456789-.eEabcdefxyz ntrulsTZ@\\/";
  std::vector<std::string> v{""};
  for (char c : alphabet) v.emplace_back(1, c);
  const std::string multi[] = {"é", "β", "😀", "\xC3", "\xA9", "\xF0\x9F", "\x98\x80"};
  for (const auto& m : multi) v.push_back(m);
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1), len(2, 7);
  static const char* pieces[] = {"\":\"", "\",\"", "true", "false", "null", "\":", "},{", "[\"", "\"]", "\":[", "2024-", "-0"};
  while (v.size() < n) {
    if (rng() % 4 == 0) {
      v.emplace_back(pieces[rng() % std::size(pieces)]);
      continue;
    }
    std::string s;
    for (size_t k = len(rng); k > 0; --k) s.push_back(alphabet[pick(rng)]);
    v.push_back(s);
  }
  v.resize(n);
  return v;
}

const std::vector<ConstraintSpec>& walk_specs() {
  static const std::vector<ConstraintSpec> specs = {
      schema(R"({"type":"object","properties":{"id":{"type":"integer","minimum":-20,"maximum":300},
          "name":{"type":"string","minLength":1,"maxLength":6},"ok":{"type":"boolean"}},"required":["id","ok"]})"),
      schema(R"({"type":"array","items":{"type":"number","minimum":-5.5,"maximum":12},"minItems":1,"maxItems":4})"),
      schema(R"({"anyOf":[{"type":"string","format":"date"},{"type":"null"},{"enum":["x","yz",3]}]})"),
      schema(R"({"type":"object","properties":{"u":{"type":"string","format":"uuid"},"s":{"type":"string","pattern":"^[a-c]+z$"}}})", 1),
      ConstraintSpec{"json_object", "", {}, 0},
      regex("(ab|c[0-9]{2,3})+x?"),
      ConstraintSpec{"choice", "", {"true", "tree", "trust", "1"}, 0},
      schema(R"({"type":"object","properties":{"t":{"type":"string","maxLength":120},"n":{"type":"integer"}},"required":["t"]})"),
  };
  return specs;
}

// Expected mask by brute force: id allowed iff prefix + bytes is a prefix of an accepted output;
// the stop id iff prefix is complete or nothing can follow.
void expect_mask_matches(const Grammar& g, const TokenVocabulary& vocab, const std::string& prefix, TokenMask m,
                         bool first_strip, const std::string& what) {
  bool any = false;
  std::vector<char> want(static_cast<size_t>(vocab.size()), 0);
  for (int32_t id = 1; id < vocab.size(); ++id) {
    std::string b = vocab.bytes(id);
    if (first_strip && !b.empty() && b[0] == ' ') b.erase(0, 1);
    want[static_cast<size_t>(id)] = !vocab.bytes(id).empty() && g.accepts_prefix(prefix + b);
    any = any || want[static_cast<size_t>(id)];
  }
  want[0] = g.accepts(prefix) || !any;
  for (int32_t id = 0; id < vocab.size(); ++id)
    ASSERT_EQ(m.allows(id), want[static_cast<size_t>(id)] != 0)
        << what << ": id " << id << " '" << vocab.bytes(id) << "' after '" << prefix << "'";
}

TEST(ConstraintMask, MatchesBruteForceAlongRandomWalksAndRollbacks) {
  for (size_t n : {57u, 129u, 1001u}) {
    auto vocab = TokenVocabulary::from_bytes(random_vocab(n, n));
    ConstraintCache cache(vocab);
    for (size_t si = 0; si < walk_specs().size(); ++si) {
      auto c = cache.get(walk_specs()[si]);
      ASSERT_TRUE(c.ok()) << c.status().to_string();
      const Grammar& g = (*c)->grammar();
      for (uint64_t seed = 0; seed < 3; ++seed) {
        std::mt19937_64 rng(seed * 31 + si);
        ConstraintMatcher m(*c, {0});
        std::string prefix;
        std::vector<std::vector<uint64_t>> masks;
        std::vector<std::string> prefixes;
        const std::string what = "vocab " + std::to_string(n) + " spec " + std::to_string(si) + " seed " + std::to_string(seed);
        for (int step = 0; step < 60 && !m.complete(); ++step) {
          TokenMask mk = m.mask();
          expect_mask_matches(g, *vocab, prefix, mk, false, what);
          if (HasFatalFailure()) return;
          masks.emplace_back(mk.words.begin(), mk.words.end());
          prefixes.push_back(prefix);
          std::vector<int32_t> allowed;
          for (int32_t id = 1; id < vocab->size(); ++id)
            if (mk.allows(id)) allowed.push_back(id);
          if (allowed.empty()) break;
          const int32_t t = allowed[rng() % allowed.size()];
          ASSERT_TRUE(m.accept(t));
          prefix += vocab->bytes(t);
          EXPECT_EQ(m.accepting(), g.accepts(prefix));
        }
        EXPECT_FALSE(m.accept(0)) << "the stop id has no bytes";
        // Roll back to every earlier point: the same masks again.
        for (size_t k = masks.size(); k-- > 0;) {
          m.rollback(k);
          TokenMask mk = m.mask();
          ASSERT_EQ(std::vector<uint64_t>(mk.words.begin(), mk.words.end()), masks[k]) << what << " rollback to " << k;
        }
      }
    }
  }
}

TEST(ConstraintMask, FirstTokenWithLeadingStrip) {
  auto bytes = random_vocab(300, 5);
  bytes.push_back(" {");
  bytes.push_back(" [1");
  auto vocab = TokenVocabulary::from_bytes(bytes, 1);
  auto g = compile(ConstraintSpec{"json_object", "", {}, 0});
  auto c = std::make_shared<const CompiledConstraint>(g, vocab);
  ConstraintMatcher m(c, {0});
  expect_mask_matches(*g, *vocab, "", m.mask(), true, "first token");
  EXPECT_TRUE(m.accept(vocab->size() - 2));  // " {" -> "{"
  expect_mask_matches(*g, *vocab, "{", m.mask(), false, "second token");
}

// The states of a long bounded string that still have room for the longest token share one class
// and so one mask: far fewer trie walks than states, the masks still those of brute force (above).
TEST(ConstraintMask, LongBoundedStringsShareMasks) {
  std::vector<std::string> bytes = {""};
  for (char c = 'a'; c <= 'z'; ++c) bytes.emplace_back(1, c), bytes.push_back(std::string(3, c));
  bytes.push_back("\"");
  bytes.push_back("ab\"");
  auto vocab = TokenVocabulary::from_bytes(bytes);
  auto g = compile(schema(R"({"type":"string","maxLength":3000})"));
  auto c = std::make_shared<const CompiledConstraint>(g, vocab);
  ConstraintMatcher m(c, {0});
  ASSERT_TRUE(m.accept(vocab->size() - 2));  // the opening quote
  std::string prefix = "\"";
  std::mt19937_64 rng(4);
  for (int step = 0; step < 600; ++step) {
    TokenMask mk = m.mask();
    if (step % 50 == 0) expect_mask_matches(*g, *vocab, prefix, mk, false, "long string");
    std::vector<int32_t> body;
    for (int32_t id = 1; id < vocab->size(); ++id)
      if (mk.allows(id) && vocab->bytes(id).find('"') == std::string::npos) body.push_back(id);
    if (body.empty()) expect_mask_matches(*g, *vocab, prefix, mk, false, "long string");
    ASSERT_FALSE(body.empty()) << "step " << step << " after " << prefix.size() << " bytes";
    const int32_t t = body[rng() % body.size()];
    ASSERT_TRUE(m.accept(t));
    prefix += vocab->bytes(t);
  }
  const auto st = c->stats();
  EXPECT_GT(st.dfa_states, 600u);
  EXPECT_LT(st.masks_computed, 20u) << "states " << st.dfa_states << ", classes " << st.classes;
}

TEST(ConstraintMask, CacheSharesCompiledConstraints) {
  auto vocab = TokenVocabulary::from_bytes(random_vocab(64, 1));
  ConstraintCache cache(vocab, 2);
  auto a = cache.get(schema(R"({"type":"boolean"})"));
  auto b = cache.get(schema(R"({"type":"boolean"})"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->get(), b->get());
  EXPECT_EQ(cache.stats().hits, 1u);
  (void)cache.get(schema(R"({"type":"null"})"));
  (void)cache.get(schema(R"({"type":"string"})"));
  EXPECT_EQ(cache.stats().entries, 2u);
  auto bad = cache.get(schema(R"({"type":"string","contains":{}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("contains"), std::string::npos);
}

TEST(ConstraintSampler, MaskedDrawEqualsReference) {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> nd(0, 2);
  for (int v : {7, 64, 129, 1000}) {
    for (int round = 0; round < 20; ++round) {
      std::vector<float> logits(static_cast<size_t>(v));
      for (float& x : logits) x = nd(rng);
      std::vector<uint64_t> words(static_cast<size_t>(v + 63) / 64 - (round % 3 == 0 ? 0 : 0), 0);
      const int keep = 1 + static_cast<int>(rng() % 5);
      std::set<int32_t> allowed;
      for (int k = 0; k < keep; ++k) allowed.insert(static_cast<int32_t>(rng() % static_cast<uint64_t>(v)));
      for (int32_t id : allowed) words[static_cast<size_t>(id) / 64] |= uint64_t{1} << (id % 64);
      TokenMask mask{words};
      std::vector<float> in_place = logits;
      apply_token_mask(in_place, mask);
      for (int i = 0; i < v; ++i)
        ASSERT_EQ(std::isinf(in_place[static_cast<size_t>(i)]), !allowed.count(i)) << "v " << v << " id " << i;
      SamplingParams p;
      p.seed = static_cast<uint64_t>(round);
      p.temperature = round % 4 == 0 ? 0.0f : 0.8f;
      p.top_k = round % 4 == 1 ? 3 : 0;
      p.top_p = round % 4 == 2 ? 0.9f : 1.0f;
      p.repetition_penalty = round % 5 == 0 ? 1.3f : 1.0f;
      std::vector<int32_t> history{0, 1, 2};
      Sampler s(p);
      std::mt19937_64 ref_rng(p.seed);
      const SampleResult got = s.sample(logits, history, &mask);
      const SampleResult want = sample_reference(logits, history, p, ref_rng, &mask);
      EXPECT_TRUE(allowed.count(got.token)) << "v " << v << " round " << round;
      EXPECT_EQ(got.token, want.token) << "v " << v << " round " << round;
      EXPECT_NEAR(got.logprob, log_softmax_at(logits, got.token), 1e-4);
    }
  }
}

// The Qwen3 vocabulary (151 k byte-level tokens) when tests/engine_io/fetch_tokenizer_references.sh
// has fetched it: masks against brute force on a few steps of a schema.
TEST(ConstraintMask, RealQwenVocabulary) {
  const std::string path = std::string(RAGD_SOURCE_DIR) + "/examples/tokenizers/qwen3/tokenizer.json";
  if (!std::filesystem::exists(path)) GTEST_SKIP() << "no " << path << " (tests/engine_io/fetch_tokenizer_references.sh)";
  auto tok = Tokenizer::from_file(path);
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  auto vocab = TokenVocabulary::from_tokenizer(**tok);
  auto g = compile(schema(R"({"type":"object","properties":{"city":{"type":"string","maxLength":12},
      "population":{"type":"integer","minimum":0}},"required":["city","population"]})"));
  auto c = std::make_shared<const CompiledConstraint>(g, vocab);
  ConstraintMatcher m(c, (*tok)->eos_ids());
  std::string prefix;
  const auto ids = (*tok)->encode(R"({"city":"Paris","population":21)", false, false);
  ASSERT_GT(ids.size(), 4u);
  for (int32_t next : ids) {
    TokenMask mk = m.mask();
    for (int32_t id = 0; id < vocab->size(); ++id) {
      const std::string& b = vocab->bytes(id);
      const bool want = !b.empty() && g->accepts_prefix(prefix + b);
      if (mk.allows(id) != want) {
        ADD_FAILURE() << "id " << id << " '" << b << "' after '" << prefix << "'";
        return;
      }
    }
    ASSERT_TRUE(m.accept(next)) << vocab->bytes(next);
    prefix += vocab->bytes(next);
  }
  EXPECT_FALSE(m.accepting());
  // A long single-byte repetition: its states share masks by class even under Qwen's 128-byte
  // longest token.
  auto rg = compile(regex("[a-z]{0,3000}"));
  auto rc = std::make_shared<const CompiledConstraint>(rg, vocab);
  ConstraintMatcher rm(rc, (*tok)->eos_ids());
  std::mt19937_64 rng(8);
  std::string text;
  for (int step = 0; step < 150; ++step) {
    TokenMask mk = rm.mask();
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab->size(); ++id)
      if (mk.allows(id) && !vocab->bytes(id).empty()) allowed.push_back(id);
    ASSERT_FALSE(allowed.empty());
    const int32_t t = allowed[rng() % allowed.size()];
    ASSERT_TRUE(rm.accept(t));
    text += vocab->bytes(t);
  }
  EXPECT_TRUE(rg->accepts_prefix(text));
  const auto st = rc->stats();
  EXPECT_LT(st.masks_computed, 30u) << "DFA states " << st.dfa_states << ", classes " << st.classes << ", over budget "
                                    << st.unclassed;
}

}  // namespace
}  // namespace ragd::engine
