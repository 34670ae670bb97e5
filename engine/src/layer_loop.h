// Per-layer loops over host KV (a segment written into the pool, its keys re-rotated on the way).
// Thread-safety: a function; f runs on the calling thread's OpenMP team, so callers are the thread
// that steps the model (whose team the kernels use).
#pragma once

#include <cstddef>

namespace ragd::engine {

// Runs f(l) for every layer l: in parallel when there are several layers of at least 4,096
// floats each, else in order on this thread. A branch, not `parallel for if (...)`: inside an
// inactive region, a region that f opens itself (the RoPE rotation past 16 rows) would become a
// nested team of new threads.
template <typename F>
void for_each_layer(int layers, size_t floats_per_layer, const F& f) {
  if (layers > 1 && floats_per_layer >= 4096) {
#pragma omp parallel for schedule(static)
    for (int l = 0; l < layers; ++l) f(l);
  } else {
    for (int l = 0; l < layers; ++l) f(l);
  }
}

}  // namespace ragd::engine
