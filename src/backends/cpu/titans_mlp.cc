// Titans' deep memory (backends/api/memory.h, TitansMlpArgs), forward and backward: each
// (sequence, key/value head) walks its segments in order (forward) or in reverse (backward), a
// segment's unit queries and keys as matrices. The backward differentiates through the memory's
// own gradient step (the associative loss's gradient is a function of the weights, the keys and
// the values), so it carries silu's second derivative. The same code runs on our f32 GEMM
// ("gemm") or on plain loops ("scalar", the reference); the per-head gradients of the rates and of
// the initial weights are summed over the sequences in order, independent of the thread count.
#include <cmath>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/memory.h"
#include "backends/cpu/memory_impl.h"
#include "backends/cpu/titans_impl.h"

namespace nexus::cpu {
namespace {

// C[m x n] = (acc ? C : 0) + op(A)[m x k] op(B)[k x n], row-major, as gemm_f32.
template <bool kGemm>
void mm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
        const float* b, int64_t ldb, bool acc, float* c, int64_t ldc) {
  if constexpr (kGemm) {
    gemm_f32(ta, tb, m, n, k, a, lda, b, ldb, acc, c, ldc);
  } else {
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float s = acc ? c[i * ldc + j] : 0.0f;
        for (int64_t p = 0; p < k; ++p)
          s += (ta ? a[p * lda + i] : a[i * lda + p]) * (tb ? b[j * ldb + p] : b[p * ldb + j]);
        c[i * ldc + j] = s;
      }
  }
}

// silu(z) = z sigmoid(z) and its first and second derivatives.
struct Silu {
  float f, d1, d2;
};
inline Silu silu(float z) {
  const float s = 1.0f / (1.0f + std::exp(-z));
  return {z * s, s * (1.0f + z * (1.0f - s)), s * (1.0f - s) * (2.0f + z * (1.0f - 2.0f * s))};
}

// One head's geometry and its current weights W_j = W_j0 + D_j.
struct Head {
  int64_t d, h;
  std::vector<float> w1, w2;
  void set(const float* w10, const float* w20, const float* mem) {
    const int64_t n = d * h;
    w1.resize(static_cast<size_t>(n));
    w2.resize(static_cast<size_t>(n));
    for (int64_t e = 0; e < n; ++e) w1[e] = w10[e] + mem[e];
    for (int64_t e = 0; e < n; ++e) w2[e] = w20[e] + mem[n + e];
  }
};

// out [rows][d] = silu(x W1) W2 for x [rows][d]; z = x W1 and act = silu(z) [rows][h] kept.
template <bool G>
void mlp(const Head& w, const float* x, int64_t rows, float* z, float* act, float* out) {
  mm<G>(false, false, rows, w.h, w.d, x, w.d, w.w1.data(), w.h, false, z, w.h);
  for (int64_t e = 0; e < rows * w.h; ++e) act[e] = silu(z[e]).f;
  mm<G>(false, false, rows, w.d, w.h, act, w.h, w.w2.data(), w.d, false, out, w.d);
}

// A segment's write: the associative loss's gradients over its unit keys x [len][d] and values
// (row t at v + t * ldv), with c = titans_grad_scale(len). Keeps z, act, r = M(x) - v [len][d],
// da = c r W2^T and dz = da * silu'(z) [len][h]; g1 = x^T dz [d][h], g2 = c act^T r [h][d].
struct Write {
  std::vector<float> z, act, r, da, dz, g1, g2;
  template <bool G>
  void run(const Head& w, const float* x, const float* v, int64_t ldv, int64_t len) {
    const int64_t d = w.d, h = w.h;
    for (auto* b : {&z, &act, &da, &dz}) sized(*b, len * h);
    sized(r, len * d), sized(g1, d * h), sized(g2, h * d);
    mlp<G>(w, x, len, z.data(), act.data(), r.data());
    for (int64_t t = 0; t < len; ++t)
      for (int64_t c = 0; c < d; ++c) r[t * d + c] -= v[t * ldv + c];
    mm<G>(false, true, len, h, d, r.data(), d, w.w2.data(), d, false, da.data(), h);
    const float c = titans_grad_scale(len);
    for (int64_t e = 0; e < len * h; ++e) {
      da[e] *= c;
      dz[e] = da[e] * silu(z[e]).d1;
    }
    mm<G>(true, false, d, h, len, x, d, dz.data(), h, false, g1.data(), h);
    mm<G>(true, false, h, d, len, act.data(), h, r.data(), d, false, g2.data(), d);
    for (float& e : g2) e *= c;
  }
  GradClamp clamp() const {
    double sq = 0;
    for (const auto* m : {&g1, &g2})
      for (const float e : *m) sq += static_cast<double>(e) * e;
    return GradClamp(sq);
  }
};

template <bool G>
void forward_run(const TitansMlpArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, hd = a.hidden, group = a.heads / a.kv_heads;
  const int64_t n = d * hd, tf = titans_mlp_floats(d, hd);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    // Per-thread buffers (decode reads and writes a token at a time: no allocation once warm).
    thread_local std::vector<float> mem, x, xn, z, act;
    thread_local Head w;
    thread_local Write wr;
    const int64_t rows = a.segment * group;
    sized(mem, tf, true), sized(x, rows * d), sized(xn, rows), sized(z, rows * hd),
        sized(act, rows * hd);
    w.d = d, w.h = hd;
    float* st = a.state ? a.state + (s * a.kv_heads + g) * tf : nullptr;
    if (st) std::copy(st, st + tf, mem.begin());
    float *dl = mem.data(), *sm = dl + 2 * n;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * tf);
      w.set(a.w1 + g * n, a.w2 + g * n, dl);
      if (a.q) {
        thread_local std::vector<float> y;
        sized(y, rows * d);
        unit_rows(a.q, qw, i0, i1, g * group, (g + 1) * group, d, x.data(), xn.data());
        mlp<G>(w, x.data(), len * group, z.data(), act.data(), y.data());
        for (int64_t i = i0; i < i1; ++i)
          std::copy_n(y.data() + (i - i0) * group * d, group * d, a.y + i * qw + g * group * d);
      }
      if (!a.write) continue;
      unit_rows(a.k, kw, i0, i1, g, g + 1, d, x.data(), xn.data());
      wr.run<G>(w, x.data(), a.v + i0 * kw + g * d, kw, len);
      const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
      const float* grads[] = {wr.g1.data(), wr.g2.data()};
      const float step = theta * wr.clamp().k;
      for (int m = 0; m < 2; ++m)
        for (int64_t e = 0; e < n; ++e) {
          float& sv = sm[m * n + e];
          sv = eta * sv - step * grads[m][e];
          dl[m * n + e] = (1.0f - alpha) * dl[m * n + e] + sv;
        }
    }
    if (st) std::copy(mem.begin(), mem.end(), st);
  });
}

template <bool G>
void backward_run(const TitansMlpBackwardArgs& b, ThreadPool* pool) {
  const TitansMlpArgs& a = b.fwd;
  const int64_t d = a.head_dim, hd = a.hidden, group = a.heads / a.kv_heads;
  const int64_t n = d * hd, tf = titans_mlp_floats(d, hd);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  const int64_t heads = a.b * a.kv_heads;
  // Each (sequence, head)'s rate gradients and initial-weight gradients, summed in order below.
  std::vector<double> parts(static_cast<size_t>(heads * 3), 0.0);
  std::vector<float> w0_parts(static_cast<size_t>(heads * 2 * n), 0.0f);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    const int64_t rows = a.segment * group;
    // dm, ds: d/dD and d/dS after the segment ([D1 | D2], [S1 | S2]); gw: d/dW of the segment's
    // reads and write, which reaches both D (before the segment) and the initial weights.
    std::vector<float> dm(2 * n, 0.0f), ds(2 * n, 0.0f), dmo(2 * n), dg(2 * n), gw(2 * n);
    std::vector<float> x(rows * d), xn(rows), gk(rows * d), gr(rows * d), dy(rows * d);
    std::vector<float> gdz(rows * hd), gda(rows * hd), gz(rows * hd), ga(rows * hd);
    std::vector<float> zq(rows * hd), aq(rows * hd), yq(rows * d);
    Head w{d, hd, {}, {}};
    Write wr;
    double* part = parts.data() + (s * a.kv_heads + g) * 3;
    float* w0g = w0_parts.data() + (s * a.kv_heads + g) * 2 * n;
    const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
    float *gw1 = gw.data(), *gw2 = gw1 + n, *dg1 = dg.data(), *dg2 = dg1 + n;
    for (int64_t j = segs - 1; j >= 0; --j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      const float* mem = a.saved + ((s * segs + j) * a.kv_heads + g) * tf;
      w.set(a.w1 + g * n, a.w2 + g * n, mem);
      const float *w1 = w.w1.data(), *w2 = w.w2.data();
      unit_rows(a.k, kw, i0, i1, g, g + 1, d, x.data(), xn.data());
      wr.run<G>(w, x.data(), a.v + i0 * kw + g * d, kw, len);
      // Back through S_j = eta S_j - theta k G_j, D_j = (1 - alpha) D_j + S_j, then through the
      // clamp's factor k(|G|): dg = k dG' + G^ dk (G^ . dG'), dG' = d/d(k G) = dg / k.
      const float* grads[] = {wr.g1.data(), wr.g2.data()};
      const GradClamp cl = wr.clamp();
      for (int m = 0; m < 2; ++m)
        step_backward(mem + m * n, mem + (2 + m) * n, grads[m], cl.k, eta, theta, alpha, n,
                      dm.data() + m * n, ds.data() + m * n, dmo.data() + m * n, dg.data() + m * n,
                      part);
      if (cl.n > 0) {
        double dot = 0;
        for (int m = 0; m < 2; ++m)
          for (int64_t e = 0; e < n; ++e) dot += static_cast<double>(grads[m][e]) * dg[m * n + e];
        const float f = static_cast<float>(dot) * cl.dk / (cl.k * cl.n * cl.n);
        for (int m = 0; m < 2; ++m)
          for (int64_t e = 0; e < n; ++e) dg[m * n + e] += f * grads[m][e];
      }
      // Back through G1 = x^T dz: d/dx and d/d(dz).
      mm<G>(false, true, len, d, hd, wr.dz.data(), hd, dg1, hd, false, gk.data(), d);
      mm<G>(false, false, len, hd, d, x.data(), d, dg1, hd, false, gdz.data(), hd);
      // dz = da * silu'(z): d/dz from silu'', then d/d(da) (carrying da = c r W2^T's c).
      const float c = titans_grad_scale(len);
      for (int64_t e = 0; e < len * hd; ++e) {
        const Silu f = silu(wr.z[e]);
        gz[e] = gdz[e] * wr.da[e] * f.d2;
        gda[e] = c * gdz[e] * f.d1;
        gdz[e] = f.d1;  // silu'(z), kept for act's backward below
      }
      // da = c r W2^T and G2 = c act^T r (dg2 takes the c): d/dr, d/dW2, d/dact.
      for (int64_t e = 0; e < n; ++e) dg2[e] *= c;
      mm<G>(false, false, len, d, hd, gda.data(), hd, w2, d, false, gr.data(), d);
      mm<G>(false, false, len, d, hd, wr.act.data(), hd, dg2, d, true, gr.data(), d);
      mm<G>(true, false, hd, d, len, gda.data(), hd, wr.r.data(), d, false, gw2, d);
      mm<G>(false, true, len, hd, d, wr.r.data(), d, dg2, d, false, ga.data(), hd);
      // r = act W2 - v.
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) b.dv[(i0 + t) * kw + g * d + c] = -gr[t * d + c];
      mm<G>(true, false, hd, d, len, wr.act.data(), hd, gr.data(), d, true, gw2, d);
      mm<G>(false, true, len, hd, d, gr.data(), d, w2, d, true, ga.data(), hd);
      // act = silu(z), z = x W1.
      for (int64_t e = 0; e < len * hd; ++e) gz[e] += ga[e] * gdz[e];
      mm<G>(false, true, len, d, hd, gz.data(), hd, w1, hd, true, gk.data(), d);
      mm<G>(true, false, d, hd, len, x.data(), d, gz.data(), hd, false, gw1, hd);
      for (int64_t t = 0; t < len; ++t)
        unit_backward(x.data() + t * d, xn[t], gk.data() + t * d, d, b.dk + (i0 + t) * kw + g * d);
      // Reads: y = silu(q^ W1) W2.
      const int64_t rq = len * group;
      unit_rows(a.q, qw, i0, i1, g * group, (g + 1) * group, d, x.data(), xn.data());
      mlp<G>(w, x.data(), rq, zq.data(), aq.data(), yq.data());
      for (int64_t i = i0; i < i1; ++i)
        std::copy_n(b.dy + i * qw + g * group * d, group * d, dy.data() + (i - i0) * group * d);
      mm<G>(true, false, hd, d, rq, aq.data(), hd, dy.data(), d, true, gw2, d);
      mm<G>(false, true, rq, hd, d, dy.data(), d, w2, d, false, ga.data(), hd);
      for (int64_t e = 0; e < rq * hd; ++e) ga[e] *= silu(zq[e]).d1;
      mm<G>(true, false, d, hd, rq, x.data(), d, ga.data(), hd, true, gw1, hd);
      mm<G>(false, true, rq, d, hd, ga.data(), hd, w1, hd, false, gk.data(), d);
      for (int64_t row = 0; row < rq; ++row) {
        const int64_t i = i0 + row / group, h = g * group + row % group;
        unit_backward(x.data() + row * d, xn[row], gk.data() + row * d, d, b.dq + i * qw + h * d);
      }
      // W = W0 + D: the segment's d/dW reaches D before it and the initial weights alike.
      for (int64_t e = 0; e < 2 * n; ++e) {
        dmo[e] += gw[e];
        w0g[e] += gw[e];
      }
      dm.swap(dmo);
    }
  });
  add_rate_grads(parts, a.b, a.kv_heads, b.deta, b.dtheta, b.dalpha);
  for (int64_t s = 0; s < a.b; ++s)
    for (int64_t g = 0; g < a.kv_heads; ++g) {
      const float* p = w0_parts.data() + (s * a.kv_heads + g) * 2 * n;
      for (int64_t e = 0; e < n; ++e) b.dw1[g * n + e] += p[e];
      for (int64_t e = 0; e < n; ++e) b.dw2[g * n + e] += p[n + e];
    }
}

const KernelVariant<TitansMlpArgs> kForward[] = {{"gemm", gemm_f32_active, forward_run<true>},
                                                 {"scalar", always_available, forward_run<false>}};
const KernelVariant<TitansMlpBackwardArgs> kBackward[] = {
    {"gemm", gemm_f32_active, backward_run<true>},
    {"scalar", always_available, backward_run<false>}};

}  // namespace

KernelVariants<TitansMlpArgs> titans_mlp_kernels() { return kForward; }
KernelVariants<TitansMlpBackwardArgs> titans_mlp_backward_kernels() { return kBackward; }

}  // namespace nexus::cpu
