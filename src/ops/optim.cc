// Optimizer op front-ends: shape and pointer checks, then the device's kernel.
#include "ops/optim.h"

#include <string>

namespace nexus {
namespace {

void check_n(const char* op, int64_t n, bool pointers) {
  NEXUS_CHECK(n >= 0, std::string("[") + op + "] bad length " + std::to_string(n));
  NEXUS_CHECK(n == 0 || pointers, std::string("[") + op + "] null buffer");
}

}  // namespace

void adamw_update(const AdamWArgs& a, ThreadPool* pool, Device device) {
  const bool f32 = a.m != nullptr && a.v != nullptr, bf16 = a.m16 != nullptr && a.v16 != nullptr;
  check_n("adamw", a.n, a.p && a.g && f32 != bf16);
  if (a.n > 0) run_op(a, pool, device);
}

double sum_squares(const float* g, int64_t n, ThreadPool* pool, Device device) {
  check_n("sum_squares", n, g != nullptr);
  double out = 0.0;
  if (n > 0) run_op(SumSquaresArgs{g, n, &out}, pool, device);
  return out;
}

void scale_values(float* g, int64_t n, float c, ThreadPool* pool, Device device) {
  check_n("scale", n, g != nullptr);
  if (n > 0) run_op(ScaleArgs{g, n, c}, pool, device);
}

}  // namespace nexus
