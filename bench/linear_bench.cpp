// bench_linear: kernels::linear() on its own, per weight format.
//
//   bench_linear [--threads 1] [--rows 1,8,32,128,512] [--reps 10]
//
// 1. Streaming: one pass over every projection of the `small` preset (8 layers of q/k/v, o,
//    gate/up, down, then the 32000-row LM head; about 160 MB at f32, far beyond the caches) with one
//    row of x, as a decode step reads them: ms per pass and GB/s of weights.
// 2. Batches: a 4096 × 4096 matrix at each --rows count, ragd's kernels against OpenBLAS sgemm on
//    the same weights in f32 (measured in the same run): ms per call and the speed-up.
// Thread-safety: single-threaded driver; the kernels use --threads OpenMP threads.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ragd/kernels/cpu_features.h"
#include "ragd/kernels/gemm.h"
#include "ragd/kernels/threads.h"
#include "ragd/kernels/weight_matrix.h"

#include "bench_args.h"

using namespace ragd::kernels;

namespace {

using Clock = std::chrono::steady_clock;

struct Packed {
  std::vector<uint8_t> mem;
  WeightMatrix view;
};

Packed pack(const std::vector<float>& w, int n, int k, WeightType t) {
  Packed p;
  p.mem.resize(weight_bytes(t, n, k));
  init_weight_storage(t, n, k, p.mem.data());
  pack_weight_rows(w.data(), n, 0, t, n, k, p.mem.data());
  p.view = make_view(t, n, k, p.mem.data());
  return p;
}

template <typename F>
double best_of(int reps, F&& f) {
  double best = 1e30;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = Clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

const WeightType kTypes[] = {WeightType::kF32, WeightType::kBF16, WeightType::kF16, WeightType::kQ8};

}  // namespace

int main(int argc, char** argv) {
  int threads = 1, reps = 10;
  std::vector<int> rows{1, 8, 32, 128, 512};
  ragd::bench::BenchArgs args("bench_linear");
  args.opt("threads", &threads).list("rows", &rows).opt("reps", &reps);
  if (!args.parse(argc, argv)) return 2;
  set_num_threads(threads);
  reps = std::max(1, reps);
  std::printf("# bench_linear threads=%d kernels=%s\n", num_threads(), cpu_summary().c_str());
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  auto random = [&](size_t n) {
    std::vector<float> v(n);
    for (auto& x : v) x = dist(rng);
    return v;
  };

  // 1. One decode step's worth of projections of the `small` preset.
  struct Shape {
    int n, k;
  };
  std::vector<Shape> shapes;
  for (int l = 0; l < 8; ++l) {
    for (Shape s : {Shape{1024, 512}, Shape{512, 512}, Shape{2816, 512}, Shape{512, 1408}}) shapes.push_back(s);
  }
  shapes.push_back({32000, 512});
  std::printf("# streaming: the small preset's projections once, one row of x\n%-6s %10s %10s %8s\n", "format",
              "MB", "ms/pass", "GB/s");
  const std::vector<float> x1 = random(1408);
  std::vector<float> y1(32000);
  for (WeightType t : kTypes) {
    std::vector<Packed> ms;
    double bytes = 0;
    for (Shape s : shapes) {
      ms.push_back(pack(random(static_cast<size_t>(s.n) * s.k), s.n, s.k, t));
      bytes += static_cast<double>(ms.back().view.bytes());
    }
    const double sec = best_of(reps, [&] {
      for (const Packed& p : ms) linear(x1.data(), 1, p.view.cols, p.view, nullptr, y1.data());
    });
    std::printf("%-6s %10.1f %10.2f %8.1f\n", std::string(weight_type_name(t)).c_str(), bytes / 1e6, sec * 1e3,
                bytes / sec / 1e9);
  }

  // 2. Batches on 4096 × 4096 against sgemm on the same weights in f32.
  const int n = 4096, k = 4096;
  const std::vector<float> w = random(static_cast<size_t>(n) * k);
  std::printf("# batches: 4096 x 4096, ragd kernels vs OpenBLAS sgemm on the f32 weights\n%-6s %-6s %12s %12s %8s\n",
              "rows", "format", "ragd ms", "sgemm ms", "speed-up");
  std::vector<Packed> packed;
  for (WeightType t : kTypes) packed.push_back(pack(w, n, k, t));
  for (int m : rows) {
    if (m <= 0) continue;
    const std::vector<float> x = random(static_cast<size_t>(m) * k);
    std::vector<float> y(static_cast<size_t>(m) * n);
    const double blas = best_of(reps, [&] {
      gemm(false, true, m, n, k, 1.0f, x.data(), k, w.data(), k, 0.0f, y.data(), n);
    });
    for (const Packed& p : packed) {
      const double sec = best_of(reps, [&] { linear(x.data(), m, k, p.view, nullptr, y.data()); });
      std::printf("%-6d %-6s %12.2f %12.2f %7.2fx\n", m, std::string(weight_type_name(p.view.type)).c_str(),
                  sec * 1e3, blas * 1e3, blas / sec);
    }
  }
  return 0;
}
