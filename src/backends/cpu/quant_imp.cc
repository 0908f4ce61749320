// Quantization weighted by an importance matrix (quant.h: quantize_row_imp): the 32-value block
// types fit their scale (and min) by weighted least squares over a sweep of step sizes
// (quant_k_fit.h) instead of ggml's absmax rule; the K-quants take the importances into their
// own fits (quant_k_ref.cc, quant_k23_ref.cc).
#include <algorithm>
#include <cstring>

#include "backends/cpu/blocks.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/quant_impl.h"
#include "backends/cpu/quant_k_fit.h"

namespace nexus::cpu {
namespace {

// Symmetric 32-blocks (Q4_0: codes -8..7, Q5_0: -16..15): the fitted scale, rounded to f16, and
// the codes re-rounded against it, offset to 0..2 nmax - 1.
void fit_symmetric_block(const float* x, const float* qw, int nmax, Half* d_out, uint8_t* q) {
  float w[kQK];
  int8_t L[kQK];
  fit_weights(x, kQK, w, qw);
  const float scale = fit_scale_symmetric(x, w, kQK, nmax, L);
  *d_out = f32_to_f16(scale);
  const float d = f16_to_f32(*d_out);
  for (int i = 0; i < kQK; ++i)
    q[i] = static_cast<uint8_t>(
        (d != 0.0f ? std::clamp(nearest_int(x[i] / d), -nmax, nmax - 1) : 0) + nmax);
}

// Blocks with a min (Q4_1: codes 0..15, Q5_1: 0..31): x ~ d q + m.
void fit_min_block(const float* x, const float* qw, int nmax, Half* d_out, Half* m_out,
                   uint8_t* q) {
  float w[kQK];
  uint8_t L[kQK];
  fit_weights(x, kQK, w, qw);
  float offset = 0.0f;
  const float scale = fit_scale_min(x, w, kQK, nmax, L, &offset);
  *d_out = f32_to_f16(scale);
  *m_out = f32_to_f16(-offset);
  const float d = f16_to_f32(*d_out), m = f16_to_f32(*m_out);
  for (int i = 0; i < kQK; ++i)
    q[i] = static_cast<uint8_t>(d > 0.0f ? std::clamp(nearest_int((x[i] - m) / d), 0, nmax) : 0);
}

void pack_nibbles(const uint8_t* q, uint8_t* qs) {
  for (int j = 0; j < kQK / 2; ++j)
    qs[j] = static_cast<uint8_t>((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
}

void pack_high_bits(const uint8_t* q, uint8_t* qh) {
  uint32_t h = 0;
  for (int j = 0; j < kQK; ++j) h |= static_cast<uint32_t>(q[j] >> 4) << j;
  std::memcpy(qh, &h, 4);
}

}  // namespace

bool takes_importance(DType t) {
  switch (t) {
    case DType::kQ4_0: case DType::kQ4_1: case DType::kQ5_0: case DType::kQ5_1:
    case DType::kQ2_K: case DType::kQ3_K: case DType::kQ4_K: case DType::kQ5_K:
    case DType::kQ6_K:
      return true;
    default:
      return false;
  }
}

void quantize_row_imp(DType t, const float* x, void* y, int64_t n, const float* qw) {
  if (qw == nullptr || !takes_importance(t)) return quantize_row(t, x, y, n);
  uint8_t q[kQK];
  switch (t) {
    case DType::kQ4_0:
      for (int64_t i = 0; i < n / kQK; ++i) {
        auto& b = static_cast<BlockQ4_0*>(y)[i];
        fit_symmetric_block(x + i * kQK, qw + i * kQK, 8, &b.d, q);
        pack_nibbles(q, b.qs);
      }
      return;
    case DType::kQ5_0:
      for (int64_t i = 0; i < n / kQK; ++i) {
        auto& b = static_cast<BlockQ5_0*>(y)[i];
        fit_symmetric_block(x + i * kQK, qw + i * kQK, 16, &b.d, q);
        pack_nibbles(q, b.qs);
        pack_high_bits(q, b.qh);
      }
      return;
    case DType::kQ4_1:
      for (int64_t i = 0; i < n / kQK; ++i) {
        auto& b = static_cast<BlockQ4_1*>(y)[i];
        fit_min_block(x + i * kQK, qw + i * kQK, 15, &b.d, &b.m, q);
        pack_nibbles(q, b.qs);
      }
      return;
    case DType::kQ5_1:
      for (int64_t i = 0; i < n / kQK; ++i) {
        auto& b = static_cast<BlockQ5_1*>(y)[i];
        fit_min_block(x + i * kQK, qw + i * kQK, 31, &b.d, &b.m, q);
        pack_nibbles(q, b.qs);
        pack_high_bits(q, b.qh);
      }
      return;
    case DType::kQ2_K: return quantize_q2_k_imp(x, y, n, qw);
    case DType::kQ3_K: return quantize_q3_k_imp(x, y, n, qw);
    case DType::kQ4_K: return quantize_q4_k_imp(x, y, n, qw);
    case DType::kQ5_K: return quantize_q5_k_imp(x, y, n, qw);
    case DType::kQ6_K: return quantize_q6_k_imp(x, y, n, qw);
    default: return quantize_row(t, x, y, n);
  }
}

}  // namespace nexus::cpu
