// Rotary embedding kernels: the angle table (shared by all heads and layers of a batch) and the
// rotation, rows split over the pool (each row independent: any thread count gives the same bits).
#include "backends/cpu/rope.h"

#include <cmath>

#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"

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

void rope_rotate_row_scalar(float* v, const float* cs, int64_t half, float sign) {
  for (int64_t i = 0; i < half; ++i) {
    const float x0 = v[2 * i], x1 = v[2 * i + 1], co = cs[2 * i], si = sign * cs[2 * i + 1];
    v[2 * i] = x0 * co - x1 * si;
    v[2 * i + 1] = x0 * si + x1 * co;
  }
}

namespace {

using PairRow = void (*)(float*, const float*, int64_t, float);

template <PairRow pair_row>
void rope(const RopeArgs& a, ThreadPool* pool) {
  const int64_t half = a.rope_dim / 2;
  const float sign = a.inverse ? -1.0f : 1.0f;
  par::for_ranges(pool, a.rows, 16, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; ++r) {
      const float* c = a.cs + (r % a.cs_rows) * half * 2;
      for (int64_t h = 0; h < a.n_heads; ++h) {
        float* v = a.x + (r * a.n_heads + h) * a.head_dim;
        if (a.style != RopeStyle::kNeox) {  // adjacent pairs (2i, 2i + 1)
          pair_row(v, c, half, sign);
          continue;
        }
        for (int64_t i = 0; i < half; ++i) {  // pairs (i, i + half)
          const float x0 = v[i], x1 = v[i + half], co = c[2 * i], si = sign * c[2 * i + 1];
          v[i] = x0 * co - x1 * si;
          v[i + half] = x0 * si + x1 * co;
        }
      }
    }
  });
}

const KernelVariant<RopeArgs> kRope[] = {{"avx2", avx2_active, rope<rope_rotate_row_avx2>},
                                         {"scalar", always_available, rope<rope_rotate_row_scalar>}};

}  // namespace

KernelVariants<RopeArgs> rope_kernels() { return kRope; }

}  // namespace nexus::cpu
