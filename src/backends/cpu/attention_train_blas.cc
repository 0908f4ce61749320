// Causal attention of one head (forward) or one (sequence, KV head) group (backward) as OpenBLAS
// GEMMs (train_kernels.h), in blocks of kRowBlock query rows: query rows [r0, r1) see keys
// [0, r1), so the GEMMs skip the key blocks right of the diagonal block (t = 256: 62.5% of the
// full square's multiply-adds instead of 100%; the causal minimum is 50%). Inside the diagonal
// block the saved probabilities are zero above the diagonal (the softmax rows are written so),
// which keeps the products causal.
//   forward:  S = scale Q K^T, P = causal softmax(S) (saved), O = P V;
//   backward: dP = dO V^T, dS = P (dP - rowsum(P dP)) scale, dQ += dS K, dK += dS^T Q,
//             dV += P^T dO.
// Register-blocked GEMMs run these several times faster than per-pair loops (one thread, t 256,
// head 64: see BM_TrainAttention*).
#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "backends/cpu/isa.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/train_kernels.h"

namespace nexus::cpu {
namespace {

constexpr int64_t kRowBlock = 64;

int i32(int64_t v) { return static_cast<int>(v); }

}  // namespace

void attn_forward_head_blas(float* out, float* att, const float* q, const float* k, const float* v,
                            const AttnShape& s, int64_t b, int64_t h) {
  const int64_t hd = s.head_dim, t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t kh = h / (s.n_heads / s.n_kv_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const float* qh = q + b * t * qw + h * hd;
  const float* kb = k + b * t * kvw + kh * hd;
  const float* vb = v + b * t * kvw + kh * hd;
  float* oh = out + b * t * qw + h * hd;
  float* pm = att + (b * s.n_heads + h) * t * t;
  const auto softmax = cpu::avx512_active() ? softmax_causal_row_avx512
                       : avx2_active()   ? softmax_causal_row_avx2
                                              : softmax_causal_row_scalar;
  for (int64_t r0 = 0; r0 < t; r0 += kRowBlock) {
    const int64_t r1 = std::min(t, r0 + kRowBlock), m = r1 - r0;
    // S[r0:r1, 0:r1] = scale Q[r0:r1] K[0:r1]^T, into the rows of the saved probabilities.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, i32(m), i32(r1), i32(hd), scale,
                qh + r0 * qw, i32(qw), kb, i32(kvw), 0.0f, pm + r0 * t, i32(t));
    for (int64_t i = r0; i < r1; ++i) softmax(pm + i * t, i + 1, t);
    // O[r0:r1] = P[r0:r1, 0:r1] V[0:r1]
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i32(m), i32(hd), i32(r1), 1.0f,
                pm + r0 * t, i32(t), vb, i32(kvw), 0.0f, oh + r0 * qw, i32(qw));
  }
}

void attn_backward_group_blas(float* dq, float* dk, float* dv, const float* dout,
                              const float* att, const float* q, const float* k, const float* v,
                              const AttnShape& s, int64_t b, int64_t kh, float* dp) {
  const int64_t hd = s.head_dim, t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t kvo = b * t * kvw + kh * hd;
  const float *kb = k + kvo, *vb = v + kvo;
  float *dkb = dk + kvo, *dvb = dv + kvo;
  const auto softmax_bwd =
      avx2_active() ? softmax_causal_row_backward_avx2 : softmax_causal_row_backward_scalar;
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    const float* pm = att + (b * s.n_heads + h) * t * t;
    const int64_t qo = b * t * qw + h * hd;
    for (int64_t r0 = 0; r0 < t; r0 += kRowBlock) {
      const int64_t r1 = std::min(t, r0 + kRowBlock), m = r1 - r0;
      const float* go = dout + qo + r0 * qw;
      const float* qr = q + qo + r0 * qw;
      float* ds = dp + r0 * t;
      // dP[r0:r1, 0:r1] = dO[r0:r1] V[0:r1]^T
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, i32(m), i32(r1), i32(hd), 1.0f, go,
                  i32(qw), vb, i32(kvw), 0.0f, ds, i32(t));
      for (int64_t i = r0; i < r1; ++i) softmax_bwd(dp + i * t, pm + i * t, i + 1, r1, scale);
      // dQ[r0:r1] += dS K[0:r1]; dK[0:r1] += dS^T Q[r0:r1]; dV[0:r1] += P^T dO[r0:r1]
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, i32(m), i32(hd), i32(r1), 1.0f, ds,
                  i32(t), kb, i32(kvw), 1.0f, dq + qo + r0 * qw, i32(qw));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i32(r1), i32(hd), i32(m), 1.0f, ds,
                  i32(t), qr, i32(qw), 1.0f, dkb, i32(kvw));
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, i32(r1), i32(hd), i32(m), 1.0f,
                  pm + r0 * t, i32(t), go, i32(qw), 1.0f, dvb, i32(kvw));
    }
  }
}

}  // namespace nexus::cpu
