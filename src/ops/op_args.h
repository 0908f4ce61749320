// Bytes, flops and shapes of the instrumented forward-pass ops: the arguments of their
// NEXUS_PROFILE_OP spans, evaluated only while profiling is on. Bytes are the logical traffic (each
// operand read or written once), so GB/s in the summary is achieved, not peak, bandwidth.
#pragma once

#include <algorithm>
#include <cstdint>

#include "nexus/profile.h"
#include "nexus/tensor.h"
#include "ops/attention.h"
#include "backends/cpu/kv_cache.h"

namespace nexus::profile {

// y[n, rows] = x[n, k] W[rows, k]^T: the weight plus the f32 activations in and out.
inline int64_t matmul_bytes(const Tensor& w, int64_t n) {
  return static_cast<int64_t>(w.nbytes()) + n * (w.cols() + w.rows()) * 4;
}
inline int64_t matmul_flops(const Tensor& w, int64_t n) { return 2 * n * w.rows() * w.cols(); }
inline Text matmul_shapes(const Tensor& w, int64_t n) {
  const std::string_view t = dtype_name(w.dtype());
  return text("x[%lld,%lld] w[%lld,%lld] %.*s", static_cast<long long>(n),
              static_cast<long long>(w.cols()), static_cast<long long>(w.rows()),
              static_cast<long long>(w.cols()), static_cast<int>(t.size()), t.data());
}

// A row-wise op over rows x dim f32 values, each read and written once.
inline int64_t rows_bytes(int64_t rows, int64_t dim) { return 2 * rows * dim * 4; }
inline Text rows_shapes(int64_t rows, int64_t dim) {
  return text("[%lld,%lld]", static_cast<long long>(rows), static_cast<long long>(dim));
}

// Storing n tokens' keys and values: f32 rows in, cache rows out.
inline int64_t kv_store_bytes(const KvCache& kv, int64_t n) {
  return 2 * n * (kv.row_width() * 4 + static_cast<int64_t>(row_bytes(kv.type(), kv.row_width())));
}

// Keys visible to the n queries at positions pos[] (summed), per the window rule of attention().
inline int64_t attention_keys(const int32_t* pos, int64_t n, const AttentionParams& p) {
  int64_t keys = 0;
  for (int64_t t = 0; t < n; ++t)
    keys += p.window > 0 ? std::min<int64_t>(pos[t] + 1, p.window) : pos[t] + 1;
  return keys;
}
// K and V rows of every visible key, plus q in and the output out in f32.
inline int64_t attention_bytes(const KvCache& kv, const int32_t* pos, int64_t n,
                               const AttentionParams& p) {
  const int64_t row = static_cast<int64_t>(row_bytes(kv.type(), kv.row_width()));
  return 2 * attention_keys(pos, n, p) * row + 2 * n * p.n_heads * p.head_dim * 4;
}
// q.k and the weighted sum of v: 2 flops each per head dimension and visible key.
inline int64_t attention_flops(const int32_t* pos, int64_t n, const AttentionParams& p) {
  return 4 * attention_keys(pos, n, p) * p.n_heads * p.head_dim;
}
inline Text attention_shapes(const KvCache& kv, int64_t n, const AttentionParams& p) {
  const std::string_view t = dtype_name(kv.type());
  return text("q[%lld,%lldx%lld] kv_heads %lld %.*s", static_cast<long long>(n),
              static_cast<long long>(p.n_heads), static_cast<long long>(p.head_dim),
              static_cast<long long>(p.n_kv_heads), static_cast<int>(t.size()), t.data());
}

}  // namespace nexus::profile
