// Host sampling cost per row (what the scheduler spends per sequence and step after the logits are
// back), ragd's Sampler against the plain algorithm it must equal (engine::sample_reference: full
// sort, fp64 exponentials), same rows, same run. Rows: an LM-like distribution (a few dozen likely
// tokens above a broad tail) and a flat one (N(0, 3) logits), vocabularies of 32,000 and 128,256
// (Llama-2 / Llama-3 sizes), 600 tokens of history.
// Usage: bench_sampler [--rows N]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ragd/engine/sampler.h"

#include "bench_args.h"

using namespace ragd::engine;
using Clock = std::chrono::steady_clock;

namespace {

std::vector<float> make_row(int v, bool peaked, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.f, 3.f);
  std::vector<float> l(v);
  for (auto& x : l) x = nd(rng) - (peaked ? 12.0f : 0.0f);
  if (peaked) {
    for (int i = 0; i < 60; ++i) l[(static_cast<int64_t>(i) * 7919) % v] = 6.0f - 0.25f * i;
  }
  return l;
}

template <typename F>
double us_per_row(int rows, F&& f) {
  f();  // warm-up
  const auto t0 = Clock::now();
  for (int i = 0; i < rows; ++i) f();
  return std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / rows;
}

}  // namespace

int main(int argc, char** argv) {
  int rows = 20;
  ragd::bench::BenchArgs args("bench_sampler");
  args.opt("rows", &rows);
  if (!args.parse(argc, argv)) return 2;
  struct Config {
    const char* name;
    SamplingParams p;
  };
  auto params = [](float t, float top_p, int top_k, float min_p, float rep) {
    SamplingParams p;
    p.temperature = t;
    p.top_p = top_p;
    p.top_k = top_k;
    p.min_p = min_p;
    p.repetition_penalty = rep;
    p.seed = 7;
    return p;
  };
  const Config configs[] = {
      {"greedy", params(0.0f, 1.0f, 0, 0.0f, 1.0f)},
      {"greedy, repetition 1.1", params(0.0f, 1.0f, 0, 0.0f, 1.1f)},
      {"T 0.7, no filter", params(0.7f, 1.0f, 0, 0.0f, 1.0f)},
      {"T 0.8, top-p 0.9", params(0.8f, 0.9f, 0, 0.0f, 1.0f)},
      {"T 0.8, top-k 40", params(0.8f, 1.0f, 40, 0.0f, 1.0f)},
      {"T 1.0, min-p 0.05", params(1.0f, 1.0f, 0, 0.05f, 1.0f)},
  };
  const std::vector<int32_t> history(600, 5);
  std::printf("| vocabulary | row | sampling | ragd µs / row | reference µs / row | speed-up |\n|---:|---|---|---:|---:|---:|\n");
  for (int v : {32000, 128256}) {
    for (bool peaked : {true, false}) {
      const auto row = make_row(v, peaked, 3);
      for (const Config& c : configs) {
        Sampler s(c.p);
        std::mt19937_64 rng(c.p.seed);
        const double ours = us_per_row(rows, [&] { return s.sample(row, history).token; });
        const double ref = us_per_row(rows, [&] { return sample_reference(row, history, c.p, rng).token; });
        std::printf("| %d | %s | %s | %.1f | %.1f | %.1fx |\n", v, peaked ? "LM-like" : "flat", c.name, ours, ref,
                    ref / ours);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
