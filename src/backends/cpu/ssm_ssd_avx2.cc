// The chunked SSD scan with its products on the f32 GEMM (gemm_f32.h), for one decay per head.
// ssm_impl.h's chunked form multiplies head by head in a 4 x 16 tile; here a unit is a block of a
// group's heads, whose products over a chunk of L tokens are single GEMMs with a shared operand
// (Dao and Gu, "Transformers are SSMs", section 6, in the state-passing order):
//   y = d x + diag(exp(c)) C S                  one [L x N] x [N x heads P] product,
//     + (G o exp(c_i - c_j) dt_j, j <= i) X     per head, [L x L] x [L x P], G = C B^T per group;
//   S = exp(c_L) S + B^T (diag(exp(c_L - c) dt) X)   one [N x L] x [L x heads P] product,
// with c the chunk's cumulative dt a. The block's state [N][heads P] stays in L2 from chunk to
// chunk; G and c are computed for a window of chunks first, in parallel. Every product is a
// gemm_f32 call on one thread inside a unit, so the bits do not depend on the threads.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "backends/cpu/exp_avx2.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/ssm.h"
#include "nexus/core/thread_pool.h"

namespace nexus::cpu {
namespace {

constexpr int64_t kL = 64;           // tokens per chunk, as ssm_impl.h's form
constexpr int64_t kWindowChunks = 16;  // chunks whose G and decays are computed at once (all seqs)
constexpr int64_t kHeadsPerUnit = 4;  // heads of one unit in phases 1 and 3
constexpr int64_t kSub = 16;          // rows of a block of the decay matrix
constexpr int64_t kTriRows = 24;      // rows of one product with it (both tiles' heights divide it)

template <typename Fn>
void split(ThreadPool* pool, int64_t n, const Fn& fn) {
  if (pool == nullptr || pool->size() == 1 || n < 2) {
    for (int64_t i = 0; i < n; ++i) fn(i);
    return;
  }
  pool->parallel_for(n, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) fn(i);
  });
}

void exp_row(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, avx2::exp_clamped(_mm256_loadu_ps(x + i)));
  for (; i < n; ++i) x[i] = std::exp(x[i]);
}

// dst[j][i] = src[i][j] for an [rows x cols] src, in 16 x 16 blocks (both sides strided).
void transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
               int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16)
      for (int64_t j = j0; j < std::min(cols, j0 + 16); ++j)
        for (int64_t i = i0; i < std::min(rows, i0 + 16); ++i) dst[j * ldd + i] = src[i * lds + j];
}

struct Window {
  const SsmScanArgs& a;
  int64_t H, P, N, HP, t0, chunks;  // chunks [t0 / kL, t0 / kL + chunks) of every sequence
  float* cum;                       // per (seq, chunk, head): cumulative dt a [kL]
  float* gmat;                      // per (seq, chunk, group): C B^T [kL][kL]
  int64_t len(int64_t c) const { return std::min(kL, a.t - t0 - c * kL); }
  int64_t row(int64_t s, int64_t c) const { return s * a.t + t0 + c * kL; }
  float* cum_of(int64_t s, int64_t c, int64_t h) const {
    return cum + ((s * chunks + c) * H + h) * kL;
  }
  float* gmat_of(int64_t s, int64_t c, int64_t g) const {
    return gmat + ((s * chunks + c) * a.groups + g) * kL * kL;
  }
};

// The window's cumulative decays and G of one (seq, chunk).
void prepare(const Window& w, int64_t s, int64_t c) {
  const SsmScanArgs& a = w.a;
  const int64_t n = w.len(c), r0 = w.row(s, c);
  for (int64_t h = 0; h < w.H; ++h) {
    float* cum = w.cum_of(s, c, h);
    float acc = 0.0f;
    for (int64_t i = 0; i < n; ++i) cum[i] = acc += a.dt[(r0 + i) * a.ld_dt + h] * a.a[h];
  }
  for (int64_t g = 0; g < a.groups; ++g) {
    const float* B = a.B + r0 * a.ld_bc + g * w.N;
    const float* C = a.C + r0 * a.ld_bc + g * w.N;
    gemm_f32(false, true, n, n, w.N, C, a.ld_bc, B, a.ld_bc, false, w.gmat_of(s, c, g), kL);
  }
}

// Scratch of one unit: Z = C S and the block's scaled inputs [kL][cols], one head's M [kL][kL].
struct Scratch {
  std::vector<float> z, xw, m;
};

// One chunk of heads [h0, h1) of sequence s (group g): outputs written, the block's state st
// ([N][cols]) carried past the chunk.
void chunk(const Window& w, int64_t s, int64_t c, int64_t g, int64_t h0, int64_t h1, float* st,
           Scratch& sc) {
  const SsmScanArgs& a = w.a;
  const int64_t n = w.len(c), r0 = w.row(s, c), P = w.P, cols = (h1 - h0) * P;
  const float* B = a.B + r0 * a.ld_bc + g * w.N;
  const float* C = a.C + r0 * a.ld_bc + g * w.N;
  const float* gm = w.gmat_of(s, c, g);
  float* z = sc.z.data();
  float* xw = sc.xw.data();
  float* m = sc.m.data();
  gemm_f32(false, false, n, cols, w.N, C, a.ld_bc, st, cols, false, z, cols);
  float e[kL], dt[kL], ur[kL], vc[kL];
  for (int64_t h = h0; h < h1; ++h) {
    const float* cum = w.cum_of(s, c, h);
    const float dd = a.d != nullptr ? a.d[h] : 0.0f;
    const int64_t o = (h - h0) * P;
    for (int64_t j = 0; j < n; ++j) dt[j] = a.dt[(r0 + j) * a.ld_dt + h];
    std::copy(cum, cum + n, e);
    exp_row(e, n);
    for (int64_t i = 0; i < n; ++i) {
      const float* x = a.x + (r0 + i) * a.ld_x + h * P;
      const float* zi = z + i * cols + o;
      float* y = a.y + (r0 + i) * w.HP + h * P;
      for (int64_t q = 0; q < P; ++q) y[q] = dd * x[q] + e[i] * zi[q];
    }
    // M_ij = G_ij exp(c_i - c_j) dt_j for j <= i, 0 after. Left of a block of kSub rows from r,
    // exp(c_i - c_j) = exp(c_i - c_r) exp(c_r - c_j), both factors at most 1 (c falls), so the
    // exps are per row and column there and per entry only in the diagonal block.
    for (int64_t r = 0; r < n; r += kSub) {
      const int64_t re = std::min(n, r + kSub);
      for (int64_t i = r; i < re; ++i) ur[i] = cum[i] - cum[r];
      exp_row(ur + r, re - r);
      for (int64_t j = 0; j < r; ++j) vc[j] = cum[r] - cum[j];
      exp_row(vc, r);
      for (int64_t j = 0; j < r; ++j) vc[j] *= dt[j];
      for (int64_t i = r; i < re; ++i) {
        float* mi = m + i * n;
        const float* gi = gm + i * kL;
        for (int64_t j = 0; j < r; ++j) mi[j] = gi[j] * ur[i] * vc[j];
        for (int64_t j = r; j <= i; ++j) mi[j] = cum[i] - cum[j];
        exp_row(mi + r, i + 1 - r);
        for (int64_t j = r; j <= i; ++j) mi[j] *= gi[j] * dt[j];
        std::fill(mi + i + 1, mi + n, 0.0f);
      }
    }
    // M is lower triangular: rows [i0, i1) need only its first i1 columns.
    for (int64_t i0 = 0; i0 < n; i0 += kTriRows) {
      const int64_t i1 = std::min(n, i0 + kTriRows);
      gemm_f32(false, false, i1 - i0, P, i1, m + i0 * n, n, a.x + r0 * a.ld_x + h * P, a.ld_x,
               true, a.y + (r0 + i0) * w.HP + h * P, w.HP);
    }
    // The state's decay over the chunk, and the head's inputs weighted by exp(c_L - c_j) dt_j.
    const float el = std::exp(cum[n - 1]);
    for (int64_t k = 0; k < w.N; ++k)
      for (int64_t q = 0; q < P; ++q) st[k * cols + o + q] *= el;
    for (int64_t j = 0; j < n; ++j) vc[j] = cum[n - 1] - cum[j];
    exp_row(vc, n);
    for (int64_t j = 0; j < n; ++j) {
      const float f = vc[j] * dt[j];
      const float* x = a.x + (r0 + j) * a.ld_x + h * P;
      for (int64_t q = 0; q < P; ++q) xw[j * cols + o + q] = f * x[q];
    }
  }
  gemm_f32(true, false, w.N, cols, n, B, a.ld_bc, xw, cols, true, st, cols);
}

}  // namespace

void ssm_scan_ssd_gemm(const SsmScanArgs& a, ThreadPool* pool) {
  const int64_t H = a.heads, P = a.head_dim, N = a.state_size, HP = H * P, Hg = H / a.groups;
  const int64_t units = (Hg + kHeadsPerUnit - 1) / kHeadsPerUnit, work = a.b * a.groups * units;
  const int64_t total = (a.t + kL - 1) / kL;
  const int64_t wc = std::min(std::max<int64_t>(1, kWindowChunks / a.b), total);
  std::vector<float> cum(a.b * wc * H * kL), gmat(a.b * wc * a.groups * kL * kL);
  // Unit (s, g, u) holds heads [h0, h1); its state is the [N][cols] block at `state_of`, the
  // blocks of a sequence in head order ([N][cols] each, N * HP floats in all).
  auto heads_of = [&](int64_t unit, int64_t* s, int64_t* g, int64_t* h0, int64_t* h1) {
    *s = unit / (a.groups * units);
    *g = (unit / units) % a.groups;
    *h0 = *g * Hg + (unit % units) * kHeadsPerUnit;
    *h1 = std::min(*h0 + kHeadsPerUnit, (*g + 1) * Hg);
  };
  std::vector<float> states(a.b * N * HP);
  split(pool, work, [&](int64_t unit) {
    int64_t s, g, h0, h1;
    heads_of(unit, &s, &g, &h0, &h1);
    const int64_t cols = (h1 - h0) * P;
    float* st = states.data() + s * N * HP + h0 * P * N;
    for (int64_t h = h0; h < h1; ++h)
      if (a.state != nullptr)
        transpose(a.state + (s * H + h) * P * N, N, P, N, st + (h - h0) * P, cols);
      else
        for (int64_t k = 0; k < N; ++k) std::fill_n(st + k * cols + (h - h0) * P, P, 0.0f);
  });
  for (int64_t c0 = 0; c0 < total; c0 += wc) {
    const Window w{a, H, P, N, HP, c0 * kL, std::min(wc, total - c0), cum.data(), gmat.data()};
    split(pool, a.b * w.chunks, [&](int64_t i) { prepare(w, i / w.chunks, i % w.chunks); });
    split(pool, work, [&](int64_t unit) {
      thread_local Scratch sc;
      sc.z.resize(kL * kHeadsPerUnit * P);
      sc.xw.resize(kL * kHeadsPerUnit * P);
      sc.m.resize(kL * kL);
      int64_t s, g, h0, h1;
      heads_of(unit, &s, &g, &h0, &h1);
      float* st = states.data() + s * N * HP + h0 * P * N;
      for (int64_t c = 0; c < w.chunks; ++c) chunk(w, s, c, g, h0, h1, st, sc);
    });
  }
  if (a.state != nullptr)
    split(pool, work, [&](int64_t unit) {
      int64_t s, g, h0, h1;
      heads_of(unit, &s, &g, &h0, &h1);
      const int64_t cols = (h1 - h0) * P;
      const float* st = states.data() + s * N * HP + h0 * P * N;
      for (int64_t h = h0; h < h1; ++h)
        transpose(st + (h - h0) * P, cols, N, P, a.state + (s * H + h) * P * N, N);
    });
}

}  // namespace nexus::cpu
