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
#include "backends/cpu/ssm_impl.h"
#include "nexus/core/thread_pool.h"

namespace nexus::cpu {
namespace {

constexpr int64_t kL = kChunk;       // tokens per chunk, as ssm_impl.h's form
constexpr int64_t kWindowChunks = 16;  // chunks whose G and decays are computed at once (all seqs)
constexpr int64_t kHeadsPerUnit = 4;  // heads of one unit in phases 1 and 3
constexpr int64_t kSub = 16;          // rows of a block of the decay matrix
constexpr int64_t kTriRows = 24;      // rows of one product with it (both tiles' heights divide it)

// dst[j][i] = src[i][j] for an [rows x cols] src, in 16 x 16 blocks (both sides strided).
void transpose(const float* src, int64_t lds, int64_t rows, int64_t cols, float* dst,
               int64_t ldd) {
  for (int64_t i0 = 0; i0 < rows; i0 += 16)
    for (int64_t j0 = 0; j0 < cols; j0 += 16)
      for (int64_t j = j0; j < std::min(cols, j0 + 16); ++j)
        for (int64_t i = i0; i < std::min(rows, i0 + 16); ++i) dst[j * ldd + i] = src[i * lds + j];
}

// e[i][j] = exp(c_i - c_j) for j <= i and 0 after ([n][n], c a chunk's cumulative decays).
// Left of a block of kSub rows from r, exp(c_i - c_j) = exp(c_i - c_r) exp(c_r - c_j), both
// factors at most 1 (c falls), so there the exps are per row and column, and per entry only in
// the diagonal blocks.
void decays(const float* cum, int64_t n, float* e) {
  float ur[kL], vc[kL];
  for (int64_t r = 0; r < n; r += kSub) {
    const int64_t re = std::min(n, r + kSub);
    for (int64_t i = r; i < re; ++i) ur[i] = cum[i] - cum[r];
    exp_row(ur + r, ur + r, re - r);
    for (int64_t j = 0; j < r; ++j) vc[j] = cum[r] - cum[j];
    exp_row(vc, vc, r);
    for (int64_t i = r; i < re; ++i) {
      float* ei = e + i * n;
      for (int64_t j = 0; j < r; ++j) ei[j] = ur[i] * vc[j];
      for (int64_t j = r; j <= i; ++j) ei[j] = cum[i] - cum[j];
      exp_row(ei + r, ei + r, i + 1 - r);
      std::fill(ei + i + 1, ei + n, 0.0f);
    }
  }
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
  float e[kL], dt[kL], vc[kL];
  for (int64_t h = h0; h < h1; ++h) {
    const float* cum = w.cum_of(s, c, h);
    const float dd = a.d != nullptr ? a.d[h] : 0.0f;
    const int64_t o = (h - h0) * P;
    for (int64_t j = 0; j < n; ++j) dt[j] = a.dt[(r0 + j) * a.ld_dt + h];
    std::copy(cum, cum + n, e);
    exp_row(e, e, n);
    for (int64_t i = 0; i < n; ++i) {
      const float* x = a.x + (r0 + i) * a.ld_x + h * P;
      const float* zi = z + i * cols + o;
      float* y = a.y + (r0 + i) * w.HP + h * P;
      for (int64_t q = 0; q < P; ++q) y[q] = dd * x[q] + e[i] * zi[q];
    }
    // M_ij = G_ij exp(c_i - c_j) dt_j for j <= i, 0 after.
    decays(cum, n, m);
    for (int64_t i = 0; i < n; ++i) {
      float* mi = m + i * n;
      const float* gi = gm + i * kL;
      for (int64_t j = 0; j <= i; ++j) mi[j] *= gi[j] * dt[j];
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
    exp_row(vc, vc, n);
    for (int64_t j = 0; j < n; ++j) {
      const float f = vc[j] * dt[j];
      const float* x = a.x + (r0 + j) * a.ld_x + h * P;
      for (int64_t q = 0; q < P; ++q) xw[j * cols + o + q] = f * x[q];
    }
  }
  gemm_f32(true, false, w.N, cols, n, B, a.ld_bc, xw, cols, true, st, cols);
}


// The backward of one sequence and group on the GEMM, from a zero state (SsmScanBackwardArgs),
// in the notation of scan_backward_chunked_unit (ssm_impl.h), all heads of the group at once:
// B and C are shared, so the products that sum over heads are single GEMMs over the heads'
// columns (U = B dS, Z = C S, d C += (e o dY) S^T, d B += XW dS^T, dS_prev = el dS + C^T (e o dY))
// and the per-head d G matrices are summed before d C += dG B and d B += dG^T C. The states
// entering the chunks come from a forward pass over the chunks first.
void scan_backward_ssd_unit(const SsmScanBackwardArgs& g, int64_t s, int64_t grp, float* da,
                            float* dd) {
  const SsmScanArgs& a = g.fwd;
  const int64_t P = a.head_dim, N = a.state_size, Hg = a.heads / a.groups, cols = Hg * P;
  const int64_t h0 = grp * Hg, Y = a.heads * P, t = a.t, nc = (t + kL - 1) / kL;
  const float* Bs = a.B + s * t * a.ld_bc + grp * N;  // the sequence's rows of the group
  const float* Cs = a.C + s * t * a.ld_bc + grp * N;
  float* dBs = g.dB + s * t * a.ld_bc + grp * N;
  float* dCs = g.dC + s * t * a.ld_bc + grp * N;
  for (int64_t i = 0; i < t; ++i) {
    std::fill_n(dBs + i * a.ld_bc, N, 0.0f);
    std::fill_n(dCs + i * a.ld_bc, N, 0.0f);
  }
  std::vector<float> starts(nc * N * cols, 0.0f), ds(N * cols, 0.0f), cum(Hg * kL), dt(Hg * kL),
      el(Hg * kL), ec(Hg * kL), xw(kL * cols), dyw(kL * cols), u(kL * cols), z(kL * cols),
      gm(kL * kL), e(kL * kL), mm(kL * kL), dm(kL * kL), dgsum(kL * kL), xd(kL * P), dxd(kL * P);
  // The chunk's decays per head: cum, dt, el_j = exp(c_L - c_j), ec_i = exp(c_i); and XW.
  auto load = [&](int64_t c) {
    const int64_t c0 = c * kL, n = std::min(kL, t - c0);
    for (int64_t hh = 0; hh < Hg; ++hh) {
      const int64_t h = h0 + hh;
      float* cu = cum.data() + hh * kL;
      float* d = dt.data() + hh * kL;
      float acc = 0.0f;
      for (int64_t j = 0; j < n; ++j) {
        d[j] = a.dt[(s * t + c0 + j) * a.ld_dt + h];
        cu[j] = acc += d[j] * a.a[h];
      }
      float* l = el.data() + hh * kL;
      for (int64_t j = 0; j < n; ++j) l[j] = cu[n - 1] - cu[j];
      exp_row(l, l, n);
      exp_row(cu, ec.data() + hh * kL, n);
      for (int64_t j = 0; j < n; ++j) {
        const float f = l[j] * d[j];
        const float* x = a.x + (s * t + c0 + j) * a.ld_x + h * P;
        for (int64_t q = 0; q < P; ++q) xw[j * cols + hh * P + q] = f * x[q];
      }
    }
    return n;
  };
  auto scale_heads = [&](float* m, int64_t c) {  // m[N][cols] *= exp(c_L) of each head
    for (int64_t hh = 0; hh < Hg; ++hh) {
      const float f = std::exp(cum[hh * kL + std::min(kL, t - c * kL) - 1]);
      for (int64_t k = 0; k < N; ++k)
        for (int64_t q = 0; q < P; ++q) m[k * cols + hh * P + q] *= f;
    }
  };
  for (int64_t c = 0; c + 1 < nc; ++c) {
    const int64_t n = load(c);
    float* next = starts.data() + (c + 1) * N * cols;
    std::copy_n(starts.data() + c * N * cols, N * cols, next);
    scale_heads(next, c);
    gemm_f32(true, false, N, cols, n, Bs + c * kL * a.ld_bc, a.ld_bc, xw.data(), cols, true, next,
             cols);
  }
  float dsum[kL];
  std::vector<float> dah(Hg, 0.0f), ddh(Hg, 0.0f);
  for (int64_t c = nc - 1; c >= 0; --c) {
    const int64_t n = load(c), c0 = c * kL, r0 = s * t + c0;
    const float* B = Bs + c0 * a.ld_bc;
    const float* C = Cs + c0 * a.ld_bc;
    const float* st = starts.data() + c * N * cols;
    gemm_f32(false, true, n, n, N, C, a.ld_bc, B, a.ld_bc, false, gm.data(), n);
    gemm_f32(false, false, n, cols, N, B, a.ld_bc, ds.data(), cols, false, u.data(), cols);
    gemm_f32(false, false, n, cols, N, C, a.ld_bc, st, cols, false, z.data(), cols);
    for (int64_t i = 0; i < n; ++i)
      for (int64_t hh = 0; hh < Hg; ++hh) {
        const float f = ec[hh * kL + i];
        const float* dy = g.dy + (r0 + i) * Y + (h0 + hh) * P;
        for (int64_t q = 0; q < P; ++q) dyw[i * cols + hh * P + q] = f * dy[q];
      }
    gemm_f32(false, true, n, N, cols, dyw.data(), cols, st, cols, true, dCs + c0 * a.ld_bc,
             a.ld_bc);
    gemm_f32(false, true, n, N, cols, xw.data(), cols, ds.data(), cols, true, dBs + c0 * a.ld_bc,
             a.ld_bc);
    std::fill_n(dgsum.data(), n * n, 0.0f);
    for (int64_t hh = 0; hh < Hg; ++hh) {
      const int64_t h = h0 + hh, o = hh * P;
      const float* cu = cum.data() + hh * kL;
      const float* d = dt.data() + hh * kL;
      const float* l = el.data() + hh * kL;
      const float* dy = g.dy + r0 * Y + h * P;
      for (int64_t j = 0; j < n; ++j) {
        const float* x = a.x + (r0 + j) * a.ld_x + h * P;
        for (int64_t q = 0; q < P; ++q) xd[j * P + q] = d[j] * x[q];
      }
      std::fill_n(dsum, n, 0.0f);
      // The carried state's terms: ec_i dy_i . Z_i, el_j xd_j . U_j, and exp(c_L) <dS, S>.
      float sd = 0.0f;
      for (int64_t k = 0; k < N; ++k) sd += dot(ds.data() + k * cols + o, st + k * cols + o, P);
      dsum[n - 1] += std::exp(cu[n - 1]) * sd;
      for (int64_t i = 0; i < n; ++i) {
        dsum[i] += dot(dyw.data() + i * cols + o, z.data() + i * cols + o, P);
        const float q = l[i] * dot(xd.data() + i * P, u.data() + i * cols + o, P);
        dsum[n - 1] += q;
        dsum[i] -= q;
      }
      // Within the chunk: M = G o E; d xd = M^T dY + el o U; dM = dY xd^T; dG = dM o E.
      decays(cu, n, e.data());
      for (int64_t i = 0; i < n * n; ++i) mm[i] = gm[i] * e[i];
      for (int64_t j = 0; j < n; ++j)
        for (int64_t q = 0; q < P; ++q) dxd[j * P + q] = l[j] * u[j * cols + o + q];
      gemm_f32(true, false, n, P, n, mm.data(), n, dy, Y, true, dxd.data(), P);
      gemm_f32(false, true, n, n, P, dy, Y, xd.data(), P, false, dm.data(), n);
      for (int64_t i = 0; i < n; ++i)
        for (int64_t j = 0; j <= i; ++j) {
          const float tij = dm[i * n + j] * mm[i * n + j];
          dsum[i] += tij;
          dsum[j] -= tij;
          dgsum[i * n + j] += dm[i * n + j] * e[i * n + j];
        }
      // d(dt a) is dsum summed from the token on; then x's, dt's, A's and D's gradients.
      const float ah = a.a[h], dh = a.d != nullptr ? a.d[h] : 0.0f;
      float r = 0.0f;
      for (int64_t k = n - 1; k >= 0; --k) {
        r += dsum[k];
        const float* dyk = dy + k * Y;
        const float* x = a.x + (r0 + k) * a.ld_x + h * P;
        float* dx = g.dx + (r0 + k) * a.ld_x + h * P;
        const float* dxk = dxd.data() + k * P;
        for (int64_t q = 0; q < P; ++q) dx[q] = d[k] * dxk[q] + dh * dyk[q];
        g.ddt[(r0 + k) * a.ld_dt + h] = ah * r + dot(dxk, x, P);
        dah[hh] += d[k] * r;
        ddh[hh] += dot(dyk, x, P);
      }
    }
    gemm_f32(false, false, n, N, n, dgsum.data(), n, B, a.ld_bc, true, dCs + c0 * a.ld_bc,
             a.ld_bc);
    gemm_f32(true, false, n, N, n, dgsum.data(), n, C, a.ld_bc, true, dBs + c0 * a.ld_bc,
             a.ld_bc);
    // The gradient of the state entering this chunk.
    scale_heads(ds.data(), c);
    gemm_f32(true, false, N, cols, n, C, a.ld_bc, dyw.data(), cols, true, ds.data(), cols);
  }
  for (int64_t hh = 0; hh < Hg; ++hh) {
    da[h0 + hh] += dah[hh];
    if (dd != nullptr) dd[h0 + hh] += ddh[hh];
  }
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

void ssm_scan_backward_ssd_gemm(const SsmScanBackwardArgs& g, ThreadPool* pool) {
  scan_backward_units<scan_backward_ssd_unit>(g, pool);
}

}  // namespace nexus::cpu
