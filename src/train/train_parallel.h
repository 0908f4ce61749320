// What the training op front-ends share (train_ops.cc, train_ops_gpt2.cc, precision.cc): how they
// split work over a ThreadPool, the run-time choice between the AVX2 and scalar kernels, and the
// profiler span each records.
#pragma once

#include <algorithm>
#include <cstdint>

#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "nexus/profile.h"

// An op span for `nexus train --profile`: named `name`, in the current layer, with the bytes moved
// and flops done (both evaluated only while profiling is on).
#define NEXUS_TRAIN_OP(name, bytes, flops) \
  NEXUS_PROFILE_OP(name, ::nexus::profile::current_layer(), (bytes), (flops), std::string_view())

namespace nexus::train::par {

inline bool use_avx2() {
  static const bool avx2 = cpu::active_isa() == cpu::Isa::kAvx2;
  return avx2;
}

using cpu::par::for_aligned;
using cpu::par::for_items;
using cpu::par::for_ranges;
using cpu::par::kLaneAlign;
using cpu::par::sum4;

}  // namespace nexus::train::par
