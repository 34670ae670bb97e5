// tokenizer_speed TOKENIZER_JSON: a timing tool, not a test (timings never gate tests). Builds
// ~4 MB of English-like text from the built-in training sample plus numbers and reports CPU-time
// rates for loading, pre-tokenizing (ASCII fast path vs PCRE2 JIT), encoding and decoding.
//   cmake --build build --target tokenizer_speed && build/bin/tokenizer_speed model/tokenizer.json
#include <cstdio>
#include <ctime>
#include <string>

#include "ragd/engine/tokenizer.h"
#include "tokenizer_regex.h"

using namespace ragd::engine;

namespace {
double cpu_since(std::clock_t c0) { return static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC; }
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tokenizer_speed TOKENIZER_JSON\n");
    return 2;
  }
  std::clock_t c0 = std::clock();
  auto tok = Tokenizer::from_file(argv[1]);
  if (!tok.ok()) {
    std::fprintf(stderr, "%s\n", tok.status().to_string().c_str());
    return 1;
  }
  std::printf("load: %.3f s CPU (%d ids)\n", cpu_since(c0), (*tok)->vocab_size());
  std::string text;
  const std::string base(builtin_training_text());
  for (int i = 0; text.size() < (4u << 20); ++i)
    text += base.substr((i * 7919) % base.size()) + " " + std::to_string(i * 31337) + "\n";
  const double mb = text.size() / 1e6;

  auto re = bpe::Regex::compile(bpe::kLlama3Pattern);
  size_t n_fast = 0, n_pcre = 0;
  c0 = std::clock();
  (*re)->split(text, [&](size_t, size_t, bool) { ++n_fast; });
  const double t_fast = cpu_since(c0);
  c0 = std::clock();
  (*re)->split_pcre(text, 0, [&](size_t, size_t, bool) { ++n_pcre; });
  const double t_pcre = cpu_since(c0);
  std::printf("pre-tokenize (Llama-3 pattern) %.1f MB: ASCII fast path %.0f MB/s, PCRE2 JIT %.0f MB/s (%zu / %zu pieces)\n",
              mb, mb / t_fast, mb / t_pcre, n_fast, n_pcre);
  for (int rep = 0; rep < 2; ++rep) {
    c0 = std::clock();
    auto ids = (*tok)->encode(text);
    const double te = cpu_since(c0);
    c0 = std::clock();
    const std::string back = (*tok)->decode(ids);
    const double td = cpu_since(c0);
    std::printf("%s encode %.1f MB -> %zu tokens: %.1f MB/s, %.2f M tokens/s; decode %.0f MB/s; round trip %s\n",
                rep == 0 ? "cold" : "warm", mb, ids.size(), mb / te, ids.size() / 1e6 / te, mb / td,
                back == text ? "ok" : "MISMATCH");
  }
  return 0;
}
