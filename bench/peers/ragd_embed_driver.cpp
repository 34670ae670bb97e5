// ragd side of the encoder comparison in `make bench-peers` (PEERS_EMBED=1): embeds synthetic
// passages of raw token ids with a BERT checkpoint directory through the engine's encoder
// (BertModel::forward on packed batches) and the pooling its sentence-transformers files name.
// Same command line and output as bench/peers/llama_embed_driver.c (see there for the passages).
//
//   ragd_embed_driver MODEL_DIR THREADS TOKENS BATCH PASSAGES dump|time [--cls ID --sep ID]
//
// THREADS goes to kernels::set_num_threads (OpenMP and OpenBLAS). Exit status 1 on any failure.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ragd/engine/bert_model.h"
#include "ragd/engine/sentence_pooling.h"
#include "ragd/kernels/threads.h"

namespace {

using namespace ragd;
using namespace ragd::engine;

[[noreturn]] void die(const std::string& msg) {
  std::fprintf(stderr, "ragd_embed_driver: %s\n", msg.c_str());
  std::exit(1);
}

int g_tokens = 0, g_vocab = 0, g_cls = 101, g_sep = 102;

int32_t passage_id(int p, int i) {
  if (i == 0) return g_cls;
  if (i == g_tokens - 1) return g_sep;
  return static_cast<int32_t>(1000 + (static_cast<long long>(p) * 7919 + static_cast<long long>(i) * 104729) %
                                         (g_vocab - 1000));
}

// Pooled, L2-normalised vectors of passages [first, first + n) into out.
void embed_batch(const BertModel& m, SentencePooling pooling, int first, int n, float* out) {
  std::vector<EncoderInput> in(static_cast<size_t>(n));
  for (int s = 0; s < n; ++s) {
    in[s].ids.resize(static_cast<size_t>(g_tokens));
    in[s].type_ids.assign(static_cast<size_t>(g_tokens), 0);
    for (int i = 0; i < g_tokens; ++i) in[s].ids[i] = passage_id(first + s, i);
  }
  std::vector<float> hidden;
  if (Status st = m.forward(in, &hidden); !st.ok()) die(st.to_string());
  const size_t d = static_cast<size_t>(m.config().hidden_size), T = static_cast<size_t>(g_tokens);
  for (int s = 0; s < n; ++s) {
    float* row = out + static_cast<size_t>(s) * d;
    pool_hidden_states(hidden.data() + static_cast<size_t>(s) * T * d, g_tokens, static_cast<int>(d), pooling, row);
    double norm = 0;
    for (size_t k = 0; k < d; ++k) norm += static_cast<double>(row[k]) * row[k];
    const float inv = norm > 0 ? static_cast<float>(1.0 / std::sqrt(norm)) : 0.0f;
    for (size_t k = 0; k < d; ++k) row[k] *= inv;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s MODEL_DIR THREADS TOKENS BATCH PASSAGES dump|time [--cls ID --sep ID]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const int threads = std::atoi(argv[2]);
  g_tokens = std::atoi(argv[3]);
  const int batch = std::atoi(argv[4]);
  const int passages = std::atoi(argv[5]);
  const std::string mode = argv[6];
  for (int i = 7; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--cls") == 0) g_cls = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--sep") == 0) g_sep = std::atoi(argv[i + 1]);
    else die(std::string("unknown argument '") + argv[i] + "'");
  }
  if (mode != "dump" && mode != "time") die("MODE must be dump or time");
  if (threads <= 0 || g_tokens < 3 || batch <= 0 || passages <= 0) die("THREADS > 0, TOKENS >= 3, BATCH > 0, PASSAGES > 0");
  kernels::set_num_threads(threads);
  auto model = BertModel::load(dir);
  if (!model.ok()) die(model.status().to_string());
  const BertModel& m = **model;
  g_vocab = m.config().vocab_size;
  if (g_vocab <= 1000) die("the vocabulary needs more than 1000 ids");
  auto spec = read_sentence_pooling(dir);
  if (!spec.ok()) die(spec.status().to_string());
  const size_t d = static_cast<size_t>(m.config().hidden_size);
  const int per_batch = std::min(batch, passages);
  std::vector<float> out(static_cast<size_t>(passages) * d);
  auto run_all = [&] {
    for (int p = 0; p < passages; p += per_batch)
      embed_batch(m, spec->pooling, p, std::min(per_batch, passages - p), out.data() + static_cast<size_t>(p) * d);
  };
  if (mode == "dump") {
    run_all();
    for (int p = 0; p < passages; ++p) {
      std::printf("emb %d: ", p);
      for (size_t k = 0; k < d; ++k) std::printf(k ? ",%.7g" : "%.7g", out[static_cast<size_t>(p) * d + k]);
      std::printf("\n");
    }
  } else {
    embed_batch(m, spec->pooling, 0, per_batch, out.data());  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    run_all();
    std::printf("seconds %.6f\n", std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return 0;
}
