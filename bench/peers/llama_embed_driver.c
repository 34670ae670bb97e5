/* llama.cpp side of the encoder comparison in `make bench-peers` (PEERS_EMBED=1): embeds synthetic
 * passages of raw token ids with a BERT GGUF (ragctl convert-gguf) through llama.cpp's embedding
 * mode (embeddings = true, the model's pooling, non-causal: one ubatch holds the whole batch).
 * bench/peers/ragd_embed_driver.cpp is the ragd twin with the same command line and output.
 *
 *   llama_embed_driver MODEL.gguf THREADS TOKENS BATCH PASSAGES MODE [--cls ID --sep ID]
 *     Passage p is [CLS] c_1 ... c_{TOKENS-2} [SEP] with c_i = 1000 + (p * 7919 + i * 104729) mod
 *     (n_vocab - 1000): ids above BERT's special and unused range (defaults --cls 101 --sep 102).
 *     MODE dump: prints "emb P: v1,v2,..." for every passage, L2-normalised (%.7g).
 *          time: one untimed warm-up batch, then prints "seconds S" for embedding all PASSAGES in
 *                batches of BATCH (one llama_decode each, pooled vectors read back).
 * Threads run in one persistent ggml thread pool. Exit status 1 on any failure.
 */
#define _GNU_SOURCE
#define PEER_NAME "llama_embed_driver"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_peer.h"

static int g_tokens, g_vocab, g_cls = 101, g_sep = 102;

static llama_token passage_id(int p, int i) {
  if (i == 0) return g_cls;
  if (i == g_tokens - 1) return g_sep;
  return (llama_token)(1000 + ((long long)p * 7919 + (long long)i * 104729) % (g_vocab - 1000));
}

/* Embeds passages [first, first + n) in one batch; writes n * n_embd floats to out (may be NULL). */
static void embed_batch(struct llama_context* ctx, struct llama_batch* b, int first, int n, int n_embd, float* out) {
  b->n_tokens = 0;
  for (int s = 0; s < n; ++s) {
    for (int i = 0; i < g_tokens; ++i) {
      const int k = b->n_tokens++;
      b->token[k] = passage_id(first + s, i);
      b->pos[k] = i;
      b->n_seq_id[k] = 1;
      b->seq_id[k][0] = s;
      b->logits[k] = 1;
    }
  }
  if (llama_decode(ctx, *b) != 0) die("llama_decode failed");
  for (int s = 0; s < n; ++s) {
    const float* e = llama_get_embeddings_seq(ctx, s);
    if (!e) die("no pooled embedding (is the model's pooling type none?)");
    if (out) memcpy(out + (size_t)s * n_embd, e, sizeof(float) * (size_t)n_embd);
  }
}

int main(int argc, char** argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: %s MODEL.gguf THREADS TOKENS BATCH PASSAGES dump|time [--cls ID --sep ID]\n", argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  const int threads = atoi(argv[2]);
  g_tokens = atoi(argv[3]);
  const int batch = atoi(argv[4]);
  const int passages = atoi(argv[5]);
  const char* mode = argv[6];
  for (int i = 7; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--cls") == 0) g_cls = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--sep") == 0) g_sep = atoi(argv[i + 1]);
    else die("unknown argument");
  }
  const int dump = strcmp(mode, "dump") == 0;
  if (!dump && strcmp(mode, "time") != 0) die("MODE must be dump or time");
  if (threads <= 0 || g_tokens < 3 || batch <= 0 || batch > 256 || passages <= 0)
    die("THREADS > 0, TOKENS >= 3, BATCH in [1, 256], PASSAGES > 0");

  peer_backend_init();

  struct llama_model* model = peer_load_model(model_path);
  g_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  if (g_vocab <= 1000) die("the vocabulary needs more than 1000 ids");
  const int n_embd = llama_model_n_embd(model);

  const int per_batch = batch < passages ? batch : passages;
  const uint32_t n_tok = (uint32_t)(per_batch * g_tokens);
  struct llama_context_params cp = llama_context_default_params();
  cp.embeddings = 1;
  cp.n_ctx = n_tok;
  cp.n_batch = n_tok;
  cp.n_ubatch = n_tok; /* non-causal: the whole batch in one ubatch */
  cp.n_seq_max = (uint32_t)per_batch;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.no_perf = 1;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("cannot create a context");
  struct ggml_threadpool* pool = peer_attach_pool(ctx, threads);
  struct llama_batch b = llama_batch_init((int32_t)n_tok, 0, per_batch);
  float* out = malloc(sizeof(float) * (size_t)passages * (size_t)n_embd);

  if (dump) {
    for (int p = 0; p < passages; p += per_batch) {
      const int n = passages - p < per_batch ? passages - p : per_batch;
      embed_batch(ctx, &b, p, n, n_embd, out + (size_t)p * n_embd);
    }
    for (int p = 0; p < passages; ++p) {
      const float* e = out + (size_t)p * n_embd;
      double norm = 0;
      for (int k = 0; k < n_embd; ++k) norm += (double)e[k] * e[k];
      const double inv = norm > 0 ? 1.0 / sqrt(norm) : 0.0;
      printf("emb %d: ", p);
      for (int k = 0; k < n_embd; ++k) printf(k ? ",%.7g" : "%.7g", e[k] * inv);
      printf("\n");
    }
  } else {
    embed_batch(ctx, &b, 0, per_batch, n_embd, NULL); /* warm-up */
    const double t0 = now_s();
    for (int p = 0; p < passages; p += per_batch) {
      const int n = passages - p < per_batch ? passages - p : per_batch;
      embed_batch(ctx, &b, p, n, n_embd, out + (size_t)p * n_embd);
    }
    printf("seconds %.6f\n", now_s() - t0);
  }
  fflush(stdout);
  free(out);
  llama_batch_free(b);
  llama_free(ctx);
  peer_tp_free(pool);
  llama_model_free(model);
  llama_backend_free();
  return 0;
}
