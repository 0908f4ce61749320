// Instruction-set detection for the CPU backend: what the CPU supports, what the kernels use
// (decided once, at first use) and the environment switches that turn variants off. The parity
// tests call each variant explicitly.
#pragma once

namespace nexus::cpu {

enum class Isa { kScalar, kAvx2 };

// True when this CPU can run `isa` (kScalar always).
bool isa_supported(Isa isa);
// The ISA the dispatching entry points use (decided once, at first use).
Isa active_isa();
// AVX-512 F/VL/BW/VNNI reported by the CPU and its state saved by the OS. The few AVX-512 kernels
// (the F32 decode dot, the F16 decode rows, the Q4_0x8/Q5_0x8/Q8_0x8/Q4_Kx8/Q6_Kx8 VNNI kernels)
// are bit-identical to their AVX2 versions and replace them when avx512_active(): the AVX2 kernels
// are active and the environment does not have NEXUS_NO_AVX512=1.
bool avx512_supported();
bool avx512_active();
// Whether the environment variable `name` is set to "1" (the NEXUS_NO_* / NEXUS_FORCE_* switches).
bool env_is_one(const char* name);
// active_isa() is kAvx2: the AVX2/FMA/F16C kernels run.
bool avx2_active();

}  // namespace nexus::cpu
