// Small helpers for the files compiled with AVX-512 (dot_float_avx512.cc, train_kernels_avx512.cc),
// and only for them.
// Those files include no header of inline AVX2 helpers (simd_avx2.h) and instantiate no library
// template: an inline function's copy compiled with AVX-512 could be the one the linker keeps for
// every file, the AVX2-only ones included, and fault on a CPU without AVX-512. The functions here
// are used by the AVX-512 files alone, so whichever copy the linker keeps is safe.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus::cpu::avx512 {

// The 8 lanes summed in avx2::hsum's order.
inline float hsum8(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Halves of a 512-bit register. The zero-masked extract: GCC 12's plain extract (and the
// 512-to-256 cast built on it) passes an undefined vector that -Wuninitialized reports from
// inside its header.
inline __m256 lo256(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 0));
}
inline __m256 hi256(__m512 v) {
  return _mm256_castpd_ps(_mm512_maskz_extractf64x4_pd(0xF, _mm512_castps_pd(v), 1));
}

// The vectorised exp of exp_avx2.h on 16 lanes: the same operations in the same order on every
// lane, so each lane is bit-identical to avx2::exp_clamped / avx2::exp_neg. Max, min, rounding,
// conversion and shift are the full-mask forms for the reason above.
inline __m512 exp_clamped(__m512 x) {
  constexpr __mmask16 kAll = 0xFFFF;
  x = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, x, _mm512_set1_ps(-87.0f)),
                          _mm512_set1_ps(88.0f));
  const __m512 n =
      _mm512_maskz_roundscale_ps(kAll, _mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                 _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512i e = _mm512_maskz_slli_epi32(
      kAll, _mm512_add_epi32(_mm512_maskz_cvtps_epi32(kAll, n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(e));
}

// exp(x) for x <= 0 (scores minus their max); inputs below -87 give exactly 0.
inline __m512 exp_neg(__m512 x) {
  const __mmask16 valid = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-87.0f), _CMP_GE_OQ);
  return _mm512_maskz_mov_ps(valid, exp_clamped(x));
}

}  // namespace nexus::cpu::avx512
