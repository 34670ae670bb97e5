// Engine (CPU) benchmark: prefill and decode tokens/s at several batch sizes for a model shape
// built in memory with random weights, each next to the machine's ceiling measured in the same
// run: memory read bandwidth and large-sgemm GFLOP/s. Decode bound per step = max(bytes of weights
// + KV / bandwidth, FLOPs / sgemm rate); prefill bound = FLOPs / sgemm rate.
//
//   bench_engine --preset small|qwen2-0.5b [--batches 1,8,32] [--prompt 128] [--decode 16]
//                [--threads N] [--hidden H --layers L --heads A --kv-heads K --head-dim D
//                 --intermediate I --vocab V --tied]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <omp.h>

#include "ragd/engine/model.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/threads.h"
#include "ragd/kernels/weight_matrix.h"

#include "bench_args.h"

namespace {

using namespace ragd;
using namespace ragd::engine;
using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }



// Read bandwidth: parallel vectorised sum over a buffer much larger than the caches (best of reps),
// bytes/s. Eight independent accumulators per thread keep the adds off the critical path.
double measure_read_bandwidth(size_t bytes) {
  const size_t n = bytes / sizeof(float) / 8 * 8;
  std::vector<float> buf(n);
#pragma omp parallel for schedule(static)
  for (size_t i = 0; i < n; ++i) buf[i] = static_cast<float>(i & 1023);
  double best = 0.0;
  volatile float sink = 0.0f;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = Clock::now();
    float total = 0.0f;
#pragma omp parallel reduction(+ : total)
    {
      float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma omp for schedule(static)
      for (size_t i = 0; i < n; i += 8) {
#pragma omp simd
        for (int j = 0; j < 8; ++j) acc[j] += buf[i + j];
      }
      for (float x : acc) total += x;
    }
    const double s = seconds_since(t0);
    sink = sink + total;
    best = std::max(best, static_cast<double>(n * sizeof(float)) / s);
  }
  return best;
}

// sgemm rate on a large square problem (best of reps), FLOP/s.
double measure_sgemm(int n) {
  std::vector<float> a(static_cast<size_t>(n) * n, 0.5f), b(a.size(), 0.25f), c(a.size());
  double best = 0.0;
  for (int rep = 0; rep < 3; ++rep) {
    const auto t0 = Clock::now();
    kernels::gemm(false, false, n, n, n, 1.0f, a.data(), n, b.data(), n, 0.0f, c.data(), n);
    best = std::max(best, 2.0 * n * n * static_cast<double>(n) / seconds_since(t0));
  }
  return best;
}

struct Args {
  ModelConfig cfg;
  std::string preset = "small";
  std::vector<int> batches = {1, 8, 32};
  int prompt = 128;
  int decode = 16;
  int threads = 0;
  WeightFormat weights = WeightFormat::kF32;
  kernels::KvDtype kv_dtype = kernels::KvDtype::kF32;
};

ModelConfig preset(const std::string& name) {
  ModelConfig c;
  c.architecture = Architecture::kLlama;
  c.max_position_embeddings = 32768;
  c.rms_norm_eps = 1e-6f;
  if (name == "qwen2-0.5b") {
    c.architecture = Architecture::kQwen2;
    c.hidden_size = 896, c.num_hidden_layers = 24, c.num_attention_heads = 14, c.num_key_value_heads = 2;
    c.head_dim = 64, c.intermediate_size = 4864, c.vocab_size = 151936, c.tie_word_embeddings = true;
    c.attention_bias = true;
    c.rope_theta = 1000000.0f;
  } else if (name == "small") {
    c.hidden_size = 512, c.num_hidden_layers = 8, c.num_attention_heads = 8, c.num_key_value_heads = 4;
    c.head_dim = 64, c.intermediate_size = 1408, c.vocab_size = 32000;
  } else {
    std::fprintf(stderr, "unknown preset '%s' (small, qwen2-0.5b)\n", name.c_str());
    std::exit(2);
  }
  return c;
}

Args parse(int argc, char** argv) {
  Args a;
  // Shape flags override the preset's (the preset is then "custom").
  struct Shape {
    const char* flag;
    int ModelConfig::*field;
    int value = 0;
  };
  Shape shape[] = {{"hidden", &ModelConfig::hidden_size},         {"layers", &ModelConfig::num_hidden_layers},
                   {"heads", &ModelConfig::num_attention_heads},  {"kv-heads", &ModelConfig::num_key_value_heads},
                   {"head-dim", &ModelConfig::head_dim},          {"intermediate", &ModelConfig::intermediate_size},
                   {"vocab", &ModelConfig::vocab_size}};
  bool tied = false;
  std::string weights = "f32", kv_dtype = "f32";
  ragd::bench::BenchArgs args("bench_engine");
  args.opt("preset", &a.preset).list("batches", &a.batches).opt("prompt", &a.prompt).opt("decode", &a.decode);
  args.opt("threads", &a.threads).opt("weights", &weights).opt("kv-dtype", &kv_dtype);
  for (Shape& s : shape) args.opt(s.flag, &s.value, "N");
  args.flag("tied", &tied);
  if (!args.parse(argc, argv)) std::exit(2);
  a.cfg = preset(a.preset);
  for (const Shape& s : shape)
    if (args.given(s.flag)) a.cfg.*s.field = s.value, a.preset = "custom";
  if (tied) a.cfg.tie_word_embeddings = true;
  if (args.given("weights")) {
    auto f = parse_weight_format(weights);
    if (!f.ok()) {
      std::fprintf(stderr, "--weights: %s\n", f.status().to_string().c_str());
      std::exit(2);
    }
    a.weights = *f;
  }
  if (args.given("kv-dtype")) {
    auto d = kernels::parse_kv_dtype(kv_dtype);
    if (!d.ok()) {
      std::fprintf(stderr, "--kv-dtype: %s\n", d.status().to_string().c_str());
      std::exit(2);
    }
    a.kv_dtype = *d;
  }
  bool ok = a.prompt >= 1 && a.decode >= 1 && !a.batches.empty();
  for (int b : a.batches) ok = ok && b >= 1;
  if (!ok) {
    std::fprintf(stderr, "--prompt, --decode and every --batches entry must be >= 1\n");
    std::exit(2);
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  Args a = parse(argc, argv);
  const ModelConfig& c = a.cfg;
  if (Status st = c.validate(); !st.ok()) {
    std::fprintf(stderr, "bad shape: %s\n", st.to_string().c_str());
    return 2;
  }
  kernels::set_num_threads(a.threads);
  const int threads = kernels::num_threads();

  // Ceilings first, on an idle model.
  const double bw = measure_read_bandwidth(size_t{1} << 30);
  const double peak = measure_sgemm(2048);

  // Bytes streamed per decode step: every layer matrix once plus the LM head (norms are noise), in
  // the weight format in memory.
  const double h = c.hidden_size, q = c.q_dim(), kv = c.kv_dim(), im = c.intermediate_size, v = c.vocab_size;
  const double layer_params = h * (q + 2 * kv) + q * h + 3 * h * im;
  const kernels::WeightType wt = a.weights == WeightFormat::kBF16 ? kernels::WeightType::kBF16
                                 : a.weights == WeightFormat::kF16 ? kernels::WeightType::kF16
                                 : a.weights == WeightFormat::kQ8  ? kernels::WeightType::kQ8
                                                                   : kernels::WeightType::kF32;
  const auto mbytes = [&](double rows, double cols) {
    return static_cast<double>(kernels::weight_bytes(wt, static_cast<int>(rows), static_cast<int>(cols)));
  };
  const double step_bytes =
      c.num_hidden_layers * (mbytes(q + 2 * kv, h) + mbytes(h, q) + mbytes(2 * im, h) + mbytes(h, im)) + mbytes(v, h);
  // FLOPs per prefill token (projections; logits only for the last row of a sequence).
  const double proj_flops = 2.0 * c.num_hidden_layers * layer_params;

  const int max_batch = *std::max_element(a.batches.begin(), a.batches.end());
  ModelOptions opts;
  opts.kv_dtype = a.kv_dtype;
  const size_t kv_token_bytes = kv_layout(c, opts).token_bytes();
  opts.num_threads = a.threads;
  opts.weights = a.weights;
  opts.kv_block_size = 16;
  opts.kv_pool_bytes = kv_token_bytes * static_cast<size_t>(max_batch) * (a.prompt + a.decode + 32) * 5 / 4;
  auto t0 = Clock::now();
  auto model_r = Model::create(c, make_random_weights(c, 1), opts);
  if (!model_r.ok()) {
    std::fprintf(stderr, "model: %s\n", model_r.status().to_string().c_str());
    return 1;
  }
  auto model = std::move(model_r).value();
  const double build_s = seconds_since(t0);

  std::printf("# bench_engine preset=%s hidden=%d layers=%d heads=%d kv_heads=%d head_dim=%d inter=%d vocab=%d tied=%d "
              "threads=%d\n",
              a.preset.c_str(), c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
              c.head_dim, c.intermediate_size, c.vocab_size, c.tie_word_embeddings ? 1 : 0, threads);
  std::printf("# model built in %.1f s; weights read per decode step %.1f MiB (%s, kernels %s)\n", build_s,
              step_bytes / 1048576.0, model->load_info().weights.c_str(), model->load_info().kernels.c_str());
  std::printf("# ceilings: read bandwidth %.2f GB/s, sgemm(2048^3) %.1f GFLOP/s\n", bw / 1e9, peak / 1e9);
  std::printf("# prompt=%d tokens/seq, decode=%d steps\n", a.prompt, a.decode);
  {
    const char* wp = std::getenv("OMP_WAIT_POLICY");
    char load[64] = "?";
    if (FILE* f = std::fopen("/proc/loadavg", "r")) {
      if (std::fgets(load, sizeof(load), f) == nullptr) std::strcpy(load, "?");
      std::fclose(f);
      load[std::strcspn(load, "\n")] = 0;
    }
    std::printf("# OMP_WAIT_POLICY=%s, loadavg %s (shared machine: ratios, not absolutes)\n", wp ? wp : "(unset)", load);
  }
  std::printf("%-6s %-8s %12s %12s %8s\n", "batch", "phase", "tok/s", "bound tok/s", "ratio");

  uint64_t rng = 88172645463325252ULL;
  auto next_token = [&]() {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return static_cast<int32_t>(rng % static_cast<uint64_t>(c.vocab_size));
  };
  for (int batch : a.batches) {
    std::vector<BlockTable> tables(batch);
    std::vector<std::vector<int32_t>> prompts(batch);
    std::vector<SeqStep> steps(batch);
    for (int b = 0; b < batch; ++b) {
      prompts[b].resize(a.prompt);
      for (auto& t : prompts[b]) t = next_token();
      steps[b] = {&tables[b], prompts[b], SeqStep::Logits::kLast};
    }
    StepOutput out;
    {  // Untimed warm-up of the same batch (short prompt + two decodes): first-touch of scratch
       // buffers, KV pages and OpenBLAS buffers stays out of the measurements.
      std::vector<BlockTable> wt(batch);
      std::vector<SeqStep> ws(batch);
      const int wp = std::min(a.prompt, 16);
      for (int b = 0; b < batch; ++b) ws[b] = {&wt[b], std::span<const int32_t>(prompts[b]).subspan(0, wp), SeqStep::Logits::kLast};
      for (int rep = 0; rep < 3; ++rep) {
        if (Status st = model->forward(ws, &out); !st.ok()) {
          std::fprintf(stderr, "warm-up: %s\n", st.to_string().c_str());
          return 1;
        }
        for (int b = 0; b < batch; ++b) ws[b].tokens = std::span<const int32_t>(prompts[b]).subspan((wp + rep) % a.prompt, 1);
      }
      for (auto& t : wt) t.release(model->kv_pool());
    }
    t0 = Clock::now();
    if (Status st = model->forward(steps, &out); !st.ok()) {
      std::fprintf(stderr, "prefill: %s\n", st.to_string().c_str());
      return 1;
    }
    const double pre_s = seconds_since(t0);
    const double pre_tokens = static_cast<double>(batch) * a.prompt;
    // Attention FLOPs of a causal prefill: 2 GEMMs of ~P²/2 · q_dim each per layer.
    const double attn_flops = 2.0 * 2.0 * c.num_hidden_layers * q * (a.prompt * (a.prompt + 1) / 2.0) * batch;
    const double pre_flops = proj_flops * pre_tokens + attn_flops + 2.0 * v * h * batch;
    const double pre_bound = pre_tokens / (pre_flops / peak);
    std::printf("%-6d %-8s %12.1f %12.1f %7.1f%%\n", batch, "prefill", pre_tokens / pre_s, pre_bound,
                100.0 * (pre_tokens / pre_s) / pre_bound);

    std::vector<int32_t> toks(batch);
    t0 = Clock::now();
    for (int s = 0; s < a.decode; ++s) {
      for (int b = 0; b < batch; ++b) {
        toks[b] = next_token();
        steps[b] = {&tables[b], std::span<const int32_t>(&toks[b], 1), SeqStep::Logits::kLast};
      }
      if (Status st = model->forward(steps, &out); !st.ok()) {
        std::fprintf(stderr, "decode: %s\n", st.to_string().c_str());
        return 1;
      }
    }
    const double dec_s = seconds_since(t0);
    const double dec_tokens = static_cast<double>(batch) * a.decode;
    // Memory bound per step: weights once + every sequence's KV so far.
    const double kv_bytes = static_cast<double>(kv_token_bytes) * batch * (a.prompt + a.decode / 2.0);
    // Roofline: a step takes at least max(bytes / bandwidth, FLOPs / sgemm rate).
    const double dec_flops = 2.0 * (c.num_hidden_layers * layer_params + v * h) * batch;
    const double dec_bound = batch / std::max((step_bytes + kv_bytes) / bw, dec_flops / peak);
    std::printf("%-6d %-8s %12.1f %12.1f %7.1f%%\n", batch, "decode", dec_tokens / dec_s, dec_bound,
                100.0 * (dec_tokens / dec_s) / dec_bound);
    for (auto& t : tables) t.release(model->kv_pool());
  }
  return 0;
}
