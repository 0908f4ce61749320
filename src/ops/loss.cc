// Cross-entropy front-end: checks, a profiler span, the device's kernel, the loss summed in order.
#include "ops/loss.h"

#include <string>
#include <vector>

#include "ops/device.h"
#include "ops/op_span.h"

namespace nexus {

double cross_entropy_fused(float* logits, float* row_loss, const int32_t* targets, int64_t n,
                           int64_t v, float scale, ThreadPool* pool, Precision round,
                           Device device) {
  NEXUS_OP_SPAN("train.cross_entropy", 8 * n * v, 0);
  NEXUS_CHECK(n >= 0 && v >= 1, "[cross_entropy] bad shape n " + std::to_string(n) + " v " +
                                    std::to_string(v));
  const CrossEntropyArgs args{logits, row_loss, targets, n, v, scale, round};
  std::vector<float> host;  // the row losses, copied back from a device (which checks targets)
  if (device.is_cpu()) {
    for (int64_t i = 0; i < n; ++i)
      NEXUS_CHECK(targets[i] < v, "[cross_entropy] target " + std::to_string(targets[i]) +
                                      " of row " + std::to_string(i) + " is not below the " +
                                      std::to_string(v) + " classes");
    run_op(args, pool, device);
  } else {
    Result<const DeviceMemory*> mem = device_memory(device);
    if (!mem) throw Error("[cross_entropy] " + mem.status().message());
    run_op(args, pool, device);
    host.resize(static_cast<size_t>(n));
    const Status s =
        mem.value()->copy_to_host(device.index, host.data(), row_loss, host.size() * sizeof(float));
    if (!s) throw Error("[cross_entropy] " + s.message());
    row_loss = host.data();
  }
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += row_loss[i];
  return total;
}

double distill_loss_fused(float* logits, const float* teacher, float* row_loss,
                          const int32_t* targets, int64_t n, int64_t v, float scale,
                          float temperature, float alpha, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.distill_loss", 20 * n * v, 0);
  NEXUS_CHECK(n >= 0 && v >= 1, "[distill_loss] bad shape n " + std::to_string(n) + " v " +
                                    std::to_string(v));
  NEXUS_CHECK(temperature > 0.0f && alpha >= 0.0f && alpha <= 1.0f,
              "[distill_loss] need temperature > 0 and alpha in [0, 1]");
  for (int64_t i = 0; i < n; ++i)
    NEXUS_CHECK(targets[i] < v, "[distill_loss] target " + std::to_string(targets[i]) +
                                    " of row " + std::to_string(i) + " is not below the " +
                                    std::to_string(v) + " classes");
  run_op(DistillLossArgs{logits, teacher, row_loss, targets, n, v, scale, temperature, alpha}, pool,
         Device::cpu());
  double total = 0.0;
  for (int64_t i = 0; i < n; ++i) total += row_loss[i];
  return total;
}

}  // namespace nexus
