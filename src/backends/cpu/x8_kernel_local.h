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
// The far (L2) prefetch distance of a super-block layout (Q4_Kx8, Q6_Kx8: columns of 1-2 KiB):
// its own (`measured`, chosen where the AVX-512 builds of these kernels run: the Intel and Zen 4
// hosts) in an AVX-512 build, 16 KiB in the AVX2 builds (fetch_column says what was measured on the
// Zen 3 host).
constexpr size_t x8_far([[maybe_unused]] size_t measured) {
#if defined(__AVX512F__)
  return measured;
#else
  return 16384;
#endif
}

// And further ahead into L2 only (prefetcht1): with two threads streaming, the loaded memory's
// latency needs more lines in flight than the near prefetch and the out-of-order window keep.
// Measured, tg64 alternating (Intel host, 2 threads; 2 KiB near prefetch alone -> with this one
// 8 KiB ahead): Q06B Q4_0 75.3-75.9 -> 86.6-87.4 t/s, Q4_K_M 71.7-72.0 -> 78.9-79.8, Q8_0
// 49.6-50.2 -> 49.9-51.0; L110M Q8_0 399-402 -> 451-452, Q4_0 672-702 -> 723-739, Q4_K_M 689-690
// -> 670-672. 16 KiB ahead measured the same as 8 KiB; 4 or 8 KiB as the near distance was slower.
constexpr size_t kX8PrefetchFar = 8192;

// Columns of at least this many bytes (the super-block layouts) have their near and far lines
// prefetched in two loops in the AVX2 builds (fetch_column).
constexpr size_t kSplitPrefetchBytes = 1024;

// Column i of a group (kBytes each), after prefetching the kBytes that start kAhead past it into L1
// and those kFar past it into L2: in one loop that interleaves them, or, for the AVX2 builds'
// super-block columns, the near lines, then the far ones, in two loops. On the Zen 3 host (AVX2
// only, 32 MiB L3, a busy memory), decode on two threads, tg32 alternating,
// medians of 5-10 runs (t/s):
// - Q4_Kx8 and Q6_Kx8, one loop at their own distances (9 and 4 KiB far) -> two loops at 16 KiB:
//   L110M Q4_K_M 228 -> 281, Q06B Q4_0 (its Q6_K head) 47.1 -> 52.0. Two loops at the own
//   distances: 247-271 and 51.6-52.4. One loop at 16 KiB: no faster than at the own distances
//   (L110M Q4_K_M 213-238 against 219-256), though one thread's matrix stream (BM_DecodeRows) went
//   from 9-10 to 11-16 GB/s through Q4_Kx8 with it. The one loop with the far prefetch first, or
//   with a never-taken branch between the two prefetches, measured like two loops (326-330 against
//   260 in one window): on this core, 18-27 pairs of prefetches back to back, near then far, stall
//   the kernel. 32 KiB far, and 4 KiB near, measured 2% under 16 KiB (8 pairs).
// - The small columns (Q4_0x8 144 bytes, Q8_0x8 272) keep one loop at their own distances: with
//   both changes they measured 0.86x (L110M Q4_0) and 0.93x (Q06B Q8_0) in one window, one loop
//   at 16 KiB 1.06x and 1.02x (L110M) in another (paired medians of 5 and 10).
// - This split as committed, against the code before (paired medians of 5-8): L110M Q4_K_M 1.07x,
//   Q4_0 1.10x (its Q6_K head: 14.4-14.8 -> 17.2-17.6 GB/s in the profile), Q8_0 0.97x; Q06B
//   Q4_0 1.09x, Q4_K_M 1.11x, Q8_0 0.97x.
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
