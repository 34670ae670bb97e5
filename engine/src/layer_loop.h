// Per-layer loops over host KV (a segment written into the pool, its keys re-rotated on the way).
// Thread-safety: a function; f runs on the kernels' team (kernels/threads.h), and a kernel that f
// calls runs on f's thread.
#pragma once

#include <cstddef>

#include "ragd/kernels/threads.h"

namespace ragd::engine {

// Runs f(l) for every layer l: in parallel when there are several layers of at least 4,096
// floats each, else in order on this thread.
template <typename F>
void for_each_layer(int layers, size_t floats_per_layer, const F& f) {
  if (layers > 1 && floats_per_layer >= 4096) {
    kernels::parallel_for(layers, true, [&](int l0, int l1) {
      for (int l = l0; l < l1; ++l) f(l);
    });
  } else {
    for (int l = 0; l < layers; ++l) f(l);
  }
}

}  // namespace ragd::engine
