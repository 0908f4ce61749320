// AVX2/FMA SwiGLU and GELU (GPT-2's tanh form), forward and backward: sigmoid and
// tanh z = 1 - 2 / (exp(2z) + 1) through the shared vectorised exp (exp_avx2.h); the scalar tails
// use the references (activation.cc).
#include <immintrin.h>

#include "backends/cpu/activation.h"
#include "backends/cpu/exp_avx2.h"

namespace nexus::cpu {
namespace {

constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;

// tanh(C (v + A v^3)) for 8 values.
inline __m256 gelu_tanh(__m256 v) {
  const __m256 v2 = _mm256_mul_ps(v, v);
  const __m256 z = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(kGeluC), v),
                                 _mm256_fmadd_ps(_mm256_set1_ps(kGeluA), v2, _mm256_set1_ps(1.0f)));
  const __m256 e = avx2::exp_clamped(_mm256_add_ps(z, z));
  return _mm256_sub_ps(_mm256_set1_ps(1.0f),
                       _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
}

}  // namespace

void swiglu_forward_avx2(float* out, const float* g, const float* u, int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 den =
        _mm256_add_ps(one, avx2::exp_clamped(_mm256_sub_ps(_mm256_setzero_ps(), gv)));
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(gv, den), _mm256_loadu_ps(u + i)));
  }
  swiglu_forward_scalar(out + i, g + i, u + i, n - i);
}

void swiglu_backward_avx2(float* dg, float* du, const float* dout, const float* g, const float* u,
                          int64_t n) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i), d = _mm256_loadu_ps(dout + i);
    const __m256 sg = _mm256_div_ps(
        one, _mm256_add_ps(one, avx2::exp_clamped(_mm256_sub_ps(_mm256_setzero_ps(), gv))));
    // silu'(g) = s (1 + g (1 - s))
    const __m256 dsilu = _mm256_mul_ps(sg, _mm256_fmadd_ps(gv, _mm256_sub_ps(one, sg), one));
    const __m256 du_add = _mm256_mul_ps(d, _mm256_mul_ps(gv, sg));
    const __m256 dg_add = _mm256_mul_ps(_mm256_mul_ps(d, _mm256_loadu_ps(u + i)), dsilu);
    _mm256_storeu_ps(dg + i, dg_add);
    _mm256_storeu_ps(du + i, du_add);
  }
  swiglu_backward_scalar(dg + i, du + i, dout + i, g + i, u + i, n - i);
}

void gelu_forward_avx2(float* out, const float* x, int64_t n) {
  int64_t i = 0;
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 th = gelu_tanh(v);
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_mul_ps(half, v), _mm256_add_ps(one, th)));
  }
  gelu_forward_scalar(out + i, x + i, n - i);
}

void gelu_backward_avx2(float* dx, const float* dout, const float* x, int64_t n) {
  int64_t i = 0;
  const __m256 half = _mm256_set1_ps(0.5f), one = _mm256_set1_ps(1.0f);
  const __m256 c = _mm256_set1_ps(kGeluC), a3 = _mm256_set1_ps(3.0f * kGeluA);
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_loadu_ps(x + i);
    const __m256 th = gelu_tanh(v);
    // (1 + th) / 2 + v / 2 (1 - th^2) C (1 + 3 A v^2)
    const __m256 sech2 = _mm256_fnmadd_ps(th, th, one);
    const __m256 inner = _mm256_mul_ps(c, _mm256_fmadd_ps(a3, _mm256_mul_ps(v, v), one));
    const __m256 d = _mm256_fmadd_ps(_mm256_mul_ps(_mm256_mul_ps(half, v), sech2), inner,
                                     _mm256_mul_ps(half, _mm256_add_ps(one, th)));
    _mm256_storeu_ps(dx + i, _mm256_mul_ps(_mm256_loadu_ps(dout + i), d));
  }
  gelu_backward_scalar(dx + i, dout + i, x + i, n - i);
}

}  // namespace nexus::cpu
