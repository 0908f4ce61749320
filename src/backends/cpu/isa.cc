// Which instruction sets this CPU runs and the backend uses: probed once, overridable from the
// environment (NEXUS_FORCE_SCALAR=1, NEXUS_NO_AVX512=1).
#include "backends/cpu/isa.h"

#include <cstdlib>
#include <cstring>

namespace nexus::cpu {
namespace {

bool cpu_has_avx2() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
         __builtin_cpu_supports("f16c");
#else
  return false;
#endif
}

bool cpu_has_avx512() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // libgcc's checks include the OS saving the AVX-512 state (XCR0).
  return cpu_has_avx2() && __builtin_cpu_supports("avx512f") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vnni");
#else
  return false;
#endif
}

bool force_scalar() { return env_is_one("NEXUS_FORCE_SCALAR"); }

}  // namespace

bool isa_supported(Isa isa) {
  static const bool avx2 = cpu_has_avx2();
  return isa == Isa::kScalar || avx2;
}

Isa active_isa() {
  static const Isa isa = isa_supported(Isa::kAvx2) && !force_scalar() ? Isa::kAvx2 : Isa::kScalar;
  return isa;
}

bool avx512_supported() {
  static const bool on = cpu_has_avx512();
  return on;
}

bool avx512_active() {
  static const bool on =
      active_isa() == Isa::kAvx2 && avx512_supported() && !env_is_one("NEXUS_NO_AVX512");
  return on;
}

bool env_is_one(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && std::strcmp(v, "1") == 0;
}

bool avx2_active() { return active_isa() == Isa::kAvx2; }

}  // namespace nexus::cpu
