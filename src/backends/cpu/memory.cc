// The compressive memory's reference kernels: every (sequence, key/value head) walks its segments
// in order (forward) or in reverse (backward), with the memory as a head_dim x head_dim matrix.
// Sums run in a fixed order, so results do not depend on the thread count.
#include "backends/cpu/memory.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/memory_impl.h"

namespace nexus::cpu {
namespace {

float phi(float x) { return x > 0.0f ? x + 1.0f : std::exp(x); }  // elu(x) + 1
float dphi(float x) { return x > 0.0f ? 1.0f : std::exp(x); }

// out[c] = sum_a f[a] M[a][c] over M's `rows` rows of d; returns f . z + eps.
float read(const float* f, const float* m, const float* z, int64_t rows, int64_t d, float* out) {
  std::fill(out, out + d, 0.0f);
  float den = kMemoryEps;
  for (int64_t a = 0; a < rows; ++a) {
    const float fa = f[a];
    den += fa * z[a];
    const float* row = m + a * d;
    for (int64_t c = 0; c < d; ++c) out[c] += fa * row[c];
  }
  return den;
}

// The backward of a read r = f^T M, u = f . z + eps from dr and du: dM += f dr^T, dz += f du, and
// df (added to, or written) = M dr + du z.
void back_read(const float* f, const float* m, const float* z, const float* dr, float du, int64_t d,
               float* dm, float* dz, float* df, bool add) {
  for (int64_t x = 0; x < d; ++x) {
    const float* row = m + x * d;
    float* drow = dm + x * d;
    float acc = du * z[x];
    for (int64_t c = 0; c < d; ++c) {
      acc += row[c] * dr[c];
      drow[c] += f[x] * dr[c];
    }
    dz[x] += f[x] * du;
    df[x] = add ? df[x] + acc : acc;
  }
}

void memory_run(const MemoryArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, mf = memory_floats(d, a.slots);
  const int64_t rows = memory_rows(d, a.slots);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    // Per-thread buffers, sized again each call (no allocation once warm: decode reads and
    // writes the memory a token at a time).
    thread_local std::vector<float> mem, f, fp, r, upd;
    sized(mem, mf, true), sized(f, d), sized(fp, rows), sized(r, d), sized(upd, mf);
    float* st = a.state ? a.state + (s * a.kv_heads + g) * mf : nullptr;
    if (st) std::copy(st, st + mf, mem.begin());
    float *m = mem.data(), *z = m + rows * d;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = j * a.segment, i1 = std::min(a.t, i0 + a.segment);
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * mf);
      for (int64_t i = i0; i < (a.q ? i1 : i0); ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* q = a.q + (s * a.t + i) * qw + h * d;
          for (int64_t x = 0; x < d; ++x) f[x] = phi(q[x]);
          const float* fe = project_slots(a.proj, rows, g, f.data(), d, fp.data());
          float* y = a.y + (s * a.t + i) * qw + h * d;
          const float den = read(fe, m, z, rows, d, y);
          for (int64_t c = 0; c < d; ++c) y[c] /= den;
        }
      // The delta rule: every key reads the memory before the segment.
      if (!a.write) continue;
      std::fill(upd.begin(), upd.end(), 0.0f);
      for (int64_t i = i0; i < i1; ++i) {
        const float* k = a.k + (s * a.t + i) * kw + g * d;
        const float* v = a.v + (s * a.t + i) * kw + g * d;
        for (int64_t x = 0; x < d; ++x) f[x] = phi(k[x]);
        const float* fe = project_slots(a.proj, rows, g, f.data(), d, fp.data());
        const float den = read(fe, m, z, rows, d, r.data());
        for (int64_t c = 0; c < d; ++c) r[c] = v[c] - r[c] / den;
        for (int64_t x = 0; x < rows; ++x) {
          float* row = upd.data() + x * d;
          for (int64_t c = 0; c < d; ++c) row[c] += fe[x] * r[c];
          upd[static_cast<size_t>(rows * d + x)] += fe[x];
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
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
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
        const float u = read(f.data(), m, z, d, d, num.data());  // num = r
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
        back_read(f.data(), m, z, dnum.data(), du, d, dpm, dpz, df.data(), true);
        for (int64_t x = 0; x < d; ++x) dk[x] = df[x] * dphi(k[x]);
      }
      // The reads: y = r / s, r = f^T M, s = f . z + eps, f = phi(q).
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t h = g * group; h < (g + 1) * group; ++h) {
          const float* q = a.q + (s * a.t + i) * qw + h * d;
          const float* dy = b.dy + (s * a.t + i) * qw + h * d;
          float* dq = b.dq + (s * a.t + i) * qw + h * d;
          for (int64_t x = 0; x < d; ++x) f[x] = phi(q[x]);
          const float den = read(f.data(), m, z, d, d, num.data());
          float ds = 0.0f;
          for (int64_t c = 0; c < d; ++c) {
            dnum[c] = dy[c] / den;
            ds -= dy[c] * num[c];
          }
          ds /= den * den;
          back_read(f.data(), m, z, dnum.data(), ds, d, dpm, dpz, df.data(), false);
          for (int64_t x = 0; x < d; ++x) dq[x] = df[x] * dphi(q[x]);
        }
      dmem.swap(dprev);
    }
  });
}

// The "gemm" variants: the same equations with a segment's rows as matrices on our f32 GEMM (the
// reads F M, the writes' F_k M and F_k^T E, and their backward's products), the rest in loops.
struct Rows {
  // Gathers rows i0..i1 of head(s) [h0, h1) of x (row stride ld, head_dim d) into [L*(h1-h0)][d]
  // (token-major), mapped by fn.
  template <class Fn>
  static void gather(const float* x, int64_t ld, int64_t i0, int64_t i1, int64_t h0, int64_t h1,
                     int64_t d, float* out, Fn fn) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t h = h0; h < h1; ++h) {
        const float* src = x + i * ld + h * d;
        float* dst = out + ((i - i0) * (h1 - h0) + (h - h0)) * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = fn(src[c]);
      }
  }
};

float identity(float x) { return x; }

// den[r] = f[r] . z + eps for rows of f.
void dots(const float* f, const float* z, int64_t rows, int64_t d, float* den) {
  for (int64_t r = 0; r < rows; ++r) {
    float acc = kMemoryEps;
    for (int64_t c = 0; c < d; ++c) acc += f[r * d + c] * z[c];
    den[r] = acc;
  }
}

void memory_gemm_run(const MemoryArgs& a, ThreadPool* pool) {
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, mf = memory_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    const int64_t rows = a.segment * std::max<int64_t>(group, 1);
    // Per-thread buffers, sized again each call (no allocation once warm: decode reads and
    // writes the memory a token at a time).
    thread_local std::vector<float> mem, f, num, den, v;
    sized(mem, mf, true), sized(f, rows * d), sized(num, rows * d), sized(den, rows),
        sized(v, a.segment * d);
    float* st = a.state ? a.state + (s * a.kv_heads + g) * mf : nullptr;
    if (st) std::copy(st, st + mf, mem.begin());
    float *m = mem.data(), *z = m + d * d;
    for (int64_t j = 0; j < segs; ++j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      if (a.saved)
        std::copy(mem.begin(), mem.end(), a.saved + ((s * segs + j) * a.kv_heads + g) * mf);
      if (a.q) {
        const int64_t r = len * group;
        Rows::gather(a.q, qw, i0, i1, g * group, (g + 1) * group, d, f.data(), phi);
        gemm_f32(false, false, r, d, d, f.data(), d, m, d, false, num.data(), d);
        dots(f.data(), z, r, d, den.data());
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t h = 0; h < group; ++h) {
            const int64_t row = (i - i0) * group + h;
            float* y = a.y + i * qw + (g * group + h) * d;
            for (int64_t c = 0; c < d; ++c) y[c] = num[row * d + c] / den[row];
          }
      }
      if (!a.write) continue;
      Rows::gather(a.k, kw, i0, i1, g, g + 1, d, f.data(), phi);
      Rows::gather(a.v, kw, i0, i1, g, g + 1, d, v.data(), identity);
      gemm_f32(false, false, len, d, d, f.data(), d, m, d, false, num.data(), d);
      dots(f.data(), z, len, d, den.data());
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) v[t * d + c] -= num[t * d + c] / den[t];  // e = v - r / u
      gemm_f32(true, false, d, d, len, f.data(), d, v.data(), d, true, m, d);     // M += F^T E
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) z[c] += f[t * d + c];
    }
    if (st) std::copy(mem.begin(), mem.end(), st);
  });
}

void memory_backward_gemm_run(const MemoryBackwardArgs& b, ThreadPool* pool) {
  const MemoryArgs& a = b.fwd;
  const int64_t d = a.head_dim, group = a.heads / a.kv_heads, mf = memory_floats(d);
  const int64_t qw = a.heads * d, kw = a.kv_heads * d, segs = memory_segments(a.t, a.segment);
  for_each_memory_head(a.b, a.kv_heads, pool, [&](int64_t s, int64_t g) {
    const int64_t rows = a.segment * std::max<int64_t>(group, 1);
    std::vector<float> dmem(static_cast<size_t>(mf), 0.0f), dprev(static_cast<size_t>(mf));
    std::vector<float> f(rows * d), num(rows * d), den(rows), e(rows * d), de(rows * d),
        df(rows * d), du(rows);
    for (int64_t j = segs - 1; j >= 0; --j) {
      const int64_t i0 = s * a.t + j * a.segment, i1 = s * a.t + std::min(a.t, (j + 1) * a.segment);
      const int64_t len = i1 - i0;
      const float* m = a.saved + ((s * segs + j) * a.kv_heads + g) * mf;
      const float* z = m + d * d;
      const float *dm = dmem.data(), *dz = dm + d * d;
      std::copy(dmem.begin(), dmem.end(), dprev.begin());
      float *dpm = dprev.data(), *dpz = dpm + d * d;
      // Writes: e = v - r / u, r = F M, u = F z + eps; M_new = M + F^T e, z_new = z + sum F.
      Rows::gather(a.k, kw, i0, i1, g, g + 1, d, f.data(), phi);
      Rows::gather(a.v, kw, i0, i1, g, g + 1, d, e.data(), identity);
      gemm_f32(false, false, len, d, d, f.data(), d, m, d, false, num.data(), d);
      dots(f.data(), z, len, d, den.data());
      for (int64_t t = 0; t < len; ++t)
        for (int64_t c = 0; c < d; ++c) e[t * d + c] -= num[t * d + c] / den[t];
      gemm_f32(false, false, len, d, d, f.data(), d, dm, d, false, de.data(), d);  // de = F dM
      gemm_f32(false, true, len, d, d, e.data(), d, dm, d, false, df.data(), d);   // E dM^T
      for (int64_t t = 0; t < len; ++t) {
        float acc = 0;
        for (int64_t c = 0; c < d; ++c) {
          acc += de[t * d + c] * num[t * d + c];
          df[t * d + c] += dz[c];
        }
        du[t] = acc / (den[t] * den[t]);
        for (int64_t c = 0; c < d; ++c) e[t * d + c] = -de[t * d + c] / den[t];  // e := dr
      }
      gemm_f32(false, true, len, d, d, e.data(), d, m, d, true, df.data(), d);   // += dr M^T
      gemm_f32(true, false, d, d, len, f.data(), d, e.data(), d, true, dpm, d);  // dM += F^T dr
      for (int64_t t = 0; t < len; ++t) {
        const int64_t i = i0 + t;
        const float* k = a.k + i * kw + g * d;
        float* dk = b.dk + i * kw + g * d;
        float* dv = b.dv + i * kw + g * d;
        for (int64_t c = 0; c < d; ++c) {
          dv[c] = de[t * d + c];
          dpz[c] += f[t * d + c] * du[t];
          dk[c] = (df[t * d + c] + du[t] * z[c]) * dphi(k[c]);
        }
      }
      // Reads: y = r / s, r = F M, s = F z + eps.
      const int64_t r = len * group;
      Rows::gather(a.q, qw, i0, i1, g * group, (g + 1) * group, d, f.data(), phi);
      Rows::gather(b.dy, qw, i0, i1, g * group, (g + 1) * group, d, e.data(), identity);
      gemm_f32(false, false, r, d, d, f.data(), d, m, d, false, num.data(), d);
      dots(f.data(), z, r, d, den.data());
      for (int64_t row = 0; row < r; ++row) {
        float acc = 0;
        for (int64_t c = 0; c < d; ++c) {
          acc += e[row * d + c] * num[row * d + c];
          e[row * d + c] /= den[row];  // e := d num
        }
        du[row] = -acc / (den[row] * den[row]);  // du := ds
      }
      gemm_f32(false, true, r, d, d, e.data(), d, m, d, false, df.data(), d);  // dF = dnum M^T
      gemm_f32(true, false, d, d, r, f.data(), d, e.data(), d, true, dpm, d);  // dM += F^T dnum
      for (int64_t i = i0; i < i1; ++i)
        for (int64_t h = 0; h < group; ++h) {
          const int64_t row = (i - i0) * group + h;
          const float* q = a.q + i * qw + (g * group + h) * d;
          float* dq = b.dq + i * qw + (g * group + h) * d;
          for (int64_t c = 0; c < d; ++c) {
            dpz[c] += f[row * d + c] * du[row];
            dq[c] = (df[row * d + c] + du[row] * z[c]) * dphi(q[c]);
          }
        }
      dmem.swap(dprev);
    }
  });
}

// Slot reduction runs on the reference (a reduced memory is for inference, mostly a token a time).
bool full_slots(const MemoryArgs& a) { return a.proj == nullptr; }
const KernelVariant<MemoryArgs> kMemory[] = {{"gemm", gemm_f32_active, memory_gemm_run, full_slots},
                                             {"scalar", always_available, memory_run}};
const KernelVariant<MemoryBackwardArgs> kMemoryBackward[] = {
    {"gemm", gemm_f32_active, memory_backward_gemm_run},
    {"scalar", always_available, memory_backward_run}};

}  // namespace

KernelVariants<MemoryArgs> memory_kernels() { return kMemory; }
KernelVariants<MemoryBackwardArgs> memory_backward_kernels() { return kMemoryBackward; }

}  // namespace nexus::cpu
