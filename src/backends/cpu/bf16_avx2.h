// bf16 <-> f32 helpers of the AVX2 files that convert (round_avx2.cc, optim_avx2.cc).
// Include only from *_avx2.cc files; internal linkage (an unnamed namespace), so no copy compiled
// with other flags can stand in for these.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus::cpu {
namespace {

// Eight bf16 values widened to f32 (exact: the bits become the upper half).
inline __m256 bf16x8_to_f32(const uint16_t* h) {
  const __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(h)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(w, 16));
}

// The upper 16 bits of eight 32-bit lanes as eight uint16, in lane order.
inline __m128i high_halves(__m256i r) {
  const __m256i s = _mm256_srli_epi32(r, 16);
  return _mm_packus_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

}  // namespace
}  // namespace nexus::cpu
