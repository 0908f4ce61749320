// The selective state-space variant tables: the kernels of ssm_impl.h built with portable flags
// (the references) and with AVX2/FMA (ssm_avx2.cc).
#include "backends/cpu/ssm.h"

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/ssm_impl.h"

namespace nexus::cpu {
namespace {

// The chunked forms pay a C B^T per chunk and their products' setup: below about 48 tokens the
// recurrence is cheaper (bench/micro/ssm_bench.cc at mamba2-130m's shape, 2 threads: 16 tokens
// 0.52 against 0.70 ms, 32 tokens 0.72 against 0.85, 64 tokens 1.43 against 1.25).
bool one_decay_per_head(const SsmScanArgs& a) { return a.a_width == 1 && a.t >= 48; }

const KernelVariant<SsmConvArgs> kConv[] = {{"avx2", avx2_active, ssm_conv_avx2},
                                            {"scalar", always_available, conv_run}};
const KernelVariant<SsmConvBackwardArgs> kConvBackward[] = {
    {"avx2", avx2_active, ssm_conv_backward_avx2},
    {"scalar", always_available, conv_backward_run}};
const KernelVariant<SsmScanArgs> kScan[] = {
    {"ssd_gemm", gemm_f32_active, ssm_scan_ssd_gemm, one_decay_per_head},
    {"chunked_avx2", avx2_active, ssm_scan_chunked_avx2, one_decay_per_head},
    {"sequential_avx2", avx2_active, ssm_scan_sequential_avx2},
    {"chunked", always_available, scan_chunked_run, one_decay_per_head},
    {"sequential", always_available, scan_sequential_run}};
bool one_decay_per_head_bwd(const SsmScanBackwardArgs& a) { return a.fwd.a_width == 1; }

const KernelVariant<SsmScanBackwardArgs> kScanBackward[] = {
    {"ssd_gemm", gemm_f32_active, ssm_scan_backward_ssd_gemm, one_decay_per_head_bwd},
    {"chunked_avx2", avx2_active, ssm_scan_backward_chunked_avx2, one_decay_per_head_bwd},
    {"sequential_avx2", avx2_active, ssm_scan_backward_avx2},
    {"chunked", always_available, scan_backward_chunked_run, one_decay_per_head_bwd},
    {"sequential", always_available, scan_backward_run}};

}  // namespace

KernelVariants<SsmConvArgs> ssm_conv_kernels() { return kConv; }
KernelVariants<SsmConvBackwardArgs> ssm_conv_backward_kernels() { return kConvBackward; }
KernelVariants<SsmScanArgs> ssm_scan_kernels() { return kScan; }
KernelVariants<SsmScanBackwardArgs> ssm_scan_backward_kernels() { return kScanBackward; }

}  // namespace nexus::cpu
