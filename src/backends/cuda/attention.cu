// Training's causal self-attention on CUDA with saved probabilities (backends/api/attention.h),
// forward and backward. The forward is a block per (sequence, head, query): scores into the
// probability row, a block max and sum, then the row times V with a thread per output column.
// The backward computes ds = att * (dout . v - sum_j att dout . v) per row into a device buffer
// as large as att (from the caching pool), then dq by rows and dk, dv by key rows, each summing
// over the group's heads and the queries in order (no atomics: the same result on every run).
#include <algorithm>
#include <cmath>
#include <string>

#include "backends/cuda/kernels.h"
#include "backends/cuda/launch.h"
#include "core/device_memory.h"

namespace nexus::cuda {
namespace {

// The first key query i sees.
__device__ inline int64_t first_key(int64_t i, int64_t window) {
  return window > 0 && i - window + 1 > 0 ? i - window + 1 : 0;
}

// One (sequence, head, query) per block: grid (t, n_heads, b).
__global__ void attention_rows(float* out, float* att, const float* q, const float* k,
                               const float* v, AttnShape s, float scale) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t g = h / (s.n_heads / s.n_kv_heads), d = s.head_dim;
  const int64_t qw = s.n_heads * d, kw = s.n_kv_heads * d;
  const float* qi = q + (b * s.t + i) * qw + h * d;
  float* row = att + ((b * s.n_heads + h) * s.t + i) * s.t;
  const int64_t j0 = first_key(i, s.window);
  float m = -INFINITY;
  for (int64_t j = threadIdx.x; j < s.t; j += kThreads) {
    if (j < j0 || j > i) {
      row[j] = 0.0f;
      continue;
    }
    const float* kj = k + (b * s.t + j) * kw + g * d;
    float dot = 0.0f;
    for (int64_t c = 0; c < d; ++c) dot += qi[c] * kj[c];
    row[j] = dot * scale;
    m = fmaxf(m, row[j]);
  }
  m = block_max(m);
  float sum = 0.0f;
  for (int64_t j = j0 + threadIdx.x; j <= i; j += kThreads) {
    const float e = expf(row[j] - m);
    row[j] = e;
    sum += e;
  }
  const float inv = 1.0f / block_sum(sum);
  for (int64_t j = j0 + threadIdx.x; j <= i; j += kThreads) row[j] *= inv;
  __syncthreads();
  float* oi = out + (b * s.t + i) * qw + h * d;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) {
    float acc = 0.0f;
    for (int64_t j = j0; j <= i; ++j) acc += row[j] * v[(b * s.t + j) * kw + g * d + c];
    oi[c] = acc;
  }
}

// ds row of (sequence, head, query): att * (dout . v_j - sum_j att dout . v_j), zeros elsewhere.
__global__ void score_grad_rows(float* ds, const float* att, const float* dout, const float* v,
                                AttnShape s) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t g = h / (s.n_heads / s.n_kv_heads), d = s.head_dim;
  const int64_t qw = s.n_heads * d, kw = s.n_kv_heads * d;
  const float* di = dout + (b * s.t + i) * qw + h * d;
  const size_t o = ((b * s.n_heads + h) * s.t + i) * s.t;
  const int64_t j0 = first_key(i, s.window);
  float part = 0.0f;
  for (int64_t j = threadIdx.x; j < s.t; j += kThreads) {
    if (j < j0 || j > i) {
      ds[o + j] = 0.0f;
      continue;
    }
    const float* vj = v + (b * s.t + j) * kw + g * d;
    float dp = 0.0f;
    for (int64_t c = 0; c < d; ++c) dp += di[c] * vj[c];
    ds[o + j] = dp;  // d att for now
    part += att[o + j] * dp;
  }
  const float total = block_sum(part);
  for (int64_t j = j0 + threadIdx.x; j <= i; j += kThreads)
    ds[o + j] = att[o + j] * (ds[o + j] - total);
}

// dq row: scale * sum_j ds_ij k_j, a thread per column.
__global__ void query_grad_rows(float* dq, const float* ds, const float* k, AttnShape s,
                                float scale) {
  const int64_t i = blockIdx.x, h = blockIdx.y, b = blockIdx.z;
  const int64_t g = h / (s.n_heads / s.n_kv_heads), d = s.head_dim;
  const int64_t kw = s.n_kv_heads * d;
  const float* row = ds + ((b * s.n_heads + h) * s.t + i) * s.t;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) {
    float acc = 0.0f;
    for (int64_t j = first_key(i, s.window); j <= i; ++j)
      acc += row[j] * k[(b * s.t + j) * kw + g * d + c];
    dq[(b * s.t + i) * s.n_heads * d + h * d + c] = acc * scale;
  }
}

// dk and dv rows of (sequence, kv head, key j): over the group's heads, then the queries that see
// j, in order. Grid (t, n_kv_heads, b).
__global__ void key_value_grad_rows(float* dk, float* dv, const float* ds, const float* att,
                                    const float* q, const float* dout, AttnShape s, float scale) {
  const int64_t j = blockIdx.x, g = blockIdx.y, b = blockIdx.z;
  const int64_t group = s.n_heads / s.n_kv_heads, d = s.head_dim;
  const int64_t qw = s.n_heads * d, kw = s.n_kv_heads * d;
  const int64_t i1 = s.window > 0 ? min(s.t, j + s.window) : s.t;
  for (int64_t c = threadIdx.x; c < d; c += kThreads) {
    float gk = 0.0f, gv = 0.0f;
    for (int64_t h = g * group; h < (g + 1) * group; ++h) {
      const size_t o = (b * s.n_heads + h) * s.t * s.t;
      for (int64_t i = j; i < i1; ++i) {
        const size_t r = o + i * s.t + j, x = (b * s.t + i) * qw + h * d + c;
        gk += ds[r] * q[x];
        gv += att[r] * dout[x];
      }
    }
    dk[(b * s.t + j) * kw + g * d + c] = gk * scale;
    dv[(b * s.t + j) * kw + g * d + c] = gv;
  }
}

dim3 rows_grid(const AttnShape& s, int64_t heads) {
  return dim3(static_cast<unsigned>(s.t), static_cast<unsigned>(heads), static_cast<unsigned>(s.b));
}

float scale_of(const AttnShape& s) { return 1.0f / std::sqrt(static_cast<float>(s.head_dim)); }

void attention(const CausalAttentionArgs& a, ThreadPool*) {
  if (a.s.b == 0) return;
  attention_rows<<<rows_grid(a.s, a.s.n_heads), kThreads>>>(a.out, a.att, a.q, a.k, a.v, a.s,
                                                            scale_of(a.s));
  finish("causal_attention");
}

void attention_backward(const CausalAttentionBackwardArgs& a, ThreadPool*) {
  if (a.s.b == 0) return;
  const size_t bytes = static_cast<size_t>(a.s.b * a.s.n_heads * a.s.t * a.s.t) * sizeof(float);
  int dev = 0;
  cudaGetDevice(&dev);
  const DeviceMemory* mem = registered_device_memory(DeviceType::kCuda);
  auto* ds = mem ? static_cast<float*>(mem->alloc(dev, bytes, MemCategory::kActivations)) : nullptr;
  if (ds == nullptr)
    throw Error("[causal_attention_backward] out of CUDA memory for the score gradients (" +
                std::to_string(bytes >> 20) + " MiB)");
  const float scale = scale_of(a.s);
  score_grad_rows<<<rows_grid(a.s, a.s.n_heads), kThreads>>>(ds, a.att, a.dout, a.v, a.s);
  query_grad_rows<<<rows_grid(a.s, a.s.n_heads), kThreads>>>(a.dq, ds, a.k, a.s, scale);
  key_value_grad_rows<<<rows_grid(a.s, a.s.n_kv_heads), kThreads>>>(a.dk, a.dv, ds, a.att, a.q,
                                                                    a.dout, a.s, scale);
  try {
    finish("causal_attention_backward");
  } catch (...) {
    mem->free(dev, ds, bytes, MemCategory::kActivations);
    throw;
  }
  mem->free(dev, ds, bytes, MemCategory::kActivations);
}

// Grids of t x heads x b blocks: t and b within CUDA's limits on y and z.
bool fits(const AttnShape& s) { return s.n_heads <= 65535 && s.b <= 65535; }
bool takes(const CausalAttentionArgs& a) { return fits(a.s); }
bool takes_backward(const CausalAttentionBackwardArgs& a) { return fits(a.s); }

const KernelVariant<CausalAttentionArgs> kAttention[] = {
    {"cuda", device_present, attention, takes}};
const KernelVariant<CausalAttentionBackwardArgs> kAttentionBackward[] = {
    {"cuda", device_present, attention_backward, takes_backward}};

}  // namespace

KernelVariants<CausalAttentionArgs> causal_attention_kernels() { return kAttention; }
KernelVariants<CausalAttentionBackwardArgs> causal_attention_backward_kernels() {
  return kAttentionBackward;
}

}  // namespace nexus::cuda
