// AVX2 dot products of one weight row with 1 to 4 activation rows in a single pass, for the most
// common GGUF weight types (Q4_0, Q8_0, Q4_K, Q6_K). Why: with several tokens (prefill), decoding
// a weight block (nibbles, scales) once and applying it to every token saves most of the decode
// work and weight loads. The single-token vec_dot of these types is the NX = 1 instance, so a
// token's result is bit-identical whether it is computed alone or in a batch.
#include <immintrin.h>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/simd_avx2.h"

namespace nexus::cpu {
namespace {

using avx2::h2f;

inline __m256i load256(const void* p) { return _mm256_loadu_si256(static_cast<const __m256i*>(p)); }

template <typename B>
inline const B& act_block(const uint8_t* x, size_t x_stride, int j, int64_t i) {
  return reinterpret_cast<const B*>(x + static_cast<size_t>(j) * x_stride)[i];
}

// Q4_0 x Q8_0: signed codes q - 8; the sign of q moves onto y so maddubs sees |q|.
template <int NX>
void dot_q4_0(int64_t n, const void* w, const uint8_t* x, size_t xs, float* out) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  __m256 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = _mm256_sub_epi8(avx2::unpack_nibbles(a[i].qs), _mm256_set1_epi8(8));
    const __m256i aq = _mm256_sign_epi8(q, q);
    const float dw = h2f(a[i].d);
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_0& b = act_block<BlockQ8_0>(x, xs, j, i);
      const __m256i p = avx2::dot_u8_i8(aq, _mm256_sign_epi8(load256(b.qs), q));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(b.d)), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = avx2::hsum(acc[j]);
}

// Q8_0 x Q8_0.
template <int NX>
void dot_q8_0(int64_t n, const void* w, const uint8_t* x, size_t xs, float* out) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  __m256 acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = _mm256_setzero_ps();
  for (int64_t i = 0; i < n / kQK; ++i) {
    const __m256i q = load256(a[i].qs);
    const __m256i aq = _mm256_sign_epi8(q, q);
    const float dw = h2f(a[i].d);
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_0& b = act_block<BlockQ8_0>(x, xs, j, i);
      const __m256i p = avx2::dot_u8_i8(aq, _mm256_sign_epi8(load256(b.qs), q));
      acc[j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), _mm256_set1_ps(dw * h2f(b.d)), acc[j]);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = avx2::hsum(acc[j]);
}

// Q4_K x Q8_K: per super-block, the 8 scales become int16 multipliers for madd and the mins meet
// the Q8_K group sums; both are decoded once for all tokens.
template <int NX>
void dot_q4_k(int64_t n, const void* w, const uint8_t* x, size_t xs, float* out) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NX];
  float mins[NX];
  for (int j = 0; j < NX; ++j) {
    acc[j] = _mm256_setzero_ps();
    mins[j] = 0.0f;
  }
  for (int64_t i = 0; i < n / kQKK; ++i) {
    uint8_t sc[8], m[8];
    for (int s = 0; s < 8; ++s) unpack_scale_min_k4(s, a[i].scales, &sc[s], &m[s]);
    __m256i sumi[NX];
    for (int j = 0; j < NX; ++j) sumi[j] = _mm256_setzero_si256();
    for (int c = 0; c < 4; ++c) {
      const __m256i q = load256(a[i].qs + 32 * c);
      const __m256i lo = _mm256_and_si256(q, m4);
      const __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
      const __m256i s0 = _mm256_set1_epi16(sc[2 * c]), s1 = _mm256_set1_epi16(sc[2 * c + 1]);
      for (int j = 0; j < NX; ++j) {
        const BlockQ8_K& b = act_block<BlockQ8_K>(x, xs, j, i);
        const __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(lo, load256(b.qs + 64 * c)), s0);
        const __m256i p1 =
            _mm256_madd_epi16(_mm256_maddubs_epi16(hi, load256(b.qs + 64 * c + 32)), s1);
        sumi[j] = _mm256_add_epi32(sumi[j], _mm256_add_epi32(p0, p1));
      }
    }
    const float dw = h2f(a[i].d), mw = h2f(a[i].dmin);
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_K& b = act_block<BlockQ8_K>(x, xs, j, i);
      acc[j] = _mm256_fmadd_ps(_mm256_set1_ps(dw * b.d), _mm256_cvtepi32_ps(sumi[j]), acc[j]);
      int summ = 0;
      for (int s = 0; s < 8; ++s) summ += m[s] * (b.bsums[2 * s] + b.bsums[2 * s + 1]);
      mins[j] += mw * b.d * static_cast<float>(summ);
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = avx2::hsum(acc[j]) - mins[j];
}

// Q6_K x Q8_K: codes decoded once per half super-block; the -32 offset is applied through the
// Q8_K group sums (sum sc*(q-32)*y = sum sc*q*y - 32 * sum_g sc[g] * bsums[g]).
template <int NX>
void dot_q6_k(int64_t n, const void* w, const uint8_t* x, size_t xs, float* out) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x03);
  float acc[NX];
  for (int j = 0; j < NX; ++j) acc[j] = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    __m256i sumi[NX];
    for (int j = 0; j < NX; ++j) sumi[j] = _mm256_setzero_si256();
    for (int h = 0; h < 2; ++h) {
      const uint8_t* ql = a[i].ql + 64 * h;
      const __m256i l0 = load256(ql), l1 = load256(ql + 32), hb = load256(a[i].qh + 32 * h);
      __m256i q[4];
      q[0] =
          _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m2), 4));
      q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m2), 4));
      q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m2), 4));
      q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                             _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m2), 4));
      for (int k = 0; k < 4; ++k) {
        const int g = 8 * h + 2 * k;
        // Low 128-bit lane holds elements 0-15 (group g), high lane 16-31 (group g + 1).
        const __m256i scales =
            _mm256_set_m128i(_mm_set1_epi16(a[i].scales[g + 1]), _mm_set1_epi16(a[i].scales[g]));
        for (int j = 0; j < NX; ++j) {
          const BlockQ8_K& b = act_block<BlockQ8_K>(x, xs, j, i);
          const __m256i p = _mm256_maddubs_epi16(q[k], load256(b.qs + 128 * h + 32 * k));
          sumi[j] = _mm256_add_epi32(sumi[j], _mm256_madd_epi16(p, scales));
        }
      }
    }
    const float dw = h2f(a[i].d);
    for (int j = 0; j < NX; ++j) {
      const BlockQ8_K& b = act_block<BlockQ8_K>(x, xs, j, i);
      int offset = 0;
      for (int g = 0; g < 16; ++g) offset += a[i].scales[g] * b.bsums[g];
      const float total = static_cast<float>(avx2::hsum_i32(sumi[j]) - 32 * offset);
      acc[j] += dw * b.d * total;
    }
  }
  for (int j = 0; j < NX; ++j) out[j] = acc[j];
}

using RowsFn = void (*)(int64_t, const void*, const uint8_t*, size_t, float*);

}  // namespace

void vec_dot_rows_q4_0_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,
                            float* out) {
  static constexpr RowsFn kFns[] = {dot_q4_0<1>, dot_q4_0<2>, dot_q4_0<3>, dot_q4_0<4>};
  kFns[nx - 1](n, w, static_cast<const uint8_t*>(x), xs, out);
}
void vec_dot_rows_q8_0_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,
                            float* out) {
  static constexpr RowsFn kFns[] = {dot_q8_0<1>, dot_q8_0<2>, dot_q8_0<3>, dot_q8_0<4>};
  kFns[nx - 1](n, w, static_cast<const uint8_t*>(x), xs, out);
}
void vec_dot_rows_q4_k_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,
                            float* out) {
  static constexpr RowsFn kFns[] = {dot_q4_k<1>, dot_q4_k<2>, dot_q4_k<3>, dot_q4_k<4>};
  kFns[nx - 1](n, w, static_cast<const uint8_t*>(x), xs, out);
}
void vec_dot_rows_q6_k_avx2(int64_t n, const void* w, const void* x, size_t xs, int nx,
                            float* out) {
  static constexpr RowsFn kFns[] = {dot_q6_k<1>, dot_q6_k<2>, dot_q6_k<3>, dot_q6_k<4>};
  kFns[nx - 1](n, w, static_cast<const uint8_t*>(x), xs, out);
}

float vec_dot_q4_0_avx2(int64_t n, const void* w, const void* x) {
  float r;
  dot_q4_0<1>(n, w, static_cast<const uint8_t*>(x), 0, &r);
  return r;
}
float vec_dot_q8_0_avx2(int64_t n, const void* w, const void* x) {
  float r;
  dot_q8_0<1>(n, w, static_cast<const uint8_t*>(x), 0, &r);
  return r;
}
float vec_dot_q4_k_avx2(int64_t n, const void* w, const void* x) {
  float r;
  dot_q4_k<1>(n, w, static_cast<const uint8_t*>(x), 0, &r);
  return r;
}
float vec_dot_q6_k_avx2(int64_t n, const void* w, const void* x) {
  float r;
  dot_q6_k<1>(n, w, static_cast<const uint8_t*>(x), 0, &r);
  return r;
}

}  // namespace nexus::cpu
