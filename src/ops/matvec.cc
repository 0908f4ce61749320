// Dequantizing matrix-vector front-end: shape checks, then the device's kernel.
#include "ops/matvec.h"

#include <string>

namespace nexus {

void matvec(const MatvecArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.rows >= 0 && a.n >= 0 && a.k >= 1,
              "[matvec] bad shape rows " + std::to_string(a.rows) + " k " + std::to_string(a.k) +
                  " n " + std::to_string(a.n));
  const int64_t block = traits(a.dtype).block_size;
  NEXUS_CHECK(a.k % block == 0, "[matvec] k " + std::to_string(a.k) + " is not a multiple of " +
                                    std::string(dtype_name(a.dtype)) + "'s block of " +
                                    std::to_string(block));
  if (a.rows == 0 || a.n == 0) return;
  NEXUS_CHECK(a.w && a.x && a.y, "[matvec] null buffer");
  run_op(a, pool, device);
}

}  // namespace nexus
