// Hugging Face tokenizer.json (engine/src/tokenizer.cpp, bpe_model.cpp): load it, then use what
// loaded the way the engine does: encode fixed text and text taken from the input (special tokens
// on and off), decode the ids whole and through a StreamDecoder, look up a few tokens.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "ragd/engine/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view json(reinterpret_cast<const char*>(data), size);
  auto tok = ragd::engine::Tokenizer::from_json(json, "tokenizer.json");
  if (!tok.ok()) return 0;
  const auto& t = **tok;
  const int32_t vocab = t.vocab_size();
  // Text to encode: fixed samples plus the input's last bytes (arbitrary, maybe invalid UTF-8).
  const std::string tail(json.substr(json.size() - std::min<size_t>(json.size(), 48)));
  const std::string samples[] = {"Hello world! 123 héllo\n\t<|begin_of_text|>x", " the   cat's 2024 ▁a", tail};
  for (const auto& s : samples) {
    for (bool special : {true, false}) {
      std::vector<int32_t> ids = t.encode(s, /*add_bos=*/special, special);
      (void)t.decode(ids, false);
      (void)t.decode(ids, true);
      ragd::engine::StreamDecoder sd(t, /*skip_special=*/!special);
      for (int32_t id : ids) (void)sd.push(id);
      (void)sd.flush();
    }
  }
  // Every id of a small vocabulary, a sample of a large one, and ids just outside it.
  const int32_t step = std::max<int32_t>(1, vocab / 256);
  std::vector<int32_t> ids;
  for (int32_t id = 0; id < vocab; id += step) {
    (void)t.token_bytes(id);
    (void)t.is_special(id);
    ids.push_back(id);
  }
  (void)t.decode(ids, false);
  ragd::engine::StreamDecoder sd(t, false);
  for (int32_t id : ids) (void)sd.push(id);
  (void)sd.flush();
  (void)t.token_to_id("a");
  (void)t.token_to_id(tail);
  (void)t.bos_id();
  (void)t.eos_ids();
  (void)t.leading_strip();
  return 0;
}
