// The selective state-space kernels (ssm_impl.h) compiled for AVX2/FMA with -O3 and reassociated
// sums (CMakeLists.txt), so their row loops vectorise; entry points for the variant tables.
#include "backends/cpu/ssm.h"
#include "backends/cpu/ssm_impl.h"

namespace nexus::cpu {

void ssm_conv_avx2(const SsmConvArgs& a, ThreadPool* pool) { conv_run(a, pool); }
void ssm_conv_backward_avx2(const SsmConvBackwardArgs& a, ThreadPool* pool) {
  conv_backward_run(a, pool);
}
void ssm_scan_chunked_avx2(const SsmScanArgs& a, ThreadPool* pool) { scan_chunked_run(a, pool); }
void ssm_scan_sequential_avx2(const SsmScanArgs& a, ThreadPool* pool) {
  scan_sequential_run(a, pool);
}
void ssm_scan_backward_avx2(const SsmScanBackwardArgs& a, ThreadPool* pool) {
  scan_backward_run(a, pool);
}
void ssm_scan_backward_chunked_avx2(const SsmScanBackwardArgs& a, ThreadPool* pool) {
  scan_backward_chunked_run(a, pool);
}

}  // namespace nexus::cpu
