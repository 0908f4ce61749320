// The Q4_0x8 decode kernel (repack.h), shared by dot_q4_0x8_avx2.cc and dot_q4_0x8_vnni.cc, which
// differ only in how one token's eight block sums are formed (the Sums policy). Everything here
// has internal linkage (an unnamed namespace), so the copy compiled with AVX-512 in the VNNI file
// can never stand in for the AVX2 file's; for the same reason it includes no header of inline AVX2
// helpers. Per block column (144 bytes, eight rows):
//   - the eight scales are one 16-byte load and one vcvtph2ps;
//   - four 32-byte code vectors, vector j holding code bytes 4j .. 4j + 3 of row r in lane r; one
//     mask gives each row's elements 4j .. 4j + 3, one shift and a mask its elements
//     16 + 4j .. 19 + 4j (Q4_0's nibble order), unsigned 0..15, once for all the tokens;
//   - per token, each of the eight unpacked vectors meets the token's matching four activation
//     bytes broadcast to every lane (one vpbroadcastd load), so every product lands in its own
//     row's lane and the exact block sum needs no horizontal step; the -8 offset is 8 * sum(y),
//     computed once per token and block for all groups (`TokenTerms`);
//   - then acc = fma(float(sum), d_w * d_y, acc), the AVX2 Q4_0 vec_dot's arithmetic, so both
//     builds are bit-identical to it.
#pragma once

#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/x8_kernel_local.h"

namespace nexus::cpu {
namespace {

constexpr size_t kColumnBytes = 8 * sizeof(BlockQ4_0);  // 144
constexpr int kMaxTokens = 4;

// Per token and block: d_y as f32 and 8 * (sum of the 32 codes), shared by every group.
struct TokenTerms {
  std::vector<float> d;
  std::vector<int32_t> s8;
};

void token_terms(int64_t nb, const uint8_t* x, size_t x_stride, int64_t n_tokens, TokenTerms* tt) {
  const size_t n = static_cast<size_t>(nb * n_tokens);
  if (tt->d.size() < n) {
    tt->d.resize(n);
    tt->s8.resize(n);
  }
  const __m256i ones = _mm256_set1_epi8(1);
  const __m256i ones16 = _mm256_set1_epi16(1);
  for (int64_t t = 0; t < n_tokens; ++t) {
    const auto* b = reinterpret_cast<const BlockQ8_0*>(x + static_cast<size_t>(t) * x_stride);
    for (int64_t i = 0; i < nb; ++i) {
      const __m256i s = _mm256_madd_epi16(
          _mm256_maddubs_epi16(ones, load256(reinterpret_cast<const uint8_t*>(b[i].qs))), ones16);
      __m128i h = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
      h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0x4E));
      h = _mm_add_epi32(h, _mm_shuffle_epi32(h, 0xB1));
      tt->d[t * nb + i] = _cvtsh_ss(b[i].d);
      tt->s8[t * nb + i] = 8 * _mm_cvtsi128_si32(h);
    }
  }
}

// One group (8 rows) against NX tokens; out[t * out_stride + r]. Sums::block(lo, hi, y, s8) gives
// the eight exact block sums sum (q - 8) * y of one token, one row per lane (lo[j], hi[j]: the
// column's elements 4j.. and 16 + 4j.. as unsigned bytes; y: the token's 32 codes).
template <int NX, typename Sums>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, const float* yd,
                  const int32_t* ys, float* out, int64_t out_stride) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    __m256i lo[4], hi[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; ++j) {
      const __m256i v = load256(col + 16 + 32 * j);
      lo[j] = _mm256_and_si256(v, m4);
      hi[j] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride) + i;
      const __m256i sums = Sums::block(lo, hi, b->qs, ys[t * nb + i]);
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(yd[t * nb + i]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

template <typename Sums>
void gemm_q4_0x8(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x, size_t x_stride,
                 int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  thread_local TokenTerms tt;  // grown once per thread, so steady-state calls do not allocate
  token_terms(nb, x, x_stride, n_tokens, &tt);
  using Fn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, const float*, const int32_t*,
                      float*, int64_t);
  static constexpr Fn kFns[] = {group_tokens<1, Sums>, group_tokens<2, Sums>,
                                group_tokens<3, Sums>, group_tokens<4, Sums>};
  for (int64_t g = 0; g < n_groups; ++g) {
    const uint8_t* group = w + static_cast<size_t>(g) * nb * kColumnBytes;
    // The group (8 rows) stays in L1/L2 across the token passes.
    for (int64_t t = 0; t < n_tokens; t += kMaxTokens) {
      const int nx = static_cast<int>(std::min<int64_t>(kMaxTokens, n_tokens - t));
      kFns[nx - 1](nb, group, x + static_cast<size_t>(t) * x_stride, x_stride, tt.d.data() + t * nb,
                   tt.s8.data() + t * nb, y + t * y_stride + g * 8, y_stride);
    }
  }
}

}  // namespace
}  // namespace nexus::cpu
