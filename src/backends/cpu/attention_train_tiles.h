// Register-tiled causal attention of one head (forward) or one (sequence, KV head) group
// (backward) for training, written once over a vector type V and compiled by
// attention_train_tiles_avx2.cc (8 lanes) and attention_train_tiles_avx512.cc (16 lanes).
//   forward:  S = scale Q K^T, P = causal softmax(S) (saved), O = P V;
//   backward: dP = dO V^T, dS = P (dP - rowsum(P dP)) scale, dQ = dS K, dK = dS^T Q,
//             dV = P^T dO (written, not added: the only terms of those gradients).
// Three tile kernels do all the products, each output element a chain of fused multiply-adds in
// one fixed order:
//   dot_tile: S and dP, over the head's dimensions d = 0 .. hd-1 against a transposed copy of K or
//             V (lanes are keys);
//   nn_tile:  O and dQ, over the keys j = 0 .. i of row i (lanes are dimensions);
//   tn_tile:  dK and dV, over the queries i = j .. t-1 of key j (lanes are dimensions).
// The order depends on neither the tile shape nor the vector width, so the AVX2 and AVX-512 builds
// give the same bits. The products stay causal to the key (nn_tile and tn_tile walk the exact
// triangle); dot_tile computes whole vectors of keys past the diagonal, which the softmax rows then
// overwrite with zeros (forward) or nothing reads (backward).
//
// Everything here has internal linkage: each ISA's file gets its own copy, so the linker never
// picks an AVX-512 copy for the AVX2 file (the rule of docs/KERNELS.md); no library template is
// instantiated.
#pragma once

#include <cstdint>

#include "backends/api/attention.h"

namespace nexus::cpu {
namespace {
namespace tiles {

inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

// Softmax rows (train_kernels.h): forward in place with zeros after cnt, backward scaled.
using SoftmaxRow = void (*)(float* p, int64_t cnt, int64_t t);
using SoftmaxRowBackward = void (*)(float* d, const float* p, int64_t cnt, int64_t end,
                                    float scale);

// Rows of queries per dot_tile (two vectors of keys each), and of outputs per nn_tile/tn_tile with
// NV vectors of dimensions: as many accumulators as V::kAcc allows, at most 8 rows.
template <class V>
constexpr int kDotRows = V::kAcc / 2;
template <class V, int NV>
constexpr int kSumRows = V::kAcc / NV < 8 ? V::kAcc / NV : 8;

// out[r][j0 + c] = alpha * sum_d x[r][d] yt[d][j0 + c] for r < R and c < 2 V::kW, stored where
// j0 + c < jend. yt holds at least 2 V::kW readable columns from j0.
template <class V, int R>
void dot_tile(float* out, int64_t ldo, const float* x, int64_t ldx, const float* yt, int64_t ldy,
              int64_t hd, float alpha, int64_t j0, int64_t jend) {
  using vec = typename V::vec;
  vec acc[R][2];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = V::zero();
  for (int64_t d = 0; d < hd; ++d) {
    const vec y0 = V::load(yt + d * ldy + j0), y1 = V::load(yt + d * ldy + j0 + V::kW);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const vec xb = V::set1(x[r * ldx + d]);
      acc[r][0] = V::fma(xb, y0, acc[r][0]);
      acc[r][1] = V::fma(xb, y1, acc[r][1]);
    }
  }
  const vec a = V::set1(alpha);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
#pragma GCC unroll 16
    for (int c = 0; c < 2; ++c) {
      const int64_t j = j0 + c * V::kW;
      if (j + V::kW <= jend)
        V::store(out + r * ldo + j, V::mul(acc[r][c], a));
      else if (j < jend)
        V::store_n(out + r * ldo + j, V::mul(acc[r][c], a), static_cast<int>(jend - j));
    }
  }
}

// dot_tile for `rows` <= R rows (the last block of a sequence).
template <class V, int R>
void dot_rows(int rows, float* out, int64_t ldo, const float* x, int64_t ldx, const float* yt,
              int64_t ldy, int64_t hd, float alpha, int64_t j0, int64_t jend) {
  if (rows == R) return dot_tile<V, R>(out, ldo, x, ldx, yt, ldy, hd, alpha, j0, jend);
  if constexpr (R > 1) dot_rows<V, R - 1>(rows, out, ldo, x, ldx, yt, ldy, hd, alpha, j0, jend);
}

// Fetches the causal triangle of a t x t row-major matrix (row i: values 0 .. i) into L2, a few
// cache lines per call of step(), so a pass of tiles can bring in what the next pass reads.
class TriangleAhead {
 public:
  TriangleAhead(const float* m, int64_t t) : m_(m), t_(t) {}
  void step(int lines) {
    for (; lines > 0 && row_ < t_; --lines) {
      __builtin_prefetch(m_ + row_ * t_ + 16 * line_, 0, 2);
      if (16 * ++line_ > row_) line_ = 0, ++row_;  // 16 floats a line
    }
  }

 private:
  const float* m_;
  int64_t t_, row_ = 0, line_ = 0;
};

// Lines a dot tile asks TriangleAhead for: one per 24 outputs (16 per 12 x 32 tile), so the
// backward's dP pass (~100 tiles at t 256 on 16 lanes) has fetched most of the probabilities'
// 2,200 lines when it ends.
template <class V>
constexpr int kAheadLines = kDotRows<V> * 2 * V::kW / 24;

// Rows [0, t) of S (or dP) into s (row stride t): row i gets keys [0, i + 1) and whatever else
// its block's key vectors cover, up to t. After each tile, `ahead` (if any) fetches a few lines.
template <class V>
void scores(float* s, const float* x, int64_t ldx, const float* yt, int64_t ldy, int64_t t,
            int64_t hd, float alpha, TriangleAhead* ahead = nullptr) {
  constexpr int R = kDotRows<V>;
  for (int64_t i0 = 0; i0 < t; i0 += R) {
    const int rows = static_cast<int>(min64(R, t - i0));
    for (int64_t j0 = 0; j0 < i0 + rows; j0 += 2 * V::kW) {
      dot_rows<V, R>(rows, s + i0 * t, t, x + i0 * ldx, ldx, yt, ldy, hd, alpha, j0, t);
      if (ahead) ahead->step(kAheadLines<V>);
    }
  }
}

// o[r][0 .. NV kW) (+)= sum_{j = 0}^{i0 + r} a[r][j] y[j][0 .. NV kW) for r < R, in order of j;
// without `accumulate` the sums start from zero.
template <class V, int R, int NV>
void nn_tile(float* o, int64_t ldo, const float* a, int64_t lda, const float* y, int64_t ldy,
             int64_t i0, bool accumulate) {
  using vec = typename V::vec;
  vec acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      acc[r][c] = accumulate ? V::load(o + r * ldo + c * V::kW) : V::zero();
  for (int64_t j = 0; j <= i0; ++j) {  // every row sees these keys
    vec yv[NV];
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) yv[c] = V::load(y + j * ldy + c * V::kW);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const vec ab = V::set1(a[r * lda + j]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = V::fma(ab, yv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int jj = 1; jj < R; ++jj) {  // the diagonal triangle: row r sees key i0 + jj if jj <= r
    vec yv[NV];
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) yv[c] = V::load(y + (i0 + jj) * ldy + c * V::kW);
#pragma GCC unroll 16
    for (int r = jj; r < R; ++r) {
      const vec ab = V::set1(a[r * lda + i0 + jj]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = V::fma(ab, yv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) V::store(o + r * ldo + c * V::kW, acc[r][c]);
}

// o[r][0 .. NV kW) (+)= sum_{i = j0 + r}^{t - 1} a[i][j0 + r] y[i][0 .. NV kW) for r < R, in
// order of i (a and y point at row 0); without `accumulate` the sums start from zero.
template <class V, int R, int NV>
void tn_tile(float* o, int64_t ldo, const float* a, int64_t lda, const float* y, int64_t ldy,
             int64_t j0, int64_t t, bool accumulate) {
  using vec = typename V::vec;
  vec acc[R][NV];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c)
      acc[r][c] = accumulate ? V::load(o + r * ldo + c * V::kW) : V::zero();
#pragma GCC unroll 16
  for (int ii = 0; ii + 1 < R; ++ii) {  // the diagonal triangle: query j0 + ii reaches keys <= it
    vec yv[NV];
    const int64_t i = j0 + ii;
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) yv[c] = V::load(y + i * ldy + c * V::kW);
#pragma GCC unroll 16
    for (int r = 0; r <= ii; ++r) {
      const vec ab = V::set1(a[i * lda + j0 + r]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = V::fma(ab, yv[c], acc[r][c]);
    }
  }
  for (int64_t i = j0 + R - 1; i < t; ++i) {
    vec yv[NV];
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) yv[c] = V::load(y + i * ldy + c * V::kW);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const vec ab = V::set1(a[i * lda + j0 + r]);
#pragma GCC unroll 16
      for (int c = 0; c < NV; ++c) acc[r][c] = V::fma(ab, yv[c], acc[r][c]);
    }
  }
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int c = 0; c < NV; ++c) V::store(o + r * ldo + c * V::kW, acc[r][c]);
}

// Every row block of one column slice of NV vectors: nn_tile (kTn false) or tn_tile (true).
template <class V, bool kTn, int NV, int R>
void sum_rows(int rows, float* o, int64_t ldo, const float* a, int64_t lda, const float* y,
              int64_t ldy, int64_t r0, int64_t t, bool accumulate) {
  if (rows == R) {
    if constexpr (kTn)
      tn_tile<V, R, NV>(o + r0 * ldo, ldo, a, lda, y, ldy, r0, t, accumulate);
    else
      nn_tile<V, R, NV>(o + r0 * ldo, ldo, a + r0 * lda, lda, y, ldy, r0, accumulate);
    return;
  }
  if constexpr (R > 1) sum_rows<V, kTn, NV, R - 1>(rows, o, ldo, a, lda, y, ldy, r0, t, accumulate);
}

template <class V, bool kTn, int NV>
void sum_slice(float* o, int64_t ldo, const float* a, int64_t lda, const float* y, int64_t ldy,
               int64_t t, bool accumulate) {
  constexpr int R = kSumRows<V, NV>;
  for (int64_t r0 = 0; r0 < t; r0 += R)
    sum_rows<V, kTn, NV, R>(static_cast<int>(min64(R, t - r0)), o, ldo, a, lda, y, ldy, r0, t,
                            accumulate);
}

// All hd columns (a multiple of V::kW) in slices of up to V::kSlice vectors.
template <class V, bool kTn>
void sums(float* o, int64_t ldo, const float* a, int64_t lda, const float* y, int64_t ldy,
          int64_t t, int64_t hd, bool accumulate) {
  static_assert(V::kSlice >= 1 && V::kSlice <= 4);
  for (int64_t c0 = 0; c0 < hd; c0 += V::kSlice * V::kW) {
    const int64_t nv = min64(V::kSlice, (hd - c0) / V::kW);
    float* oc = o + c0;
    const float* yc = y + c0;
    if constexpr (V::kSlice >= 4)
      if (nv == 4) {
        sum_slice<V, kTn, 4>(oc, ldo, a, lda, yc, ldy, t, accumulate);
        continue;
      }
    if constexpr (V::kSlice >= 3)
      if (nv == 3) {
        sum_slice<V, kTn, 3>(oc, ldo, a, lda, yc, ldy, t, accumulate);
        continue;
      }
    if constexpr (V::kSlice >= 2)
      if (nv == 2) {
        sum_slice<V, kTn, 2>(oc, ldo, a, lda, yc, ldy, t, accumulate);
        continue;
      }
    sum_slice<V, kTn, 1>(oc, ldo, a, lda, yc, ldy, t, accumulate);
  }
}

// Columns of the transposed copy: t rounded up to whole pairs of vectors (zeros past t).
template <class V>
int64_t padded(int64_t t) {
  return (t + 2 * V::kW - 1) / (2 * V::kW) * (2 * V::kW);
}

// yt[d][j] = y[j][d] for d < hd, j < t; zeros for j in [t, padded(t)). In blocks of 16 rows of
// y, whose cache lines stay in L1 while every d walks them (a plain walk down each column took 4-5
// times as long at t 256, head 64: its 1536-byte stride maps the rows onto few L1 sets).
template <class V>
void transpose(float* yt, const float* y, int64_t ldy, int64_t t, int64_t hd) {
  const int64_t tp = padded<V>(t);
  for (int64_t j0 = 0; j0 < t; j0 += 16) {
    const int64_t j1 = min64(t, j0 + 16);
    for (int64_t d = 0; d < hd; ++d)
      for (int64_t j = j0; j < j1; ++j) yt[d * tp + j] = y[j * ldy + d];
  }
  for (int64_t d = 0; d < hd; ++d)
    for (int64_t j = t; j < tp; ++j) yt[d * tp + j] = 0.0f;
}

template <class V>
void forward_head(float* out, float* att, const float* q, const float* k, const float* v,
                  const AttnShape& s, int64_t b, int64_t h, float* kt, SoftmaxRow softmax) {
  const int64_t hd = s.head_dim, t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  const int64_t kh = h / (s.n_heads / s.n_kv_heads);
  const float* qh = q + b * t * qw + h * hd;
  const float* kb = k + b * t * kvw + kh * hd;
  const float* vb = v + b * t * kvw + kh * hd;
  float* pm = att + (b * s.n_heads + h) * t * t;
  transpose<V>(kt, kb, kvw, t, hd);
  scores<V>(pm, qh, qw, kt, padded<V>(t), t, hd, scale);
  for (int64_t i = 0; i < t; ++i) softmax(pm + i * t, i + 1, t);
  sums<V, false>(out + b * t * qw + h * hd, qw, pm, t, vb, kvw, t, hd, false);
}

template <class V>
void backward_group(float* dq, float* dk, float* dv, const float* dout, const float* att,
                    const float* q, const float* k, const float* v, const AttnShape& s, int64_t b,
                    int64_t kh, float* dp, float* vt, SoftmaxRowBackward softmax_bwd) {
  const int64_t hd = s.head_dim, t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const float scale = 1.0f / __builtin_sqrtf(static_cast<float>(hd));
  const int64_t group = s.n_heads / s.n_kv_heads;
  const int64_t kvo = b * t * kvw + kh * hd;
  transpose<V>(vt, v + kvo, kvw, t, hd);
  // Writes dq, dk, dv: each query head's dq once, the group's dk and dv summed over its heads.
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    const float* pm = att + (b * s.n_heads + h) * t * t;
    const int64_t qo = b * t * qw + h * hd;
    const bool add = h != kh * group;
    // The probabilities come from memory (written in forward, a whole pass ago): fetched while
    // the dP tiles compute, the softmax backward and the dV sums find them in L2.
    TriangleAhead ahead(pm, t);
    scores<V>(dp, dout + qo, qw, vt, padded<V>(t), t, hd, 1.0f, &ahead);
    for (int64_t i = 0; i < t; ++i) softmax_bwd(dp + i * t, pm + i * t, i + 1, i + 1, scale);
    sums<V, false>(dq + qo, qw, dp, t, k + kvo, kvw, t, hd, false);
    sums<V, true>(dk + kvo, kvw, dp, t, q + qo, qw, t, hd, add);
    sums<V, true>(dv + kvo, kvw, pm, t, dout + qo, qw, t, hd, add);
  }
}

}  // namespace tiles
}  // namespace
}  // namespace nexus::cpu
