// The byte-level BPE the pipeline tests share: a 400-entry vocabulary padded to 512 ids, trained on
// the engine's built-in sample text (deterministic: every call gives the same tokenizer).
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "ragd/engine/tokenizer.h"

namespace ragd::pipelines::testing {

// tokenizer.json text of the shared BPE.
inline std::string tiny_bpe_json() {
  engine::BpeTrainOptions o;
  o.vocab_size = 400;
  o.pad_to = 512;
  auto json = engine::train_byte_level_bpe(engine::builtin_training_text(), o);
  EXPECT_TRUE(json.ok());
  return json.ok() ? *json : std::string();
}

inline std::unique_ptr<engine::Tokenizer> tiny_bpe_tokenizer() {
  auto tok = engine::Tokenizer::from_json(tiny_bpe_json(), "tokenizer.json");
  EXPECT_TRUE(tok.ok());
  return std::move(tok).value();
}

}  // namespace ragd::pipelines::testing
