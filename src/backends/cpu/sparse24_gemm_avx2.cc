// Prefill with 2:4 sparse weights on AVX2 (sparse24.h): sparse24_gemm_avx512.cc's method with
// panels of 32 tokens (four ymm per set of accumulators, a panel row of 128 bytes, 256 columns in
// L1), and the dispatch between the two.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/sparse24.h"
#include "backends/cpu/sparse24_gemm_driver.h"

namespace nexus::cpu {
namespace {

// Columns of the panel a pass over the rows reads: 256 x kPanel floats, 32 KiB, stay in L1.
// Rows a pass over the column blocks takes: their partial sums (kRows x kPanel floats) stay in L1
// beside the panel's columns.
constexpr int64_t kRows = 16;
constexpr int64_t kColumns = 256;
constexpr int64_t kPanel = 32;

struct Half {};
struct BHalf {};
template <class V>
inline __m256 load8(const uint8_t* p) {
  if constexpr (std::is_same_v<V, float>) {
    return _mm256_loadu_ps(reinterpret_cast<const float*>(p));
  } else if constexpr (std::is_same_v<V, Half>) {
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  } else {
    const __m256i u = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    return _mm256_castsi256_ps(_mm256_slli_epi32(u, 16));
  }
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
    const __m256 zero = _mm256_setzero_ps();
    __m256 a0 = zero, a1 = zero, a2 = zero, a3 = zero;
    if (c0 > 0) {
      a0 = _mm256_loadu_ps(acc);
      a1 = _mm256_loadu_ps(acc + 8);
      a2 = _mm256_loadu_ps(acc + 16);
      a3 = _mm256_loadu_ps(acc + 24);
    }
    __m256 o0 = zero, o1 = zero, o2 = zero, o3 = zero;
    for (int64_t col = c0; col < c1; col += kSparse24Block, b += kBlockBytes) {
      uint32_t pos;
      std::memcpy(&pos, b, 4);
      const __m256 vals[2] = {load8<V>(b + 4), load8<V>(b + 4 + 8 * value_bytes<V>())};
      // Panel row of value j: column col + 4 * (j / 2) + its position, 128 bytes a row.
      const char* at = pb + (col << 7);
#pragma GCC unroll 8
      for (int j = 0; j < 16; j += 2) {
        const auto* x0 =
            reinterpret_cast<const float*>(at + ((4 * (j / 2) + ((pos >> (2 * j)) & 3)) << 7));
        const auto* x1 =
            reinterpret_cast<const float*>(at + ((4 * (j / 2) + ((pos >> (2 * j + 2)) & 3)) << 7));
        const __m256 v0 = _mm256_permutevar8x32_ps(vals[j / 8], _mm256_set1_epi32(j % 8));
        const __m256 v1 = _mm256_permutevar8x32_ps(vals[j / 8], _mm256_set1_epi32(j % 8 + 1));
        a0 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x0), a0);
        a1 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x0 + 8), a1);
        a2 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x0 + 16), a2);
        a3 = _mm256_fmadd_ps(v0, _mm256_loadu_ps(x0 + 24), a3);
        o0 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x1), o0);
        o1 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x1 + 8), o1);
        o2 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x1 + 16), o2);
        o3 = _mm256_fmadd_ps(v1, _mm256_loadu_ps(x1 + 24), o3);
      }
    }
    _mm256_storeu_ps(acc, _mm256_add_ps(a0, o0));
    _mm256_storeu_ps(acc + 8, _mm256_add_ps(a1, o1));
    _mm256_storeu_ps(acc + 16, _mm256_add_ps(a2, o2));
    _mm256_storeu_ps(acc + 24, _mm256_add_ps(a3, o3));
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

void gemm_2of4_avx2(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                    int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  gemm_2of4_driver<Kernel>(t, w, w_stride, k, x, n, y, y_stride, r0, r1);
}

void gemm_2of4(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x, int64_t n,
               float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  static const bool wide = avx512_active();
  if (wide)
    gemm_2of4_avx512(t, w, w_stride, k, x, n, y, y_stride, r0, r1);
  else
    gemm_2of4_avx2(t, w, w_stride, k, x, n, y, y_stride, r0, r1);
}

}  // namespace nexus::cpu
