// Dense layer front-ends: argument checks, a profiler span, then the device's kernel.
#include "ops/dense.h"

#include <string>

#include "ops/op_span.h"

namespace nexus {
namespace {

void check(const char* op, int64_t n, int64_t c, int64_t oc) {
  NEXUS_CHECK(n >= 0 && c >= 1 && oc >= 1, std::string("[") + op + "] bad shape n " +
                                               std::to_string(n) + " c " + std::to_string(c) +
                                               " oc " + std::to_string(oc));
}

}  // namespace

void matmul_forward(float* out, const float* inp, const float* w, int64_t n, int64_t c, int64_t oc,
                    ThreadPool* pool, bool bf16_operands, const float* add_rows,
                    const float* bias) {
  NEXUS_OP_SPAN("train.matmul", 4 * (n * c + c * oc + n * oc), 2 * n * c * oc);
  check("dense", n, c, oc);
  NEXUS_CHECK(n == 0 || (out && inp && w), "[dense] null input or output");
  run_op(DenseArgs{out, inp, w, n, c, oc, add_rows, bias, bf16_operands}, pool, Device::cpu());
}

void matmul_backward(float* dinp, float* dw, const float* dout, const float* inp, const float* w,
                     int64_t n, int64_t c, int64_t oc, ThreadPool* pool, bool bf16_operands,
                     float* dbias) {
  NEXUS_OP_SPAN("train.matmul_bwd", 4 * (2 * n * c + c * oc + n * oc),
                2 * n * c * oc * ((dinp != nullptr) + (dw != nullptr)));
  check("dense_backward", n, c, oc);
  NEXUS_CHECK(n == 0 || (dout && (!dinp || w) && (!dw || inp)),
              "[dense_backward] null input for a gradient it computes");
  run_op(DenseBackwardArgs{dinp, dw, dbias, dout, inp, w, n, c, oc, bf16_operands}, pool,
         Device::cpu());
}

void bias_backward(float* db, const float* dout, int64_t n, int64_t c, ThreadPool* pool) {
  NEXUS_OP_SPAN("train.bias_bwd", 4 * n * c, n * c);
  run_op(DenseBackwardArgs{nullptr, nullptr, db, dout, nullptr, nullptr, n, 1, c, false}, pool,
         Device::cpu());
}

}  // namespace nexus
