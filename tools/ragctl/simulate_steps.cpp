// ragctl simulate-steps --model DIR [--context C] [--reps R] [--threads T] [--kv-dtype D] --json OUT:
// the time of batched engine steps of the shapes a serving replica runs, for the simulator's step
// cost (bench/sim/calibrate.py --steps; sim/include/ragd/sim/cost_model.h). `ragctl plan` measures
// kernel rates on one large prefill and one decode without logits; a serving step batches several
// sequences, samples a row of each decode and of each prefill's last token, and on a CPU its small
// steps cost more per token than a 1024-token chunk does. Each shape is timed here as the daemon
// runs it: one forward() over contiguous appends (decodes at C tokens of context, a prefill of n
// tokens after `start`), the median of R repetitions after two untimed ones (each repetition runs
// every shape once, in turn); each step's appended tokens are truncated away again outside the
// timing. Shapes: one prefill of n tokens
// (1 .. 512) after 0 tokens without logits (the dense part and its causal attention); decode
// batches of k = 1, 2, 3, 4, 8 and 16 sequences, each sampling a row (logits); one prefill of n
// tokens after C with its last row's logits (a cache hit's first step); k = 1, 3 and 7 decodes
// beside a prefill of 24, 128 or 512 tokens after C, every sequence with its row. Then the
// wake-up: that prefill of 24 tokens after C again, each repetition after the engine was idle
// for 0.05 .. 500 ms (the kernels' worker threads spin ~0.1 ms, then sleep; caches cool), against
// the same step run back to back.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "command.h"
#include "enum_option.h"
#include "ragd/engine/model.h"
#include "ragd/kernels/threads.h"

namespace ragd::tools {
namespace {

struct StepArgs {
  std::string model;
  std::string json;
  int context = 700;
  int reps = 15;
  int threads = 0;
  kernels::KvDtype kv_dtype = engine::ModelOptions{}.kv_dtype;
};

struct Shape {
  int decodes = 0;  // sequences decoding one token at `context` tokens of KV
  int prefill = 0;  // tokens of one prefill (0: none)
  int start = 0;    // its cached tokens
  bool logits = true;  // the prefill's last row's logits
};

using Clock = std::chrono::steady_clock;

int run_steps(const StepArgs& a) {
  engine::ModelOptions o;
  o.kv_dtype = a.kv_dtype;
  o.num_threads = a.threads;
  o.kv_pool_bytes = 512ull << 20;
  kernels::set_num_threads(a.threads);
  auto m = engine::Model::load(a.model, o);
  if (!m.ok()) {
    std::fprintf(stderr, "ragctl simulate-steps: %s\n", m.status().to_string().c_str());
    return 1;
  }
  engine::Model& model = *m.value();
  engine::KvPool& pool = model.kv_pool();
  const int vocab = model.config().vocab_size;
  const int C = a.context;
  std::vector<Shape> shapes;
  for (int n : {1, 2, 4, 8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512}) shapes.push_back({0, n, 0, false});
  for (int k : {1, 2, 3, 4, 8, 16}) shapes.push_back({k, 0, 0});
  for (int n : {8, 16, 24, 32, 64, 128, 256, 512}) shapes.push_back({0, n, C});
  for (int k : {1, 3, 7})
    for (int n : {24, 128, 512}) shapes.push_back({k, n, C});

  std::vector<int32_t> toks(static_cast<size_t>(C + 1024));
  uint64_t rng = 88172645463325252ULL;
  for (auto& t : toks) {
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    t = static_cast<int32_t>(rng % static_cast<uint64_t>(vocab));
  }
  engine::StepOutput out;
  // Contexts, prefilled once (no logits) and kept: 16 decode contexts of C tokens and one prefill
  // context of C tokens; a step appends to them and is truncated back after each repetition.
  auto fill = [&](engine::BlockTable& t, int n) -> Status {
    if (n == 0) return Status::OK();
    engine::SeqStep s{&t, std::span<const int32_t>(toks.data(), static_cast<size_t>(n)), engine::SeqStep::Logits::kNone};
    return model.forward({&s, 1}, &out);
  };
  std::vector<engine::BlockTable> dec(16);
  for (auto& t : dec)
    if (Status st = fill(t, C); !st.ok()) {
      std::fprintf(stderr, "ragctl simulate-steps: %s\n", st.to_string().c_str());
      return 1;
    }
  engine::BlockTable pre_c, pre_0;
  if (Status st = fill(pre_c, C); !st.ok()) {
    std::fprintf(stderr, "ragctl simulate-steps: %s\n", st.to_string().c_str());
    return 1;
  }

  std::string json = "{\"context\":" + std::to_string(C) + ",\"threads\":" + std::to_string(kernels::num_threads()) +
                     ",\"kv_bytes_per_token\":" + std::to_string(pool.layout().token_bytes()) + ",\"steps\":[";
  bool first = true;
  // Repetitions outside, shapes inside: load from elsewhere on the machine and drift during the
  // run hit every shape alike rather than skewing some shapes against others.
  std::vector<std::vector<double>> times(shapes.size());
  for (int rep = 0; rep < a.reps + 2; ++rep) {
    for (size_t i = 0; i < shapes.size(); ++i) {
      const Shape& sh = shapes[i];
      std::vector<engine::SeqStep> batch;
      for (int k = 0; k < sh.decodes; ++k)
        batch.push_back({&dec[static_cast<size_t>(k)], std::span<const int32_t>(toks.data() + C, 1), engine::SeqStep::Logits::kLast});
      engine::BlockTable& pt = sh.start > 0 ? pre_c : pre_0;
      if (sh.prefill > 0)
        batch.push_back({&pt, std::span<const int32_t>(toks.data() + sh.start, static_cast<size_t>(sh.prefill)),
                         sh.logits ? engine::SeqStep::Logits::kLast : engine::SeqStep::Logits::kNone});
      const auto t0 = Clock::now();
      if (Status st = model.forward(batch, &out); !st.ok()) {
        std::fprintf(stderr, "ragctl simulate-steps: %s\n", st.to_string().c_str());
        return 1;
      }
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (rep >= 2) times[i].push_back(s);
      for (int k = 0; k < sh.decodes; ++k) dec[static_cast<size_t>(k)].truncate(pool, C);
      if (sh.prefill > 0) pt.truncate(pool, sh.start);
    }
  }
  for (size_t i = 0; i < shapes.size(); ++i) {
    const Shape& sh = shapes[i];
    std::vector<double>& t = times[i];
    std::sort(t.begin(), t.end());
    const double med = t[t.size() / 2];
    std::printf("decodes %2d  prefill %3d after %4d%s: %8.3f ms (min %.3f)\n", sh.decodes, sh.prefill, sh.start,
                sh.logits ? "" : " (no logits)", med * 1e3, t.front() * 1e3);
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s{\"decodes\":%d,\"prefill\":%d,\"start\":%d,\"logits\":%s,\"seconds\":%.7g,\"min_seconds\":%.7g}",
                  first ? "" : ",", sh.decodes, sh.prefill, sh.start, sh.logits ? "true" : "false", med, t.front());
    json += buf;
    first = false;
  }
  json += "],\"idle\":[";
  first = true;
  for (double gap_ms : {0.0, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0}) {
    std::vector<double> times;
    const int reps = gap_ms >= 100 ? std::max(3, a.reps / 2) : a.reps;
    for (int rep = 0; rep < reps + 2; ++rep) {
      engine::SeqStep s{&pre_c, std::span<const int32_t>(toks.data() + C, 24), engine::SeqStep::Logits::kLast};
      if (gap_ms > 0) {
        const auto until = Clock::now() + std::chrono::duration<double, std::milli>(gap_ms);
        if (gap_ms >= 1) std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(gap_ms));
        while (Clock::now() < until) {  // a short gap: sleeping would overshoot it
        }
      }
      const auto t0 = Clock::now();
      if (Status st = model.forward({&s, 1}, &out); !st.ok()) {
        std::fprintf(stderr, "ragctl simulate-steps: %s\n", st.to_string().c_str());
        return 1;
      }
      const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
      if (rep >= 2) times.push_back(sec);
      pre_c.truncate(pool, C);
    }
    std::sort(times.begin(), times.end());
    const double med = times[times.size() / 2];
    std::printf("idle %6.2f ms, then prefill 24 after %d: %8.3f ms (min %.3f)\n", gap_ms, C, med * 1e3, times.front() * 1e3);
    char buf[160];
    std::snprintf(buf, sizeof buf, "%s{\"gap_s\":%.6g,\"seconds\":%.7g,\"min_seconds\":%.7g}", first ? "" : ",",
                  gap_ms / 1e3, med, times.front());
    json += buf;
    first = false;
  }
  json += "]}\n";
  for (auto& t : dec) t.release(pool);
  pre_c.release(pool);
  pre_0.release(pool);
  if (!a.json.empty()) {
    std::ofstream f(a.json);
    f << json;
    if (!f) {
      std::fprintf(stderr, "ragctl simulate-steps: cannot write %s\n", a.json.c_str());
      return 1;
    }
  }
  return 0;
}

Registration reg("simulate-steps",
                 "time batched engine steps of serving shapes (decodes, prefills, both) for the simulator's step cost",
                 [](CLI::App& sub) -> Action {
                   auto a = std::make_shared<StepArgs>();
                   sub.add_option("--model", a->model, "HF model directory")->required();
                   sub.add_option("--context", a->context, "tokens of KV behind each decode and the cached prefills (default 700)");
                   sub.add_option("--reps", a->reps, "timed repetitions per shape; the median is kept (default 15)");
                   sub.add_option("--threads", a->threads, "engine threads (default 0: all cores, as the daemon)");
                   add_enum_option(sub, "--kv-dtype", &a->kv_dtype, "KV storage (default f32, as the daemon)");
                   sub.add_option("--json", a->json, "write the timings as JSON");
                   return [a]() {
                     if (a->context < 1 || a->context > 4096 - 520 || a->reps < 1) {
                       std::fprintf(stderr, "ragctl simulate-steps: --context must be in [1, 3576] and --reps >= 1\n");
                       return 2;
                     }
                     return run_steps(*a);
                   };
                 });

}  // namespace
}  // namespace ragd::tools
