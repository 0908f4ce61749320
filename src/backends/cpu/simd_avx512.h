// Small helpers for the files compiled with AVX-512 (dot_float_avx512.cc), and only for them.
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

}  // namespace nexus::cpu::avx512
