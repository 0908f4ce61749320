// The run-time check for the AMX GEMM (gemm_amx.h); the kernel is gemm_bf16_amx.cc, compiled with
// the AMX flags and called only when this says yes.
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/gemm_amx.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {
namespace {

bool cpu_and_os_have_amx() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool tile = (d >> 24) & 1u, bf16 = (d >> 22) & 1u;
  if (!tile || !bf16) return false;
#if defined(__linux__) && defined(SYS_arch_prctl)
  // ARCH_REQ_XCOMP_PERM for XFEATURE_XTILEDATA: without it the first tile load faults.
  constexpr int kReqXcompPerm = 0x1023, kXtileData = 18;
  return syscall(SYS_arch_prctl, kReqXcompPerm, kXtileData) == 0;
#else
  return false;
#endif
}

}  // namespace

bool amx_bf16_active() {
  static const bool on = [] {
    if (env_is_one("NEXUS_NO_AMX")) return false;
    // The conversions around the tiles are AVX-512 (every AMX CPU has it).
    return avx512_active() && cpu_and_os_have_amx();
  }();
  return on;
}

bool bf16w_amx_usable(int64_t k) { return k % 32 == 0 && amx_bf16_active(); }

}  // namespace nexus::cpu
