// AVX2 version of the sampler's copy with block maxima.
#include <immintrin.h>

#include <cmath>
#include <limits>

#include "backends/cpu/elementwise_kernels.h"
#include "backends/cpu/elementwise.h"

namespace nexus::cpu {

bool copy_block_max_avx2(const float* src, float* dst, int64_t n, float* block_max) {
  const __m256 inf = _mm256_set1_ps(std::numeric_limits<float>::infinity());
  __m256 ok = _mm256_castsi256_ps(_mm256_set1_epi32(-1));
  int64_t b = 0;
  for (; (b + 1) * kBlockMaxEntries <= n; ++b) {
    const float* s = src + b * kBlockMaxEntries;
    float* d = dst == nullptr ? nullptr : dst + b * kBlockMaxEntries;
    __m256 m[2];
    for (int h = 0; h < 2; ++h) {
      // Four vectors of each half: their max, their copy, and x < inf (false for NaN and +inf).
      const __m256 x0 = _mm256_loadu_ps(s + 32 * h), x1 = _mm256_loadu_ps(s + 32 * h + 8);
      const __m256 x2 = _mm256_loadu_ps(s + 32 * h + 16), x3 = _mm256_loadu_ps(s + 32 * h + 24);
      if (dst != nullptr) {
        _mm256_storeu_ps(d + 32 * h, x0);
        _mm256_storeu_ps(d + 32 * h + 8, x1);
        _mm256_storeu_ps(d + 32 * h + 16, x2);
        _mm256_storeu_ps(d + 32 * h + 24, x3);
      }
      const __m256 lt = _mm256_and_ps(
          _mm256_and_ps(_mm256_cmp_ps(x0, inf, _CMP_LT_OQ), _mm256_cmp_ps(x1, inf, _CMP_LT_OQ)),
          _mm256_and_ps(_mm256_cmp_ps(x2, inf, _CMP_LT_OQ), _mm256_cmp_ps(x3, inf, _CMP_LT_OQ)));
      ok = _mm256_and_ps(ok, lt);
      m[h] = _mm256_max_ps(_mm256_max_ps(x0, x1), _mm256_max_ps(x2, x3));
    }
    // Max of the eight lanes (exact in any order: no NaN gets here unflagged, and a -0 / +0 tie
    // only decides which zero stands for the block, which compares equal either way).
    __m128 v = _mm_max_ps(_mm256_castps256_ps128(_mm256_max_ps(m[0], m[1])),
                          _mm256_extractf128_ps(_mm256_max_ps(m[0], m[1]), 1));
    v = _mm_max_ps(v, _mm_movehl_ps(v, v));
    v = _mm_max_ss(v, _mm_shuffle_ps(v, v, 1));
    block_max[b] = _mm_cvtss_f32(v);
  }
  bool all = _mm256_movemask_ps(ok) == 0xff;
  if (b * kBlockMaxEntries < n)
    all &= copy_block_max_scalar(src + b * kBlockMaxEntries,
                                 dst == nullptr ? nullptr : dst + b * kBlockMaxEntries,
                                 n - b * kBlockMaxEntries, block_max + b);
  return all;
}

}  // namespace nexus::cpu
