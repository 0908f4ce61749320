// Decode with F16, BF16 and F32 weights (vec_dot_wrows; F32 is described at its function). F16
// (and BF16 alike): up
// to eight weight rows against one f32 activation row, one row after the other, each with software
// prefetches 1 KiB (into L1) and 8 KiB (into L2) ahead in the weight stream (quant_impl.h).
// One row at a time beats passes of four rows that share the activation loads (15% on L110M F16):
// four short interleaved streams defeat the hardware prefetcher even with the next rows prefetched.
// Per row, the accumulators, their order and the tail are those of vec_dot_f16_avx2 (BF16:
// vec_dot_bf16_avx2; quant_avx2.cc), so every result is bit-identical to it.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/gemm.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

// F32 rows shorter than this (tiny models, cache-resident) are compute-bound: four-row passes.
constexpr int64_t kShortF32Row = 256;

inline __m256 load_f16(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// bf16 to f32: the 16 bits are the float's high half.
inline __m256 load_bf16(const uint16_t* p) {
  const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
}

inline float f16_value(uint16_t h) { return _cvtsh_ss(h); }

inline float bf16_value(uint16_t h) {
  const uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  __builtin_memcpy(&f, &u, 4);
  return f;
}

// Two accumulators over 16-value steps (vec_dot_f16_avx2's and vec_dot_bf16_avx2's order); every
// second step (one 64-byte line) prefetches the lines kF16AheadBytes and kF16FarBytes further
// on, which near the row's end are in the next rows.
template <__m256 (*Load)(const uint16_t*), float (*Value)(uint16_t)>
float row_half(int64_t n, const uint16_t* a, const float* x) {
  const auto* bytes = reinterpret_cast<const char*>(a);
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    if ((i & 31) == 0) prefetch_f16_line(bytes + 2 * i);
    acc0 = _mm256_fmadd_ps(Load(a + i), _mm256_loadu_ps(x + i), acc0);
    acc1 = _mm256_fmadd_ps(Load(a + i + 8), _mm256_loadu_ps(x + i + 8), acc1);
  }
  float s = avx2::hsum(_mm256_add_ps(acc0, acc1));
  for (; i < n; ++i) s += Value(a[i]) * x[i];
  return s;
}

constexpr auto row_f16 = row_half<load_f16, f16_value>;
constexpr auto row_bf16 = row_half<load_bf16, bf16_value>;

}  // namespace

void vec_dot_wrows_bf16_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                             float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < nr; ++r)
    out[r] = row_bf16(n, reinterpret_cast<const uint16_t*>(wb + r * ws), static_cast<const float*>(x));
}

void vec_dot_wrows_f16_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                            float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < nr; ++r)
    out[r] = row_f16(n, reinterpret_cast<const uint16_t*>(wb + r * ws), static_cast<const float*>(x));
}

// F32: rows of at least kShortF32Row values one at a time through vec_dot_f32_avx2 (bit-identical
// to it), whose own prefetches (1 KiB and 16 KiB ahead, quant_impl.h) run into the following
// rows; tiny rows eight, then four at a time (dot8_f32_avx2, dot4_f32_avx2: one accumulator per
// row, so equal to vec_dot only to f32 rounding; either pass gives a row the same bits). Longer
// rows stream faster one at a time; tiny ones, all in cache, in passes (docs/KERNELS.md).
void vec_dot_wrows_f32_avx2(int64_t n, const void* w, size_t ws, const void* x, int nr,
                            float* out) {
  const auto* wb = static_cast<const uint8_t*>(w);
  int r = 0;
  if (n < kShortF32Row) {
    const size_t stride = ws / sizeof(float);
    for (; r + 8 <= nr; r += 8)
      dot8_f32_avx2(n, reinterpret_cast<const float*>(wb + r * ws), stride,
                    static_cast<const float*>(x), out + r);
    for (; r + 4 <= nr; r += 4)
      dot4_f32_avx2(n, reinterpret_cast<const float*>(wb + r * ws), stride,
                    static_cast<const float*>(x), out + r);
  }
  for (; r < nr; ++r) out[r] = vec_dot_f32_avx2(n, wb + r * ws, x);
}

}  // namespace nexus::cpu
