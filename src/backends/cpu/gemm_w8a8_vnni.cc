// W8A8 GEMM on AVX512-VNNI: vpdpbusd of sixteen rows' unsigned codes by four signed activation
// bytes broadcast, register-blocked four groups (64 rows) by six tokens. Bit-identical to the
// scalar reference (gemm_w8a8.h).
#include <immintrin.h>

#include <algorithm>
#include <array>
#include <utility>

#include "backends/cpu/gemm_w8a8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kBlockBytes = 34;
size_t row_size(int64_t k) { return static_cast<size_t>(k / 32) * kBlockBytes; }

// acc + the products of the unsigned bytes of u with the four signed bytes at p broadcast to every
// lane ({1to16}). Inline assembly as vnni_local.h's 256-bit helpers: GCC 12 neither folds the
// broadcast nor keeps a block of _mm512_dpbusd_epi32 accumulators in registers (it copied and
// stored every one of them each step).
inline __m512i dpbusd_bcast(__m512i acc, __m512i u, const void* p) {
  asm("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(u), "m"(*static_cast<const int32_t*>(p)));
  return acc;
}

// G groups (16G rows) by T tokens: G * T accumulators of sixteen int32 rows each, 24 at most
// (with the G weight vectors and a broadcast, 29 of the 32 registers). Per step of four k:
// G 64-byte loads, T broadcasts, G * T vpdpbusd. The accumulators are named variables, not an
// array: GCC keeps an array of vectors on the stack at -O2 and stores it every step.
#define NEXUS_W8A8_DECLARE(t) \
  __m512i c##t##0 = zero, c##t##1 = zero, c##t##2 = zero, c##t##3 = zero;
#define NEXUS_W8A8_STEP(t)                                       \
  if constexpr (T > t) {                                         \
    const int8_t* b = x + t * x_stride + 4 * j;                  \
    c##t##0 = dpbusd_bcast(c##t##0, w0, b);                      \
    if constexpr (G > 1) c##t##1 = dpbusd_bcast(c##t##1, w1, b); \
    if constexpr (G > 2) c##t##2 = dpbusd_bcast(c##t##2, w2, b); \
    if constexpr (G > 3) c##t##3 = dpbusd_bcast(c##t##3, w3, b); \
  }
// The codes carry +128: S = acc - 128 * sum(x codes), exact in int32; y = float(S) * (d * s_x).
// (The all-ones masked conversions: GCC 12's plain ones warn about an undefined source.)
#define NEXUS_W8A8_STORE_ONE(t, g)                                                                 \
  _mm512_storeu_ps(y + t * y_stride + 16 * g,                                                      \
                   _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(0xFFFF, _mm512_sub_epi32(c##t##g, off)), \
                                 _mm512_mul_ps(d##g, sx)));
#define NEXUS_W8A8_STORE(t)                               \
  if constexpr (T > t) {                                  \
    const __m512i off = _mm512_set1_epi32(128 * xsum[t]); \
    const __m512 sx = _mm512_set1_ps(xs[t]);              \
    NEXUS_W8A8_STORE_ONE(t, 0)                            \
    if constexpr (G > 1) {                                \
      NEXUS_W8A8_STORE_ONE(t, 1)                          \
    }                                                     \
    if constexpr (G > 2) {                                \
      NEXUS_W8A8_STORE_ONE(t, 2)                          \
    }                                                     \
    if constexpr (G > 3) {                                \
      NEXUS_W8A8_STORE_ONE(t, 3)                          \
    }                                                     \
  }

template <int G, int T>
void tile(const uint8_t* w, size_t group_bytes, int64_t k, const int8_t* x, size_t x_stride,
          const float* xs, const int32_t* xsum, float* y, int64_t y_stride) {
  const __m512i zero = _mm512_setzero_si512();
  NEXUS_W8A8_DECLARE(0)
  NEXUS_W8A8_DECLARE(1)
  NEXUS_W8A8_DECLARE(2)
  NEXUS_W8A8_DECLARE(3)
  NEXUS_W8A8_DECLARE(4)
  NEXUS_W8A8_DECLARE(5)
  const uint8_t* w1p = w + (G > 1 ? group_bytes : 0);
  const uint8_t* w2p = w + (G > 2 ? 2 * group_bytes : 0);
  const uint8_t* w3p = w + (G > 3 ? 3 * group_bytes : 0);
  for (int64_t j = 0; j < k / 4; ++j) {
    const __m512i w0 = _mm512_loadu_si512(w + 64 * j);
    const __m512i w1 = G > 1 ? _mm512_loadu_si512(w1p + 64 * j) : zero;
    const __m512i w2 = G > 2 ? _mm512_loadu_si512(w2p + 64 * j) : zero;
    const __m512i w3 = G > 3 ? _mm512_loadu_si512(w3p + 64 * j) : zero;
    NEXUS_W8A8_STEP(0)
    NEXUS_W8A8_STEP(1)
    NEXUS_W8A8_STEP(2)
    NEXUS_W8A8_STEP(3)
    NEXUS_W8A8_STEP(4)
    NEXUS_W8A8_STEP(5)
  }
  auto scales = [&](int g) {
    return _mm512_maskz_cvtph_ps(
        0xFFFF, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w + g * group_bytes + 16 * k)));
  };
  const __m512 d0 = scales(0);
  const __m512 d1 = G > 1 ? scales(1) : d0;
  const __m512 d2 = G > 2 ? scales(2) : d0;
  const __m512 d3 = G > 3 ? scales(3) : d0;
  NEXUS_W8A8_STORE(0)
  NEXUS_W8A8_STORE(1)
  NEXUS_W8A8_STORE(2)
  NEXUS_W8A8_STORE(3)
  NEXUS_W8A8_STORE(4)
  NEXUS_W8A8_STORE(5)
}

#undef NEXUS_W8A8_DECLARE
#undef NEXUS_W8A8_STEP
#undef NEXUS_W8A8_STORE_ONE
#undef NEXUS_W8A8_STORE

constexpr int kGroups = 4, kTokens = 6;
using TileFn = void (*)(const uint8_t*, size_t, int64_t, const int8_t*, size_t, const float*,
                        const int32_t*, float*, int64_t);

template <int G, int... T>
constexpr auto row_of(std::integer_sequence<int, T...>) {
  return std::array<TileFn, sizeof...(T)>{tile<G, T + 1>...};
}
template <int... G>
constexpr auto table_of(std::integer_sequence<int, G...>) {
  return std::array<std::array<TileFn, kTokens>, sizeof...(G)>{
      row_of<G + 1>(std::make_integer_sequence<int, kTokens>())...};
}
constexpr auto kTiles = table_of(std::make_integer_sequence<int, kGroups>());

}  // namespace

void gemm_w8a8_vnni(const W8A8Problem& p, int64_t u0, int64_t u1) {
  const int64_t groups = p.rows / kW8A8Rows;
  const size_t group_bytes = kW8A8Rows * row_size(p.k);
  const int64_t g1 = std::min(u1, groups);
  // Weight block (four groups, 64k bytes) stays in L2 while every token passes over it.
  for (int64_t g = u0; g < g1; g += kGroups) {
    const int ng = static_cast<int>(std::min<int64_t>(kGroups, g1 - g));
    for (int64_t t = 0; t < p.n_tokens; t += kTokens) {
      const int nt = static_cast<int>(std::min<int64_t>(kTokens, p.n_tokens - t));
      kTiles[ng - 1][nt - 1](p.w + g * group_bytes, group_bytes, p.k, p.xq + t * p.x_stride,
                             p.x_stride, p.xs + t, p.xsum + t, p.y + t * p.y_stride + g * kW8A8Rows,
                             p.y_stride);
    }
  }
  if (u1 > groups) gemm_w8a8_tail(p);
}

}  // namespace nexus::cpu
