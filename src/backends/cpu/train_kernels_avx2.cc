// AVX2/FMA versions of the training hot loops (train_kernels.h). Dot products and weighted sums run
// 8 lanes at a time with the head's query / output held in registers (head_dim / 8 vectors); exp
// is a vectorised polynomial (range reduction by ln 2, Cephes-style degree-6 polynomial, relative
// error ~2e-7). Long sums (the softmax denominators over the vocabulary) are flushed into double
// every 256 values so the loss keeps the scalar reference's accuracy.
#include <immintrin.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/exp_avx2.h"
#include "backends/cpu/simd_avx2.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

using cpu::avx2::hsum;

using cpu::avx2::exp_clamped;
using cpu::avx2::exp_neg;

// The four horizontal sums of a, b, c, d as one 4-lane vector.
inline __m128 hsum4(__m256 a, __m256 b, __m256 c, __m256 d) {
  const __m256 s = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
  return _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
}

// p[j] = exp(p[j] - mx) for j < cnt; returns 1 / sum of them (float partial sums, 8 lanes).
inline float exp_row(float* p, int64_t cnt, float mx) {
  const __m256 mxv = _mm256_set1_ps(mx);
  __m256 sumv = _mm256_setzero_ps();
  int64_t j = 0;
  for (; j + 8 <= cnt; j += 8) {
    const __m256 w = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(p + j), mxv));
    _mm256_storeu_ps(p + j, w);
    sumv = _mm256_add_ps(sumv, w);
  }
  if (j < cnt) {  // the last 1-7 on a masked vector, zeros in the other lanes (as the AVX-512 row)
    alignas(32) static const int32_t kLanes[16] = {-1, -1, -1, -1, -1, -1, -1, -1,
                                                   0,  0,  0,  0,  0,  0,  0,  0};
    const __m256i m =
        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kLanes + 8 - (cnt - j)));
    const __m256 w = _mm256_and_ps(
        exp_neg(_mm256_sub_ps(_mm256_maskload_ps(p + j, m), mxv)), _mm256_castsi256_ps(m));
    _mm256_maskstore_ps(p + j, m, w);
    sumv = _mm256_add_ps(sumv, w);
  }
  return 1.0f / hsum(sumv);
}

template <int NV>
void attn_forward_head(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, int64_t b, int64_t h) {
  constexpr int64_t hd = NV * 8;
  const int64_t qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t kh = h / (s.n_heads / s.n_kv_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* kb = k + b * s.t * kvw + kh * hd;
  const float* vb = v + b * s.t * kvw + kh * hd;
  for (int64_t i = 0; i < s.t; ++i) {
    const float* qi = q + (b * s.t + i) * qw + h * hd;
    float* p = att + ((b * s.n_heads + h) * s.t + i) * s.t;
    __m256 qv[NV];
#pragma GCC unroll 16
    for (int e = 0; e < NV; ++e) qv[e] = _mm256_loadu_ps(qi + 8 * e);
    // Scores from the window's first key (0 without one), four keys at a time, with their running
    // max; the keys before it get probability 0.
    const int64_t lo = s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0;
    std::fill(p, p + lo, 0.0f);
    __m128 mx4 = _mm_set1_ps(-INFINITY);
    int64_t j = lo;
    for (; j + 4 <= i + 1; j += 4) {
      __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
      const float* k0 = kb + j * kvw;
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e) {
        a0 = _mm256_fmadd_ps(qv[e], _mm256_loadu_ps(k0 + 8 * e), a0);
        a1 = _mm256_fmadd_ps(qv[e], _mm256_loadu_ps(k0 + kvw + 8 * e), a1);
        a2 = _mm256_fmadd_ps(qv[e], _mm256_loadu_ps(k0 + 2 * kvw + 8 * e), a2);
        a3 = _mm256_fmadd_ps(qv[e], _mm256_loadu_ps(k0 + 3 * kvw + 8 * e), a3);
      }
      const __m128 sc = _mm_mul_ps(hsum4(a0, a1, a2, a3), _mm_set1_ps(scale));
      _mm_storeu_ps(p + j, sc);
      mx4 = _mm_max_ps(mx4, sc);
    }
    mx4 = _mm_max_ps(mx4, _mm_movehl_ps(mx4, mx4));
    float mx = _mm_cvtss_f32(_mm_max_ss(mx4, _mm_movehdup_ps(mx4)));
    for (; j <= i; ++j) {
      __m256 a = _mm256_setzero_ps();
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e)
        a = _mm256_fmadd_ps(qv[e], _mm256_loadu_ps(kb + j * kvw + 8 * e), a);
      p[j] = hsum(a) * scale;
      mx = std::max(mx, p[j]);
    }
    const int64_t cnt = i + 1;
    const float inv = exp_row(p + lo, cnt - lo, mx);
    __m256 acc[NV];
#pragma GCC unroll 16
    for (int e = 0; e < NV; ++e) acc[e] = _mm256_setzero_ps();
    for (j = lo; j < cnt; ++j) {
      p[j] *= inv;
      const __m256 pj = _mm256_set1_ps(p[j]);
      const float* vj = vb + j * kvw;
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e)
        acc[e] = _mm256_fmadd_ps(pj, _mm256_loadu_ps(vj + 8 * e), acc[e]);
    }
    std::fill(p + cnt, p + s.t, 0.0f);
    float* oi = out + (b * s.t + i) * qw + h * hd;
#pragma GCC unroll 16
    for (int e = 0; e < NV; ++e) _mm256_storeu_ps(oi + 8 * e, acc[e]);
  }
}

// dv_j += sum_i p_ij dout_i and dk_j += sum_i ds_ij q_i over the head-dim vectors [E0, E1) of a
// head of NV vectors, each accumulated in registers (the second pass of attn_backward_group).
template <int E0, int E1, int NV>
void dvdk_columns(float* dvb, float* dkb, const float* dout, const float* q, const float* pm,
                  const float* dsm, int64_t qo0, int64_t j, int64_t t, int64_t qw, int64_t kvw) {
  constexpr int n = E1 - E0;
  __m256 av[n], ak[n];
#pragma GCC unroll 16
  for (int e = 0; e < n; ++e) av[e] = ak[e] = _mm256_setzero_ps();
  for (int64_t i = j; i < t; ++i) {
    const __m256 pij = _mm256_set1_ps(pm[i * t + j]);
    const __m256 dsij = _mm256_set1_ps(dsm[i * t + j]);
    const float* go = dout + qo0 + i * qw + 8 * E0;
    const float* qi = q + qo0 + i * qw + 8 * E0;
#pragma GCC unroll 16
    for (int e = 0; e < n; ++e) {
      av[e] = _mm256_fmadd_ps(pij, _mm256_loadu_ps(go + 8 * e), av[e]);
      ak[e] = _mm256_fmadd_ps(dsij, _mm256_loadu_ps(qi + 8 * e), ak[e]);
    }
  }
  float* dvj = dvb + j * kvw + 8 * E0;
  float* dkj = dkb + j * kvw + 8 * E0;
#pragma GCC unroll 16
  for (int e = 0; e < n; ++e) {
    _mm256_storeu_ps(dvj + 8 * e, _mm256_add_ps(_mm256_loadu_ps(dvj + 8 * e), av[e]));
    _mm256_storeu_ps(dkj + 8 * e, _mm256_add_ps(_mm256_loadu_ps(dkj + 8 * e), ak[e]));
  }
}

// Two passes per query head so that no gradient row is loaded and stored per (i, j) pair:
// by query row i, dp_ij = dout_i . v_j, ds_ij = p_ij (dp_ij - sum_j p_ij dp_ij) scale (kept in
// scratch, t x t) and dq_i += sum_j ds_ij k_j; then by key row j, dv_j += sum_i p_ij dout_i and
// dk_j += sum_i ds_ij q_i, each accumulated in registers.
template <int NV>
void attn_backward_group(float* dq, float* dk, float* dv, const float* dout, const float* att,
                         const float* q, const float* k, const float* v, const AttnShape& s,
                         int64_t b, int64_t kh, float* scratch) {
  constexpr int64_t hd = NV * 8;
  const int64_t t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t kvo = b * t * kvw + kh * hd;
  const float *kb = k + kvo, *vb = v + kvo;
  float *dkb = dk + kvo, *dvb = dv + kvo;
  float* dsm = scratch;  // [t, t], row i holds ds_ij for j <= i
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    const float* pm = att + (b * s.n_heads + h) * t * t;
    const int64_t qo0 = b * t * qw + h * hd;
    for (int64_t i = 0; i < t; ++i) {
      const int64_t qo = qo0 + i * qw;
      const float* p = pm + i * t;
      float* ds = dsm + i * t;
      __m256 go[NV];
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e) go[e] = _mm256_loadu_ps(dout + qo + 8 * e);
      int64_t j = 0;
      for (; j + 4 <= i + 1; j += 4) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
        const float* v0 = vb + j * kvw;
#pragma GCC unroll 16
        for (int e = 0; e < NV; ++e) {
          a0 = _mm256_fmadd_ps(go[e], _mm256_loadu_ps(v0 + 8 * e), a0);
          a1 = _mm256_fmadd_ps(go[e], _mm256_loadu_ps(v0 + kvw + 8 * e), a1);
          a2 = _mm256_fmadd_ps(go[e], _mm256_loadu_ps(v0 + 2 * kvw + 8 * e), a2);
          a3 = _mm256_fmadd_ps(go[e], _mm256_loadu_ps(v0 + 3 * kvw + 8 * e), a3);
        }
        _mm_storeu_ps(ds + j, hsum4(a0, a1, a2, a3));
      }
      for (; j <= i; ++j) {
        __m256 a = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int e = 0; e < NV; ++e)
          a = _mm256_fmadd_ps(go[e], _mm256_loadu_ps(vb + j * kvw + 8 * e), a);
        ds[j] = hsum(a);
      }
      // sum_j p_ij dp_ij in double, four lanes at a time.
      __m256d pd = _mm256_setzero_pd();
      for (j = 0; j + 4 <= i + 1; j += 4)
        pd = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(p + j)),
                             _mm256_cvtps_pd(_mm_loadu_ps(ds + j)), pd);
      __m128d pd2 = _mm_add_pd(_mm256_castpd256_pd128(pd), _mm256_extractf128_pd(pd, 1));
      double pdp = _mm_cvtsd_f64(_mm_add_sd(pd2, _mm_unpackhi_pd(pd2, pd2)));
      for (; j <= i; ++j) pdp += static_cast<double>(p[j]) * ds[j];
      const float pdpf = static_cast<float>(pdp);
      __m256 acc[NV];
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e) acc[e] = _mm256_setzero_ps();
      for (j = 0; j <= i; ++j) {
        ds[j] = p[j] * (ds[j] - pdpf) * scale;
        const __m256 dsv = _mm256_set1_ps(ds[j]);
        const float* kj = kb + j * kvw;
#pragma GCC unroll 16
        for (int e = 0; e < NV; ++e)
          acc[e] = _mm256_fmadd_ps(dsv, _mm256_loadu_ps(kj + 8 * e), acc[e]);
      }
#pragma GCC unroll 16
      for (int e = 0; e < NV; ++e)
        _mm256_storeu_ps(dq + qo + 8 * e, _mm256_add_ps(_mm256_loadu_ps(dq + qo + 8 * e), acc[e]));
    }
    for (int64_t j = 0; j < t; ++j) {
      // dv_j and dk_j take 2 * NV accumulators: past 12 they would not fit the 16 registers next
      // to the two broadcasts, so wide heads go in two halves of the head dim (GPT-2's 64: 8 + 8).
      if constexpr (NV > 6) {
        dvdk_columns<0, NV / 2, NV>(dvb, dkb, dout, q, pm, dsm, qo0, j, t, qw, kvw);
        dvdk_columns<NV / 2, NV, NV>(dvb, dkb, dout, q, pm, dsm, qo0, j, t, qw, kvw);
      } else {
        dvdk_columns<0, NV, NV>(dvb, dkb, dout, q, pm, dsm, qo0, j, t, qw, kvw);
      }
    }
  }
}

template <typename Fn>
void by_head_dim(int64_t hd, const Fn& fn) {
  switch (hd / 8) {
    case 1:
      return fn.template operator()<1>();
    case 2:
      return fn.template operator()<2>();
    case 3:
      return fn.template operator()<3>();
    case 4:
      return fn.template operator()<4>();
    case 5:
      return fn.template operator()<5>();
    case 6:
      return fn.template operator()<6>();
    case 7:
      return fn.template operator()<7>();
    default:
      return fn.template operator()<8>();
  }
}

}  // namespace

void attn_forward_head_avx2(float* out, float* att, const float* q, const float* k, const float* v,
                            const AttnShape& s, int64_t b, int64_t h) {
  by_head_dim(s.head_dim, [&]<int NV>() { attn_forward_head<NV>(out, att, q, k, v, s, b, h); });
}

void attn_backward_group_avx2(float* dq, float* dk, float* dv, const float* dout, const float* att,
                              const float* q, const float* k, const float* v, const AttnShape& s,
                              int64_t b, int64_t kh, float* dp) {
  by_head_dim(s.head_dim, [&]<int NV>() {
    attn_backward_group<NV>(dq, dk, dv, dout, att, q, k, v, s, b, kh, dp);
  });
}

void softmax_causal_row_avx2(float* p, int64_t cnt, int64_t t) {
  int64_t j = 0;
  __m256 mxv = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= cnt; j += 8) mxv = _mm256_max_ps(mxv, _mm256_loadu_ps(p + j));
  __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mxv), _mm256_extractf128_ps(mxv, 1));
  m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  float mx = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
  for (; j < cnt; ++j) mx = std::max(mx, p[j]);
  const __m256 inv = _mm256_set1_ps(exp_row(p, cnt, mx));
  for (j = 0; j + 8 <= cnt; j += 8) _mm256_storeu_ps(p + j, _mm256_mul_ps(_mm256_loadu_ps(p + j), inv));
  for (; j < cnt; ++j) p[j] *= _mm256_cvtss_f32(inv);
  std::fill(p + cnt, p + t, 0.0f);
}

void softmax_causal_row_backward_avx2(float* d, const float* p, int64_t cnt, int64_t end,
                                      float scale) {
  // sum_j p_j d_j in double, four lanes at a time.
  __m256d acc = _mm256_setzero_pd();
  int64_t j = 0;
  for (; j + 4 <= cnt; j += 4)
    acc = _mm256_fmadd_pd(_mm256_cvtps_pd(_mm_loadu_ps(p + j)), _mm256_cvtps_pd(_mm_loadu_ps(d + j)),
                          acc);
  __m128d a2 = _mm_add_pd(_mm256_castpd256_pd128(acc), _mm256_extractf128_pd(acc, 1));
  double pdp = _mm_cvtsd_f64(_mm_add_sd(a2, _mm_unpackhi_pd(a2, a2)));
  for (; j < cnt; ++j) pdp += static_cast<double>(p[j]) * d[j];
  const float pdpf = static_cast<float>(pdp);
  const __m256 pv = _mm256_set1_ps(pdpf), sv = _mm256_set1_ps(scale);
  for (j = 0; j + 8 <= cnt; j += 8) {
    const __m256 v = _mm256_sub_ps(_mm256_loadu_ps(d + j), pv);
    _mm256_storeu_ps(d + j, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(p + j), v), sv));
  }
  for (; j < cnt; ++j) d[j] = p[j] * (d[j] - pdpf) * scale;
  std::fill(d + cnt, d + end, 0.0f);
}

float ce_row_avx2(float* row, int64_t v, int32_t target, float scale) {
  if (target < 0) {
    std::fill(row, row + v, 0.0f);
    return 0.0f;
  }
  int64_t j = 0;
  __m256 mxv = _mm256_set1_ps(-INFINITY);
  for (; j + 8 <= v; j += 8) mxv = _mm256_max_ps(mxv, _mm256_loadu_ps(row + j));
  float mx = -INFINITY;
  {
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, mxv);
    for (float x : lanes) mx = std::max(mx, x);
  }
  for (; j < v; ++j) mx = std::max(mx, row[j]);
  const float lt = row[target];
  // exp(row - max) in place; float partial sums of <= 256 values go into a double total.
  const __m256 m = _mm256_set1_ps(mx);
  double sum = 0.0;
  j = 0;
  while (j + 8 <= v) {
    __m256 part = _mm256_setzero_ps();
    const int64_t end = std::min(v, j + 256);
    for (; j + 8 <= end; j += 8) {
      const __m256 e = exp_neg(_mm256_sub_ps(_mm256_loadu_ps(row + j), m));
      _mm256_storeu_ps(row + j, e);
      part = _mm256_add_ps(part, e);
    }
    sum += hsum(part);
  }
  for (; j < v; ++j) {
    row[j] = std::exp(row[j] - mx);
    sum += row[j];
  }
  const float f = static_cast<float>(scale / sum);
  const __m256 fv = _mm256_set1_ps(f);
  for (j = 0; j + 8 <= v; j += 8)
    _mm256_storeu_ps(row + j, _mm256_mul_ps(_mm256_loadu_ps(row + j), fv));
  for (; j < v; ++j) row[j] *= f;
  row[target] -= scale;
  return mx + static_cast<float>(std::log(sum)) - lt;
}

void zero_stream_avx2(float* p, int64_t n) {
  int64_t i = 0;
  for (; i < n && (reinterpret_cast<uintptr_t>(p + i) & 31) != 0; ++i) p[i] = 0.0f;
  const __m256 z = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) _mm256_stream_ps(p + i, z);
  for (; i < n; ++i) p[i] = 0.0f;
  _mm_sfence();  // the stores are visible before the pool's join publishes them
}

void add_vectors_avx2(float* out, const float* a, const float* b, int64_t n) {
  int64_t j = 0;
  for (; j + 8 <= n; j += 8)
    _mm256_storeu_ps(out + j, _mm256_add_ps(_mm256_loadu_ps(a + j), _mm256_loadu_ps(b + j)));
  for (; j < n; ++j) out[j] = a[j] + b[j];
}


}  // namespace nexus::cpu
