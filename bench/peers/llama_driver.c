/* llama.cpp side of `make bench-peers`: runs a GGUF model on raw token ids through llama.cpp's C
 * API, either printing the greedy continuation or timing one prefill and N single-token decodes.
 * Built by scripts/bench-peers.sh against the prebuilt libllama / libggml of the node-llama-cpp npm
 * package (headers from the llama.cpp source bundled with it); bench/peers/ragd_driver.cpp is the
 * ragd twin with the same command line and output.
 *
 *   llama_driver MODEL.gguf THREADS PROMPT PREFILL DECODE MODE [--kv f16|f32]
 *     PROMPT   comma-separated token ids, or @FILE holding them (commas or whitespace); repeated
 *              cyclically up to PREFILL tokens. No BOS is added: the ids are fed as given.
 *     MODE     greedy: prints "tokens: t1,t2,..." (DECODE ids: the argmax after the prompt, then
 *                      one per decode step)
 *              time:   one untimed warm-up (prefill of at most 1024 tokens + one decode), then prints
 *                      "prefill_s S decode_s S" for one llama_decode over PREFILL tokens and DECODE
 *                      single-token llama_decode calls, each fed the previous argmax
 *     --kv     K/V cache type (default f16, llama.cpp's default)
 *
 * Threads run in one persistent ggml thread pool (as llama-bench): n_threads = n_threads_batch =
 * THREADS. The CPU backend variant best for this machine (libggml-cpu-<arch>.so, found next to
 * libllama) is loaded at start-up and named on stderr. Exit status 1 on any failure.
 */
#define _GNU_SOURCE
#define PEER_NAME "llama_driver"
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "llama_peer.h"

/* Parses "1,2,3" or "@file" into ids; returns the count. */
static int parse_prompt(const char* arg, llama_token** out) {
  char* text = NULL;
  if (arg[0] == '@') {
    FILE* f = fopen(arg + 1, "rb");
    if (!f) {
      fprintf(stderr, "llama_driver: %s: %s\n", arg + 1, strerror(errno));
      exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    text = malloc((size_t)n + 1);
    if (fread(text, 1, (size_t)n, f) != (size_t)n) die("cannot read the prompt file");
    text[n] = 0;
    fclose(f);
  } else {
    text = strdup(arg);
  }
  int cap = 64, n = 0;
  llama_token* ids = malloc(sizeof(llama_token) * (size_t)cap);
  for (char* tok = strtok(text, ", \t\r\n"); tok; tok = strtok(NULL, ", \t\r\n")) {
    char* end = NULL;
    long v = strtol(tok, &end, 10);
    if (*end != 0 || v < 0) {
      fprintf(stderr, "llama_driver: bad token id '%s' in the prompt\n", tok);
      exit(1);
    }
    if (n == cap) ids = realloc(ids, sizeof(llama_token) * (size_t)(cap *= 2));
    ids[n++] = (llama_token)v;
  }
  free(text);
  *out = ids;
  return n;
}

/* Index of the largest logit (the lowest index on ties). */
static llama_token argmax(const float* logits, int n) {
  int best = 0;
  for (int i = 1; i < n; ++i)
    if (logits[i] > logits[best]) best = i;
  return best;
}

/* Decodes `n` tokens as one batch; returns the argmax of the last token's logits. */
static llama_token step(struct llama_context* ctx, llama_token* tokens, int n, int n_vocab) {
  struct llama_batch b = llama_batch_get_one(tokens, n);  /* logits for the last token only */
  int rc = llama_decode(ctx, b);
  if (rc != 0) {
    fprintf(stderr, "llama_driver: llama_decode of %d tokens failed (%d)\n", n, rc);
    exit(1);
  }
  const float* logits = llama_get_logits_ith(ctx, -1);
  if (!logits) die("no logits");
  return argmax(logits, n_vocab);
}

int main(int argc, char** argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: %s MODEL.gguf THREADS PROMPT PREFILL DECODE greedy|time [--kv f16|f32]\n", argv[0]);
    return 2;
  }
  const char* model_path = argv[1];
  const int threads = atoi(argv[2]);
  llama_token* prompt = NULL;
  const int n_prompt = parse_prompt(argv[3], &prompt);
  const int prefill = atoi(argv[4]);
  const int decode = atoi(argv[5]);
  const char* mode = argv[6];
  enum ggml_type kv_type = GGML_TYPE_F16;
  for (int i = 7; i < argc; ++i) {
    if (strcmp(argv[i], "--kv") == 0 && i + 1 < argc) {
      const char* v = argv[++i];
      if (strcmp(v, "f16") == 0) kv_type = GGML_TYPE_F16;
      else if (strcmp(v, "f32") == 0) kv_type = GGML_TYPE_F32;
      else die("--kv takes f16 or f32");
    } else {
      fprintf(stderr, "llama_driver: unknown argument '%s'\n", argv[i]);
      return 2;
    }
  }
  const int greedy = strcmp(mode, "greedy") == 0;
  if (!greedy && strcmp(mode, "time") != 0) die("MODE must be greedy or time");
  if (threads <= 0 || n_prompt == 0 || prefill <= 0 || decode < 0) die("THREADS and PREFILL must be > 0, PROMPT non-empty");

  peer_backend_init();

  struct llama_model* model = peer_load_model(model_path);
  const int n_vocab = llama_vocab_n_tokens(llama_model_get_vocab(model));
  for (int i = 0; i < n_prompt; ++i)
    if (prompt[i] >= n_vocab) die("a prompt token id is outside the vocabulary");

  struct llama_context_params cp = llama_context_default_params();
  cp.n_ctx = (uint32_t)(prefill + decode + 64);
  cp.n_batch = (uint32_t)(prefill > 512 ? prefill : 512);
  cp.n_ubatch = 512;
  cp.n_seq_max = 1;
  cp.n_threads = threads;
  cp.n_threads_batch = threads;
  cp.type_k = kv_type;
  cp.type_v = kv_type;
  cp.no_perf = 1;
  struct llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) die("cannot create a context");
  struct ggml_threadpool* pool = peer_attach_pool(ctx, threads);

  llama_token* tokens = malloc(sizeof(llama_token) * (size_t)prefill);
  for (int i = 0; i < prefill; ++i) tokens[i] = prompt[i % n_prompt];
  llama_memory_t mem = llama_get_memory(ctx);

  if (greedy) {
    llama_token t = step(ctx, tokens, prefill, n_vocab);
    printf("tokens: ");
    for (int i = 0; i < decode; ++i) {
      printf(i ? ",%d" : "%d", t);
      if (i + 1 < decode) t = step(ctx, &t, 1, n_vocab);
    }
    printf("\n");
  } else {
    llama_token t = step(ctx, tokens, prefill < 1024 ? prefill : 1024, n_vocab); /* warm-up */
    step(ctx, &t, 1, n_vocab);
    llama_memory_clear(mem, 0);
    double t0 = now_s();
    t = step(ctx, tokens, prefill, n_vocab);
    const double prefill_s = now_s() - t0;
    t0 = now_s();
    for (int i = 0; i < decode; ++i) t = step(ctx, &t, 1, n_vocab);
    const double decode_s = now_s() - t0;
    printf("prefill_s %.6f decode_s %.6f\n", prefill_s, decode_s);
  }
  fflush(stdout);
  llama_free(ctx);
  peer_tp_free(pool);
  llama_model_free(model);
  llama_backend_free();
  free(tokens);
  free(prompt);
  return 0;
}
