// The selective state-space kernels: the causal conv with its rolling state, the sequential scan
// (the reference, and the decode path), the chunked SSD scan for prefill and training, and their
// backwards. Work is split over sequences and channels or heads, each computed on its own, so the
// results do not depend on the thread count.
#include "backends/cpu/ssm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "nexus/core/thread_pool.h"

namespace nexus::cpu {
namespace {

float sigmoid(float v) { return 1.0f / (1.0f + std::exp(-v)); }

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

// --- conv ---

constexpr int64_t kConvBlock = 64;  // channels per work item

void conv_block(const SsmConvArgs& a, int64_t seq, int64_t c0, int64_t c1) {
  const int64_t k = a.k, km = k - 1, t = a.t, C = a.channels;
  float* st = a.state != nullptr ? a.state + seq * km * C : nullptr;
  auto u = [&](int64_t i, int64_t c) -> float {  // i: position in [state rows, x rows]
    if (i < km) return st != nullptr ? st[i * C + c] : 0.0f;
    return a.x[(seq * t + i - km) * a.ld_x + c];
  };
  for (int64_t i = 0; i < t; ++i) {
    const int64_t row = seq * t + i;
    for (int64_t c = c0; c < c1; ++c) {
      float acc = a.bias[c];
      for (int64_t j = 0; j < k; ++j) acc += a.w[c * k + j] * u(i + j, c);
      if (a.pre != nullptr) a.pre[row * C + c] = acc;
      a.y[row * C + c] = acc * sigmoid(acc);
    }
  }
  if (st == nullptr) return;
  float keep[16];
  std::vector<float> big;
  float* nw = keep;
  if (km > 16) {
    big.resize(km);
    nw = big.data();
  }
  for (int64_t c = c0; c < c1; ++c) {
    for (int64_t r = 0; r < km; ++r) nw[r] = u(t + r, c);
    for (int64_t r = 0; r < km; ++r) st[r * C + c] = nw[r];
  }
}

void conv_run(const SsmConvArgs& a, ThreadPool* pool) {
  const int64_t blocks = (a.channels + kConvBlock - 1) / kConvBlock;
  split(pool, a.b * blocks, [&](int64_t w) {
    const int64_t c0 = (w % blocks) * kConvBlock;
    conv_block(a, w / blocks, c0, std::min(a.channels, c0 + kConvBlock));
  });
}

void conv_backward_block(const SsmConvBackwardArgs& a, int64_t c0, int64_t c1) {
  const int64_t k = a.k, km = k - 1, t = a.t, C = a.channels;
  std::vector<float> dpre(t);
  for (int64_t s = 0; s < a.b; ++s) {
    for (int64_t c = c0; c < c1; ++c) {
      for (int64_t i = 0; i < t; ++i) {
        const int64_t row = s * t + i;
        const float v = a.pre[row * C + c], sg = sigmoid(v);
        dpre[i] = a.dy[row * C + c] * sg * (1.0f + v * (1.0f - sg));
      }
      float db = 0.0f;
      for (int64_t i = 0; i < t; ++i) db += dpre[i];
      a.dbias[c] += db;
      for (int64_t j = 0; j < k; ++j) {
        float dw = 0.0f;
        // u[i + j] is x row i + j - km (zero before the sequence).
        for (int64_t i = std::max<int64_t>(0, km - j); i < t; ++i)
          dw += dpre[i] * a.x[(s * t + i + j - km) * a.ld_x + c];
        a.dw[c * k + j] += dw;
      }
      for (int64_t r = 0; r < t; ++r) {  // x row r feeds outputs i = r - j + km
        float dx = 0.0f;
        for (int64_t j = 0; j < k; ++j) {
          const int64_t i = r - j + km;
          if (i >= 0 && i < t) dx += a.w[c * k + j] * dpre[i];
        }
        a.dx[(s * t + r) * a.ld_dx + c] = dx;
      }
    }
  }
}

void conv_backward_run(const SsmConvBackwardArgs& a, ThreadPool* pool) {
  const int64_t blocks = (a.channels + kConvBlock - 1) / kConvBlock;
  split(pool, blocks, [&](int64_t w) {
    const int64_t c0 = w * kConvBlock;
    conv_backward_block(a, c0, std::min(a.channels, c0 + kConvBlock));
  });
}

// --- scan ---

// Pointers of head h of sequence s at token i.
struct HeadRow {
  const float* x;
  float dt;
  const float* B;
  const float* C;
};

HeadRow head_row(const SsmScanArgs& a, int64_t s, int64_t h, int64_t i) {
  const int64_t row = s * a.t + i, g = h / (a.heads / a.groups);
  return {a.x + row * a.ld_x + h * a.head_dim, a.dt[row * a.ld_dt + h],
          a.B + row * a.ld_bc + g * a.state_size, a.C + row * a.ld_bc + g * a.state_size};
}

// One step of the recurrence on head state st[P][N]; y[p] written.
void scan_step(const SsmScanArgs& a, int64_t h, const HeadRow& r, float* st, float* y,
               float* decay) {
  const int64_t P = a.head_dim, N = a.state_size;
  const float* ah = a.a + h * a.a_width;
  for (int64_t n = 0; n < a.a_width; ++n) decay[n] = std::exp(r.dt * ah[n]);
  const float dd = a.d != nullptr ? a.d[h] : 0.0f;
  for (int64_t p = 0; p < P; ++p) {
    float* sp = st + p * N;
    const float xdt = r.x[p] * r.dt;
    float sum = 0.0f;
    if (a.a_width == 1) {
      const float e = decay[0];
      for (int64_t n = 0; n < N; ++n) {
        sp[n] = sp[n] * e + xdt * r.B[n];
        sum += sp[n] * r.C[n];
      }
    } else {
      for (int64_t n = 0; n < N; ++n) {
        sp[n] = sp[n] * decay[n] + xdt * r.B[n];
        sum += sp[n] * r.C[n];
      }
    }
    y[p] = sum + dd * r.x[p];
  }
}

void scan_sequential_run(const SsmScanArgs& a, ThreadPool* pool) {
  const int64_t PN = a.head_dim * a.state_size;
  split(pool, a.b * a.heads, [&](int64_t w) {
    const int64_t s = w / a.heads, h = w % a.heads;
    std::vector<float> local(a.state == nullptr ? PN : 0), decay(a.a_width);
    float* st = a.state != nullptr ? a.state + w * PN : local.data();
    for (int64_t i = 0; i < a.t; ++i)
      scan_step(a, h, head_row(a, s, h, i), st,
                a.y + (s * a.t + i) * a.heads * a.head_dim + h * a.head_dim, decay.data());
  });
}

// The SSD form for one decay per head. Within a chunk of L tokens with cum[i] = sum_{j<=i} dt_j a,
//   y_i = sum_{j<=i} (C_i . B_j) exp(cum_i - cum_j) dt_j x_j + exp(cum_i) C_i s_prev + d x_i,
//   s_next = exp(cum_last) s_prev + sum_j exp(cum_last - cum_j) dt_j x_j B_j^T,
// which is the recurrence unrolled: products of L x N, L x L and L x P matrices.
void scan_chunked_head(const SsmScanArgs& a, int64_t s, int64_t h, float* st) {
  const int64_t P = a.head_dim, N = a.state_size, L = std::min(kSsmChunk, a.t);
  const float ah = a.a[h], dd = a.d != nullptr ? a.d[h] : 0.0f;
  std::vector<float> cum(L), xd(L * P), w(L);
  std::vector<HeadRow> rows(L);
  for (int64_t c0 = 0; c0 < a.t; c0 += L) {
    const int64_t len = std::min(L, a.t - c0);
    float acc = 0.0f;
    for (int64_t j = 0; j < len; ++j) {
      rows[j] = head_row(a, s, h, c0 + j);
      acc += rows[j].dt * ah;
      cum[j] = acc;
      for (int64_t p = 0; p < P; ++p) xd[j * P + p] = rows[j].dt * rows[j].x[p];
    }
    for (int64_t i = 0; i < len; ++i) {
      const HeadRow& ri = rows[i];
      float* y = a.y + (s * a.t + c0 + i) * a.heads * P + h * P;
      const float ei = std::exp(cum[i]);
      for (int64_t p = 0; p < P; ++p) {  // the carried state, then the skip term
        const float* sp = st + p * N;
        float dot = 0.0f;
        for (int64_t n = 0; n < N; ++n) dot += ri.C[n] * sp[n];
        y[p] = ei * dot + dd * ri.x[p];
      }
      for (int64_t j = 0; j <= i; ++j) {
        float cb = 0.0f;
        for (int64_t n = 0; n < N; ++n) cb += ri.C[n] * rows[j].B[n];
        w[j] = cb * std::exp(cum[i] - cum[j]);
      }
      for (int64_t j = 0; j <= i; ++j) {
        const float wj = w[j];
        const float* xj = xd.data() + j * P;
        for (int64_t p = 0; p < P; ++p) y[p] += wj * xj[p];
      }
    }
    const float last = cum[len - 1], el = std::exp(last);
    for (int64_t j = 0; j < len; ++j) w[j] = std::exp(last - cum[j]);
    for (int64_t p = 0; p < P; ++p) {
      float* sp = st + p * N;
      for (int64_t n = 0; n < N; ++n) sp[n] *= el;
      for (int64_t j = 0; j < len; ++j) {
        const float coef = w[j] * xd[j * P + p];
        const float* Bj = rows[j].B;
        for (int64_t n = 0; n < N; ++n) sp[n] += coef * Bj[n];
      }
    }
  }
}

void scan_chunked_run(const SsmScanArgs& a, ThreadPool* pool) {
  const int64_t PN = a.head_dim * a.state_size;
  split(pool, a.b * a.heads, [&](int64_t w) {
    std::vector<float> local(a.state == nullptr ? PN : 0);
    scan_chunked_head(a, w / a.heads, w % a.heads,
                      a.state != nullptr ? a.state + w * PN : local.data());
  });
}

bool one_decay_per_head(const SsmScanArgs& a) { return a.a_width == 1; }

// Backward of one sequence and group (the heads sharing its B and C): the states are recomputed
// forward and kept, then the gradient of the state runs backward in time.
void scan_backward_unit(const SsmScanBackwardArgs& g, int64_t s, int64_t grp, float* da,
                        float* dd) {
  const SsmScanArgs& a = g.fwd;
  const int64_t P = a.head_dim, N = a.state_size, PN = P * N, hpg = a.heads / a.groups;
  const int64_t t = a.t, Y = a.heads * P;
  for (int64_t i = 0; i < t; ++i) {
    const int64_t row = s * t + i;
    std::memset(g.dB + row * a.ld_bc + grp * N, 0, N * sizeof(float));
    std::memset(g.dC + row * a.ld_bc + grp * N, 0, N * sizeof(float));
  }
  std::vector<float> states((t + 1) * PN), gs(PN), decay(a.a_width), ytmp(P);
  for (int64_t h = grp * hpg; h < (grp + 1) * hpg; ++h) {
    const float* ah = a.a + h * a.a_width;
    const float dh = a.d != nullptr ? a.d[h] : 0.0f;
    std::fill(states.begin(), states.begin() + PN, 0.0f);
    for (int64_t i = 0; i < t; ++i) {
      std::copy(states.begin() + i * PN, states.begin() + (i + 1) * PN,
                states.begin() + (i + 1) * PN);
      scan_step(a, h, head_row(a, s, h, i), states.data() + (i + 1) * PN, ytmp.data(),
                decay.data());
    }
    std::fill(gs.begin(), gs.end(), 0.0f);
    for (int64_t i = t - 1; i >= 0; --i) {
      const int64_t row = s * t + i;
      const HeadRow r = head_row(a, s, h, i);
      const float* dy = g.dy + row * Y + h * P;
      const float* s1 = states.data() + (i + 1) * PN;  // after step i
      const float* s0 = states.data() + i * PN;        // before it
      float* dx = g.dx + row * a.ld_x + h * P;
      float* dB = g.dB + row * a.ld_bc + grp * N;
      float* dC = g.dC + row * a.ld_bc + grp * N;
      for (int64_t n = 0; n < a.a_width; ++n) decay[n] = std::exp(r.dt * ah[n]);
      float ddt = 0.0f;
      for (int64_t p = 0; p < P; ++p) {
        float* gp = gs.data() + p * N;
        const float* s1p = s1 + p * N;
        const float* s0p = s0 + p * N;
        float dxp = dh * dy[p];
        if (dd != nullptr) dd[h] += dy[p] * r.x[p];
        for (int64_t n = 0; n < N; ++n) {
          gp[n] += dy[p] * r.C[n];
          dC[n] += dy[p] * s1p[n];
          const int64_t an = a.a_width == 1 ? 0 : n;
          const float e = decay[an];
          dB[n] += r.dt * gp[n] * r.x[p];
          dxp += r.dt * gp[n] * r.B[n];
          ddt += gp[n] * (r.x[p] * r.B[n] + ah[an] * e * s0p[n]);
          da[h * a.a_width + an] += gp[n] * r.dt * e * s0p[n];
          gp[n] *= e;
        }
        dx[p] = dxp;
      }
      g.ddt[row * a.ld_dt + h] = ddt;
    }
  }
}

void scan_backward_run(const SsmScanBackwardArgs& g, ThreadPool* pool) {
  const SsmScanArgs& a = g.fwd;
  const int64_t units = a.b * a.groups, na = a.heads * a.a_width;
  // Per-unit partial sums of da and dd, added in unit order after.
  std::vector<float> part(units * (na + a.heads), 0.0f);
  split(pool, units, [&](int64_t u) {
    float* pa = part.data() + u * (na + a.heads);
    scan_backward_unit(g, u / a.groups, u % a.groups, pa, g.dd != nullptr ? pa + na : nullptr);
  });
  for (int64_t u = 0; u < units; ++u) {
    const float* pa = part.data() + u * (na + a.heads);
    for (int64_t i = 0; i < na; ++i) g.da[i] += pa[i];
    if (g.dd != nullptr)
      for (int64_t h = 0; h < a.heads; ++h) g.dd[h] += pa[na + h];
  }
}

const KernelVariant<SsmConvArgs> kConv[] = {{"scalar", always_available, conv_run}};
const KernelVariant<SsmConvBackwardArgs> kConvBackward[] = {
    {"scalar", always_available, conv_backward_run}};
const KernelVariant<SsmScanArgs> kScan[] = {
    {"chunked", always_available, scan_chunked_run, one_decay_per_head},
    {"sequential", always_available, scan_sequential_run}};
const KernelVariant<SsmScanBackwardArgs> kScanBackward[] = {
    {"sequential", always_available, scan_backward_run}};

}  // namespace

KernelVariants<SsmConvArgs> ssm_conv_kernels() { return kConv; }
KernelVariants<SsmConvBackwardArgs> ssm_conv_backward_kernels() { return kConvBackward; }
KernelVariants<SsmScanArgs> ssm_scan_kernels() { return kScan; }
KernelVariants<SsmScanBackwardArgs> ssm_scan_backward_kernels() { return kScanBackward; }

}  // namespace nexus::cpu
