// How an op front-end finds its kernel: OpKernels<Args> (specialised next to each op) names the op
// and gives each backend's variant table; run_op checks that the device has one and runs the
// first variant this machine supports. The op test walks the same tables.
#pragma once

#include <string>

#include "backends/api/kernel.h"
#include "nexus/device.h"
#include "nexus/status.h"

namespace nexus {

// Specialised per op: `static constexpr const char* kName`, `static KernelVariants<Args> cpu()`
// and, for the ops the CUDA backend has, `cuda()`.
template <class Args>
struct OpKernels;

// The variants of the op taking `Args` on device `d`, fastest first (empty where d's backend has
// none).
template <class Args>
KernelVariants<Args> op_kernels(Device d) {
  if (d.is_cpu()) return OpKernels<Args>::cpu();
  if constexpr (requires { OpKernels<Args>::cuda(); }) return OpKernels<Args>::cuda();
  return {};
}

template <class Args>
void run_op(const Args& args, ThreadPool* pool, Device d) {
  const KernelVariants<Args> v = op_kernels<Args>(d);
  if (v.empty())
    throw Error(std::string("[") + OpKernels<Args>::kName + "] no kernel for device " + d.str());
  best_kernel(v, OpKernels<Args>::kName, args).run(args, pool);
}

}  // namespace nexus
