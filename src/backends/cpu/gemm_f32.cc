// The run-time check for our f32 GEMM (gemm_f32.h); the kernel is gemm_f32_avx512.cc, compiled
// with the AVX-512 flags and called only when this says yes.
#include "backends/cpu/gemm_f32.h"

#include "backends/cpu/quant.h"

namespace nexus::cpu {

bool gemm_f32_avx512_active() {
  static const bool on = avx512_active() && !env_is_one("NEXUS_NO_F32_GEMM");
  return on;
}

}  // namespace nexus::cpu
