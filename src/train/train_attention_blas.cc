// Attention backward of one (sequence, KV head) group as OpenBLAS GEMMs (train_kernels.h): per
// query head, dP = dO V^T, dS = P (dP - rowsum(P dP)) * scale, dQ += dS K, dK += dS^T Q and
// dV += P^T dO. The saved probabilities are zero above the diagonal (attention_forward writes
// them so), which makes the full-square products causal; half of their multiply-adds are on
// zeros, but register-blocked GEMMs run them several times faster than the per-pair loops.
#include <cblas.h>

#include <cmath>

#include "train/train_kernels.h"

namespace nexus::train::kern {

void attn_backward_group_blas(float* dq, float* dk, float* dv, const float* dout,
                              const float* att, const float* q, const float* k, const float* v,
                              const AttnShape& s, int64_t b, int64_t kh, float* dp) {
  const int64_t hd = s.head_dim, t = s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  const int64_t kvo = b * t * kvw + kh * hd;
  const int ti = static_cast<int>(t), hi = static_cast<int>(hd), qwi = static_cast<int>(qw),
            kvwi = static_cast<int>(kvw);
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    const float* pm = att + (b * s.n_heads + h) * t * t;
    const int64_t qo = b * t * qw + h * hd;
    // dP [t, t] = dO_h [t, hd] V_h^T
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, ti, ti, hi, 1.0f, dout + qo, qwi,
                v + kvo, kvwi, 0.0f, dp, ti);
    for (int64_t i = 0; i < t; ++i) {
      const float* p = pm + i * t;
      float* d = dp + i * t;
      double pdp = 0.0;
      for (int64_t j = 0; j <= i; ++j) pdp += static_cast<double>(p[j]) * d[j];
      const float pdpf = static_cast<float>(pdp);
      for (int64_t j = 0; j <= i; ++j) d[j] = p[j] * (d[j] - pdpf) * scale;
      for (int64_t j = i + 1; j < t; ++j) d[j] = 0.0f;
    }
    // dQ_h += dS K_h; dK_h += dS^T Q_h; dV_h += P^T dO_h
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ti, hi, ti, 1.0f, dp, ti, k + kvo,
                kvwi, 1.0f, dq + qo, qwi);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, hi, ti, 1.0f, dp, ti, q + qo, qwi,
                1.0f, dk + kvo, kvwi);
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, ti, hi, ti, 1.0f, pm, ti, dout + qo, qwi,
                1.0f, dv + kvo, kvwi);
  }
}

}  // namespace nexus::train::kern
