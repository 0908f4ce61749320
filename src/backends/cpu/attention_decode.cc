// Picks the single-token attention kernel for a cache type (see attention_decode.h).
#include "backends/cpu/attention_decode.h"

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

}  // namespace nexus::cpu
