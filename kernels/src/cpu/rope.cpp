#include "ragd/kernels/rope.h"

#include <cmath>
#include <numbers>
#include <vector>

#include "ragd/kernels/threads.h"

namespace ragd::kernels {

void rope_inv_freq(const RopeConfig& cfg, float* inv_freq) {
  const int half = cfg.head_dim / 2;
  for (int i = 0; i < half; ++i) {
    // transformers: 1 / theta^(arange(0, dim, 2) / dim), computed in float32.
    const float base = static_cast<float>(
        1.0 / std::pow(cfg.theta, static_cast<double>(2 * i) / static_cast<double>(cfg.head_dim)));
    double f = base;
    switch (cfg.scaling) {
      case RopeConfig::Scaling::kNone:
        break;
      case RopeConfig::Scaling::kLinear:
        f = base / cfg.factor;
        break;
      case RopeConfig::Scaling::kLlama3: {
        const double old_len = cfg.original_max_position_embeddings;
        const double low_wavelen = old_len / cfg.low_freq_factor;
        const double high_wavelen = old_len / cfg.high_freq_factor;
        const double wavelen = 2.0 * std::numbers::pi / base;
        if (wavelen > low_wavelen) {
          f = base / cfg.factor;  // low frequencies: scaled
        } else if (wavelen < high_wavelen) {
          f = base;  // high frequencies: unchanged
        } else {     // medium: smooth interpolation between the two
          const double smooth =
              (old_len / wavelen - cfg.low_freq_factor) / (cfg.high_freq_factor - cfg.low_freq_factor);
          f = (1.0 - smooth) * base / cfg.factor + smooth * base;
        }
        break;
      }
    }
    inv_freq[i] = static_cast<float>(f);
  }
}

namespace {

// cos / sin of position p times each frequency. Angle in double: exact enough at long positions,
// and rotate(p) then rotate(d) matches rotate(p + d) to float rounding.
void angles(double p, int half, const float* inv_freq, float* cs, float* sn) {
  for (int i = 0; i < half; ++i) {
    const double ang = p * static_cast<double>(inv_freq[i]);
    cs[i] = static_cast<float>(std::cos(ang));
    sn[i] = static_cast<float>(std::sin(ang));
  }
}

__attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
void rotate_heads(float* x, int heads, int head_dim, const float* cs, const float* sn) {
  const int half = head_dim / 2;
  for (int h = 0; h < heads; ++h) {
    float* a = x + static_cast<size_t>(h) * head_dim;
    float* b = a + half;
#pragma omp simd
    for (int i = 0; i < half; ++i) {
      const float x1 = a[i];
      const float x2 = b[i];
      a[i] = x1 * cs[i] - x2 * sn[i];
      b[i] = x2 * cs[i] + x1 * sn[i];
    }
  }
}

// Rotates rows [0, rows) of x, row r by the table at cs / sn + r · table_stride (0: one table for
// every row).
void rotate_rows(float* x, int rows, int heads, int head_dim, int row_stride, const float* cs, const float* sn,
                 size_t table_stride) {
  parallel_for(rows, rows > 16, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r)
      rotate_heads(x + static_cast<size_t>(r) * row_stride, heads, head_dim, cs + r * table_stride,
                   sn + r * table_stride);
  });
}

}  // namespace

void rope_apply(float* x, int rows, int heads, int head_dim, int row_stride, const int32_t* positions,
                const float* inv_freq) {
  const int half = head_dim / 2;
  parallel_for(rows, rows > 4, [&](int r0, int r1) {
    std::vector<float> cs(half), sn(half);
    for (int r = r0; r < r1; ++r) {
      angles(static_cast<double>(positions[r]), half, inv_freq, cs.data(), sn.data());
      rotate_heads(x + static_cast<size_t>(r) * row_stride, heads, head_dim, cs.data(), sn.data());
    }
  });
}

void rope_table(int rows, int head_dim, const int32_t* positions, const float* inv_freq, float* cs, float* sn) {
  const int half = head_dim / 2;
  parallel_for(rows, rows > 16, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r)
      angles(static_cast<double>(positions[r]), half, inv_freq, cs + static_cast<size_t>(r) * half,
             sn + static_cast<size_t>(r) * half);
  });
}

void rope_apply_table(float* x, int rows, int heads, int head_dim, int row_stride, const float* cs, const float* sn) {
  rotate_rows(x, rows, heads, head_dim, row_stride, cs, sn, static_cast<size_t>(head_dim / 2));
}

void rope_rerotate(float* x, int rows, int heads, int head_dim, int row_stride, int64_t delta,
                   const float* inv_freq) {
  // Every row turns by the same angle: one cos / sin table for the call (the angles rope_apply would
  // compute for each row at position delta, so the result is the same bit for bit).
  const int half = head_dim / 2;
  std::vector<float> cs(static_cast<size_t>(half)), sn(static_cast<size_t>(half));
  angles(static_cast<double>(delta), half, inv_freq, cs.data(), sn.data());
  rotate_rows(x, rows, heads, head_dim, row_stride, cs.data(), sn.data(), 0);
}

}  // namespace ragd::kernels
