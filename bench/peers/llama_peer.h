/* Shared set-up of the llama.cpp drivers of the peer benchmarks (llama_driver.c,
 * llama_embed_driver.c): timing, errors, logging, loading the prebuilt CPU backend that suits this
 * machine, and one persistent ggml thread pool per context (as llama-bench). Header-only: each
 * driver is a single C file compiled by its script against the npm build of llama.cpp. Each driver
 * defines PEER_NAME (its name in messages) before including this header.
 */
#ifndef RAGD_BENCH_PEERS_LLAMA_PEER_H
#define RAGD_BENCH_PEERS_LLAMA_PEER_H

#include <dlfcn.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ggml-backend.h"
#include "ggml-cpu.h"
#include "ggml.h"
#include "llama.h"

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void die(const char* msg) {
  fprintf(stderr, "%s: %s\n", PEER_NAME, msg);
  exit(1);
}

/* Warnings and errors pass through; so does the line naming the loaded CPU backend variant. */
static void log_cb(enum ggml_log_level level, const char* text, void* user) {
  static int passing = 0;
  (void)user;
  if (level != GGML_LOG_LEVEL_CONT)
    passing = level >= GGML_LOG_LEVEL_WARN || strstr(text, "loaded CPU backend") != NULL;
  if (passing) fputs(text, stderr);
}

typedef struct ggml_threadpool* (*peer_threadpool_new_fn)(struct ggml_threadpool_params*);
typedef void (*peer_threadpool_free_fn)(struct ggml_threadpool*);
static peer_threadpool_new_fn peer_tp_new;
static peer_threadpool_free_fn peer_tp_free;

/* The prebuilt libraries select their CPU backend at run time: load the variants that sit next to
 * libllama (the executable's directory, ggml's default, does not hold them), then llama's backend. */
static void peer_backend_init(void) {
  llama_log_set(log_cb, NULL);
  Dl_info info;
  if (!dladdr((void*)&llama_backend_init, &info) || !info.dli_fname) die("cannot locate libllama");
  char* lib_path = strdup(info.dli_fname);
  ggml_backend_load_all_from_path(dirname(lib_path));
  free(lib_path);
  llama_backend_init();
  ggml_backend_dev_t cpu_dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  if (!cpu_dev) die("no CPU backend could be loaded");
  ggml_backend_reg_t cpu_reg = ggml_backend_dev_backend_reg(cpu_dev);
  peer_tp_new = (peer_threadpool_new_fn)ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_new");
  peer_tp_free = (peer_threadpool_free_fn)ggml_backend_reg_get_proc_address(cpu_reg, "ggml_threadpool_free");
  if (!peer_tp_new || !peer_tp_free) die("the CPU backend exports no thread pool");
}

/* A thread pool of `threads` attached to ctx; free it with peer_tp_free after llama_free(ctx). */
static struct ggml_threadpool* peer_attach_pool(struct llama_context* ctx, int threads) {
  struct ggml_threadpool_params tpp = ggml_threadpool_params_default(threads);
  struct ggml_threadpool* pool = peer_tp_new(&tpp);
  if (!pool) die("cannot create the thread pool");
  llama_attach_threadpool(ctx, pool, NULL);
  return pool;
}

static struct llama_model* peer_load_model(const char* path) {
  struct llama_model_params mp = llama_model_default_params();
  mp.n_gpu_layers = 0;
  struct llama_model* model = llama_model_load_from_file(path, mp);
  if (!model) die("cannot load the model");
  return model;
}

#endif
