// AVX2 bias gradient of the training ops.
#include <immintrin.h>

#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {

// Row by row like the scalar loop (each column's sum keeps its order), eight columns per add: the
// column range's partial sums stay in L1 while the rows stream past (GCC -O2 does not vectorise
// the scalar loop).
void bias_backward_avx2(float* db, const float* dout, int64_t n, int64_t c, int64_t j0,
                        int64_t j1) {
  const int64_t vend = j0 + (j1 - j0) / 8 * 8;
  for (int64_t i = 0; i < n; ++i) {
    const float* row = dout + i * c;
    for (int64_t j = j0; j < vend; j += 8)
      _mm256_storeu_ps(db + j, _mm256_add_ps(_mm256_loadu_ps(db + j), _mm256_loadu_ps(row + j)));
    for (int64_t j = vend; j < j1; ++j) db[j] += row[j];
  }
}

}  // namespace nexus::cpu
