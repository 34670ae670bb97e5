// Our tokenizer on the real Llama-3 vocabulary and merges against an independent implementation:
// ids produced by the npm package llama3-tokenizer-js on a set of texts (tests/engine_io/
// fetch_llama3_reference.sh writes the fixture; it is not committed, the test skips without it).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <simdjson.h>

#include "ragd/engine/tokenizer.h"

using namespace ragd::engine;

TEST(TokenizerReal, Llama3MatchesReferenceEncoder) {
  const char* env = std::getenv("RAGD_LLAMA3_REF_DIR");
  const std::filesystem::path dir = env ? env : RAGD_SOURCE_DIR "/examples/tokenizers/llama3-js";
  if (!std::filesystem::exists(dir / "tokenizer.json") || !std::filesystem::exists(dir / "cases.json"))
    GTEST_SKIP() << "no Llama-3 reference fixture in " << dir << " (run tests/engine_io/fetch_llama3_reference.sh)";
  auto tok = Tokenizer::from_file((dir / "tokenizer.json").string());
  ASSERT_TRUE(tok.ok()) << tok.status().to_string();
  EXPECT_EQ((*tok)->vocab_size(), 128256);
  EXPECT_EQ((*tok)->bos_id(), 128000);
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  ASSERT_EQ(p.load((dir / "cases.json").string()).get(doc), simdjson::SUCCESS);
  int n = 0;
  for (auto c : doc["cases"].get_array()) {
    std::string text(c["text"].get_string().value());
    std::vector<int32_t> want;
    for (auto id : c["ids"].get_array()) want.push_back(static_cast<int32_t>(id.get_int64().value()));
    EXPECT_EQ((*tok)->encode(text), want) << "text: " << text;
    EXPECT_EQ((*tok)->decode(want), text);
    ++n;
  }
  EXPECT_GE(n, 20);
}
