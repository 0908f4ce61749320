// Prefill with 2:4 sparse weights on AVX-512, vectors across output rows (sparse24.h): a zmm
// holds one kept value of 16 rows in a group of four columns, and one permute brings each row's
// activation of that group into its lane from a zmm of the token's 16 activations (four groups).
// So every FMA does 16 kept products with one permute beside it, and this CPU runs the permutes
// on a port the FMAs do not use: about 1.8x the dense FMA rate in products (bench/micro/
// prefill_bench.cc, BM_Prefill2of4Variants). A block of 32 rows is first unpacked into a panel
// of f32 values and lane indices (4 bytes a weight, L2-resident), read once per 6 tokens.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "backends/cpu/sparse24.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

constexpr int64_t kRows = 32;  // two zmm of rows
constexpr int kTokens = 6;     // 12 accumulators
// Per 16 columns: [group g][slot s][half h] a zmm of values, then the same of lane indices.
constexpr int64_t kChunkFloats = 4 * 2 * 2 * 16 * 2;

// 16 x 16 transpose: r[i] lane j into r[j] lane i.
[[gnu::always_inline]] inline void transpose16(__m512 r[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    const __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
    const __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
    u[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));      // column 4L of rows i..i+3
    u[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));  // 4L + 1
    u[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));  // 4L + 2
    u[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));  // 4L + 3
  }
  // v[q]: columns q and q + 8 (q < 4) or q - 4 + 4 and q + 8 (q >= 4) of two row quads.
  __m512 v[16];
  for (int half = 0; half < 16; half += 8)
    for (int q = 0; q < 4; ++q) {
      v[half + q] = _mm512_shuffle_f32x4(u[half + q], u[half + 4 + q], 0x88);
      v[half + 4 + q] = _mm512_shuffle_f32x4(u[half + q], u[half + 4 + q], 0xdd);
    }
  for (int q = 0; q < 4; ++q) {
    r[q] = _mm512_shuffle_f32x4(v[q], v[8 + q], 0x88);
    r[4 + q] = _mm512_shuffle_f32x4(v[4 + q], v[12 + q], 0x88);
    r[8 + q] = _mm512_shuffle_f32x4(v[q], v[8 + q], 0xdd);
    r[12 + q] = _mm512_shuffle_f32x4(v[4 + q], v[12 + q], 0xdd);
  }
}

template <DType kType>
__m512 block_values(const uint8_t* p) {
  if constexpr (kType == DType::kF32_2of4) {
    return _mm512_loadu_ps(p);
  } else if constexpr (kType == DType::kF16_2of4) {
    return _mm512_maskz_cvtph_ps(0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  } else {
    const __m512i u = _mm512_maskz_cvtepu16_epi32(
        0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
    return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(0xFFFF, u, 16));
  }
}

// Rows [rb, rb + nr) of the matrix into panel (k / 16 chunks); rows past nr get zero values. A
// block of 16 rows at a time: each row's 16 values transposed so a vector holds one value slot of
// the 16 rows, and each slot's lane indices shifted out of the 16 rows' position words at once.
template <DType kType>
void unpack(const uint8_t* w, size_t w_stride, int64_t k, int64_t rb, int64_t nr, float* panel) {
  constexpr size_t kBlockBytes = 4 + 16 * (kType == DType::kF32_2of4 ? 4 : 2);
  const __m512i three = _mm512_set1_epi32(3);
  for (int64_t h = 0; h < kRows / 16; ++h) {
    const int64_t live = std::clamp<int64_t>(nr - h * 16, 0, 16);
    const __mmask16 mask = static_cast<__mmask16>((1u << live) - 1);
    const __m512i row_at =
        _mm512_mullo_epi32(_mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0),
                           _mm512_set1_epi32(static_cast<int>(w_stride)));
    const uint8_t* rows = w + static_cast<size_t>(rb + h * 16) * w_stride;
    for (int64_t b = 0; b < k / kSparse24Block; ++b) {
      const uint8_t* blocks = rows + b * kBlockBytes;
      __m512 vals[16];
      for (int64_t l = 0; l < 16; ++l)
        vals[l] = l < live ? block_values<kType>(blocks + l * w_stride + 4) : _mm512_setzero_ps();
      transpose16(vals);
      // The 16 rows' position words: lane l is row l's.
      const __m512i pos =
          _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), mask, row_at, blocks, 1);
      // Value j: chunk b * 2 + j / 8, group g = (j / 2) % 4, slot j % 2; lane index 4g + position.
#pragma GCC unroll 16
      for (int j = 0; j < 16; ++j) {
        const int g = (j / 2) % 4;
        float* c = panel + (b * 2 + j / 8) * kChunkFloats;
        const int64_t at = ((g * 2 + j % 2) * 2 + h) * 16;
        const __m512i idx = _mm512_add_epi32(_mm512_and_si512(_mm512_srli_epi32(pos, 2 * j), three),
                                             _mm512_set1_epi32(4 * g));
        _mm512_storeu_ps(c + at, vals[j]);
        _mm512_storeu_si512(c + kChunkFloats / 2 + at, idx);
      }
    }
  }
}

template <int T>
void tokens_on_panel(const float* panel, int64_t k, const float* x, float* y, int64_t y_stride,
                     int64_t nr) {
  __m512 acc[T][2];
#pragma GCC unroll 8
  for (int i = 0; i < T; ++i) acc[i][0] = acc[i][1] = _mm512_setzero_ps();
  for (int64_t c = 0; c < k / 16; ++c) {
    const float* vp = panel + c * kChunkFloats;
    const auto* ip = reinterpret_cast<const int32_t*>(vp + kChunkFloats / 2);
    __m512 xt[T];
#pragma GCC unroll 8
    for (int i = 0; i < T; ++i) xt[i] = _mm512_loadu_ps(x + i * k + c * 16);
#pragma GCC unroll 4
    for (int g = 0; g < 4; ++g) {
#pragma GCC unroll 2
      for (int h = 0; h < 2; ++h) {
        const __m512 v0 = _mm512_loadu_ps(vp + ((g * 2 + 0) * 2 + h) * 16);
        const __m512 v1 = _mm512_loadu_ps(vp + ((g * 2 + 1) * 2 + h) * 16);
        const __m512i i0 = _mm512_loadu_si512(ip + ((g * 2 + 0) * 2 + h) * 16);
        const __m512i i1 = _mm512_loadu_si512(ip + ((g * 2 + 1) * 2 + h) * 16);
#pragma GCC unroll 8
        for (int i = 0; i < T; ++i)
          acc[i][h] = _mm512_fmadd_ps(v0, _mm512_permutexvar_ps(i0, xt[i]), acc[i][h]);
#pragma GCC unroll 8
        for (int i = 0; i < T; ++i)
          acc[i][h] = _mm512_fmadd_ps(v1, _mm512_permutexvar_ps(i1, xt[i]), acc[i][h]);
      }
    }
  }
  const __mmask16 m0 = nr >= 16 ? 0xFFFF : static_cast<__mmask16>((1u << nr) - 1);
  const __mmask16 m1 = nr >= 32   ? 0xFFFF
                       : nr <= 16 ? 0
                                  : static_cast<__mmask16>((1u << (nr - 16)) - 1);
#pragma GCC unroll 8
  for (int i = 0; i < T; ++i) {
    _mm512_mask_storeu_ps(y + i * y_stride, m0, acc[i][0]);
    _mm512_mask_storeu_ps(y + i * y_stride + 16, m1, acc[i][1]);
  }
}

}  // namespace

void gemm_2of4_avx512(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                      int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  thread_local std::vector<float> panel;
  const size_t floats = static_cast<size_t>(k / 16 * kChunkFloats);
  if (panel.size() < floats) panel.resize(floats);
  for (int64_t rb = r0; rb < r1; rb += kRows) {
    const int64_t nr = std::min(kRows, r1 - rb);
    switch (t) {
      case DType::kF16_2of4:
        unpack<DType::kF16_2of4>(w, w_stride, k, rb, nr, panel.data());
        break;
      case DType::kBF16_2of4:
        unpack<DType::kBF16_2of4>(w, w_stride, k, rb, nr, panel.data());
        break;
      default:
        unpack<DType::kF32_2of4>(w, w_stride, k, rb, nr, panel.data());
        break;
    }
    // Whole blocks of kTokens, then the rest (1-5 tokens) on the kernel of its size.
    using Fn = void (*)(const float*, int64_t, const float*, float*, int64_t, int64_t);
    static constexpr Fn kernel[kTokens + 1] = {nullptr,
                                               tokens_on_panel<1>,
                                               tokens_on_panel<2>,
                                               tokens_on_panel<3>,
                                               tokens_on_panel<4>,
                                               tokens_on_panel<5>,
                                               tokens_on_panel<6>};
    for (int64_t t0 = 0; t0 < n; t0 += kTokens)
      kernel[std::min<int64_t>(kTokens, n - t0)](panel.data(), k, x + t0 * k,
                                                 y + t0 * y_stride + rb, y_stride, nr);
  }
}

}  // namespace nexus::cpu
