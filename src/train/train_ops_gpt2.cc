// Training kernels gpt2 adds to the llama set (see train_ops.h): LayerNorm with bias, tanh GELU,
// bias add and learned positions. Plain loops; row reductions of the norm in double. Also the
// norm dispatch by architecture (LayerNorm for gpt2, RMSNorm for llama).
#include <cmath>

#include "train/train_ops.h"

namespace nexus::train {

void layernorm_forward(float* out, float* mean, float* rstd, const float* x, const float* w,
                       const float* b, int64_t n, int64_t c, float eps) {
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    double m = 0.0;
    for (int64_t j = 0; j < c; ++j) m += xi[j];
    m /= c;
    double var = 0.0;
    for (int64_t j = 0; j < c; ++j) var += (xi[j] - m) * (xi[j] - m);
    const double r = 1.0 / std::sqrt(var / c + eps);
    mean[i] = static_cast<float>(m);
    rstd[i] = static_cast<float>(r);
    float* oi = out + i * c;
    for (int64_t j = 0; j < c; ++j) oi[j] = static_cast<float>((xi[j] - m) * r) * w[j] + b[j];
  }
}

void layernorm_backward(float* dx, float* dw, float* db, const float* dout, const float* x,
                        const float* w, const float* mean, const float* rstd, int64_t n,
                        int64_t c) {
  // y_j = xhat_j w_j + b_j with xhat = (x - mean) r; with g_j = dy_j w_j,
  // dx_j = r (g_j - mean(g) - xhat_j mean(g xhat)).
  for (int64_t i = 0; i < n; ++i) {
    const float* xi = x + i * c;
    const float* gi = dout + i * c;
    const float m = mean[i], r = rstd[i];
    double sg = 0.0, sgx = 0.0;
    for (int64_t j = 0; j < c; ++j) {
      const double g = static_cast<double>(gi[j]) * w[j];
      sg += g;
      sgx += g * ((xi[j] - m) * r);
    }
    const float mg = static_cast<float>(sg / c), mgx = static_cast<float>(sgx / c);
    float* di = dx + i * c;
    for (int64_t j = 0; j < c; ++j) {
      const float xhat = (xi[j] - m) * r;
      di[j] += r * (gi[j] * w[j] - mg - xhat * mgx);
      dw[j] += gi[j] * xhat;
      db[j] += gi[j];
    }
  }
}

namespace {
constexpr float kGeluC = 0.7978845608028654f;  // sqrt(2 / pi)
constexpr float kGeluA = 0.044715f;
}  // namespace

void gelu_forward(float* out, const float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    out[i] = 0.5f * v * (1.0f + std::tanh(kGeluC * (v + kGeluA * v * v * v)));
  }
}

void gelu_backward(float* dx, const float* dout, const float* x, int64_t n) {
  // gelu(v) = v/2 (1 + tanh z), z = C (v + A v^3):
  // gelu'(v) = (1 + tanh z) / 2 + v/2 (1 - tanh^2 z) C (1 + 3 A v^2).
  for (int64_t i = 0; i < n; ++i) {
    const float v = x[i];
    const float th = std::tanh(kGeluC * (v + kGeluA * v * v * v));
    const float d =
        0.5f * (1.0f + th) + 0.5f * v * (1.0f - th * th) * kGeluC * (1.0f + 3.0f * kGeluA * v * v);
    dx[i] += dout[i] * d;
  }
}

void bias_forward(float* out, const float* b, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) out[i * c + j] += b[j];
}

void bias_backward(float* db, const float* dout, int64_t n, int64_t c) {
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < c; ++j) db[j] += dout[i * c + j];
}

void positions_forward(float* out, const float* table, int64_t n, int64_t t, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    const float* p = table + (r % t) * c;
    for (int64_t j = 0; j < c; ++j) out[r * c + j] += p[j];
  }
}

void positions_backward(float* dtable, const float* dout, int64_t n, int64_t t, int64_t c) {
  for (int64_t r = 0; r < n; ++r) {
    float* p = dtable + (r % t) * c;
    for (int64_t j = 0; j < c; ++j) p[j] += dout[r * c + j];
  }
}

void norm_forward(const ModelConfig& c, float* out, float* mean, float* rstd, const float* x,
                  const float* w, const float* b, int64_t n, ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_forward(out, mean, rstd, x, w, b, n, c.dim, c.norm_eps);
  else
    rmsnorm_forward(out, rstd, x, w, n, c.dim, c.norm_eps, pool);
}

void norm_backward(const ModelConfig& c, float* dx, float* dw, float* db, const float* dout,
                   const float* x, const float* w, const float* mean, const float* rstd,
                   int64_t n, ThreadPool* pool) {
  if (c.arch == Arch::kGpt2)
    layernorm_backward(dx, dw, db, dout, x, w, mean, rstd, n, c.dim);
  else
    rmsnorm_backward(dx, dw, dout, x, w, rstd, n, c.dim, pool);
}

}  // namespace nexus::train
