// Sequence-parallel prefill and decode of one long prompt on N in-process workers (threads
// transport), measured against one worker in the same run and against the performance model
// (seqparallel/perf_model.h) calibrated on this machine first.
//
//   bench_seqparallel [--preset tiny|small] [--tokens 16384,131072] [--workers 1,2]
//                     [--partitions zigzag,contiguous] [--decode 16] [--threads-per-worker 1]
//                     [--predict 1048576] [--predict-workers 1,2,4,8] [--kv-dtype f32|bf16|int8]
//                     [--chunks 0,2048] [--decode-workers 1]
//
// Per run: prefill wall time (slowest worker), each worker's compute (prefill minus time blocked
// on the ring) and the spread between workers (zigzag vs contiguous balance), time blocked on the
// ring (communication not hidden behind compute, plus waiting for slower workers), speedup and
// compute-part efficiency vs one worker, the model's prediction, and decode ms per token. Then
// the model's predictions for --predict tokens on --predict-workers workers. --chunks: ring prefill
// in steps of about that many tokens per worker (0 = one step); the ring's bytes are reported.
// --decode-workers D: every run on more than D workers is run again with its KV moved to the first
// D after the prefill (ShardedSequence::shrink) and decoded there: the move's seconds, decode ms per
// token at D, and what the performance model predicts for both (seqparallel::predict_shrink_s, what
// pipelines' LongContextPolicy costs a move with).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "ragd/engine/model.h"
#include "ragd/engine/random_weights.h"
#include "ragd/kernels/threads.h"
#include "ragd/seqparallel/perf_model.h"
#include "ragd/seqparallel/sharded_sequence.h"
#include "ragd/seqparallel/thread_communicator.h"

#include "bench_args.h"

using namespace ragd;               // NOLINT
using namespace ragd::seqparallel;  // NOLINT

namespace {

engine::ModelConfig preset(const std::string& name) {
  engine::ModelConfig c;
  c.architecture = engine::Architecture::kLlama;
  c.rms_norm_eps = 1e-5f;
  c.max_position_embeddings = 1 << 21;
  if (name == "small") {  // ragctl make-model --preset small
    c.hidden_size = 512, c.num_hidden_layers = 8, c.num_attention_heads = 8, c.num_key_value_heads = 4;
    c.intermediate_size = 1408, c.vocab_size = 32000;
  } else {  // tiny
    c.hidden_size = 64, c.num_hidden_layers = 2, c.num_attention_heads = 4, c.num_key_value_heads = 2;
    c.intermediate_size = 176, c.vocab_size = 512;
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

kernels::KvDtype g_kv_dtype = kernels::KvDtype::kF32;  // --kv-dtype, set once in main

std::unique_ptr<engine::Model> make_model(const engine::ModelConfig& cfg, size_t tokens) {
  engine::ModelOptions o;
  o.num_threads = 0;
  o.kv_dtype = g_kv_dtype;
  const size_t per_token = engine::kv_layout(cfg, o).token_bytes();
  o.kv_pool_bytes = std::max<size_t>(64u << 20, (tokens + 4096) * per_token * 5 / 4);
  auto r = engine::Model::create(cfg, engine::make_random_weights(cfg, 7), o);
  if (!r.ok()) {
    std::fprintf(stderr, "model: %s\n", r.status().to_string().c_str());
    std::exit(1);
  }
  return std::move(r).value();
}

std::string fmt_ratio(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.2fx", x);
  return b;
}
std::string fmt_pct(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.0f %%", 100.0 * x);
  return b;
}

struct RankResult {
  StepTimes prefill;
  double decode_s = 0.0;  // per token
  double move_s = 0.0;    // the shrink's (0 without one)
  int32_t first_token = -1;
};

std::vector<RankResult> run(const engine::ModelConfig& cfg, const std::vector<int32_t>& prompt, int workers,
                            PartitionKind kind, int decode, int threads, int chunk, int decode_workers = 0) {
  auto comms = make_thread_group(workers).value();
  std::vector<RankResult> res(workers);
  std::vector<Status> st(workers);
  // Every rank's pool sized for the most KV any rank holds (the sequence-parallel KV share).
  SpSequence shape;
  shape.prompt_tokens = static_cast<int64_t>(prompt.size());
  shape.decode_tokens = decode;
  shape.workers = workers;
  shape.kind = kind;
  shape.max_chunk_tokens = chunk;
  shape.block_size = engine::ModelOptions{}.kv_block_size;
  int64_t pool_blocks = kv_blocks_per_worker(shape);
  if (decode_workers > 0 && decode_workers < workers) {  // a receiver holds its share at the decode's degree
    shape.workers = decode_workers;
    pool_blocks = std::max(pool_blocks, kv_blocks_per_worker(shape) + 1);
  }
  std::vector<std::thread> ts;
  for (int r = 0; r < workers; ++r) {
    ts.emplace_back([&, r] {
      kernels::set_num_threads(threads);
      auto model = make_model(cfg, static_cast<size_t>(pool_blocks * shape.block_size));
      ShardedSequence seq(*model, *comms[r], kind, chunk);
      std::vector<float> logits;
      st[r] = seq.prefill(prompt, &logits);
      if (!st[r].ok()) {
        comms[r]->abort(st[r]);
        return;
      }
      res[r].prefill = seq.prefill_times();
      res[r].first_token = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      if (decode_workers > 0 && decode_workers < workers) {
        const auto m0 = std::chrono::steady_clock::now();
        st[r] = seq.shrink(decode_workers);
        res[r].move_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - m0).count();
        if (!st[r].ok() || !seq.holds_kv()) return;  // this rank's part is over
      }
      const auto t0 = std::chrono::steady_clock::now();
      int32_t next = res[r].first_token;
      for (int i = 0; i < decode && st[r].ok(); ++i) {
        st[r] = seq.decode(next, &logits);
        next = static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      }
      if (!st[r].ok()) comms[r]->abort(st[r]);
      res[r].decode_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / std::max(decode, 1);
    });
  }
  for (auto& t : ts) t.join();
  for (int r = 0; r < workers; ++r) {
    if (!st[r].ok()) {
      std::fprintf(stderr, "rank %d: %s\n", r, st[r].to_string().c_str());
      std::exit(1);
    }
  }
  return res;
}

}  // namespace

int main(int argc, char** argv) {
  std::string preset_name = "tiny", kv_dtype = "f32";
  std::vector<int64_t> token_counts{16384, 131072}, workers{1, 2}, predict_workers{1, 2, 4, 8}, chunks{0};
  std::vector<std::string> partitions{"zigzag", "contiguous"};
  int decode = 16, threads = 1;
  int64_t big = 1048576, decode_workers = 0;
  ragd::bench::BenchArgs args("bench_seqparallel");
  args.opt("preset", &preset_name).list("tokens", &token_counts).list("workers", &workers).list("partitions", &partitions);
  args.opt("decode", &decode).opt("threads-per-worker", &threads).opt("predict", &big);
  args.list("predict-workers", &predict_workers).opt("kv-dtype", &kv_dtype).list("chunks", &chunks);
  args.opt("decode-workers", &decode_workers);
  if (!args.parse(argc, argv)) return 2;
  const engine::ModelConfig cfg = preset(preset_name);
  if (auto d = kernels::parse_kv_dtype(kv_dtype); d.ok()) {
    g_kv_dtype = *d;
  } else {
    std::fprintf(stderr, "--kv-dtype: %s\n", d.status().to_string().c_str());
    return 2;
  }
  std::vector<PartitionKind> kinds;
  for (const std::string& x : partitions) {
    auto k = parse_partition(x);
    if (!k.ok()) {
      std::fprintf(stderr, "%s\n", k.status().to_string().c_str());
      return 2;
    }
    kinds.push_back(k.value());
  }
  engine::ModelOptions kv_opts;
  kv_opts.kv_dtype = g_kv_dtype;
  const double kv_token = static_cast<double>(engine::kv_layout(cfg, kv_opts).token_bytes()) / cfg.num_hidden_layers;
  kernels::set_num_threads(threads);
  KernelRates rates;
  {
    auto m = make_model(cfg, 40000);
    auto r = calibrate(*m);
    if (!r.ok()) {
      std::fprintf(stderr, "calibrate: %s\n", r.status().to_string().c_str());
      return 1;
    }
    rates = r.value();
  }
  std::printf("# bench_seqparallel preset=%s layers=%d hidden=%d heads=%d/%d head_dim=%d, %s KV, %d thread(s) per "
              "worker, %u hardware threads\n# rates: %s\n",
              preset_name.c_str(), cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads,
              cfg.num_key_value_heads, cfg.head_dim, kv_dtype.c_str(), threads, std::thread::hardware_concurrency(),
              rates.describe().c_str());
  std::printf("| tokens | workers | partition | prefill s | predicted s | per-worker compute s (min-max) | blocked on ring s "
              "(max) | speedup | compute efficiency | decode ms/token | predicted ms | chunk | ring MB |\n");
  std::printf("|---:|---:|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int64_t n : token_counts) {
    std::mt19937 g(1);
    std::vector<int32_t> prompt(n);
    for (auto& t : prompt) t = static_cast<int32_t>(g() % cfg.vocab_size);
    double base_s = 0.0, base_compute = 0.0;
    int32_t base_token = -1;
    for (int64_t w : workers) {
      for (PartitionKind kind : kinds) {
        for (int64_t chunk : chunks) {
          if (w == 1 && (kind != kinds.front() || chunk != chunks.front())) continue;
          auto res = run(cfg, prompt, static_cast<int>(w), kind, decode, threads, static_cast<int>(chunk));
          double wall = 0, cmin = 1e300, cmax = 0, blocked = 0, bytes = 0;
          for (auto& r : res) {
            bytes += static_cast<double>(r.prefill.bytes_sent);
            wall = std::max(wall, r.prefill.seconds);
            cmin = std::min(cmin, r.prefill.compute_s());
            cmax = std::max(cmax, r.prefill.compute_s());
            blocked = std::max(blocked, r.prefill.comm_wait_s);
          }
          if (w == 1) {
            base_s = wall, base_compute = cmax, base_token = res[0].first_token;
          }
          const Prediction p = predict(cfg, rates, n, static_cast<int>(w), kv_token);
          std::printf("| %lld | %lld | %s | %.2f | %.2f | %.2f-%.2f | %.2f | %s | %s | %.2f | %.2f | %lld | %.1f |%s\n",
                      static_cast<long long>(n), static_cast<long long>(w), std::string(partition_name(kind)).c_str(), wall,
                      p.prefill_s, cmin, cmax, blocked, base_s > 0 ? fmt_ratio(base_s / wall).c_str() : "-",
                      base_compute > 0 ? fmt_pct(base_compute / (w * cmax)).c_str() : "-", res[0].decode_s * 1e3,
                      p.decode_s * 1e3, static_cast<long long>(chunk), bytes / 1e6,
                      base_token >= 0 && res[0].first_token != base_token ? "  (first token differs!)" : "");
          std::fflush(stdout);
          if (decode_workers > 0 && decode_workers < w) {
            const int dw = static_cast<int>(decode_workers);
            auto moved = run(cfg, prompt, static_cast<int>(w), kind, decode, threads, static_cast<int>(chunk), dw);
            double move = 0;
            for (auto& r : moved) move = std::max(move, r.move_s);
            const Prediction pd = predict(cfg, rates, n, dw, kv_token);
            const double pmove = predict_shrink_s(cfg, rates, n, static_cast<int>(w), dw);
            std::printf("|   | then %d | KV moved to %d worker(s): move %.3f s (predicted %.3f) | decode %.2f ms/token "
                        "(predicted %.2f) against %.2f on %lld |%s\n",
                        dw, dw, move, pmove, moved[0].decode_s * 1e3, pd.decode_s * 1e3, res[0].decode_s * 1e3,
                        static_cast<long long>(w), moved[0].first_token != res[0].first_token ? "  (first token differs!)" : "");
            std::fflush(stdout);
          }
        }
      }
    }
  }
  std::printf("\nPredicted for %lld tokens (%s KV):\n\n| workers | prefill s | compute s | exposed ring s | compute "
              "efficiency | decode ms/token | KV GiB per worker |\n|---:|---:|---:|---:|---:|---:|---:|\n",
              static_cast<long long>(big), kv_dtype.c_str());
  double c1 = 0;
  for (int64_t w : predict_workers) {
    const Prediction p = predict(cfg, rates, big, static_cast<int>(w), kv_token);
    if (w == 1) c1 = p.prefill_compute_s;
    std::printf("| %lld | %.1f | %.1f | %.2f | %s | %.2f | %.2f |\n", static_cast<long long>(w), p.prefill_s,
                p.prefill_compute_s, p.prefill_exposed_comm_s, c1 > 0 ? fmt_pct(c1 / (w * p.prefill_compute_s)).c_str() : "-",
                p.decode_s * 1e3, p.kv_bytes_per_worker / (1 << 30));
  }
  return 0;
}
