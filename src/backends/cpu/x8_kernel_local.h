// Helpers of the eight-row decode kernels (the shared headers dot_q4_kx8_impl.h, dot_q6_kx8_impl.h
// and dot_q8_0x8_impl.h, which are compiled both for AVX2 and with AVX-512, and
// dot_q4_0x8_avx2.cc): internal linkage (an unnamed namespace), so that no copy compiled with
// AVX-512 can stand in for an AVX2 file's.
#pragma once

#include <immintrin.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace nexus::cpu {
namespace {

// Bytes ahead of the current block column that the kernels prefetch: a thread's groups of rows are
// one sequential stream. Q06B Q4_0 tg64, 2 threads, quiet moment: 1024 and 2048 ahead 59-60 t/s,
// no prefetch 25 t/s.
constexpr size_t kX8PrefetchAhead = 2048;
// And further ahead into L2 only (prefetcht1): with two threads streaming, the loaded memory's
// latency needs more lines in flight than the near prefetch and the out-of-order window keep.
// Measured, tg64 alternating (Intel host, 2 threads; 2 KiB near prefetch alone -> with this one
// 8 KiB ahead): Q06B Q4_0 75.3-75.9 -> 86.6-87.4 t/s, Q4_K_M 71.7-72.0 -> 78.9-79.8, Q8_0
// 49.6-50.2 -> 49.9-51.0; L110M Q8_0 399-402 -> 451-452, Q4_0 672-702 -> 723-739, Q4_K_M 689-690
// -> 670-672. 16 KiB ahead measured the same as 8 KiB; 4 or 8 KiB as the near distance was slower.
constexpr size_t kX8PrefetchFar = 8192;

// Column i of a group (kBytes each), after prefetching the kBytes that start kAhead past it into L1
// and those kFar past it into L2.
template <size_t kBytes, size_t kAhead = kX8PrefetchAhead, size_t kFar = kX8PrefetchFar>
inline const uint8_t* fetch_column(const uint8_t* w, int64_t i) {
  const uint8_t* col = w + static_cast<size_t>(i) * kBytes;
  const char* near = reinterpret_cast<const char*>(col + kAhead);
  const char* far = reinterpret_cast<const char*>(col + kFar);
  for (size_t o = 0; o < kBytes; o += 64) {
    _mm_prefetch(near + o, _MM_HINT_T0);
    _mm_prefetch(far + o, _MM_HINT_T1);
  }
  return col;
}

// The four bytes (or two int16) at p in every 32-bit lane: a row-per-lane kernel's activation
// operand (the VNNI files fold it into the instruction instead, vnni_local.h).
inline __m256i broadcast4(const void* p) {
  int32_t v;
  std::memcpy(&v, p, sizeof(v));
  return _mm256_set1_epi32(v);
}

inline __m256i load256(const uint8_t* p) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
}

// Rows p (low half) and p + 4 (high half) of four int32 pair sums to rows 0..7, one per lane: two
// levels of hadd (as avx2::sum4_i32).
inline __m256i sum4_i32(__m256i a, __m256i b, __m256i c, __m256i d) {
  return _mm256_hadd_epi32(_mm256_hadd_epi32(a, b), _mm256_hadd_epi32(c, d));
}

// The finish of a 32-element block column shared by eight rows (Q8_0x8, Q5_0x8): the four pair
// sums s (rows p and p + 4) to one exact int32 per row, then acc + sum * (d_w * d_y) in one FMA.
inline __m256 add_block(__m256 acc, const __m256i s[4], __m256 dw, float dy) {
  const __m256i rows = sum4_i32(s[0], s[1], s[2], s[3]);
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(rows), _mm256_mul_ps(dw, _mm256_set1_ps(dy)), acc);
}

}  // namespace
}  // namespace nexus::cpu
