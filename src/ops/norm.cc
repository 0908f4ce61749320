// Normalisation front-ends: argument checks, then the device's kernel (ops/kernels.h).
#include "ops/norm.h"

#include <initializer_list>
#include <string>

namespace nexus {
namespace {

void check(const char* op, int64_t rows, int64_t dim, std::initializer_list<const void*> ptrs) {
  NEXUS_CHECK(rows >= 0 && dim >= 1, std::string("[") + op + "] bad shape rows " +
                                         std::to_string(rows) + " x dim " + std::to_string(dim));
  for (const void* p : ptrs)
    NEXUS_CHECK(p != nullptr || rows == 0, std::string("[") + op + "] null input or output");
}

}  // namespace

void rms_norm(const RmsNormArgs& a, ThreadPool* pool, Device device) {
  check("rms_norm", a.rows, a.dim, {a.x, a.w, a.y});
  run_op(a, pool, device);
}

void rms_norm_backward(const RmsNormBackwardArgs& a, ThreadPool* pool, Device device) {
  check("rms_norm_backward", a.rows, a.dim, {a.dx, a.dw, a.dy, a.x, a.w, a.rstd});
  run_op(a, pool, device);
}

void layer_norm(const LayerNormArgs& a, ThreadPool* pool, Device device) {
  check("layer_norm", a.rows, a.dim, {a.x, a.w, a.b, a.y});
  run_op(a, pool, device);
}

void layer_norm_backward(const LayerNormBackwardArgs& a, ThreadPool* pool, Device device) {
  check("layer_norm_backward", a.rows, a.dim, {a.dx, a.dw, a.db, a.dy, a.x, a.w, a.mean, a.rstd});
  run_op(a, pool, device);
}

}  // namespace nexus
