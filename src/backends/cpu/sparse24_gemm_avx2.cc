// Prefill with 2:4 sparse weights on AVX2 (sparse24.h): only the kept half of the products. The
// tokens are transposed into panels of 32 (column c of the panel: 32 activations, 128 bytes), so a
// kept weight w at column c is its broadcast times four ymm of the panel's row c, added into the
// row's 4 x 8 token accumulators. The panel row's address comes from the position bits with scalar
// shifts (through a buffer it cost a store-to-load forward per value: 1.5x slower). Even and odd
// values feed two sets of accumulators, so eight FMA chains are in flight. Rows go in passes of
// kRows over kColumns columns at a time, so the panel's columns and the rows' partial sums stay in
// L1, and the sums reach y a token at a time. One panel load per FMA bounds it: it beats the rows
// expanded onto the dense GEMM only from 48 to 160 tokens (gemm_2of4_takes). Also the dispatch.
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backends/cpu/isa.h"
#include "backends/cpu/sparse24.h"

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

// K: kPanel (tokens per panel), kRows, kColumns, the value tags F32/Half/BHalf, and
// rows<V>(w, w_stride, c0, c1, panel, part, r0, r1), which adds columns [c0, c1) of rows
// [r0, r1) times the panel into part[(r - r0) * kPanel + t] (set, not added, when c0 is 0).
template <class K>
void gemm_2of4_driver(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                      int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  // Grown once per thread to the widest panel seen.
  thread_local std::vector<float> panel, part;
  if (panel.size() < static_cast<size_t>(k * K::kPanel)) panel.resize(k * K::kPanel);
  if (part.size() < static_cast<size_t>(K::kRows * K::kPanel)) part.resize(K::kRows * K::kPanel);
  for (int64_t t0 = 0; t0 < n; t0 += K::kPanel) {
    const int64_t nt = std::min(K::kPanel, n - t0);
    // x[(t0 + i) * k + c] into panel[c * kPanel + i], zeros past nt.
    for (int64_t c = 0; c < k; ++c) {
      float* p = panel.data() + c * K::kPanel;
      for (int64_t i = 0; i < nt; ++i) p[i] = x[(t0 + i) * k + c];
      std::fill(p + nt, p + K::kPanel, 0.0f);
    }
    float* yt = y + t0 * y_stride;
    for (int64_t rb = r0; rb < r1; rb += K::kRows) {
      const int64_t re = std::min(r1, rb + K::kRows);
      for (int64_t c0 = 0; c0 < k; c0 += K::kColumns) {
        const int64_t c1 = std::min(k, c0 + K::kColumns);
        switch (t) {
          case DType::kF16_2of4:
            K::template rows<typename K::Half>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                               re);
            break;
          case DType::kBF16_2of4:
            K::template rows<typename K::BHalf>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                                re);
            break;
          default:
            K::template rows<typename K::F32>(w, w_stride, c0, c1, panel.data(), part.data(), rb,
                                              re);
            break;
        }
      }
      // The rows' sums into y a token at a time: y's rows are y_stride floats apart, a power of
      // two in many models, where writing a row's tokens one by one would meet in one cache set
      // (2x slower at 2,048).
      for (int64_t i = 0; i < nt; ++i)
        for (int64_t r = rb; r < re; ++r) yt[i * y_stride + r] = part[(r - rb) * K::kPanel + i];
    }
  }
}

}  // namespace

void gemm_2of4_avx2(DType t, const uint8_t* w, size_t w_stride, int64_t k, const float* x,
                    int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  gemm_2of4_driver<Kernel>(t, w, w_stride, k, x, n, y, y_stride, r0, r1);
}

bool gemm_2of4_takes(int64_t n) {
  static const bool wide = avx512_active(), narrow = avx2_active();
  return wide ? n >= 1 : narrow && n >= 48 && n <= 160;
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
