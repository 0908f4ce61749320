// Scalar reference versions of the training hot loops (train_kernels.h): plain loops in f32 with
// the softmax denominators and the attention backward's row dot product summed in double.
#include "backends/cpu/train_kernels.h"
#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"

#include <algorithm>
#include <cmath>

namespace nexus::cpu {

void attn_forward_head_scalar(float* out, float* att, const float* q, const float* k,
                              const float* v, const AttnShape& s, int64_t b, int64_t h) {
  const int64_t hd = s.head_dim, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t kh = h / (s.n_heads / s.n_kv_heads);
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t i = 0; i < s.t; ++i) {
    const float* qi = q + (b * s.t + i) * qw + h * hd;
    float* p = att + ((b * s.n_heads + h) * s.t + i) * s.t;
    const int64_t lo = s.window > 0 ? std::max<int64_t>(0, i - s.window + 1) : 0;
    std::fill(p, p + lo, 0.0f);  // keys before the window: probability 0
    float mx = -INFINITY;
    for (int64_t j = lo; j <= i; ++j) {
      const float* kj = k + (b * s.t + j) * kvw + kh * hd;
      float d = 0.0f;
      for (int64_t e = 0; e < hd; ++e) d += qi[e] * kj[e];
      p[j] = d * scale;
      mx = std::max(mx, p[j]);
    }
    double sum = 0.0;
    for (int64_t j = lo; j <= i; ++j) {
      p[j] = std::exp(p[j] - mx);
      sum += p[j];
    }
    const float inv = static_cast<float>(1.0 / sum);
    for (int64_t j = lo; j <= i; ++j) p[j] *= inv;
    for (int64_t j = i + 1; j < s.t; ++j) p[j] = 0.0f;
    float* oi = out + (b * s.t + i) * qw + h * hd;
    std::fill(oi, oi + hd, 0.0f);
    for (int64_t j = lo; j <= i; ++j) {
      const float* vj = v + (b * s.t + j) * kvw + kh * hd;
      for (int64_t e = 0; e < hd; ++e) oi[e] += p[j] * vj[e];
    }
  }
}

void bias_backward_scalar(float* db, const float* dout, int64_t n, int64_t c, int64_t j0,
                          int64_t j1) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = j0; j < j1; ++j) db[j] += dout[i * c + j];
}

void add_vectors_scalar(float* out, const float* a, const float* b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = a[j] + b[j];
}

void softmax_causal_row_scalar(float* p, int64_t cnt, int64_t t) {
  float mx = -INFINITY;
  for (int64_t j = 0; j < cnt; ++j) mx = std::max(mx, p[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < cnt; ++j) {
    p[j] = std::exp(p[j] - mx);
    sum += p[j];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < cnt; ++j) p[j] *= inv;
  std::fill(p + cnt, p + t, 0.0f);
}

void softmax_causal_row_backward_scalar(float* d, const float* p, int64_t cnt, int64_t end,
                                        float scale) {
  double pdp = 0.0;
  for (int64_t j = 0; j < cnt; ++j) pdp += static_cast<double>(p[j]) * d[j];
  const float pdpf = static_cast<float>(pdp);
  for (int64_t j = 0; j < cnt; ++j) d[j] = p[j] * (d[j] - pdpf) * scale;
  std::fill(d + cnt, d + end, 0.0f);
}

void attn_backward_group_scalar(float* dq, float* dk, float* dv, const float* dout,
                                const float* att, const float* q, const float* k, const float* v,
                                const AttnShape& s, int64_t b, int64_t kh, float* dp) {
  const int64_t hd = s.head_dim, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
    for (int64_t i = 0; i < s.t; ++i) {
      const int64_t qo = (b * s.t + i) * qw + h * hd;
      const float* p = att + ((b * s.n_heads + h) * s.t + i) * s.t;
      const float* go = dout + qo;
      // dp_j = dout . v_j, dv_j += p_j dout; then the softmax backward
      // ds_j = p_j (dp_j - sum_k p_k dp_k), and the scaled score backward into q and k.
      double pdp = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t ko = (b * s.t + j) * kvw + kh * hd;
        float d = 0.0f;
        for (int64_t e = 0; e < hd; ++e) {
          d += go[e] * v[ko + e];
          dv[ko + e] += p[j] * go[e];
        }
        dp[j] = d;
        pdp += static_cast<double>(p[j]) * d;
      }
      for (int64_t j = 0; j <= i; ++j) {
        const int64_t ko = (b * s.t + j) * kvw + kh * hd;
        const float ds = p[j] * (dp[j] - static_cast<float>(pdp)) * scale;
        for (int64_t e = 0; e < hd; ++e) {
          dq[qo + e] += ds * k[ko + e];
          dk[ko + e] += ds * q[qo + e];
        }
      }
    }
  }
}

float ce_row_scalar(float* row, int64_t v, int32_t target, float scale) {
  if (target < 0) {
    std::fill(row, row + v, 0.0f);
    return 0.0f;
  }
  const float mx = *std::max_element(row, row + v);
  const float lt = row[target];
  double sum = 0.0;
  for (int64_t j = 0; j < v; ++j) {
    row[j] = static_cast<float>(std::exp(static_cast<double>(row[j] - mx)));
    sum += row[j];
  }
  const float f = static_cast<float>(scale / sum);
  for (int64_t j = 0; j < v; ++j) row[j] *= f;
  row[target] -= scale;
  return mx + static_cast<float>(std::log(sum)) - lt;
}

}  // namespace nexus::cpu
