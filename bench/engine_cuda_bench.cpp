// CUDA engine benchmark on one GPU: a preset model with random bf16 weights (llama3-8b by default)
// run by the CUDA backend, each number next to a ceiling or a baseline measured in the same run.
//   bandwidth   device-to-device copy of 2 GiB (read + write bytes / time): the HBM ceiling
//   prefill     one sequence of --prefill tokens in one step: tokens/s and TFLOP/s
//               (2 · matrix parameters · tokens + causal attention 4 · head_dim · heads · N(N+1)/2 · layers)
//   decode      --batches B sequences of --prompt tokens, then --steps steps of one token each:
//               tokens/s; for each B the bytes a step must read (weights except the embedding table,
//               plus every sequence's KV) / step time, as a fraction of the measured bandwidth
//   ttft        a RAG prompt of --doc-tokens document tokens + --question tokens: time to the first
//               logits when the documents' KV is already in HBM (a knowledge-tree hit: fork of the
//               cached prefix + prefill of the question), when it comes up from host memory (a DRAM
//               hit: the segment upload, synchronous or overlapped with the layers) and when
//               everything is computed (reuse none)
// Prints markdown tables; --csv FILE also writes one line per measurement.
//
//   bench_engine_cuda [--preset llama3-8b] [--device cuda:0] [--prefill 4096] [--prompt 512]
//                     [--steps 32] [--batches 1,2,8,32,64] [--doc-tokens 2048] [--question 64]
//                     [--kv-gib 12] [--csv FILE]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ragd/engine/model.h"
#include "ragd/engine/presets.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kernels/cuda/device.h"
#include "ragd/kernels/cuda/memory.h"

#include "bench_args.h"

namespace {

using namespace ragd;
using namespace ragd::engine;
namespace cu = ragd::kernels::cuda;
using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

[[noreturn]] void die(const std::string& what, const Status& st) {
  std::fprintf(stderr, "bench_engine_cuda: %s: %s\n", what.c_str(), st.to_string().c_str());
  std::exit(1);
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0.0 : v[v.size() / 2];
}

// HBM bandwidth: best of 5 device-to-device copies of `bytes` (each byte read once, written once).
double measure_bandwidth(int device, size_t bytes) {
  Status st = cu::set_device(device);
  if (!st.ok()) die("set_device", st);
  auto a = cu::DeviceBuffer::alloc(bytes), b = cu::DeviceBuffer::alloc(bytes);
  auto s = cu::Stream::create();
  if (!a.ok() || !b.ok() || !s.ok()) die("bandwidth buffers", !a.ok() ? a.status() : !b.ok() ? b.status() : s.status());
  double best = 1e30;
  for (int rep = 0; rep < 6; ++rep) {
    const auto t0 = Clock::now();
    st = cu::copy_on_device(b->get(), a->get(), bytes, s->get());
    if (st.ok()) st = s->sync();
    if (!st.ok()) die("bandwidth copy", st);
    if (rep > 0) best = std::min(best, since(t0));
  }
  return 2.0 * bytes / best;
}

struct Row {
  std::string kind, params;
  double value = 0.0, ceiling = 0.0;
};

}  // namespace

int main(int argc, char** argv) {
  std::string preset_name = "llama3-8b", device_name = "cuda:0", csv;
  int prefill = 4096, prompt = 512, steps = 32, doc = 2048, question = 64;
  std::vector<int> batches{1, 2, 8, 32, 64};
  double kv_gib = 12;
  ragd::bench::BenchArgs args("bench_engine_cuda");
  args.opt("preset", &preset_name).opt("device", &device_name).opt("prefill", &prefill).opt("prompt", &prompt);
  args.opt("steps", &steps).list("batches", &batches).opt("doc-tokens", &doc).opt("question", &question);
  args.opt("kv-gib", &kv_gib).opt("csv", &csv);
  if (!args.parse(argc, argv)) return 2;
  auto cfg_r = preset_config(preset_name);
  if (!cfg_r.ok()) die("preset", cfg_r.status());
  const ModelConfig cfg = *cfg_r;
  const int device = device_name.size() > 5 ? std::atoi(device_name.c_str() + 5) : 0;

  const double bw = measure_bandwidth(device, size_t{2} << 30);
  std::printf("# bench_engine_cuda preset=%s device=%s: measured HBM bandwidth %.0f GB/s\n", preset_name.c_str(),
              device_name.c_str(), bw / 1e9);

  ModelOptions mo;
  mo.device = device_name;
  mo.kv_dtype = kernels::KvDtype::kBF16;
  mo.kv_pool_bytes = static_cast<size_t>(kv_gib * (1ull << 30));
  const auto t_load = Clock::now();
  auto mr = Model::create(cfg, make_random_weights(cfg, 1), mo);
  if (!mr.ok()) die("Model::create", mr.status());
  Model& m = **mr;
  KvPool& pool = m.kv_pool();
  std::printf("# model: %d layers x %d, %d/%d heads, vocab %d; %.2f GB bf16 weights on %s, KV pool %zu blocks "
              "(%.1f GiB), load %.1f s\n",
              cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads, cfg.num_key_value_heads,
              cfg.vocab_size, m.load_info().weight_bytes / 1e9, std::string(m.device()).c_str(), pool.num_blocks(),
              pool.bytes() / double(1ull << 30), since(t_load));
  const size_t token_bytes = pool.layout().token_bytes();
  const size_t embed_bytes = cfg.tie_word_embeddings ? 0 : size_t{2} * cfg.vocab_size * cfg.hidden_size;
  const size_t step_weight_bytes = m.load_info().weight_bytes - embed_bytes;  // the gather reads one row
  const double matrix_params = static_cast<double>(m.load_info().weight_bytes - embed_bytes) / 2.0;

  std::mt19937 rng(5);
  auto tokens = [&](int n) {
    std::vector<int32_t> t(n);
    for (auto& x : t) x = static_cast<int32_t>(rng() % cfg.vocab_size);
    return t;
  };
  auto run = [&](std::vector<SeqStep>& batch, StepOutput* out) {
    const Status st = m.forward(batch, out);
    if (!st.ok()) die("forward", st);
  };
  std::vector<Row> rows;

  // ---- prefill ---------------------------------------------------------------------------------
  {
    const auto toks = tokens(prefill);
    std::vector<double> t;
    for (int rep = 0; rep < 3; ++rep) {
      BlockTable tb;
      std::vector<SeqStep> b{SeqStep{&tb, toks, SeqStep::Logits::kLast}};
      StepOutput out;
      const auto t0 = Clock::now();
      run(b, &out);
      if (rep > 0) t.push_back(since(t0));
      tb.release(pool);
    }
    const double s = median(t), n = prefill;
    const double flops = 2.0 * matrix_params * n +
                         4.0 * cfg.head_dim * cfg.num_attention_heads * n * (n + 1) / 2 * cfg.num_hidden_layers;
    std::printf("\n| prefill tokens | ms | tokens/s | TFLOP/s |\n|---:|---:|---:|---:|\n| %d | %.1f | %.0f | %.1f |\n",
                prefill, 1e3 * s, n / s, flops / s / 1e12);
    rows.push_back({"prefill_tflops", "tokens=" + std::to_string(prefill), flops / s / 1e12, 0.0});
    rows.push_back({"prefill_ms", "tokens=" + std::to_string(prefill), 1e3 * s, 0.0});
  }

  // ---- decode ----------------------------------------------------------------------------------
  // Each batch decodes five times from the same tables: cuBLAS for every matrix and one launch per
  // kernel (the baseline); ragd's one-row GEMV (batch 1); GEMV and the step's layers replayed as
  // one CUDA graph; then both again with the fused decode kernels (RMSNorm / f32 → bf16 / SwiGLU in
  // the one-row GEMVs, RoPE + KV write in one launch); then both again with programmatic dependent
  // launches (the decode chain's kernels start while their predecessor drains); last, the served
  // configuration with the greedy picks made on the device (SeqStep::Logits::kGreedy: 8 bytes a row
  // come back instead of the vocabulary's floats). The other rows bring every logits row back and
  // take the argmax on the host (outside the timing). RAGD_CUDA_GEMV, RAGD_CUDA_FUSED,
  // RAGD_CUDA_GRAPHS and RAGD_CUDA_PDL are read at every call / step.
  std::printf("\n| batch | prompt | GEMV | fused | CUDA graphs | PDL | picks | ms / step | tokens/s | bytes / step (GB) | GB/s | of measured bandwidth |\n"
              "|---:|---:|---|---|---|---|---|---:|---:|---:|---:|---:|\n");
  for (int B : batches) {
    std::vector<BlockTable> tabs(B);
    std::vector<std::vector<int32_t>> prompts;
    for (int i = 0; i < B; ++i) prompts.push_back(tokens(prompt));
    for (int i0 = 0; i0 < B; i0 += 8) {  // prompts 8 at a time
      std::vector<SeqStep> b;
      for (int i = i0; i < std::min(B, i0 + 8); ++i) b.push_back(SeqStep{&tabs[i], prompts[i], SeqStep::Logits::kLast});
      StepOutput out;
      run(b, &out);
    }
    std::vector<int32_t> next(B);
    for (auto& x : next) x = static_cast<int32_t>(rng() % cfg.vocab_size);
    int len = prompt;  // KV length of every sequence before the next step
    struct Phase {
      bool gemv, fused, graphs, pdl, device_picks = false;
    };
    for (const Phase ph : {Phase{false, false, false, false}, Phase{true, false, false, false},
                           Phase{true, false, true, false}, Phase{true, true, false, false},
                           Phase{true, true, true, false}, Phase{true, true, false, true},
                           Phase{true, true, true, true}, Phase{true, true, true, false, true}}) {
      const bool graphs = ph.graphs;
      setenv("RAGD_CUDA_GEMV", ph.gemv ? "1" : "0", 1);
      setenv("RAGD_CUDA_FUSED", ph.fused ? "1" : "0", 1);
      setenv("RAGD_CUDA_GRAPHS", graphs ? "1" : "0", 1);
      setenv("RAGD_CUDA_PDL", ph.pdl ? "1" : "0", 1);
      std::vector<double> t;
      const int len0 = len;
      // RAGD_PROFILE_DECODE=1: the profiler collects two batch-1 steps of the fused kernels, launched
      // kernel by kernel.
      const bool profile = B == 1 && ph.fused && !graphs && !ph.pdl && std::getenv("RAGD_PROFILE_DECODE") != nullptr;
      for (int s = 0; s < steps + 2; ++s) {
        if (profile && s == 2) kernels::cuda::profiler_start();
        if (profile && s == 4) kernels::cuda::profiler_stop();
        std::vector<SeqStep> b;
        const auto mode = ph.device_picks ? SeqStep::Logits::kGreedy : SeqStep::Logits::kLast;
        for (int i = 0; i < B; ++i) b.push_back(SeqStep{&tabs[i], std::span(&next[i], 1), mode});
        StepOutput out;
        const auto t0 = Clock::now();
        run(b, &out);
        if (s >= 2) t.push_back(since(t0));
        ++len;
        for (int i = 0; i < B; ++i) {  // greedy
          if (ph.device_picks) {
            next[i] = out.picks[i].token;
          } else {
            const auto r = out.row(i);
            next[i] = static_cast<int32_t>(std::max_element(r.begin(), r.end()) - r.begin());
          }
        }
      }
      const double step = median(t);
      const double kv_tokens = len0 + 2 + steps / 2.0 + 1;  // mean KV length read per measured step
      const double kv_read = static_cast<double>(B) * kv_tokens * token_bytes;
      const double bytes = step_weight_bytes + kv_read;
      std::printf("| %d | %d | %s | %s | %s | %s | %s | %.2f | %.0f | %.2f | %.0f | %.1f %% |\n", B, prompt,
                  ph.gemv && B == 1 ? "on" : "off", ph.fused ? "on" : "off", graphs ? "on" : "off",
                  ph.pdl ? "on" : "off", ph.device_picks ? "device" : "host", 1e3 * step, B / step, bytes / 1e9,
                  bytes / step / 1e9, 100.0 * bytes / step / bw);
      const std::string params = "batch=" + std::to_string(B) + (ph.gemv ? ";gemv=on" : ";gemv=off") +
                                 (ph.fused ? ";fused=on" : ";fused=off") + (graphs ? ";graphs=on" : ";graphs=off") +
                                 (ph.pdl ? ";pdl=on" : ";pdl=off") + (ph.device_picks ? ";picks=device" : ";picks=host");
      rows.push_back({"decode_tokens_per_s", params, B / step, 0.0});
      rows.push_back({"decode_step_ms", params, 1e3 * step, 0.0});
      rows.push_back({"decode_kv_tokens", params, kv_tokens, 0.0});
      rows.push_back({"decode_bandwidth_fraction", params, bytes / step / bw, 1.0});
    }
    unsetenv("RAGD_CUDA_GEMV");
    unsetenv("RAGD_CUDA_FUSED");
    unsetenv("RAGD_CUDA_GRAPHS");
    unsetenv("RAGD_CUDA_PDL");
    for (auto& tb : tabs) tb.release(pool);
  }

  // ---- TTFT: documents' KV in HBM / in DRAM vs recomputed ---------------------------------------
  {
    const auto docs = tokens(doc), q = tokens(question);
    BlockTable cached;
    {
      std::vector<SeqStep> b{SeqStep{&cached, docs, SeqStep::Logits::kNone}};
      StepOutput out;
      run(b, &out);
    }
    // The documents' KV as the DRAM tier holds it (f32 rows on the host, all layers).
    const size_t seg_floats = static_cast<size_t>(cfg.num_hidden_layers) * doc * pool.layout().token_floats();
    std::vector<float> host_k(seg_floats), host_v(seg_floats);
    cached.read_all_layers(pool, 0, doc, host_k.data(), host_v.data());
    std::vector<double> hit, none, dram_sync, dram_overlap;
    for (int rep = 0; rep < 6; ++rep) {
      // Documents' KV from host memory (BlockTable::append: the segment upload), then the question:
      // the upload synchronous on the compute stream, and overlapped with the layers on a copy stream.
      for (const bool overlap : {false, true}) {
        setenv("RAGD_CUDA_KV_OVERLAP", overlap ? "1" : "0", 1);
        const auto t0 = Clock::now();
        BlockTable t;
        if (!t.append(pool, doc, host_k.data(), host_v.data())) die("append", Status::ResourceExhausted("KV pool full"));
        std::vector<SeqStep> b{SeqStep{&t, q, SeqStep::Logits::kLast}};
        StepOutput out;
        run(b, &out);
        if (rep > 0) (overlap ? dram_overlap : dram_sync).push_back(since(t0));
        t.release(pool);
      }
      unsetenv("RAGD_CUDA_KV_OVERLAP");
      {
        const auto t0 = Clock::now();
        BlockTable t = cached.fork_prefix(pool, doc);
        std::vector<SeqStep> b{SeqStep{&t, q, SeqStep::Logits::kLast}};
        StepOutput out;
        run(b, &out);
        if (rep > 0) hit.push_back(since(t0));
        t.release(pool);
      }
      {
        std::vector<int32_t> all(docs);
        all.insert(all.end(), q.begin(), q.end());
        const auto t0 = Clock::now();
        BlockTable t;
        std::vector<SeqStep> b{SeqStep{&t, all, SeqStep::Logits::kLast}};
        StepOutput out;
        run(b, &out);
        if (rep > 0) none.push_back(since(t0));
        t.release(pool);
      }
    }
    cached.release(pool);
    const double h = median(hit), n = median(none), ds = median(dram_sync), dov = median(dram_overlap);
    std::printf("\n| RAG prompt | TTFT, documents' KV in HBM (ms) | in DRAM, upload then prefill (ms) | in DRAM, "
                "upload overlapped (ms) | reuse none (ms) | speed-up HBM / DRAM overlapped |\n"
                "|---|---:|---:|---:|---:|---:|\n| %d document + %d question tokens | %.1f | %.1f | %.1f | %.1f | "
                "%.1fx / %.1fx |\n",
                doc, question, 1e3 * h, 1e3 * ds, 1e3 * dov, 1e3 * n, n / h, n / dov);
    rows.push_back({"ttft_dram_sync_ms", "doc=" + std::to_string(doc) + ";q=" + std::to_string(question), 1e3 * ds, 0.0});
    rows.push_back({"ttft_dram_overlap_ms", "doc=" + std::to_string(doc) + ";q=" + std::to_string(question), 1e3 * dov, 0.0});
    rows.push_back({"ttft_hbm_hit_ms", "doc=" + std::to_string(doc) + ";q=" + std::to_string(question), 1e3 * h, 0.0});
    rows.push_back({"ttft_none_ms", "doc=" + std::to_string(doc) + ";q=" + std::to_string(question), 1e3 * n, 0.0});
  }
  if (pool.free_blocks() != pool.num_blocks()) {
    std::fprintf(stderr, "bench_engine_cuda: %zu KV blocks not returned\n", pool.num_blocks() - pool.free_blocks());
    return 1;
  }
  if (!csv.empty()) {
    std::ofstream f(csv);
    f << "kind,params,value,ceiling\n";
    for (const Row& r : rows) f << r.kind << "," << r.params << "," << r.value << "," << r.ceiling << "\n";
  }
  return 0;
}
