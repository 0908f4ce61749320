// Vector search front-end: shape checks, a profiler span, then the device's kernel.
#include "ops/similarity.h"

#include <string>

#include "ops/op_span.h"

namespace nexus {

void topk_search(const TopKArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.type == DType::kF32 || a.type == DType::kF16 || a.type == DType::kI8,
              "[topk_search] rows must be f32, f16 or int8");
  NEXUS_CHECK(a.nq >= 0 && a.dim >= 1 && a.n >= 0 && a.k >= 1 && (a.n == 0 || a.rows) &&
                  (a.type != DType::kI8 || a.n == 0 || a.scales),
              "[topk_search] bad shape: " + std::to_string(a.nq) + " queries, dim " +
                  std::to_string(a.dim) + ", " + std::to_string(a.n) + " rows, k " +
                  std::to_string(a.k));
  if (a.nq == 0) return;
  const int64_t width = a.type == DType::kF32 ? 4 : a.type == DType::kF16 ? 2 : 1;
  NEXUS_OP_SPAN("topk_search", 2 * a.nq * a.n * a.dim, a.n * a.dim * width + a.nq * a.dim * 4);
  run_op(a, pool, device);
}

}  // namespace nexus
