// AVX2 kernels over the Q4_0x8 layout (repack.h): eight weight rows x 1-4 tokens per pass. Per
// (row, token) pair and block the operations are those of the AVX2 Q4_0 vec_dot: P = the exact
// int32 sum of (q - 8) * y, then acc = fma(float(P), d_w * d_y, acc), so outputs are
// bit-identical to it. Per block column (144 bytes, eight rows):
//   - four 32-byte loads of codes, each two rows (row p low lane, row p + 4 high lane); nibbles
//     split with one shift and two masks, and enter maddubs unsigned (0..15) against the
//     activation halves broadcast to both lanes;
//   - two int16 hadds and one madd leave one int32 block sum per row, rows 0..7 in lane order
//     (a lane sums at most 16 products q * y, |sum| <= 30720, inside int16);
//   - the -8 offset is one int32 subtraction of 8 * sum(y) and d_y one broadcast, both computed
//     once per token and block for all groups (`TokenTerms`);
//   - the eight scales are one 16-byte load and one vcvtph2ps.
#include <immintrin.h>

#include <algorithm>
#include <vector>

#include "backends/cpu/blocks.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/simd_avx2.h"
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
      tt->d[t * nb + i] = avx2::h2f(b[i].d);
      tt->s8[t * nb + i] = 8 * _mm_cvtsi128_si32(h);
    }
  }
}

// One group (8 rows) against NX tokens; out[t * out_stride + r].
template <int NX>
void group_tokens(int64_t nb, const uint8_t* w, const uint8_t* x, size_t x_stride, const float* yd,
                  const int32_t* ys, float* out, int64_t out_stride) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc[NX];
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) acc[t] = _mm256_setzero_ps();
  for (int64_t i = 0; i < nb; ++i) {
    const uint8_t* col = fetch_column<kColumnBytes>(w, i);
    const __m256 dw = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(col)));
    __m256i lo[4], hi[4];
#pragma GCC unroll 4
    for (int p = 0; p < 4; ++p) {
      const __m256i v = load256(col + 16 + 32 * p);
      lo[p] = _mm256_and_si256(v, m4);
      hi[p] = _mm256_and_si256(_mm256_srli_epi16(v, 4), m4);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NX; ++t) {
      const auto* b = reinterpret_cast<const BlockQ8_0*>(x + t * x_stride) + i;
      const __m256i ylo =
          _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs)));
      const __m256i yhi = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b->qs + 16)));
      __m256i d[4];
#pragma GCC unroll 4
      for (int p = 0; p < 4; ++p)
        d[p] = _mm256_add_epi16(_mm256_maddubs_epi16(lo[p], ylo), _mm256_maddubs_epi16(hi[p], yhi));
      const __m256i h =
          _mm256_hadd_epi16(_mm256_hadd_epi16(d[0], d[1]), _mm256_hadd_epi16(d[2], d[3]));
      const __m256i sums =
          _mm256_sub_epi32(_mm256_madd_epi16(h, ones), _mm256_set1_epi32(ys[t * nb + i]));
      const __m256 scale = _mm256_mul_ps(dw, _mm256_set1_ps(yd[t * nb + i]));
      acc[t] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(sums), scale, acc[t]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NX; ++t) _mm256_storeu_ps(out + t * out_stride, acc[t]);
}

}  // namespace

void gemm_q4_0x8_avx2(int64_t k, const uint8_t* w, int64_t n_groups, const uint8_t* x,
                      size_t x_stride, int64_t n_tokens, float* y, int64_t y_stride) {
  const int64_t nb = k / kQK;
  thread_local TokenTerms tt;  // grown once per thread, so steady-state calls do not allocate
  token_terms(nb, x, x_stride, n_tokens, &tt);
  using Fn = void (*)(int64_t, const uint8_t*, const uint8_t*, size_t, const float*, const int32_t*,
                      float*, int64_t);
  static constexpr Fn kFns[] = {group_tokens<1>, group_tokens<2>, group_tokens<3>, group_tokens<4>};
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

}  // namespace nexus::cpu
