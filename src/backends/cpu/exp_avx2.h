// Vectorised exp for AVX2/FMA translation units (compile with -mavx2 -mfma): range reduction by
// ln 2, degree-5 polynomial, relative error ~2e-7. Used by attention, SwiGLU and the training kernels.
#pragma once

#include <immintrin.h>

namespace nexus::cpu::avx2 {

// exp(x) with x clamped to [-87, 88], so results stay finite and normal.
inline __m256 exp_clamped(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
  // x = n ln2 + r, |r| <= ln2 / 2 (ln2 split in two parts for an exact reduction).
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  // Taylor/Cephes coefficients of expf on [-ln2/2, ln2/2].
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // Scale by 2^n through the exponent bits.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(e));
}

// exp(x) for x <= 0 (scores minus their max); inputs below -87 give exactly 0.
inline __m256 exp_neg(__m256 x) {
  const __m256 valid = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_GE_OQ);
  return _mm256_and_ps(exp_clamped(x), valid);
}

}  // namespace nexus::cpu::avx2
