// Picks the single-token attention kernel for a cache type, and joins the results of calls over
// parts of the keys (see attention_decode.h).
#include "backends/cpu/attention_decode.h"

#include <algorithm>
#include <cmath>

#include "backends/cpu/quant.h"

namespace nexus::cpu {

AttnDecodeFn attn_decode_kernel(DType kv_type, int64_t hd) {
  if (active_isa() != Isa::kAvx2 || hd <= 0 || hd % 8 != 0) return nullptr;
  switch (kv_type) {
    case DType::kF32:
      return attn_decode_f32_avx2;
    case DType::kF16:
      return attn_decode_f16_avx2;
    case DType::kQ8_0:
      return attn_decode_q8_0_avx2;
    default:
      return nullptr;
  }
}

void attn_decode_join(const float* parts, size_t stride, int n_parts, int64_t heads, int64_t hd,
                      float* out) {
  for (int64_t h = 0; h < heads; ++h) {
    float m = parts[heads * hd + h];
    for (int i = 1; i < n_parts; ++i) m = std::max(m, parts[i * stride + heads * hd + h]);
    float total = 0.0f;
    float* o = out + h * hd;
    std::fill(o, o + hd, 0.0f);
    for (int i = 0; i < n_parts; ++i) {
      const float* p = parts + i * stride;
      const float w = p[heads * hd + heads + h] * std::exp(p[heads * hd + h] - m);
      total += w;
      for (int64_t e = 0; e < hd; ++e) o[e] += w * p[h * hd + e];
    }
    const float inv = 1.0f / total;
    for (int64_t e = 0; e < hd; ++e) o[e] *= inv;
  }
}

void attn_decode_merge(float* out, float* max, float* sum, const float* out2, const float* max2,
                       const float* sum2, int64_t heads, int64_t hd) {
  for (int64_t h = 0; h < heads; ++h) {
    const float m = std::max(max[h], max2[h]);
    const float w1 = sum[h] * std::exp(max[h] - m), w2 = sum2[h] * std::exp(max2[h] - m);
    const float inv = 1.0f / (w1 + w2);
    float* o = out + h * hd;
    const float* o2 = out2 + h * hd;
    for (int64_t e = 0; e < hd; ++e) o[e] = (o[e] * w1 + o2[e] * w2) * inv;
    max[h] = m;
    sum[h] = w1 + w2;
  }
}

}  // namespace nexus::cpu
