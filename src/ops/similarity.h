// The vector search op: the top-k rows by inner product for each query (arguments in
// backends/api/similarity.h). The front-end checks the shapes, opens a profiler span and runs the
// device's first variant.
#pragma once

#include "backends/api/similarity.h"
#include "backends/cpu/similarity.h"
#include "nexus/core/thread_pool.h"
#include "ops/kernels.h"

namespace nexus {

template <>
struct OpKernels<TopKArgs> {
  static constexpr const char* kName = "topk_search";
  static KernelVariants<TopKArgs> cpu() { return cpu::topk_kernels(); }
};

void topk_search(const TopKArgs& a, ThreadPool* pool = nullptr, Device device = Device::cpu());

}  // namespace nexus
