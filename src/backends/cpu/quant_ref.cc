// Scalar reference kernels for F32/F16/BF16 and the 32-element block types (Q4_0 ... Q8_1).
// Quantizers follow ggml's quantize_row_*_ref arithmetic step for step (same float operations,
// same truncating casts) so the bytes match llama.cpp's; the AVX2 versions must match these.
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

inline float h2f(Half h) { return f16_to_f32(h); }
inline Half f2h(float f) { return f32_to_f16(f); }

// Largest-magnitude value of a block with its sign (the first one wins ties, like ggml).
inline float signed_absmax(const float* x, int n) {
  float amax = 0.0f;
  float max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  return max;
}

inline void min_max(const float* x, int n, float* mn, float* mx) {
  float lo = FLT_MAX;
  float hi = -FLT_MAX;
  for (int j = 0; j < n; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

// The 5th bits of a Q5 block as a 0/16 value for element j.
inline int high_bit(uint32_t qh, int j) { return static_cast<int>((qh >> j) & 1u) << 4; }

// Sum of w[i] * x[i] over one 32-element block of 8-bit activation values.
template <typename W>
inline int block_dot_i8(const W* w, const int8_t* x) {
  int s = 0;
  for (int j = 0; j < kQK; ++j) s += static_cast<int>(w[j]) * x[j];
  return s;
}

// Unpacks the 4-bit (plus optional 5th bit) codes of a block into 32 bytes in element order.
inline void unpack_nibbles(const uint8_t* qs, uint8_t* q) {
  for (int j = 0; j < kQK / 2; ++j) {
    q[j] = qs[j] & 0x0F;
    q[j + kQK / 2] = qs[j] >> 4;
  }
}

}  // namespace

// ---- plain float types ----

void quantize_f32_ref(const float* x, void* y, int64_t n) { std::memcpy(y, x, n * sizeof(float)); }
void dequantize_f32_ref(const void* x, float* y, int64_t n) {
  std::memcpy(y, x, n * sizeof(float));
}
void quantize_f16_ref(const float* x, void* y, int64_t n) {
  auto* h = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_f16(x[i]);
}
void dequantize_f16_ref(const void* x, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = f16_to_f32(h[i]);
}
void quantize_bf16_ref(const float* x, void* y, int64_t n) {
  auto* h = static_cast<uint16_t*>(y);
  for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(x[i]);
}
void dequantize_bf16_ref(const void* x, float* y, int64_t n) {
  const auto* h = static_cast<const uint16_t*>(x);
  for (int64_t i = 0; i < n; ++i) y[i] = bf16_to_f32(h[i]);
}

float vec_dot_f32_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const float*>(w);
  const auto* b = static_cast<const float*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
float vec_dot_f16_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += f16_to_f32(a[i]) * b[i];
  return s;
}
float vec_dot_bf16_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const uint16_t*>(w);
  const auto* b = static_cast<const float*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += bf16_to_f32(a[i]) * b[i];
  return s;
}

// ---- Q4_0: symmetric 4-bit, d = signed absmax / -8 so the extreme value maps to code 0 ----

void quantize_q4_0_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ4_0*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t q0 = std::min<uint8_t>(15, static_cast<int8_t>(x[j] * id + 8.5f));
      const uint8_t q1 = std::min<uint8_t>(15, static_cast<int8_t>(x[j + kQK / 2] * id + 8.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_q4_0_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) - 8) * d;
    }
  }
}

float vec_dot_q4_0_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t q[kQK];
    unpack_nibbles(a[i].qs, q);
    int sumi = block_dot_i8(q, b[i].qs);
    int sumx = 0;
    for (int j = 0; j < kQK; ++j) sumx += b[i].qs[j];
    sumi -= 8 * sumx;
    s += static_cast<float>(sumi) * (h2f(a[i].d) * h2f(b[i].d));
  }
  return s;
}

// ---- Q4_1: asymmetric 4-bit, x = d * q + m with m the block minimum ----

void quantize_q4_1_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ4_1*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t q0 = std::min<uint8_t>(15, static_cast<int8_t>((x[j] - mn) * id + 0.5f));
      const uint8_t q1 =
          std::min<uint8_t>(15, static_cast<int8_t>((x[j + kQK / 2] - mn) * id + 0.5f));
      b[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void dequantize_q4_1_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    const float m = h2f(b[i].m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(b[i].qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = static_cast<float>(b[i].qs[j] >> 4) * d + m;
    }
  }
}

// sum((d q + m) * dx qx) = d dx sum(q qx) + m * s, where s = dx * sum(qx) comes with the Q8_1
// block.
float vec_dot_q4_1_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    uint8_t q[kQK];
    unpack_nibbles(a[i].qs, q);
    const int sumi = block_dot_i8(q, b[i].qs);
    s += static_cast<float>(sumi) * (h2f(a[i].d) * h2f(b[i].d)) + h2f(a[i].m) * h2f(b[i].s);
  }
  return s;
}

// ---- Q5_0 / Q5_1: as Q4 with a fifth bit per element in qh ----

void quantize_q5_0_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ5_0*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t q0 = std::min<uint8_t>(31, static_cast<int8_t>(x[j] * id + 16.5f));
      const uint8_t q1 = std::min<uint8_t>(31, static_cast<int8_t>(x[j + kQK / 2] * id + 16.5f));
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>(q0 >> 4) << j;
      qh |= static_cast<uint32_t>(q1 >> 4) << (j + kQK / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void dequantize_q5_0_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>(((b[i].qs[j] & 0x0F) | high_bit(qh, j)) - 16) * d;
      y[j + kQK / 2] = static_cast<float>(((b[i].qs[j] >> 4) | high_bit(qh, j + kQK / 2)) - 16) * d;
    }
  }
}

float vec_dot_q5_0_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_u32(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = ((a[i].qs[j] & 0x0F) | high_bit(qh, j)) - 16;
      const int q1 = ((a[i].qs[j] >> 4) | high_bit(qh, j + kQK / 2)) - 16;
      sumi += q0 * b[i].qs[j] + q1 * b[i].qs[j + kQK / 2];
    }
    s += static_cast<float>(sumi) * (h2f(a[i].d) * h2f(b[i].d));
  }
  return s;
}

void quantize_q5_1_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ5_1*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float mn, mx;
    min_max(x, kQK, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    b[i].m = f2h(mn);
    uint32_t qh = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      // ggml does not clamp here: (x - min) * id + 0.5 stays below 32 for finite inputs.
      const uint8_t q0 = static_cast<uint8_t>((x[j] - mn) * id + 0.5f);
      const uint8_t q1 = static_cast<uint8_t>((x[j + kQK / 2] - mn) * id + 0.5f);
      b[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + kQK / 2);
    }
    std::memcpy(b[i].qh, &qh, 4);
  }
}

void dequantize_q5_1_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    const float m = h2f(b[i].m);
    const uint32_t qh = load_u32(b[i].qh);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((b[i].qs[j] & 0x0F) | high_bit(qh, j)) * d + m;
      y[j + kQK / 2] = static_cast<float>((b[i].qs[j] >> 4) | high_bit(qh, j + kQK / 2)) * d + m;
    }
  }
}

float vec_dot_q5_1_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_1*>(w);
  const auto* b = static_cast<const BlockQ8_1*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i) {
    const uint32_t qh = load_u32(a[i].qh);
    int sumi = 0;
    for (int j = 0; j < kQK / 2; ++j) {
      const int q0 = (a[i].qs[j] & 0x0F) | high_bit(qh, j);
      const int q1 = (a[i].qs[j] >> 4) | high_bit(qh, j + kQK / 2);
      sumi += q0 * b[i].qs[j] + q1 * b[i].qs[j + kQK / 2];
    }
    s += static_cast<float>(sumi) * (h2f(a[i].d) * h2f(b[i].d)) + h2f(a[i].m) * h2f(b[i].s);
  }
  return s;
}

// ---- Q8_0 / Q8_1: symmetric 8-bit, d = absmax / 127, codes rounded half away from zero ----

void quantize_q8_0_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_0*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    for (int j = 0; j < kQK; ++j) b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void dequantize_q8_0_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_0*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

float vec_dot_q8_0_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_0*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i)
    s += static_cast<float>(block_dot_i8(a[i].qs, b[i].qs)) * (h2f(a[i].d) * h2f(b[i].d));
  return s;
}

void quantize_q8_1_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_1*>(y);
  for (int64_t i = 0; i < n / kQK; ++i, x += kQK) {
    float amax = 0.0f;
    for (int j = 0; j < kQK; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    b[i].d = f2h(d);
    int sum = 0;
    for (int j = 0; j < kQK; ++j) {
      b[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
      sum += b[i].qs[j];
    }
    b[i].s = f2h(static_cast<float>(sum) * d);
  }
}

void dequantize_q8_1_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_1*>(x);
  for (int64_t i = 0; i < n / kQK; ++i, y += kQK) {
    const float d = h2f(b[i].d);
    for (int j = 0; j < kQK; ++j) y[j] = static_cast<float>(b[i].qs[j]) * d;
  }
}

// Q8_1 weights (rare in files) use Q8_0 activations; the stored sum is not needed.
float vec_dot_q8_1_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_1*>(w);
  const auto* b = static_cast<const BlockQ8_0*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQK; ++i)
    s += static_cast<float>(block_dot_i8(a[i].qs, b[i].qs)) * (h2f(a[i].d) * h2f(b[i].d));
  return s;
}

}  // namespace nexus::cpu
