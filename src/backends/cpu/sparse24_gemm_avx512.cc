// Prefill with 2:4 sparse weights on AVX-512 (sparse24.h): only the kept half of the products.
// The tokens are transposed into panels of 64 (column c of the panel: 64 activations, 256 bytes),
// so a kept weight w at column c is its broadcast times four vectors of the panel's row c, added
// into the row's 4 x 16 token accumulators. The panel row's address comes from the position bits
// with scalar shifts (through a buffer it cost a store-to-load forward per value: 1.5x slower) and
// the broadcast from the block's 16 widened values with one permute. Even and odd values feed two
// sets of accumulators, so eight FMA chains are in flight. Rows go in passes of kRows over
// kColumns columns at a time, so the panel's columns and the rows' partial sums stay in L1, and
// the sums reach y a token at a time. (The zero-masked forms with all lanes set: GCC 12's plain
// cvtph, cvtepu16, slli and permutexvar warn about their own undefined pass-through operand.)
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/sparse24.h"
#include "backends/cpu/sparse24_gemm_driver.h"

namespace nexus::cpu {
namespace {

// Columns of the panel a pass over the rows reads: 128 x kPanel floats, 32 KiB, stay in L1.
// Rows a pass over the column blocks takes: their partial sums (kRows x kPanel floats) stay in L1
// beside the panel's columns.
constexpr int64_t kRows = 16;
constexpr int64_t kColumns = 128;
constexpr int64_t kPanel = 64;  // tokens per panel: four zmm of accumulators per set

template <class V>
inline __m512 load16(const uint8_t* p);
template <>
inline __m512 load16<float>(const uint8_t* p) {
  return _mm512_loadu_ps(p);
}
struct Half {};
struct BHalf {};
template <>
inline __m512 load16<Half>(const uint8_t* p) {
  return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
template <>
inline __m512 load16<BHalf>(const uint8_t* p) {
  const __m512i u =
      _mm512_maskz_cvtepu16_epi32(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, u, 16));
}

template <class V>
constexpr size_t value_bytes() {
  return std::is_same_v<V, float> ? 4 : 2;
}

template <class V>
void rows_on_panel(const uint8_t* w, size_t w_stride, int64_t c0, int64_t c1, const float* panel,
                   float* part, int64_t r0, int64_t r1) {
  constexpr size_t kBlockBytes = 4 + 16 * value_bytes<V>();
  const auto* pb = reinterpret_cast<const char*>(panel);
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* b = w + static_cast<size_t>(r) * w_stride + c0 / kSparse24Block * kBlockBytes;
    float* acc = part + (r - r0) * kPanel;
    // The same columns of the row kRows on (the next pass's rows): a pass reads each row's
    // columns a short strided piece at a time, which the hardware prefetchers do not follow.
    for (size_t i = 0; i < static_cast<size_t>(c1 - c0) / kSparse24Block * kBlockBytes; i += 64)
      __builtin_prefetch(b + kRows * w_stride + i, 0, 3);
    // The k-block's sums go on from the earlier blocks' (kept in `part`).
    const __m512 zero = _mm512_setzero_ps();
    __m512 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    if (c0 > 0) {
      a0 = _mm512_loadu_ps(acc);
      a1 = _mm512_loadu_ps(acc + 16);
      a2 = _mm512_loadu_ps(acc + 32);
      a3 = _mm512_loadu_ps(acc + 48);
    }
    __m512 o0 = zero, o1 = zero, o2 = zero, o3 = zero;
    for (int64_t col = c0; col < c1; col += kSparse24Block, b += kBlockBytes) {
      uint32_t pos;
      std::memcpy(&pos, b, 4);
      const __m512 vals = load16<V>(b + 4);
      // Panel row of value j: column col + 4 * (j / 2) + its position, 256 bytes a row.
      const char* at = pb + (col << 8);
#pragma GCC unroll 8
      for (int j = 0; j < 16; j += 2) {
        const auto* x0 =
            reinterpret_cast<const float*>(at + ((4 * (j / 2) + ((pos >> (2 * j)) & 3)) << 8));
        const auto* x1 =
            reinterpret_cast<const float*>(at + ((4 * (j / 2) + ((pos >> (2 * j + 2)) & 3)) << 8));
        const __m512 v0 = _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_set1_epi32(j), vals);
        const __m512 v1 = _mm512_maskz_permutexvar_ps(0xFFFF, _mm512_set1_epi32(j + 1), vals);
        a0 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x0), a0);
        a1 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x0 + 16), a1);
        a2 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x0 + 32), a2);
        a3 = _mm512_fmadd_ps(v0, _mm512_loadu_ps(x0 + 48), a3);
        o0 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x1), o0);
        o1 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x1 + 16), o1);
        o2 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x1 + 32), o2);
        o3 = _mm512_fmadd_ps(v1, _mm512_loadu_ps(x1 + 48), o3);
      }
    }
    _mm512_storeu_ps(acc, _mm512_add_ps(a0, o0));
    _mm512_storeu_ps(acc + 16, _mm512_add_ps(a1, o1));
    _mm512_storeu_ps(acc + 32, _mm512_add_ps(a2, o2));
    _mm512_storeu_ps(acc + 48, _mm512_add_ps(a3, o3));
  }
}

struct Kernel {
  static constexpr int64_t kPanel = ::nexus::cpu::kPanel, kRows = ::nexus::cpu::kRows,
                           kColumns = ::nexus::cpu::kColumns;
  using F32 = float;
  using Half = ::nexus::cpu::Half;
  using BHalf = ::nexus::cpu::BHalf;
  template <class V>
  static void rows(const uint8_t* w, size_t w_stride, int64_t c0, int64_t c1, const float* panel,
                   float* part, int64_t r0, int64_t r1) {
    rows_on_panel<V>(w, w_stride, c0, c1, panel, part, r0, r1);
  }
};

}  // namespace

void gemm_2of4_avx512(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                      int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  gemm_2of4_driver<Kernel>(t, w, w_stride, k, x, n, y, y_stride, r0, r1);
}

}  // namespace nexus::cpu
