// Rounding front-ends: checks, a profiler span, then the device's kernel.
#include "ops/round.h"

#include <algorithm>

#include "ops/device.h"
#include "ops/op_span.h"

namespace nexus {

void round_to(Precision p, float* x, int64_t n, ThreadPool* pool, Device device) {
  round_copy(p, x, x, n, pool, device);
}

void round_copy(Precision p, const float* x, float* y, int64_t n, ThreadPool* pool, Device device) {
  NEXUS_OP_SPAN("train.round", 8 * n, 0);
  if (p != Precision::kF32) {
    run_op(RoundArgs{p, x, y, n}, pool, device);
  } else if (x != y && device.is_cpu()) {
    std::copy(x, x + n, y);
  } else if (x != y) {
    Result<const DeviceMemory*> mem = device_memory(device);
    if (!mem) throw Error("[round] " + mem.status().message());
    const Status s = mem.value()->copy_within(device.index, y, x, static_cast<size_t>(n) * 4);
    if (!s) throw Error("[round] " + s.message());
  }
}

void round_pack(Precision p, float* x, uint16_t* h, int64_t n, ThreadPool* pool, Device device) {
  NEXUS_OP_SPAN("train.round_pack", 10 * n, 0);
  NEXUS_CHECK(p != Precision::kF32, "[round_pack] needs bf16 or f16");
  run_op(RoundPackArgs{p, x, h, n}, pool, device);
}

void unpack(Precision p, const uint16_t* h, float* x, int64_t n, ThreadPool* pool, Device device) {
  NEXUS_OP_SPAN("train.unpack", 6 * n, 0);
  NEXUS_CHECK(p != Precision::kF32, "[unpack] needs bf16 or f16");
  run_op(UnpackArgs{p, h, x, n}, pool, device);
}

}  // namespace nexus
