// Scalar reference kernels for the 256-element K-quant super-blocks (Q4_K, Q5_K, Q6_K, Q8_K).
// Dequantization follows the ggml layout exactly; the quantizers fit per-sub-block scales (and
// mins) with a weighted least-squares search, then code the scales in 6 or 8 bits.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/quant_k_fit.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): fits the 8 sub-blocks, codes scales and mins in 6
// bits against the super-block d/dmin, then re-rounds every value against the coded scales.
void quantize_k_super_block(const float* x, int nmax, Half* d_out, Half* dmin_out, uint8_t* scales,
                            uint8_t* L, const float* qw) {
  float sc[8], mn[8], w[kQK], sw[8];
  float max_sc = 0.0f, max_mn = 0.0f;
  for (int j = 0; j < 8; ++j) {
    fit_weights(x + kQK * j, kQK, w, qw ? qw + kQK * j : nullptr);
    sc[j] = fit_scale_min(x + kQK * j, w, kQK, nmax, L + kQK * j, &mn[j]);
    sw[j] = 0.0f;
    for (int i = 0; i < kQK; ++i) sw[j] += w[i];
    max_sc = std::max(max_sc, sc[j]);
    max_mn = std::max(max_mn, mn[j]);
  }
  uint8_t ls[8], lm[8];
  if (qw != nullptr) {
    // With importances the 6-bit scales and mins are fitted too, weighted by their sub-blocks'.
    *d_out = f32_to_f16(fit_scale_codes(sc, sw, 8, 63, ls));
    *dmin_out = f32_to_f16(fit_scale_codes(mn, sw, 8, 63, lm));
  } else {
    const float inv_sc = max_sc > 0.0f ? 63.0f / max_sc : 0.0f;
    const float inv_mn = max_mn > 0.0f ? 63.0f / max_mn : 0.0f;
    for (int j = 0; j < 8; ++j) {
      ls[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_sc * sc[j]), 0, 63));
      lm[j] = static_cast<uint8_t>(std::clamp(nearest_int(inv_mn * mn[j]), 0, 63));
    }
    *d_out = f32_to_f16(max_sc / 63.0f);
    *dmin_out = f32_to_f16(max_mn / 63.0f);
  }
  pack_scales_mins_k4(ls, lm, scales);
  const float d = f16_to_f32(*d_out);
  const float dmin = f16_to_f32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * ls[j];
    if (dl == 0.0f) continue;  // keep the fitted codes; they multiply zero anyway
    const float ml = dmin * lm[j];
    for (int i = 0; i < kQK; ++i)
      L[kQK * j + i] =
          static_cast<uint8_t>(std::clamp(nearest_int((x[kQK * j + i] + ml) / dl), 0, nmax));
  }
}

// Unpacks the 6-bit scales and mins of a Q4_K/Q5_K super-block.
inline void scales_mins(const uint8_t* packed, uint8_t* sc, uint8_t* m) {
  for (int j = 0; j < 8; ++j) unpack_scale_min_k4(j, packed, &sc[j], &m[j]);
}

// Codes (0..15 or 0..31) of a Q4_K/Q5_K super-block in element order.
inline void unpack_q4_k(const BlockQ4_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] = b.qs[32 * c + l] & 0xF;
      q[64 * c + 32 + l] = b.qs[32 * c + l] >> 4;
    }
  }
}
inline void unpack_q5_k(const BlockQ5_K& b, uint8_t* q) {
  for (int c = 0; c < 4; ++c) {
    for (int l = 0; l < 32; ++l) {
      q[64 * c + l] =
          static_cast<uint8_t>((b.qs[32 * c + l] & 0xF) | (((b.qh[l] >> (2 * c)) & 1) << 4));
      q[64 * c + 32 + l] =
          static_cast<uint8_t>((b.qs[32 * c + l] >> 4) | (((b.qh[l] >> (2 * c + 1)) & 1) << 4));
    }
  }
}
// Codes of a Q6_K super-block in element order, already shifted to [-32, 31].
inline void unpack_q6_k(const BlockQ6_K& b, int8_t* q) {
  for (int h = 0; h < 2; ++h) {
    const uint8_t* ql = b.ql + 64 * h;
    const uint8_t* qh = b.qh + 32 * h;
    int8_t* o = q + 128 * h;
    for (int l = 0; l < 32; ++l) {
      o[l] = static_cast<int8_t>(((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32);
      o[l + 32] = static_cast<int8_t>(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
      o[l + 64] = static_cast<int8_t>(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
      o[l + 96] = static_cast<int8_t>(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
    }
  }
}

// Dot product of a super-block's unsigned codes with Q8_K values, weighted per 32-element
// sub-block by the 6-bit scales, minus the mins times the Q8_K 16-element sums.
inline float dot_k_super_block(const uint8_t* q, Half d, Half dmin, const uint8_t* packed,
                               const BlockQ8_K& y) {
  uint8_t sc[8], m[8];
  scales_mins(packed, sc, m);
  int sumi = 0, summ = 0;
  for (int j = 0; j < 8; ++j) {
    int s = 0;
    for (int l = 0; l < kQK; ++l) s += q[kQK * j + l] * y.qs[kQK * j + l];
    sumi += sc[j] * s;
    summ += m[j] * (y.bsums[2 * j] + y.bsums[2 * j + 1]);
  }
  return f16_to_f32(d) * y.d * static_cast<float>(sumi) -
         f16_to_f32(dmin) * y.d * static_cast<float>(summ);
}

}  // namespace

// ---- Q4_K ----

void quantize_q4_k_ref(const float* x, void* y, int64_t n) { quantize_q4_k_imp(x, y, n, nullptr); }

void quantize_q4_k_imp(const float* x, void* y, int64_t n, const float* qw) {
  auto* b = static_cast<BlockQ4_K*>(y);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    quantize_k_super_block(x, 15, &b[i].d, &b[i].dmin, b[i].scales, L, qw);
    for (int c = 0; c < 4; ++c)
      for (int l = 0; l < 32; ++l)
        b[i].qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
  }
}

void dequantize_q4_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ4_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d);
    const float dmin = f16_to_f32(b[i].dmin);
    uint8_t sc[8], m[8], q[kQKK];
    scales_mins(b[i].scales, sc, m);
    unpack_q4_k(b[i], q);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * sc[j];
      const float ml = dmin * m[j];
      for (int l = 0; l < kQK; ++l) y[kQK * j + l] = dl * q[kQK * j + l] - ml;
    }
  }
}

float vec_dot_q4_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ4_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  uint8_t q[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    unpack_q4_k(a[i], q);
    s += dot_k_super_block(q, a[i].d, a[i].dmin, a[i].scales, b[i]);
  }
  return s;
}

// ---- Q5_K ----

void quantize_q5_k_ref(const float* x, void* y, int64_t n) { quantize_q5_k_imp(x, y, n, nullptr); }

void quantize_q5_k_imp(const float* x, void* y, int64_t n, const float* qw) {
  auto* b = static_cast<BlockQ5_K*>(y);
  uint8_t L[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    quantize_k_super_block(x, 31, &b[i].d, &b[i].dmin, b[i].scales, L, qw);
    std::memset(b[i].qh, 0, sizeof(b[i].qh));
    for (int c = 0; c < 4; ++c) {
      for (int l = 0; l < 32; ++l) {
        const int lo = L[64 * c + l], hi = L[64 * c + 32 + l];
        b[i].qs[32 * c + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
        b[i].qh[l] |= static_cast<uint8_t>(((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1)));
      }
    }
  }
}

void dequantize_q5_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ5_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d);
    const float dmin = f16_to_f32(b[i].dmin);
    uint8_t sc[8], m[8], q[kQKK];
    scales_mins(b[i].scales, sc, m);
    unpack_q5_k(b[i], q);
    for (int j = 0; j < 8; ++j) {
      const float dl = d * sc[j];
      const float ml = dmin * m[j];
      for (int l = 0; l < kQK; ++l) y[kQK * j + l] = dl * q[kQK * j + l] - ml;
    }
  }
}

float vec_dot_q5_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ5_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  uint8_t q[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    unpack_q5_k(a[i], q);
    s += dot_k_super_block(q, a[i].d, a[i].dmin, a[i].scales, b[i]);
  }
  return s;
}

// ---- Q6_K: 16 sub-blocks of 16 with signed 8-bit scales against one f16 d ----

void quantize_q6_k_ref(const float* x, void* y, int64_t n) { quantize_q6_k_imp(x, y, n, nullptr); }

void quantize_q6_k_imp(const float* x, void* y, int64_t n, const float* qw) {
  auto* b = static_cast<BlockQ6_K*>(y);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    int8_t L[kQKK];
    float sc[16];
    const float max_sc = fit_sub_blocks_symmetric(x, 32, sc, L, qw);
    const float amax_sc = std::fabs(max_sc);
    std::memset(&b[i], 0, sizeof(BlockQ6_K));
    if (amax_sc < 1e-30f) continue;  // all zero: d = 0, codes 0 (value -32 * 0)
    // The largest-magnitude scale maps to -128 so the int8 scale range is fully used.
    const float iscale = -128.0f / max_sc;
    b[i].d = f32_to_f16(1.0f / iscale);
    for (int j = 0; j < 16; ++j)
      b[i].scales[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * sc[j])));
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * b[i].scales[j];
      if (dl == 0.0f) continue;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(std::clamp(nearest_int(x[16 * j + l] / dl), -32, 31));
    }
    for (int h = 0; h < 2; ++h) {
      uint8_t* ql = b[i].ql + 64 * h;
      uint8_t* qh = b[i].qh + 32 * h;
      const int8_t* q = L + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int q1 = q[l] + 32, q2 = q[l + 32] + 32, q3 = q[l + 64] + 32, q4 = q[l + 96] + 32;
        ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
        ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
        qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) |
                                     ((q4 >> 4) << 6));
      }
    }
  }
}

void dequantize_q6_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ6_K*>(x);
  int8_t q[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d);
    unpack_q6_k(b[i], q);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * b[i].scales[j];
      for (int l = 0; l < 16; ++l) y[16 * j + l] = dl * q[16 * j + l];
    }
  }
}

float vec_dot_q6_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ6_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  int8_t q[kQKK];
  for (int64_t i = 0; i < n / kQKK; ++i) {
    unpack_q6_k(a[i], q);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int g = 0;
      for (int l = 0; l < 16; ++l) g += q[16 * j + l] * b[i].qs[16 * j + l];
      sumi += a[i].scales[j] * g;
    }
    s += f16_to_f32(a[i].d) * b[i].d * static_cast<float>(sumi);
  }
  return s;
}

// ---- Q8_K: activation type; the largest-magnitude value maps to -127, ties round to even ----

void quantize_q8_k_ref(const float* x, void* y, int64_t n) {
  auto* b = static_cast<BlockQ8_K*>(y);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < kQKK; ++j) {
      if (std::fabs(x[j]) > amax) {
        amax = std::fabs(x[j]);
        max = x[j];
      }
    }
    if (amax == 0.0f) {
      std::memset(&b[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < kQKK; ++j)
      b[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int g = 0; g < kQKK / 16; ++g) {
      int s = 0;
      for (int l = 0; l < 16; ++l) s += b[i].qs[16 * g + l];
      b[i].bsums[g] = static_cast<int16_t>(s);
    }
    b[i].d = 1.0f / iscale;
  }
}

void dequantize_q8_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ8_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK)
    for (int j = 0; j < kQKK; ++j) y[j] = b[i].d * b[i].qs[j];
}

float vec_dot_q8_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ8_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sumi = 0;
    for (int j = 0; j < kQKK; ++j) sumi += a[i].qs[j] * b[i].qs[j];
    s += a[i].d * b[i].d * static_cast<float>(sumi);
  }
  return s;
}

}  // namespace nexus::cpu
