// Timing tool (not a test, not built by default): passages embedded per second by the encoder
// embedder on a random-weight encoder directory, at a given token length and batch size.
//   encoder_speed MODEL_DIR [TOKENS=128] [BATCH=32] [PASSAGES=64]
// Passages are synthetic words sized so that each is truncated to exactly TOKENS tokens.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ragd/retrieval/embedder.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: encoder_speed MODEL_DIR [TOKENS] [BATCH] [PASSAGES]\n");
    return 2;
  }
  const int tokens = argc > 2 ? std::atoi(argv[2]) : 128;
  const int batch = argc > 3 ? std::atoi(argv[3]) : 32;
  const int n = argc > 4 ? std::atoi(argv[4]) : 64;
  ragd::retrieval::EmbedderOptions o;
  o.name = "encoder";
  o.model_dir = argv[1];
  o.max_tokens = tokens;
  o.batch_size = batch;
  auto emb = ragd::retrieval::make_encoder_embedder(o);
  if (!emb.ok()) {
    std::fprintf(stderr, "%s\n", emb.status().to_string().c_str());
    return 1;
  }
  std::vector<std::string> texts;
  for (int i = 0; i < n; ++i) {
    std::string t;
    for (int w = 0; w < tokens * 2; ++w) t += "the passage " + std::to_string(i * 7 + w) + " ";
    texts.push_back(t);
  }
  std::vector<std::string_view> views(texts.begin(), texts.end());
  std::vector<float> out;
  // Warm-up on one batch, then time all passages.
  (void)(*emb)->embed(std::span(views).first(std::min<size_t>(views.size(), batch)), &out);
  const auto t0 = std::chrono::steady_clock::now();
  auto st = (*emb)->embed(views, &out);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!st.ok()) {
    std::fprintf(stderr, "%s\n", st.to_string().c_str());
    return 1;
  }
  std::printf("%s: %d passages x %d tokens, batch %d: %.2f s, %.1f passages/s, %.0f tokens/s\n", argv[1], n, tokens,
              batch, s, n / s, n * static_cast<double>(tokens) / s);
  return 0;
}
