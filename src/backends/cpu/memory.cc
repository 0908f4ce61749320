// The compressive memory's reference kernels: every (sequence, key/value head) walks its segments
// in order (forward) or in reverse (backward), with the memory as a head_dim x head_dim matrix.
// Sums run in a fixed order, so results do not depend on the thread count.
#include "backends/cpu/memory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace nexus::cpu {
namespace {

float phi(float x) { return x > 0.0f ? x + 1.0f : std::exp(x); }  // elu(x) + 1
float dphi(float x) { return x > 0.0f ? 1.0f : std::exp(x); }

// out[c] = sum_a f[a] M[a][c]; returns f . z + eps.
float read(const float* f, const float* m, const float* z, int64_t d, float* out) {
  std::fill(out, out + d, 0.0f);
  float den = kMemoryEps;
  for (int64_t a = 0; a < d; ++a) {
    const float fa = f[a];
    den += fa * z[a];
    const float* row = m + a * d;
    for (int64_t c = 0; c < d; ++c) out[c] += fa * row[c];
  }
  return den;
}

template <class Fn>
void over_heads(const MemoryArgs& a, ThreadPool* pool, Fn fn) {
  const int64_t n = a.b * a.kv_heads;
  if (pool != nullptr && n > 1)
    pool->parallel_for(
        n,
        [&](int64_t i0, int64_t i1) {
          for (int64_t i = i0; i < i1; ++i) fn(i / a.kv_heads, i % a.kv_heads);
        },
        1);
  else
    for (int64_t i = 0; i < n; ++i) fn(i / a.kv_heads, i % a.kv_heads);
}

void memory_run(const MemoryArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, mf = memory_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  over_heads(a, pool, [&](int64_t s, int64_t g) {
    std::vector<float> mem(static_cast<size_t>(mf), 0.0f), f(d), r(d), upd(static_cast<size_t>(mf));
    float* st = a.state ? a.state + (s * a.kv_heads + g) * mf : nullptr;
    if (st) std::copy(st, st + mf, mem.begin());
    float *m = mem.data(), *z = m + d * d;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = j * a.segment, i1 = std::min(a.t, i0 + a.segment);
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * mf);
      for (int64_t i = i0; i < (a.q ? i1 : i0); ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* q = a.q + (s * a.t + i) * qw + h * d;
          for (int64_t x = 0; x < d; ++x) f[x] = phi(q[x]);
          float* y = a.y + (s * a.t + i) * qw + h * d;
          const float den = read(f.data(), m, z, d, y);
          for (int64_t c = 0; c < d; ++c) y[c] /= den;
        }
      // The delta rule: every key reads the memory before the segment.
      if (!a.write) continue;
      std::fill(upd.begin(), upd.end(), 0.0f);
      for (int64_t i = i0; i < i1; ++i) {
        const float* k = a.k + (s * a.t + i) * kw + g * d;
        const float* v = a.v + (s * a.t + i) * kw + g * d;
        for (int64_t x = 0; x < d; ++x) f[x] = phi(k[x]);
        const float den = read(f.data(), m, z, d, r.data());
        for (int64_t c = 0; c < d; ++c) r[c] = v[c] - r[c] / den;
        for (int64_t x = 0; x < d; ++x) {
          float* row = upd.data() + x * d;
          for (int64_t c = 0; c < d; ++c) row[c] += f[x] * r[c];
          upd[static_cast<size_t>(d * d + x)] += f[x];
        }
      }
      for (int64_t x = 0; x < mf; ++x) mem[x] += upd[x];
    }
    if (st) std::copy(mem.begin(), mem.end(), st);
  });
}

void memory_backward_run(const MemoryBackwardArgs& b, ThreadPool* pool) {
  const MemoryArgs& a = b.fwd;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, mf = memory_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  over_heads(a, pool, [&](int64_t s, int64_t g) {
    // dmem: d loss / d the memory after the segment being undone (M then z); zero after the last.
    std::vector<float> dmem(static_cast<size_t>(mf), 0.0f), dprev(static_cast<size_t>(mf));
    std::vector<float> f(d), num(d), dnum(d), df(d);
    for (int64_t j = segs - 1; j >= 0; --j) {
      const int64_t i0 = j * a.segment, i1 = std::min(a.t, i0 + a.segment);
      const float* m = a.saved + ((s * segs + j) * a.kv_heads + g) * mf;
      const float* z = m + d * d;
      const float *dm = dmem.data(), *dz = dm + d * d;
      std::copy(dmem.begin(), dmem.end(), dprev.begin());  // M_new = M_old + ...: passes through
      float *dpm = dprev.data(), *dpz = dpm + d * d;
      // The delta rule's writes: e = v - r / u, r = f^T M, u = f . z + eps, f = phi(k).
      for (int64_t i = i0; i < i1; ++i) {
        const float* k = a.k + (s * a.t + i) * kw + g * d;
        const float* v = a.v + (s * a.t + i) * kw + g * d;
        float* dk = b.dk + (s * a.t + i) * kw + g * d;
        float* dv = b.dv + (s * a.t + i) * kw + g * d;
        for (int64_t x = 0; x < d; ++x) f[x] = phi(k[x]);
        const float u = read(f.data(), m, z, d, num.data());  // num = r
        // de = dM_new^T f (dv = de), df = dM_new e + dz_new
        for (int64_t c = 0; c < d; ++c) dv[c] = 0.0f;
        for (int64_t x = 0; x < d; ++x) {
          const float* row = dm + x * d;
          float acc = dz[x];
          for (int64_t c = 0; c < d; ++c) {
            dv[c] += row[c] * f[x];
            acc += row[c] * (v[c] - num[c] / u);
          }
          df[x] = acc;
        }
        // e = v - r / u: dr = -de / u, du = (de . r) / u^2
        float du = 0.0f;
        for (int64_t c = 0; c < d; ++c) {
          dnum[c] = -dv[c] / u;
          du += dv[c] * num[c];
        }
        du /= u * u;
        for (int64_t x = 0; x < d; ++x) {
          const float* row = m + x * d;
          float* drow = dpm + x * d;
          float acc = du * z[x];
          for (int64_t c = 0; c < d; ++c) {
            acc += row[c] * dnum[c];
            drow[c] += f[x] * dnum[c];
          }
          dpz[x] += f[x] * du;
          dk[x] = (df[x] + acc) * dphi(k[x]);
        }
      }
      // The reads: y = r / s, r = f^T M, s = f . z + eps, f = phi(q).
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* q = a.q + (s * a.t + i) * qw + h * d;
          const float* dy = b.dy + (s * a.t + i) * qw + h * d;
          float* dq = b.dq + (s * a.t + i) * qw + h * d;
          for (int64_t x = 0; x < d; ++x) f[x] = phi(q[x]);
          const float den = read(f.data(), m, z, d, num.data());
          float ds = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            dnum[c] = dy[c] / den;
            ds -= dy[c] * num[c];
          }
          ds /= den * den;
          for (int64_t x = 0; x < d; ++x) {
            const float* row = m + x * d;
            float* drow = dpm + x * d;
            float acc = ds * z[x];
            for (int64_t c = 0; c < d; ++c) {
              acc += row[c] * dnum[c];
              drow[c] += f[x] * dnum[c];
            }
            dpz[x] += f[x] * ds;
            dq[x] = acc * dphi(q[x]);
          }
        }
      dmem.swap(dprev);
    }
  });
}

const KernelVariant<MemoryArgs> kMemory[] = {{"scalar", always_available, memory_run}};
const KernelVariant<MemoryBackwardArgs> kMemoryBackward[] = {
    {"scalar", always_available, memory_backward_run}};

}  // namespace

KernelVariants<MemoryArgs> memory_kernels() { return kMemory; }
KernelVariants<MemoryBackwardArgs> memory_backward_kernels() { return kMemoryBackward; }

}  // namespace nexus::cpu
