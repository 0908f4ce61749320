// Titans' linear long-term memory, the reference kernels: every (sequence, key/value head) walks
// its segments in order (forward) or in reverse (backward) with M and S as head_dim x head_dim
// matrices; the per-head gradients of eta, theta and alpha are summed over the sequences in order
// after the parallel part, so results do not depend on the thread count.
#include <cmath>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/memory.h"
#include "backends/cpu/memory_impl.h"
#include "backends/cpu/titans_impl.h"

namespace nexus::cpu {
namespace {

// G = (2 / len) K^T (K M - V) over a segment's unit keys kh [len][rows] and values, M
// [rows][d]; R = K M - V kept.
void gradient(const float* kh, const float* const* v, int64_t len, const float* m, int64_t rows,
              int64_t d, float* r, float* g) {
  const float scale = titans_grad_scale(len);
  std::fill(g, g + rows * d, 0.0f);
  for (int64_t t = 0; t < len; ++t) {
    const float* k = kh + t * rows;
    float* rt = r + t * d;
    for (int64_t c = 0; c < d; ++c) rt[c] = -v[t][c];
    for (int64_t a = 0; a < rows; ++a)
      for (int64_t c = 0; c < d; ++c) rt[c] += k[a] * m[a * d + c];
    for (int64_t a = 0; a < rows; ++a)
      for (int64_t c = 0; c < d; ++c) g[a * d + c] += scale * k[a] * rt[c];
  }
}

void titans_run(const TitansArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, tf = titans_floats(d, a.slots);
  const int64_t rows = memory_rows(d, a.slots), md = rows * d;
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    // Per-thread buffers, sized again each call (no allocation once warm: decode reads and
    // writes the memory a token at a time).
    thread_local std::vector<float> mem, u, up, kh, r, grad;
    thread_local std::vector<const float*> vrows;
    sized(mem, tf, true), sized(u, d), sized(up, rows), sized(kh, a.segment * rows),
        sized(r, a.segment * d), sized(grad, md);
    vrows.resize(static_cast<size_t>(a.segment));
    float* st = a.state ? a.state + (s * a.kv_heads + g) * tf : nullptr;
    if (st) std::copy(st, st + tf, mem.begin());
    float *m = mem.data(), *sm = m + md;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * tf);
      for (int64_t i = i0; a.q && i < i1; ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          unit(a.q + i * qw + h * d, d, u.data());
          const float* ue = project_slots(a.proj, rows, g, u.data(), d, up.data());
          float* y = a.y + i * qw + h * d;
          std::fill(y, y + d, 0.0f);
          for (int64_t x = 0; x < rows; ++x)
            for (int64_t c = 0; c < d; ++c) y[c] += ue[x] * m[x * d + c];
        }
      if (!a.write) continue;
      const int64_t len = i1 - i0;
      for (int64_t t = 0; t < len; ++t) {
        unit(a.k + (i0 + t) * kw + g * d, d, u.data());
        const float* ke = project_slots(a.proj, rows, g, u.data(), d, up.data());
        std::copy(ke, ke + rows, kh.data() + t * rows);
        vrows[t] = a.v + (i0 + t) * kw + g * d;
      }
      gradient(kh.data(), vrows.data(), len, m, rows, d, r.data(), grad.data());
      const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
      for (int64_t x = 0; x < md; ++x) {
        sm[x] = eta * sm[x] - theta * grad[x];
        m[x] = (1.0f - alpha) * m[x] + sm[x];
      }
    }
    if (st) std::copy(mem.begin(), mem.end(), st);
  });
}

void titans_backward_run(const TitansBackwardArgs& b, ThreadPool* pool) {
  const TitansArgs& a = b.fwd;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, tf = titans_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  // Each (sequence, head)'s d eta, d theta, d alpha, summed in order below.
  std::vector<double> parts(static_cast<size_t>(a.b * a.kv_heads * 3), 0.0);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    std::vector<float> dm(d * d, 0.0f), ds(d * d, 0.0f), dmo(d * d), dg(d * d);
    std::vector<float> kh(a.segment * d), kn(a.segment), r(a.segment * d), grad(d * d), dr(d),
        dkh(d), u(d), du(d);
    std::vector<const float*> vrows(static_cast<size_t>(a.segment));
    double* part = parts.data() + (s * a.kv_heads + g) * 3;
    const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
    for (int64_t j = segs - 1; j >= 0; --j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      const float* m = a.saved + ((s * segs + j) * a.kv_heads + g) * tf;
      const float* sm = m + d * d;
      for (int64_t t = 0; t < len; ++t) {
        kn[t] = unit(a.k + (i0 + t) * kw + g * d, d, kh.data() + t * d);
        vrows[t] = a.v + (i0 + t) * kw + g * d;
      }
      gradient(kh.data(), vrows.data(), len, m, d, d, r.data(), grad.data());
      // M_new = (1 - alpha) M + S_new, S_new = eta S - theta G.
      // (gradient() keeps G with its scale.)
      step_backward(m, sm, grad.data(), 1.0f, eta, theta, alpha, d * d, dm.data(), ds.data(),
                    dmo.data(), dg.data(), part);
      // G = c sum_t k_t^T r_t, r_t = k_t M - v_t, c = 2 / len.
      const float c2 = titans_grad_scale(len);
      for (int64_t t = 0; t < len; ++t) {
        const float* k = kh.data() + t * d;
        const float* rt = r.data() + t * d;
        // dr = c k dG (row), dk = c dG r^T + M dr
        for (int64_t c = 0; c < d; ++c) dr[c] = 0.0f;
        for (int64_t x = 0; x < d; ++x) {
          float acc = 0;
          for (int64_t c = 0; c < d; ++c) {
            dr[c] += c2 * k[x] * dg[x * d + c];
            acc += c2 * dg[x * d + c] * rt[c];
          }
          dkh[x] = acc;
        }
        for (int64_t x = 0; x < d; ++x) {
          float acc = 0;
          for (int64_t c = 0; c < d; ++c) {
            acc += m[x * d + c] * dr[c];
            dmo[x * d + c] += k[x] * dr[c];
          }
          dkh[x] += acc;
        }
        float* dv = b.dv + (i0 + t) * kw + g * d;
        for (int64_t c = 0; c < d; ++c) dv[c] = -dr[c];
        unit_backward(k, kn[t], dkh.data(), d, b.dk + (i0 + t) * kw + g * d);
      }
      // Reads: y = q^ M.
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float n = unit(a.q + i * qw + h * d, d, u.data());
          const float* dy = b.dy + i * qw + h * d;
          for (int64_t x = 0; x < d; ++x) {
            float acc = 0;
            for (int64_t c = 0; c < d; ++c) {
              acc += m[x * d + c] * dy[c];
              dmo[x * d + c] += u[x] * dy[c];
            }
            du[x] = acc;
          }
          unit_backward(u.data(), n, du.data(), d, b.dq + i * qw + h * d);
        }
      dm.swap(dmo);
    }
  });
  add_rate_grads(parts, a.b, a.kv_heads, b.deta, b.dtheta, b.dalpha);
}

// The "gemm" variants: a segment's unit queries and keys as matrices, the reads Q M, the
// residuals K M - V, the gradient K^T R and their backward's products on our f32 GEMM.

void titans_gemm_run(const TitansArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, tf = titans_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    const int64_t rows = a.segment * group;
    // Per-thread buffers, sized again each call (no allocation once warm: decode reads and
    // writes the memory a token at a time).
    thread_local std::vector<float> mem, x, y, n, grad;
    sized(mem, tf, true), sized(x, rows * d), sized(y, rows * d), sized(n, rows),
        sized(grad, d * d);
    float* st = a.state ? a.state + (s * a.kv_heads + g) * tf : nullptr;
    if (st) std::copy(st, st + tf, mem.begin());
    float *m = mem.data(), *sm = m + d * d;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * tf);
      if (a.q) {
        unit_rows(a.q, qw, i0, i1, g * group, (g + 1) * group, d, x.data(), n.data());
        gemm_f32(false, false, len * group, d, d, x.data(), d, m, d, false, y.data(), d);
        for (int64_t i = i0; i < i1; ++i)
          std::copy_n(y.data() + (i - i0) * group * d, group * d, a.y + i * qw + g * group * d);
      }
      if (!a.write) continue;
      unit_rows(a.k, kw, i0, i1, g, g + 1, d, x.data(), n.data());
      gemm_f32(false, false, len, d, d, x.data(), d, m, d, false, y.data(), d);  // K M
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) y[t * d + c] -= a.v[(i0 + t) * kw + g * d + c];
      gemm_f32(true, false, d, d, len, x.data(), d, y.data(), d, false, grad.data(), d);  // K^T R
      const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
      for (int64_t e = 0; e < d * d; ++e) {
        sm[e] = eta * sm[e] - theta * titans_grad_scale(len) * grad[e];
        m[e] = (1.0f - alpha) * m[e] + sm[e];
      }
    }
    if (st) std::copy(mem.begin(), mem.end(), st);
  });
}

void titans_backward_gemm_run(const TitansBackwardArgs& b, ThreadPool* pool) {
  const TitansArgs& a = b.fwd;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, tf = titans_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  std::vector<double> parts(static_cast<size_t>(a.b * a.kv_heads * 3), 0.0);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    const int64_t rows = a.segment * group;
    std::vector<float> dm(d * d, 0.0f), ds(d * d, 0.0f), dmo(d * d), dg(d * d), grad(d * d);
    std::vector<float> x(rows * d), n(rows), r(rows * d), dr(rows * d), dx(rows * d);
    double* part = parts.data() + (s * a.kv_heads + g) * 3;
    const float eta = a.eta[g], theta = a.theta[g], alpha = a.alpha[g];
    for (int64_t j = segs - 1; j >= 0; --j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      const float* m = a.saved + ((s * segs + j) * a.kv_heads + g) * tf;
      const float* sm = m + d * d;
      unit_rows(a.k, kw, i0, i1, g, g + 1, d, x.data(), n.data());
      gemm_f32(false, false, len, d, d, x.data(), d, m, d, false, r.data(), d);
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) r[t * d + c] -= a.v[(i0 + t) * kw + g * d + c];
      gemm_f32(true, false, d, d, len, x.data(), d, r.data(), d, false, grad.data(), d);
      // grad is K^T R: G is 2 / len times it, and dg carries the factor into dR = K dg and
      // R dg^T.
      step_backward(m, sm, grad.data(), titans_grad_scale(len), eta, theta, alpha, d * d, dm.data(),
                    ds.data(), dmo.data(), dg.data(), part);
      gemm_f32(false, false, len, d, d, x.data(), d, dg.data(), d, false, dr.data(), d);  // dR
      gemm_f32(false, true, len, d, d, r.data(), d, dg.data(), d, false, dx.data(), d);   // R dG^T
      gemm_f32(false, true, len, d, d, dr.data(), d, m, d, true, dx.data(), d);          // + dR M^T
      gemm_f32(true, false, d, d, len, x.data(), d, dr.data(), d, true, dmo.data(), d);  // K^T dR
      for (int64_t t = 0; t < len; ++t) {
        float* dv = b.dv + (i0 + t) * kw + g * d;
        for (int64_t c = 0; c < d; ++c) dv[c] = -dr[t * d + c];
        unit_backward(x.data() + t * d, n[t], dx.data() + t * d, d, b.dk + (i0 + t) * kw + g * d);
      }
      // Reads: Y = Q M.
      const int64_t rq = len * group;
      unit_rows(a.q, qw, i0, i1, g * group, (g + 1) * group, d, x.data(), n.data());
      for (int64_t i = i0; i < i1; ++i)
        std::copy_n(b.dy + i * qw + g * group * d, group * d, r.data() + (i - i0) * group * d);
      gemm_f32(false, true, rq, d, d, r.data(), d, m, d, false, dx.data(), d);         // dY M^T
      gemm_f32(true, false, d, d, rq, x.data(), d, r.data(), d, true, dmo.data(), d);  // Q^T dY
      for (int64_t row = 0; row < rq; ++row) {
        const int64_t i = i0 + row / group, h = g * group + row % group;
        unit_backward(x.data() + row * d, n[row], dx.data() + row * d, d, b.dq + i * qw + h * d);
      }
      dm.swap(dmo);
    }
  });
  add_rate_grads(parts, a.b, a.kv_heads, b.deta, b.dtheta, b.dalpha);
}

// Slot reduction runs on the reference (a reduced memory is for inference, mostly a token a time).
bool full_slots(const TitansArgs& a) { return a.proj == nullptr; }
const KernelVariant<TitansArgs> kTitans[] = {{"gemm", gemm_f32_active, titans_gemm_run, full_slots},
                                             {"scalar", always_available, titans_run}};
const KernelVariant<TitansBackwardArgs> kTitansBackward[] = {
    {"gemm", gemm_f32_active, titans_backward_gemm_run},
    {"scalar", always_available, titans_backward_run}};

}  // namespace

KernelVariants<TitansArgs> titans_kernels() { return kTitans; }
KernelVariants<TitansBackwardArgs> titans_backward_kernels() { return kTitansBackward; }

}  // namespace nexus::cpu
