// Helpers of the eight-row decode kernels' shared headers (dot_q4_kx8_impl.h, dot_q6_kx8_impl.h,
// dot_q8_0x8_impl.h), which are compiled both for AVX2 and with AVX-512: internal linkage (an
// unnamed namespace), so that no copy compiled with AVX-512 can stand in for an AVX2 file's.
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus::cpu {
namespace {

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Rows p (low half) and p + 4 (high half) of four int32 pair sums to rows 0..7, one per lane: two
// levels of hadd (as avx2::sum4_i32).
inline __m256i sum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}

}  // namespace
}  // namespace nexus::cpu
