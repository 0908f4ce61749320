// Selective state-space front-ends: shape checks, a profiler span, then the device's kernel.
#include "ops/ssm.h"

#include <string>

#include "ops/op_span.h"

namespace nexus {
namespace {

void check_scan(const SsmScanArgs& a, const char* op) {
  NEXUS_CHECK(a.b >= 1 && a.t >= 1 && a.heads >= 1 && a.head_dim >= 1 && a.state_size >= 1 &&
                  a.groups >= 1 && a.heads % a.groups == 0,
              std::string("[") + op + "] bad shape: heads " + std::to_string(a.heads) +
                  ", groups " + std::to_string(a.groups));
  NEXUS_CHECK(a.a_width == 1 || (a.a_width == a.state_size && a.head_dim == 1),
              std::string("[") + op + "] decay width must be 1 or the state size (head_dim 1)");
  NEXUS_CHECK(a.ld_x >= a.heads * a.head_dim && a.ld_dt >= a.heads &&
                  a.ld_bc >= a.groups * a.state_size,
              std::string("[") + op + "] row strides shorter than the rows");
}

}  // namespace

void ssm_conv(const SsmConvArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.k >= 1 && a.channels >= 1 && a.ld_x >= a.channels,
              "[ssm_conv] bad shape");
  NEXUS_OP_SPAN("ssm_conv", 12 * a.b * a.t * a.channels, 2 * a.b * a.t * a.channels * a.k);
  run_op(a, pool, device);
}

void ssm_conv_backward(const SsmConvBackwardArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.k >= 1 && a.channels >= 1 && a.ld_x >= a.channels && a.ld_dx >= a.channels,
              "[ssm_conv_backward] bad shape");
  NEXUS_OP_SPAN("train.ssm_conv_backward", 16 * a.b * a.t * a.channels,
                6 * a.b * a.t * a.channels * a.k);
  run_op(a, pool, device);
}

void ssm_scan(const SsmScanArgs& a, ThreadPool* pool, Device device) {
  check_scan(a, "ssm_scan");
  NEXUS_OP_SPAN("ssm_scan", 4 * a.b * a.t * (2 * a.heads * a.head_dim + 2 * a.groups * a.state_size),
                4 * a.b * a.t * a.heads * a.head_dim * a.state_size);
  run_op(a, pool, device);
}

void ssm_scan_backward(const SsmScanBackwardArgs& a, ThreadPool* pool, Device device) {
  check_scan(a.fwd, "ssm_scan_backward");
  NEXUS_OP_SPAN("train.ssm_scan_backward",
                8 * a.fwd.b * a.fwd.t * (2 * a.fwd.heads * a.fwd.head_dim +
                                         2 * a.fwd.groups * a.fwd.state_size),
                14 * a.fwd.b * a.fwd.t * a.fwd.heads * a.fwd.head_dim * a.fwd.state_size);
  run_op(a, pool, device);
}

}  // namespace nexus
