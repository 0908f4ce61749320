// Helpers of the eight-row decode kernels (the shared headers dot_q4_kx8_impl.h, dot_q6_kx8_impl.h
// and dot_q8_0x8_impl.h, which are compiled both for AVX2 and with AVX-512, and dot_q4_0x8_avx2.cc):
// internal linkage (an unnamed namespace), so that no copy compiled with AVX-512 can stand in for
// an AVX2 file's.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>

namespace nexus::cpu {
namespace {

// Bytes ahead of the current block column that the kernels prefetch: a thread's groups of rows are
// one sequential stream. Q06B Q4_0 tg64, 2 threads, quiet moment: 1024 and 2048 ahead 59-60 t/s,
// no prefetch 25 t/s.
constexpr size_t kX8PrefetchAhead = 2048;

// Column i of a group (kBytes each), after prefetching the kBytes that start kX8PrefetchAhead past
// it.
template <size_t kBytes>
inline const uint8_t* fetch_column(const uint8_t* w, int64_t i) {
  const uint8_t* col = w + static_cast<size_t>(i) * kBytes;
  const char* pf = reinterpret_cast<const char*>(col + kX8PrefetchAhead);
  for (size_t o = 0; o < kBytes; o += 64) _mm_prefetch(pf + o, _MM_HINT_T0);
  return col;
}

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
