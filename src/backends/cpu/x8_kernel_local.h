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
// one sequential stream, which decoded at under half the speed without it (1 and 2 KiB alike).
constexpr size_t kX8PrefetchAhead = 2048;
// The far (L2) prefetch distance of a super-block layout (Q4_Kx8, Q6_Kx8: columns of 1-2 KiB):
// its own (`measured`, chosen where the AVX-512 builds of these kernels run) in an AVX-512 build,
// 16 KiB in the AVX2 builds (fetch_column says why).
constexpr size_t x8_far([[maybe_unused]] size_t measured) {
#if defined(__AVX512F__)
  return measured;
#else
  return 16384;
#endif
}

// And further ahead into L2 only (prefetcht1): with two threads streaming, the loaded memory's
// latency needs more lines in flight than the near prefetch and the out-of-order window keep (up
// to 15% faster decode; 16 KiB measured like 8: docs/KERNELS.md).
constexpr size_t kX8PrefetchFar = 8192;

// Columns of at least this many bytes (the super-block layouts) have their near and far lines
// prefetched in two loops in the AVX2 builds (fetch_column).
constexpr size_t kSplitPrefetchBytes = 1024;

// Column i of a group (kBytes each), after prefetching the kBytes that start kAhead past it into L1
// and those kFar past it into L2: in one loop that interleaves them, or, for the AVX2 builds'
// super-block columns, the near lines, then the far ones, in two loops: on Zen 3, 18-27 near/far
// pairs back to back stall the kernel. The small columns (Q4_0x8, Q8_0x8) keep one loop at their
// own distances, which measured faster for them (docs/KERNELS.md).
template <size_t kBytes, size_t kAhead = kX8PrefetchAhead, size_t kFar = kX8PrefetchFar>
inline const uint8_t* fetch_column(const uint8_t* w, int64_t i) {
  const uint8_t* col = w + static_cast<size_t>(i) * kBytes;
  const char* near = reinterpret_cast<const char*>(col + kAhead);
  const char* far = reinterpret_cast<const char*>(col + kFar);
#if !defined(__AVX512F__)
  if constexpr (kBytes >= kSplitPrefetchBytes) {
    for (size_t o = 0; o < kBytes; o += 64) _mm_prefetch(near + o, _MM_HINT_T0);
    for (size_t o = 0; o < kBytes; o += 64) _mm_prefetch(far + o, _MM_HINT_T1);
    return col;
  }
#endif
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
