// AVX-512 versions of the training's exp-bound row kernels (train_kernels.h): the causal softmax
// row of attention and the fused cross-entropy row. Bit-identical to the AVX2 ones
// (train_kernels_avx2.cc): exp runs on 16 lanes with the same per-lane operations
// (cpu::avx512::exp_neg), and every sum keeps the AVX2 kernel's 8-lane partial sums, each 16
// values added as their low 8 and then their high 8, so the order of every addition is the same.
// Called only when cpu::avx512_active(). Like every AVX-512 file (docs/KERNELS.md) it includes no
// AVX2 helper header and instantiates no library template: loops and comparisons are written out.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "backends/cpu/simd_avx512.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

using cpu::avx512::exp_neg;
using cpu::avx512::hi256;
using cpu::avx512::hsum8;
using cpu::avx512::lo256;

// part += e as the AVX2 kernels would add it: the low 8 lanes, then the high 8.
inline __m256 add_halves(__m256 part, __m512 e) {
  return _mm256_add_ps(_mm256_add_ps(part, lo256(e)), hi256(e));
}

// The largest of p[0, n) (max is exact, so the lane order does not matter).
inline float row_max(const float* p, int64_t n) {
  __m512 m = _mm512_set1_ps(-INFINITY);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) m = _mm512_maskz_max_ps(0xFFFF, m, _mm512_loadu_ps(p + j));
  if (j < n) {  // the lanes past n keep m's value
    const __mmask16 k = static_cast<__mmask16>((1u << (n - j)) - 1u);
    m = _mm512_mask_max_ps(m, k, m, _mm512_maskz_loadu_ps(k, p + j));
  }
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, m);
  float mx = -INFINITY;
  for (float x : lanes) mx = x > mx ? x : mx;
  return mx;
}

// p[j] = exp(p[j] - mx) for j from j0 to end (a multiple of 8 from j0), 16 at a time and then 8
// (the low half of a masked 16-lane step); adds the values to part in the AVX2 order.
inline void exp_steps(float* p, int64_t j0, int64_t end, float mx, __m256& part) {
  const __m512 m = _mm512_set1_ps(mx);
  int64_t j = j0;
  for (; j + 16 <= end; j += 16) {
    const __m512 e = exp_neg(_mm512_sub_ps(_mm512_loadu_ps(p + j), m));
    _mm512_storeu_ps(p + j, e);
    part = add_halves(part, e);
  }
  if (j < end) {  // 8 left
    const __m512 e = exp_neg(_mm512_sub_ps(_mm512_maskz_loadu_ps(0x00FF, p + j), m));
    _mm512_mask_storeu_ps(p + j, 0x00FF, e);
    part = _mm256_add_ps(part, lo256(e));
  }
}

inline void scale_row(float* p, int64_t n, float f) {
  const __m512 fv = _mm512_set1_ps(f);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16) _mm512_storeu_ps(p + j, _mm512_mul_ps(_mm512_loadu_ps(p + j), fv));
  if (j < n) {
    const __mmask16 m = static_cast<__mmask16>((1u << (n - j)) - 1u);
    _mm512_mask_storeu_ps(p + j, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, p + j), fv));
  }
}

inline void zero_range(float* p, int64_t b, int64_t e) {
  int64_t j = b;
  for (; j + 16 <= e; j += 16) _mm512_storeu_ps(p + j, _mm512_setzero_ps());
  if (j < e)
    _mm512_mask_storeu_ps(p + j, static_cast<__mmask16>((1u << (e - j)) - 1u),
                          _mm512_setzero_ps());
}

}  // namespace

// Only whole 16-value vectors are stored and read back: the last 1-15 values stay in a register
// from their exp to their store, because a load that overlaps a masked store cannot take its value
// from the store buffer (it waits for the store: about a quarter of a GPT-2 head's time).
void softmax_causal_row_avx512(float* p, int64_t cnt, int64_t t) {
  const float mx = row_max(p, cnt);
  const __m512 m = _mm512_set1_ps(mx);
  __m256 part = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 16 <= cnt; j += 16) {
    const __m512 e = exp_neg(_mm512_sub_ps(_mm512_loadu_ps(p + j), m));
    _mm512_storeu_ps(p + j, e);
    part = add_halves(part, e);
  }
  const int64_t r = cnt - j;  // 0-15 left: zeros in the other lanes, added as the AVX2 row does
  const __mmask16 k = static_cast<__mmask16>((1u << r) - 1u);
  __m512 tail = _mm512_setzero_ps();
  if (r > 0) {
    tail = _mm512_maskz_mov_ps(k, exp_neg(_mm512_sub_ps(_mm512_maskz_loadu_ps(k, p + j), m)));
    part = _mm256_add_ps(part, lo256(tail));
    if (r > 8) part = _mm256_add_ps(part, hi256(tail));
  }
  const __m512 inv = _mm512_set1_ps(1.0f / hsum8(part));
  for (int64_t i = 0; i < j; i += 16)
    _mm512_storeu_ps(p + i, _mm512_mul_ps(_mm512_loadu_ps(p + i), inv));
  if (r > 0) {  // the tail and the zeros after it, up to t
    const int64_t n = t - j < 16 ? t - j : 16;
    _mm512_mask_storeu_ps(p + j, static_cast<__mmask16>((1u << n) - 1u), _mm512_mul_ps(tail, inv));
    j += n;
  }
  zero_range(p, j, t);
}

float ce_row_avx512(float* row, int64_t v, int32_t target, float scale) {
  if (target < 0) {
    zero_range(row, 0, v);
    return 0.0f;
  }
  const float mx = row_max(row, v);
  const float lt = row[target];
  // exp(row - max) in place; float partial sums of <= 256 values go into a double total.
  double sum = 0.0;
  const int64_t v8 = v / 8 * 8;
  for (int64_t j = 0; j < v8; j += 256) {
    __m256 part = _mm256_setzero_ps();
    exp_steps(row, j, j + 256 < v8 ? j + 256 : v8, mx, part);
    sum += hsum8(part);
  }
  for (int64_t j = v8; j < v; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  scale_row(row, v, static_cast<float>(scale / sum));
  row[target] -= scale;
  return mx + static_cast<float>(std::log(sum)) - lt;
}

}  // namespace nexus::cpu
