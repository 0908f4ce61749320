// Scalar reference kernels for the 2- and 3-bit K-quants (Q2_K, Q3_K), whose 256-element
// super-blocks hold 16 sub-blocks of 16 (layouts in blocks.h). Dequantization and dot products
// follow the ggml layout exactly; the quantizers fit each sub-block's scale (and min) by weighted
// least squares (quant_k_fit.h), code the scales against the super-block's d, and re-round every
// value against the coded scales.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/quant_k_fit.h"
#include "nexus/dtype.h"

namespace nexus::cpu {
namespace {

// Code of element e (0..255) of a Q2_K/Q3_K super-block: bits 2c, 2c + 1 of qs[32h + l] for
// e = 128h + 32c + l.
inline int low2(const uint8_t* qs, int e) {
  const int h = e / 128, c = (e % 128) / 32, l = e % 32;
  return (qs[32 * h + l] >> (2 * c)) & 3;
}
inline void set_low2(uint8_t* qs, int e, int v) {
  const int h = e / 128, c = (e % 128) / 32, l = e % 32;
  qs[32 * h + l] = static_cast<uint8_t>(qs[32 * h + l] | (v << (2 * c)));
}
// Sub-block of element e: 16 consecutive elements each.
inline int sub_block(int e) { return e / 16; }

// The 16 Q3_K scales as 0..63 (subtract 32 for the signed value).
inline void unpack_q3_k_scales(const uint8_t* packed, int* s) {
  for (int j = 0; j < 16; ++j) {
    const int lo = j < 8 ? packed[j] & 0xF : packed[j - 8] >> 4;
    const int hi = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    s[j] = lo | (hi << 4);
  }
}
inline void pack_q3_k_scales(const int* s, uint8_t* packed) {
  std::memset(packed, 0, 12);
  for (int j = 0; j < 16; ++j) {
    packed[j % 8] = static_cast<uint8_t>(packed[j % 8] | ((s[j] & 0xF) << (j < 8 ? 0 : 4)));
    packed[8 + j % 4] = static_cast<uint8_t>(packed[8 + j % 4] | ((s[j] >> 4) << (2 * (j / 4))));
  }
}
// Signed Q3_K code of element e: low 2 bits less 4 when its hmask bit is clear.
inline int q3_code(const BlockQ3_K& b, int e) {
  const int h = e / 128, c = (e % 128) / 32, l = e % 32;
  const int hbit = (b.hmask[l] >> (4 * h + c)) & 1;
  return low2(b.qs, e) - (hbit ? 0 : 4);
}

}  // namespace

// ---- Q2_K: 4-bit scales and mins per sub-block against f16 d and dmin ----

void quantize_q2_k_ref(const float* x, void* y, int64_t n) { quantize_q2_k_imp(x, y, n, nullptr); }

void quantize_q2_k_imp(const float* x, void* y, int64_t n, const float* qw) {
  auto* b = static_cast<BlockQ2_K*>(y);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    uint8_t L[kQKK];
    float sc[16], mn[16], w[16], sw[16];
    float max_sc = 0.0f, max_mn = 0.0f;
    for (int j = 0; j < 16; ++j) {
      fit_weights(x + 16 * j, 16, w, qw ? qw + 16 * j : nullptr);
      sc[j] = fit_scale_min(x + 16 * j, w, 16, 3, L + 16 * j, &mn[j]);
      sw[j] = 0.0f;
      for (int l = 0; l < 16; ++l) sw[j] += w[l];
      max_sc = std::max(max_sc, sc[j]);
      max_mn = std::max(max_mn, mn[j]);
    }
    std::memset(&b[i], 0, sizeof(BlockQ2_K));
    // With importances the 4-bit scales and mins are fitted too, weighted by their sub-blocks'.
    uint8_t ls[16], lm[16];
    if (qw != nullptr) {
      b[i].d = f32_to_f16(fit_scale_codes(sc, sw, 16, 15, ls));
      b[i].dmin = f32_to_f16(fit_scale_codes(mn, sw, 16, 15, lm));
    } else {
      b[i].d = f32_to_f16(max_sc / 15.0f);
      b[i].dmin = f32_to_f16(max_mn / 15.0f);
    }
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int j = 0; j < 16; ++j) {
      const int q_sc = qw != nullptr ? ls[j] : d > 0.0f ? std::clamp(nearest_int(sc[j] / d), 0, 15) : 0;
      const int q_mn = qw != nullptr ? lm[j] : dmin > 0.0f ? std::clamp(nearest_int(mn[j] / dmin), 0, 15) : 0;
      b[i].scales[j] = static_cast<uint8_t>(q_sc | (q_mn << 4));
      const float dl = d * q_sc, ml = dmin * q_mn;
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<uint8_t>(
            dl > 0.0f ? std::clamp(nearest_int((x[16 * j + l] + ml) / dl), 0, 3) : 0);
    }
    for (int e = 0; e < kQKK; ++e) set_low2(b[i].qs, e, L[e]);
  }
}

void dequantize_q2_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ2_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d), dmin = f16_to_f32(b[i].dmin);
    for (int e = 0; e < kQKK; ++e) {
      const uint8_t sc = b[i].scales[sub_block(e)];
      y[e] = d * static_cast<float>(sc & 0xF) * static_cast<float>(low2(b[i].qs, e)) -
             dmin * static_cast<float>(sc >> 4);
    }
  }
}

float vec_dot_q2_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ2_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sumi = 0, summ = 0;
    for (int j = 0; j < 16; ++j) {
      int g = 0;
      for (int l = 0; l < 16; ++l) g += low2(a[i].qs, 16 * j + l) * b[i].qs[16 * j + l];
      sumi += (a[i].scales[j] & 0xF) * g;
      summ += (a[i].scales[j] >> 4) * b[i].bsums[j];
    }
    s += f16_to_f32(a[i].d) * b[i].d * static_cast<float>(sumi) -
         f16_to_f32(a[i].dmin) * b[i].d * static_cast<float>(summ);
  }
  return s;
}

// ---- Q3_K: signed 6-bit scales per sub-block against one f16 d, codes -4..3 ----

void quantize_q3_k_ref(const float* x, void* y, int64_t n) { quantize_q3_k_imp(x, y, n, nullptr); }

void quantize_q3_k_imp(const float* x, void* y, int64_t n, const float* qw) {
  auto* b = static_cast<BlockQ3_K*>(y);
  for (int64_t i = 0; i < n / kQKK; ++i, x += kQKK, qw = qw ? qw + kQKK : nullptr) {
    int8_t L[kQKK];
    float sc[16];
    const float max_sc = fit_sub_blocks_symmetric(x, 4, sc, L, qw);
    const float amax_sc = std::fabs(max_sc);
    std::memset(&b[i], 0, sizeof(BlockQ3_K));
    int s[16] = {};
    if (amax_sc >= 1e-30f) {
      // The largest-magnitude scale maps to -32, the end of the signed 6-bit range.
      const float iscale = -32.0f / max_sc;
      b[i].d = f32_to_f16(1.0f / iscale);
      for (int j = 0; j < 16; ++j) s[j] = std::clamp(nearest_int(iscale * sc[j]), -32, 31);
    }
    const float d = f16_to_f32(b[i].d);
    for (int j = 0; j < 16; ++j) {
      const float dl = d * static_cast<float>(s[j]);
      for (int l = 0; l < 16; ++l)
        L[16 * j + l] = static_cast<int8_t>(
            dl != 0.0f ? std::clamp(nearest_int(x[16 * j + l] / dl), -4, 3) : 0);
      s[j] += 32;
    }
    pack_q3_k_scales(s, b[i].scales);
    for (int e = 0; e < kQKK; ++e) {
      const int q = L[e] + 4;  // 0..7: the low 2 bits, and the high bit set for codes >= 0
      set_low2(b[i].qs, e, q & 3);
      const int h = e / 128, c = (e % 128) / 32, l = e % 32;
      if (q & 4) b[i].hmask[l] = static_cast<uint8_t>(b[i].hmask[l] | (1 << (4 * h + c)));
    }
  }
}

void dequantize_q3_k_ref(const void* x, float* y, int64_t n) {
  const auto* b = static_cast<const BlockQ3_K*>(x);
  for (int64_t i = 0; i < n / kQKK; ++i, y += kQKK) {
    const float d = f16_to_f32(b[i].d);
    int s[16];
    unpack_q3_k_scales(b[i].scales, s);
    for (int e = 0; e < kQKK; ++e)
      y[e] = d * static_cast<float>(s[sub_block(e)] - 32) * static_cast<float>(q3_code(b[i], e));
  }
}

float vec_dot_q3_k_ref(int64_t n, const void* w, const void* x) {
  const auto* a = static_cast<const BlockQ3_K*>(w);
  const auto* b = static_cast<const BlockQ8_K*>(x);
  float s = 0.0f;
  for (int64_t i = 0; i < n / kQKK; ++i) {
    int sc[16];
    unpack_q3_k_scales(a[i].scales, sc);
    int sumi = 0;
    for (int j = 0; j < 16; ++j) {
      int g = 0;
      for (int l = 0; l < 16; ++l) g += q3_code(a[i], 16 * j + l) * b[i].qs[16 * j + l];
      sumi += (sc[j] - 32) * g;
    }
    s += f16_to_f32(a[i].d) * b[i].d * static_cast<float>(sumi);
  }
  return s;
}

}  // namespace nexus::cpu
