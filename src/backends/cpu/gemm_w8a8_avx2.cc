// W8A8 on AVX2: the per-token activation quantizer and the int8 GEMM with vpmaddubsw/vpmaddwd
// (sign trick; no saturation, gemm_w8a8.h). Bit-identical to the scalar reference.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "backends/cpu/gemm_w8a8.h"

namespace nexus::cpu {
namespace {

constexpr size_t kBlockBytes = 34;
size_t row_size(int64_t k) { return static_cast<size_t>(k / 32) * kBlockBytes; }

int32_t load_i32(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// One group of sixteen rows (two 8-row halves) against T <= 3 tokens: 2T accumulators, the weights'
// magnitudes and signs shared by the tokens. Named accumulators, not an array: GCC keeps an array
// of vectors on the stack at -O2.
#define NEXUS_W8A8_STEP(t)                                                   \
  if constexpr (T > t) {                                                     \
    const __m256i b = _mm256_set1_epi32(load_i32(x + t * x_stride + 4 * j)); \
    const __m256i p0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(b, w0));    \
    const __m256i p1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(b, w1));    \
    c##t##0 = _mm256_add_epi32(c##t##0, _mm256_madd_epi16(p0, ones));        \
    c##t##1 = _mm256_add_epi32(c##t##1, _mm256_madd_epi16(p1, ones));        \
  }
#define NEXUS_W8A8_STORE(t)                                                              \
  if constexpr (T > t) {                                                                 \
    const __m256 sx = _mm256_set1_ps(xs[t]);                                             \
    _mm256_storeu_ps(y + t * y_stride,                                                   \
                     _mm256_mul_ps(_mm256_cvtepi32_ps(c##t##0), _mm256_mul_ps(d0, sx))); \
    _mm256_storeu_ps(y + t * y_stride + 8,                                               \
                     _mm256_mul_ps(_mm256_cvtepi32_ps(c##t##1), _mm256_mul_ps(d1, sx))); \
  }

template <int T>
void tile(const uint8_t* group, int64_t k, const int8_t* x, size_t x_stride, const float* xs,
          float* y, int64_t y_stride) {
  const __m256i zero = _mm256_setzero_si256();
  __m256i c00 = zero, c01 = zero, c10 = zero, c11 = zero, c20 = zero, c21 = zero;
  const __m256i flip = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t j = 0; j < k / 4; ++j) {
    const auto* v = reinterpret_cast<const __m256i*>(group + 64 * j);
    const __m256i w0 = _mm256_xor_si256(_mm256_loadu_si256(v), flip);  // code - 128 as int8
    const __m256i w1 = _mm256_xor_si256(_mm256_loadu_si256(v + 1), flip);
    const __m256i a0 = _mm256_sign_epi8(w0, w0), a1 = _mm256_sign_epi8(w1, w1);
    NEXUS_W8A8_STEP(0)
    NEXUS_W8A8_STEP(1)
    NEXUS_W8A8_STEP(2)
  }
  const auto* d = reinterpret_cast<const __m128i*>(group + 16 * k);
  const __m256 d0 = _mm256_cvtph_ps(_mm_loadu_si128(d));
  const __m256 d1 = _mm256_cvtph_ps(_mm_loadu_si128(d + 1));
  NEXUS_W8A8_STORE(0)
  NEXUS_W8A8_STORE(1)
  NEXUS_W8A8_STORE(2)
}

#undef NEXUS_W8A8_STEP
#undef NEXUS_W8A8_STORE

// Three tokens: the six accumulators, the weights, their magnitudes, the constants and the
// products fill the sixteen registers (four tokens spilled accumulators every step).
constexpr int kTokens = 3;
using TileFn = void (*)(const uint8_t*, int64_t, const int8_t*, size_t, const float*, float*,
                        int64_t);
constexpr TileFn kTiles[kTokens] = {tile<1>, tile<2>, tile<3>};

}  // namespace

void quantize_act_w8a8_avx2(const float* x, int64_t k, float static_scale, int8_t* q, float* scale,
                            int32_t* sum) {
  float s = static_scale, inv = 0.0f;
  if (s > 0.0f) {
    inv = 1.0f / s;
  } else {
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    __m256 m = _mm256_setzero_ps();
    for (int64_t i = 0; i < k; i += 8)
      m = _mm256_max_ps(m, _mm256_and_ps(_mm256_loadu_ps(x + i), abs_mask));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    const float amax = _mm_cvtss_f32(h);
    s = amax / 127.0f;
    inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  }
  const __m256 vinv = _mm256_set1_ps(inv);
  const __m256 lo = _mm256_set1_ps(-127.0f), hi = _mm256_set1_ps(127.0f);
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  __m256i total = _mm256_setzero_si256();
  for (int64_t i = 0; i < k; i += 32) {
    __m256i v[4];
    for (int j = 0; j < 4; ++j) {
      const __m256 f = _mm256_mul_ps(_mm256_loadu_ps(x + i + 8 * j), vinv);
      v[j] = _mm256_cvtps_epi32(_mm256_min_ps(_mm256_max_ps(f, lo), hi));
      total = _mm256_add_epi32(total, v[j]);
    }
    // Packing interleaves the 128-bit lanes; the permute puts the 32 codes back in order.
    const __m256i p =
        _mm256_packs_epi16(_mm256_packs_epi32(v[0], v[1]), _mm256_packs_epi32(v[2], v[3]));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + i), _mm256_permutevar8x32_epi32(p, order));
  }
  __m128i t4 = _mm_add_epi32(_mm256_castsi256_si128(total), _mm256_extracti128_si256(total, 1));
  t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0x4e));
  t4 = _mm_add_epi32(t4, _mm_shuffle_epi32(t4, 0xb1));
  *scale = s;
  *sum = _mm_cvtsi128_si32(t4);
}

void gemm_w8a8_avx2(const W8A8Problem& p, int64_t u0, int64_t u1) {
  const int64_t groups = p.rows / kW8A8Rows;
  const size_t group_bytes = kW8A8Rows * row_size(p.k);
  for (int64_t g = u0; g < std::min(u1, groups); ++g)
    for (int64_t t = 0; t < p.n_tokens; t += kTokens) {
      const int n = static_cast<int>(std::min<int64_t>(kTokens, p.n_tokens - t));
      kTiles[n - 1](p.w + g * group_bytes, p.k, p.xq + t * p.x_stride, p.x_stride, p.xs + t,
                    p.y + t * p.y_stride + g * kW8A8Rows, p.y_stride);
    }
  if (u1 > groups) gemm_w8a8_tail(p);
}

}  // namespace nexus::cpu
