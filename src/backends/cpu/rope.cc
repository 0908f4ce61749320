// Rotary embedding kernels (scalar; the table is shared by all heads and layers of a batch).
#include <cmath>

#include "backends/cpu/rope.h"

namespace nexus::cpu {

void rope_table(const int32_t* pos, int64_t n, int64_t rope_dim, float theta, float* cs) {
  const int64_t half = rope_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(theta), -2.0 * i / rope_dim);
      const double a = pos[t] * freq;
      cs[(t * half + i) * 2] = static_cast<float>(std::cos(a));
      cs[(t * half + i) * 2 + 1] = static_cast<float>(std::sin(a));
    }
  }
}

void rope_apply(float* x, int64_t n, int64_t n_heads, int64_t head_dim, int64_t rope_dim,
                RopeStyle style, const float* cs) {
  const int64_t half = rope_dim / 2;
  for (int64_t t = 0; t < n; ++t) {
    const float* c = cs + t * half * 2;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (t * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b];
        v[a] = x0 * c[2 * i] - x1 * c[2 * i + 1];
        v[b] = x0 * c[2 * i + 1] + x1 * c[2 * i];
      }
    }
  }
}

}  // namespace nexus::cpu
