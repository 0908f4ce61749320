// AVX-512 versions of the F32 decode dot product (vec_dot and vec_dot_wrows) and of the F16 rows
// (vec_dot_wrows), bit-identical to the AVX2 ones (quant_avx2.cc, dot_float_rows_avx2.cc): a
// 512-bit register holds two of the AVX2 kernel's 256-bit accumulators side by side (lanes 0-7 the
// first, 8-15 the second), so every lane sees the same products in the same order, and the final
// reduction splits them back and sums them as the AVX2 code does. What changes is the instruction
// count: one load and one FMA per 64 bytes of F32 weights instead of two. Decode streams the
// weights, and each core keeps only so many loads in flight, so fewer instructions per weight byte
// buy speed (Q06B F32 about 3%). F16 rows likewise (vec_dot_wrows only: one 512-bit conversion and
// FMA per 16 values, lanes 0-7 and 8-15 the AVX2 row's two accumulators): faster where the weights
// sit in the L3, equal from memory.
#include <immintrin.h>

#include <cstdint>

#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx512.h"

namespace nexus::cpu {
namespace {

using avx512::hi256;
using avx512::hsum8;
using avx512::lo256;

// F32 rows shorter than this go to the AVX2 four-row passes (as in dot_float_rows_avx2.cc).
constexpr int64_t kShortF32Row = 256;

}  // namespace

float vec_dot_f32_avx512(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  // acc01 = vec_dot_f32_avx2's acc0 | acc1, acc23 = acc2 | acc3.
  __m512 acc01 = _mm512_setzero_ps(), acc23 = acc01;
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    prefetch_f32_step(a + i);
    acc01 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc01);
    acc23 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc23);
  }
  __m256 acc0 = lo256(acc01);
  for (; i + 8 <= n; i += 8)
    acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
  float s = hsum8(_mm256_add_ps(_mm256_add_ps(acc0, hi256(acc01)),
                                _mm256_add_ps(lo256(acc23), hi256(acc23))));
  for (; i < n; ++i) s += a[i] * b[i];
  return s;
}

void vec_dot_wrows_f32_avx512(int64_t n, const void* w, size_t ws, const void* x, int nr,
                              float* out) {
  if (n < kShortF32Row) return vec_dot_wrows_f32_avx2(n, w, ws, x, nr, out);
  const auto* wb = static_cast<const uint8_t*>(w);
  for (int r = 0; r < nr; ++r) out[r] = vec_dot_f32_avx512(n, wb + r * ws, x);
}

namespace {

// F16 and BF16 rows (Widen: 16 halves to 16 floats; Scalar: one): one 16-lane accumulator whose
// halves are vec_dot_{f16,bf16}_avx2's two 8-lane ones, the same tail, so bit-identical to them.
template <typename Widen, typename Scalar>
void wrows_half(int64_t n, const void* w, size_t ws, const void* x, int nr, float* out,
                Widen widen, Scalar scalar) {
  const auto* wb = static_cast<const uint8_t*>(w);
  const auto* b = static_cast<const float*>(x);
  for (int r = 0; r < nr; ++r) {
    const auto* a = reinterpret_cast<const uint16_t*>(wb + r * ws);
    const auto* bytes = reinterpret_cast<const char*>(a);
    __m512 acc01 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
      if ((i & 31) == 0) prefetch_f16_line(bytes + 2 * i);
      const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
      acc01 = _mm512_fmadd_ps(widen(h), _mm512_loadu_ps(b + i), acc01);
    }
    float s = hsum8(_mm256_add_ps(lo256(acc01), hi256(acc01)));
    for (; i < n; ++i) s += scalar(a[i]) * b[i];
    out[r] = s;
  }
}

}  // namespace

// (The all-ones / zero-masked forms: GCC 12's plain _mm512_cvtph_ps, cvtepu16 and slli warn about
// their own undefined pass-through operand (-Wmaybe-uninitialized); the instructions are the same.)
void vec_dot_wrows_f16_avx512(int64_t n, const void* w, size_t ws, const void* x, int nr,
                              float* out) {
  wrows_half(
      n, w, ws, x, nr, out, [](__m256i h) { return _mm512_maskz_cvtph_ps(0xFFFF, h); },
      [](uint16_t v) { return _cvtsh_ss(v); });
}

// bf16 widens by a shift: its 16 bits are the float's high half.
void vec_dot_wrows_bf16_avx512(int64_t n, const void* w, size_t ws, const void* x, int nr,
                               float* out) {
  wrows_half(
      n, w, ws, x, nr, out,
      [](__m256i h) {
        return _mm512_castsi512_ps(
            _mm512_maskz_slli_epi32(0xFFFF, _mm512_maskz_cvtepu16_epi32(0xFFFF, h), 16));
      },
      [](uint16_t v) {
        const uint32_t u = static_cast<uint32_t>(v) << 16;
        float f;
        __builtin_memcpy(&f, &u, 4);
        return f;
      });
}

}  // namespace nexus::cpu
