// Decode attention tile step reading the KV cache in place (attention_tile.h, AttnTileKv): for a
// group of query heads sharing a KV head, scores of four keys per pass (each key row converted
// once for the group, one hadd-based reduction for the four), the AVX2 online softmax per head,
// then the weighted value sums over 32 outputs at a time with each value row converted once.
#include <immintrin.h>

#include <algorithm>

#include "backends/cpu/attention_tile.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
inline __m256 load8(const uint16_t* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}

// The horizontal sums of a, b, c, d as one 4-lane vector.
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// Brings `bytes` of the row at p into the cache (the rows of one head are a few hundred bytes
// spaced by the whole cache row: too sparse for the hardware prefetcher to run ahead).
inline void prefetch_row(const uint8_t* p, size_t bytes) {
  for (size_t o = 0; o < bytes; o += 64) _mm_prefetch(reinterpret_cast<const char*>(p + o), _MM_HINT_T0);
}

template <typename T>
const T* row(const uint8_t* base, size_t row_bytes, int64_t j) {
  return reinterpret_cast<const T*>(base + static_cast<size_t>(j) * row_bytes);
}

// Scaled scores of heads g0 .. g0 + G - 1 against every key of the tile.
template <typename T, int G>
void scores(const AttnTileKv& t, int g0) {
  const float* q[G];
  float* s[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    q[g] = t.q + (g0 + g) * t.hd;
    s[g] = t.scores + (g0 + g) * t.score_stride;
  }
  const __m128 scale4 = _mm_set1_ps(t.scale);
  int32_t j = 0;
  const size_t head_bytes = static_cast<size_t>(t.hd) * sizeof(T);
  // Prefetch: keys 8 rows ahead, and this pass's value rows for the weighted sums that follow.
  for (int32_t p = 0; p < std::min<int32_t>(8, t.cnt); ++p)
    prefetch_row(t.k + static_cast<size_t>(p) * t.row_bytes, head_bytes);
  for (; j + 4 <= t.cnt; j += 4) {
    if (g0 == 0) {
      for (int32_t p = j + 8; p < std::min<int32_t>(j + 12, t.cnt); ++p)
        prefetch_row(t.k + static_cast<size_t>(p) * t.row_bytes, head_bytes);
      for (int32_t p = j; p < j + 4; ++p)
        prefetch_row(t.v + static_cast<size_t>(p) * t.row_bytes, head_bytes);
    }
    const T* r0 = row<T>(t.k, t.row_bytes, j);
    const T* r1 = row<T>(t.k, t.row_bytes, j + 1);
    const T* r2 = row<T>(t.k, t.row_bytes, j + 2);
    const T* r3 = row<T>(t.k, t.row_bytes, j + 3);
    __m256 a[G][4];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      #pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) a[g][r] = _mm256_setzero_ps();
    for (int64_t e = 0; e < t.hd; e += 8) {
      const __m256 k0 = load8(r0 + e), k1 = load8(r1 + e), k2 = load8(r2 + e),
                   k3 = load8(r3 + e);
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) {
        const __m256 qv = _mm256_loadu_ps(q[g] + e);
        a[g][0] = _mm256_fmadd_ps(qv, k0, a[g][0]);
        a[g][1] = _mm256_fmadd_ps(qv, k1, a[g][1]);
        a[g][2] = _mm256_fmadd_ps(qv, k2, a[g][2]);
        a[g][3] = _mm256_fmadd_ps(qv, k3, a[g][3]);
      }
    }
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g)
      _mm_storeu_ps(s[g] + j, _mm_mul_ps(hsum4(a[g][0], a[g][1], a[g][2], a[g][3]), scale4));
  }
  for (; j < t.cnt; ++j) {
    const T* r0 = row<T>(t.k, t.row_bytes, j);
    __m256 a[G];
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) a[g] = _mm256_setzero_ps();
    for (int64_t e = 0; e < t.hd; e += 8) {
      const __m256 k0 = load8(r0 + e);
      #pragma GCC unroll 4
      for (int g = 0; g < G; ++g) a[g] = _mm256_fmadd_ps(_mm256_loadu_ps(q[g] + e), k0, a[g]);
    }
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) s[g][j] = avx2::hsum(a[g]) * t.scale;
  }
}

// acc[g][e0 .. e0 + 8 NV) = acc * corr[g] + sum_j w[g][j] * v[j][e0 ..], heads g0 .. g0 + G - 1.
template <typename T, int G, int NV>
void values(const AttnTileKv& t, int g0, const float* corr, int64_t e0) {
  __m256 a[G][NV];
  const float* w[G];
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g) {
    w[g] = t.scores + (g0 + g) * t.score_stride;
    const __m256 c = _mm256_set1_ps(corr[g0 + g]);
    #pragma GCC unroll 4
    for (int i = 0; i < NV; ++i)
      a[g][i] = _mm256_mul_ps(_mm256_loadu_ps(t.acc + (g0 + g) * t.hd + e0 + 8 * i), c);
  }
  for (int32_t j = 0; j < t.cnt; ++j) {
    const T* r = row<T>(t.v, t.row_bytes, j) + e0;
    __m256 vv[NV];
    #pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) vv[i] = load8(r + 8 * i);
    #pragma GCC unroll 4
    for (int g = 0; g < G; ++g) {
      const __m256 wj = _mm256_broadcast_ss(w[g] + j);
      #pragma GCC unroll 4
      for (int i = 0; i < NV; ++i) a[g][i] = _mm256_fmadd_ps(wj, vv[i], a[g][i]);
    }
  }
  #pragma GCC unroll 4
  for (int g = 0; g < G; ++g)
    #pragma GCC unroll 4
    for (int i = 0; i < NV; ++i) _mm256_storeu_ps(t.acc + (g0 + g) * t.hd + e0 + 8 * i, a[g][i]);
}

template <typename T, int G>
void values_all(const AttnTileKv& t, int g0, const float* corr) {
  int64_t e0 = 0;
  for (; e0 + 32 <= t.hd; e0 += 32) values<T, G, 4>(t, g0, corr, e0);
  for (; e0 < t.hd; e0 += 8) values<T, G, 1>(t, g0, corr, e0);
}

template <typename T>
void tile(const AttnTileKv& t) {
  // Heads in pairs (two heads' accumulators and a converted row fit the 16 registers).
  int g = 0;
  for (; g + 2 <= t.group; g += 2) scores<T, 2>(t, g);
  if (g < t.group) scores<T, 1>(t, g);
  float corr[64];
  for (int h = 0; h < t.group; ++h)
    corr[h] = attn_row_softmax_avx2(t.scores + h * t.score_stride, t.cnt, t.max + h, t.sum + h);
  for (g = 0; g + 2 <= t.group; g += 2) values_all<T, 2>(t, g, corr);
  if (g < t.group) values_all<T, 1>(t, g, corr);
}

}  // namespace

void attn_tile_kv_f32_avx2(const AttnTileKv& t) { tile<float>(t); }
void attn_tile_kv_f16_avx2(const AttnTileKv& t) { tile<uint16_t>(t); }

}  // namespace nexus::cpu
