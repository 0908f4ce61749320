// Activation front-ends: argument checks, then the device's kernel (ops/kernels.h).
#include "ops/activation.h"

#include <initializer_list>
#include <string>

namespace nexus {
namespace {

void check(const char* op, int64_t n, std::initializer_list<const void*> ptrs) {
  NEXUS_CHECK(n >= 0, std::string("[") + op + "] negative length " + std::to_string(n));
  for (const void* p : ptrs)
    NEXUS_CHECK(p != nullptr || n == 0, std::string("[") + op + "] null input or output");
}

}  // namespace

void swiglu(const SwigluArgs& a, ThreadPool* pool, Device device) {
  check("swiglu", a.n, {a.out, a.g, a.u});
  run_op(a, pool, device);
}

void swiglu_backward(const SwigluBackwardArgs& a, ThreadPool* pool, Device device) {
  check("swiglu_backward", a.n, {a.dg, a.du, a.dout, a.g, a.u});
  run_op(a, pool, device);
}

void gelu(const GeluArgs& a, ThreadPool* pool, Device device) {
  check("gelu", a.n, {a.out, a.x});
  run_op(a, pool, device);
}

void gelu_backward(const GeluBackwardArgs& a, ThreadPool* pool, Device device) {
  check("gelu_backward", a.n, {a.dx, a.dout, a.x});
  run_op(a, pool, device);
}

}  // namespace nexus
