// Training kernels (see train_ops.h). GEMMs go to OpenBLAS; the rest are plain loops that
// accumulate in f32 except where noted (row reductions of the norms and softmaxes use double).
#include "train/train_ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>

#include "core/thread_pool.h"

namespace nexus::train {

void matmul_forward(float* out, const float* inp, const float* w, int64_t n, int64_t c,
                    int64_t oc) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(oc),
              static_cast<int>(c), 1.0f, inp, static_cast<int>(c), w, static_cast<int>(c), 0.0f,
              out, static_cast<int>(oc));
}

void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int64_t n, int64_t c, int64_t oc) {
  const int ni = static_cast<int>(n), ci = static_cast<int>(c), oci = static_cast<int>(oc);
  // dinp[n, c] += dout[n, oc] w[oc, c]
  if (dinp)
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, ni, ci, oci, 1.0f, dout, oci, w, ci,
                1.0f, dinp, ci);
  // dw[oc, c] += dout^T[oc, n] inp[n, c]
  if (dw)
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oci, ci, ni, 1.0f, dout, oci, inp, ci,
                1.0f, dw, ci);
}

void rmsnorm_forward(float* out, float* rstd, const float* x, const float* w, int64_t n, int64_t c,
                     float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    double ss = 0.0;
    for (int64_t j = 0; j < c; ++j) ss += static_cast<double>(xi[j]) * xi[j];
    const float r = static_cast<float>(1.0 / std::sqrt(ss / c + eps));
    rstd[i] = r;
    float* oi = out + i * c;
    for (int64_t j = 0; j < c; ++j) oi[j] = xi[j] * r * w[j];
  }
}

void rmsnorm_backward(float* dx, float* dw, const float* dout, const float* x, const float* w,
                      const float* rstd, int64_t n, int64_t c) {
  // y_j = x_j r w_j with r = (mean(x^2) + eps)^-1/2, so
  // dx_j = r w_j dy_j - r^3 x_j / c * sum_k dy_k w_k x_k.
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    const float* gi = dout + i * c;
    const float r = rstd[i];
    double dot = 0.0;
    for (int64_t j = 0; j < c; ++j) dot += static_cast<double>(gi[j]) * w[j] * xi[j];
    const float k = static_cast<float>(dot * r * r * r / c);
    float* di = dx + i * c;
    for (int64_t j = 0; j < c; ++j) {
      di[j] += r * w[j] * gi[j] - k * xi[j];
      dw[j] += gi[j] * xi[j] * r;
    }
  }
}

void rope_table(float* cs, int64_t t, int64_t rope_dim, float theta) {
  const int64_t half = rope_dim / 2;
  for (int64_t p = 0; p < t; ++p) {
    for (int64_t i = 0; i < half; ++i) {
      const double freq = std::pow(static_cast<double>(theta), -2.0 * i / rope_dim);
      cs[(p * half + i) * 2] = static_cast<float>(std::cos(p * freq));
      cs[(p * half + i) * 2 + 1] = static_cast<float>(std::sin(p * freq));
    }
  }
}

void rope_rotate(float* x, int64_t n, int64_t t, int64_t n_heads, int64_t head_dim,
                 int64_t rope_dim, RopeStyle style, const float* cs, bool inverse) {
  const int64_t half = rope_dim / 2;
  const float sign = inverse ? -1.0f : 1.0f;
  for (int64_t r = 0; r < n; ++r) {
    const float* c = cs + (r % t) * half * 2;
    for (int64_t h = 0; h < n_heads; ++h) {
      float* v = x + (r * n_heads + h) * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const int64_t a = style == RopeStyle::kNeox ? i : 2 * i;
        const int64_t b = style == RopeStyle::kNeox ? i + half : 2 * i + 1;
        const float x0 = v[a], x1 = v[b], co = c[2 * i], si = sign * c[2 * i + 1];
        v[a] = x0 * co - x1 * si;
        v[b] = x0 * si + x1 * co;
      }
    }
  }
}

namespace {

// Calls fn(item, thread) for item in [0, n), split into contiguous chunks over the pool's threads.
template <typename Fn>
void for_items(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (!pool || pool->size() == 1 || n < 2) {
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
    return;
  }
  pool->run([&](int thread, int n_threads) {
    const int64_t chunk = (n + n_threads - 1) / n_threads;
    const int64_t end = std::min(n, (thread + 1) * chunk);
    for (int64_t i = thread * chunk; i < end; ++i) fn(i, thread);
  });
}

}  // namespace

void attention_forward(float* out, float* att, const float* q, const float* k, const float* v,
                       const AttnShape& s, ThreadPool* pool) {
  const int64_t hd = s.head_dim, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for_items(pool, s.b * s.n_heads, [&](int64_t item, int) {
    const int64_t b = item / s.n_heads, h = item % s.n_heads, kh = h / group;
    for (int64_t i = 0; i < s.t; ++i) {
      const float* qi = q + (b * s.t + i) * qw + h * hd;
      float* p = att + ((b * s.n_heads + h) * s.t + i) * s.t;
      float mx = -INFINITY;
      for (int64_t j = 0; j <= i; ++j) {
        const float* kj = k + (b * s.t + j) * kvw + kh * hd;
        float d = 0.0f;
        for (int64_t e = 0; e < hd; ++e) d += qi[e] * kj[e];
        p[j] = d * scale;
        mx = std::max(mx, p[j]);
      }
      double sum = 0.0;
      for (int64_t j = 0; j <= i; ++j) {
        p[j] = std::exp(p[j] - mx);
        sum += p[j];
      }
      const float inv = static_cast<float>(1.0 / sum);
      for (int64_t j = 0; j <= i; ++j) p[j] *= inv;
      for (int64_t j = i + 1; j < s.t; ++j) p[j] = 0.0f;
      float* oi = out + (b * s.t + i) * qw + h * hd;
      std::fill(oi, oi + hd, 0.0f);
      for (int64_t j = 0; j <= i; ++j) {
        const float* vj = v + (b * s.t + j) * kvw + kh * hd;
        for (int64_t e = 0; e < hd; ++e) oi[e] += p[j] * vj[e];
      }
    }
  });
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* att,
                        const float* q, const float* k, const float* v, const AttnShape& s,
                        float* scratch, ThreadPool* pool) {
  const int64_t hd = s.head_dim, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
  const int64_t group = s.n_heads / s.n_kv_heads;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  for_items(pool, s.b * s.n_kv_heads, [&](int64_t item, int thread) {
    const int64_t b = item / s.n_kv_heads, kh = item % s.n_kv_heads;
    float* dp = scratch + thread * s.t;
    for (int64_t h = kh * group; h < (kh + 1) * group; ++h) {
      for (int64_t i = 0; i < s.t; ++i) {
        const size_t qo = (b * s.t + i) * qw + h * hd;
        const float* p = att + ((b * s.n_heads + h) * s.t + i) * s.t;
        const float* go = dout + qo;
        // dp_j = dout . v_j, dv_j += p_j dout; then the softmax backward
        // ds_j = p_j (dp_j - sum_k p_k dp_k), and the scaled score backward into q and k.
        double pdp = 0.0;
        for (int64_t j = 0; j <= i; ++j) {
          const size_t ko = (b * s.t + j) * kvw + kh * hd;
          float d = 0.0f;
          for (int64_t e = 0; e < hd; ++e) {
            d += go[e] * v[ko + e];
            dv[ko + e] += p[j] * go[e];
          }
          dp[j] = d;
          pdp += static_cast<double>(p[j]) * d;
        }
        for (int64_t j = 0; j <= i; ++j) {
          const size_t ko = (b * s.t + j) * kvw + kh * hd;
          const float ds = p[j] * (dp[j] - static_cast<float>(pdp)) * scale;
          for (int64_t e = 0; e < hd; ++e) {
            dq[qo + e] += ds * k[ko + e];
            dk[ko + e] += ds * q[qo + e];
          }
        }
      }
    }
  });
}

void swiglu_forward(float* out, const float* g, const float* u, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

void swiglu_backward(float* dg, float* du, const float* dout, const float* g, const float* u,
                     int64_t n) {
  // silu(g) = g s with s = sigmoid(g); silu'(g) = s (1 + g (1 - s)).
  for (int64_t i = 0; i < n; ++i) {
    const float sg = 1.0f / (1.0f + std::exp(-g[i]));
    dg[i] += dout[i] * u[i] * sg * (1.0f + g[i] * (1.0f - sg));
    du[i] += dout[i] * g[i] * sg;
  }
}

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t n,
                       int64_t c) {
  for (int64_t i = 0; i < n; ++i) std::copy_n(table + tokens[i] * c, c, out + i * c);
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t n,
                        int64_t c) {
  for (int64_t i = 0; i < n; ++i) {
    float* row = dtable + tokens[i] * c;
    const float* g = dout + i * c;
    for (int64_t j = 0; j < c; ++j) row[j] += g[j];
  }
}

float cross_entropy_forward(float* lse, const float* logits, const int32_t* targets, int64_t n,
                            int64_t v, int64_t* count) {
  double total = 0.0;
  int64_t cnt = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float* li = logits + i * v;
    const float mx = *std::max_element(li, li + v);
    double sum = 0.0;
    for (int64_t j = 0; j < v; ++j) sum += std::exp(static_cast<double>(li[j] - mx));
    lse[i] = mx + static_cast<float>(std::log(sum));
    if (targets[i] < 0) continue;
    total += static_cast<double>(lse[i]) - li[targets[i]];
    ++cnt;
  }
  *count = cnt;
  return cnt ? static_cast<float>(total / cnt) : 0.0f;
}

void cross_entropy_backward(float* logits, const float* lse, const int32_t* targets, int64_t n,
                            int64_t v, int64_t count) {
  const float inv = count ? 1.0f / static_cast<float>(count) : 0.0f;
  for (int64_t i = 0; i < n; ++i) {
    float* li = logits + i * v;
    if (targets[i] < 0) {
      std::fill(li, li + v, 0.0f);
      continue;
    }
    for (int64_t j = 0; j < v; ++j) li[j] = std::exp(li[j] - lse[i]) * inv;
    li[targets[i]] -= inv;
  }
}

}  // namespace nexus::train
