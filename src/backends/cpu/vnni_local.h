// Helpers of the AVX512-VNNI kernels (*_vnni.cc only: they emit EVEX instructions), with internal
// linkage like x8_kernel_local.h's.
//
// vpdpbusd / vpdpwssd with one 32-bit memory operand broadcast to all eight lanes ({1to8}). GCC 12
// does not fold _mm256_set1_epi32(*p) into the instruction as clang does, and emits a separate
// vpbroadcastd load for each; a decode kernel issues one per four codes of eight rows, and the
// extra front-end slots are what limit it while it streams from memory (folded, the Q4_Kx8 kernel
// streamed over 10% faster).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace nexus::cpu {
namespace {

// acc + the products of the unsigned bytes of u with the four signed bytes at p (every lane).
inline __m256i dpbusd_bcast(__m256i acc, __m256i u, const void* p) {
  asm("vpdpbusd %2%{1to8%}, %1, %0"
      : "+v"(acc)
      : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// acc + the products of the int16 pairs of a with the int16 pair at p (every lane).
inline __m256i dpwssd_bcast(__m256i acc, __m256i a, const void* p) {
  asm("vpdpwssd %2%{1to8%}, %1, %0"
      : "+v"(acc)
      : "v"(a), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

}  // namespace
}  // namespace nexus::cpu
