// ragctl plan (--model DIR | --preset P) --tokens N [--workers 1,2,4,8] [--threads T] [--kv-dtype D]
//            [--rates FILE] [--json]:
// what a prompt of N tokens costs on W sequence-parallel workers: KV bytes per worker, FLOPs, and the
// prefill time and per-token decode time the performance model (seqparallel/perf_model.h) predicts
// from kernel rates it measures first on this machine with this model (a few seconds), or from rates
// measured elsewhere (--rates: a JSON file, e.g. bench/rates/h200-llama3-8b.json; only the model's
// config.json is read then, or a preset's shape is used: --preset needs --rates).
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "enum_option.h"
#include "ragd/engine/model.h"
#include "ragd/engine/model_config.h"
#include "ragd/engine/presets.h"
#include "ragd/kernels/threads.h"
#include "ragd/seqparallel/perf_model.h"

namespace ragd::tools {
namespace {

struct PlanArgs {
  std::string model;
  std::string preset;
  int64_t tokens = 0;
  std::string workers = "1,2,4,8";
  int threads = 1;
  kernels::KvDtype kv_dtype = engine::ModelOptions{}.kv_dtype;
  std::string rates_file;
  bool json = false;
};

std::string gib(double b) {
  char s[32];
  std::snprintf(s, sizeof s, "%.2f GiB", b / (1u << 30));
  return s;
}

int run_plan(const PlanArgs& a) {
  std::vector<int> workers;
  std::stringstream ss(a.workers);
  for (std::string x; std::getline(ss, x, ',');) {
    const int w = std::atoi(x.c_str());
    if (w < 1) {
      std::fprintf(stderr, "ragctl plan: --workers: '%s' is not a positive worker count\n", x.c_str());
      return 2;
    }
    workers.push_back(w);
  }
  if (a.tokens < 1 || a.tokens > INT32_MAX) {
    std::fprintf(stderr, "ragctl plan: --tokens must be in [1, 2^31 - 1], got %lld\n", static_cast<long long>(a.tokens));
    return 2;
  }
  if (a.model.empty() == a.preset.empty()) {
    std::fprintf(stderr, "ragctl plan: give one of --model DIR and --preset NAME\n");
    return 2;
  }
  if (!a.preset.empty() && a.rates_file.empty()) {
    std::fprintf(stderr, "ragctl plan: --preset needs --rates (calibration runs a loaded model)\n");
    return 2;
  }
  engine::ModelOptions o;
  o.kv_dtype = a.kv_dtype;
  o.num_threads = a.threads;
  o.kv_pool_bytes = 256u << 20;  // room for the calibration's 32k-token context of small models
  engine::ModelConfig cfg;
  size_t per_token_layer = 0;
  seqparallel::KernelRates rates;
  if (!a.rates_file.empty()) {
    std::ifstream in(a.rates_file);
    if (!in) {
      std::fprintf(stderr, "ragctl plan: --rates: cannot read %s\n", a.rates_file.c_str());
      return 1;
    }
    std::stringstream text;
    text << in.rdbuf();
    auto r = seqparallel::parse_kernel_rates(text.str());
    if (!r.ok()) {
      std::fprintf(stderr, "ragctl plan: %s: %s\n", a.rates_file.c_str(), r.status().message().c_str());
      return 1;
    }
    rates = *r;
    auto c = a.preset.empty() ? engine::ModelConfig::from_json_file(a.model + "/config.json")
                              : engine::preset_config(a.preset);
    if (!c.ok()) {
      std::fprintf(stderr, "ragctl plan: %s\n", c.status().to_string().c_str());
      return 1;
    }
    cfg = *c;
    per_token_layer = engine::kv_layout(cfg, o).token_bytes() / cfg.num_hidden_layers;
  } else {
    kernels::set_num_threads(a.threads);
    auto m = engine::Model::load(a.model, o);
    if (!m.ok()) {
      std::fprintf(stderr, "ragctl plan: %s\n", m.status().to_string().c_str());
      return 1;
    }
    engine::Model& model = *m.value();
    cfg = model.config();
    per_token_layer = model.kv_pool().layout().token_bytes() / cfg.num_hidden_layers;
    // The calibration contexts must fit the pool.
    const int64_t pool_tokens = static_cast<int64_t>(model.kv_pool().bytes() / (per_token_layer * cfg.num_hidden_layers));
    const int ctx = static_cast<int>(std::min<int64_t>(32768, pool_tokens - 64));
    auto r = seqparallel::calibrate(model, std::min(4096, ctx), ctx);
    if (!r.ok()) {
      std::fprintf(stderr, "ragctl plan: calibration: %s\n", r.status().to_string().c_str());
      return 1;
    }
    rates = *r;
  }
  if (a.json) {
    std::printf("{\"tokens\":%lld,\"threads_per_worker\":%d,\"rates\":%s,\"plans\":[",
                static_cast<long long>(a.tokens), rates.threads, seqparallel::kernel_rates_json(rates).c_str());
  } else {
    std::printf("model %s: %d layers, hidden %d, %d/%d heads x %d; KV %s, %zu bytes per token\n", (a.model.empty() ? a.preset : a.model).c_str(),
                cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim,
                std::string(kernels::kv_dtype_name(a.kv_dtype)).c_str(), per_token_layer * cfg.num_hidden_layers);
    std::printf("%s: %s\n\n", a.rates_file.empty() ? "measured here" : "rates", rates.describe().c_str());
    std::printf("%lld tokens | KV per worker | prefill PFLOP | prefill (predicted) | of which ring, exposed | "
                "compute efficiency | decode per token\n",
                static_cast<long long>(a.tokens));
  }
  double c1 = seqparallel::predict(cfg, rates, a.tokens, 1, per_token_layer).prefill_compute_s;
  for (size_t i = 0; i < workers.size(); ++i) {
    const int w = workers[i];
    const auto p = seqparallel::predict(cfg, rates, a.tokens, w, per_token_layer);
    const double eff = c1 / (w * p.prefill_compute_s);
    if (a.json) {
      std::printf("%s{\"workers\":%d,\"kv_bytes_per_worker\":%.0f,\"prefill_flops\":%.6g,\"prefill_s\":%.6g,"
                  "\"prefill_exposed_comm_s\":%.6g,\"compute_efficiency\":%.4f,\"decode_s\":%.6g}",
                  i ? "," : "", w, p.kv_bytes_per_worker, p.prefill_flops, p.prefill_s, p.prefill_exposed_comm_s, eff,
                  p.decode_s);
    } else {
      std::printf("%2d workers | %s | %.3f | %.1f s | %.2f s | %.0f %% | %.2f ms\n", w, gib(p.kv_bytes_per_worker).c_str(),
                  p.prefill_flops / 1e15, p.prefill_s, p.prefill_exposed_comm_s, 100 * eff, p.decode_s * 1e3);
    }
  }
  if (a.json) std::printf("]}\n");
  return 0;
}

Registration reg("plan", "predict KV bytes, prefill and decode time of an N-token prompt on W sequence-parallel workers",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<PlanArgs>();
                   sub.add_option("--model", a->model, "HF model directory");
                   sub.add_option("--preset", a->preset, "a preset's shape instead of a model (with --rates)");
                   sub.add_option("--tokens", a->tokens, "prompt length in tokens")->required();
                   sub.add_option("--workers", a->workers, "comma-separated worker counts (default 1,2,4,8)");
                   sub.add_option("--threads", a->threads, "threads per worker for the calibration (default 1)");
                   add_enum_option(sub, "--kv-dtype", &a->kv_dtype, "KV storage");
                   sub.add_option("--rates", a->rates_file,
                                  "kernel rates measured elsewhere (JSON, see seqparallel/perf_model.h) instead of "
                                  "calibrating here");
                   sub.add_flag("--json", a->json, "one JSON object");
                   return [a]() { return run_plan(*a); };
                 });

}  // namespace
}  // namespace ragd::tools
