// Compressive memory front-ends: shape checks, a profiler span, then the device's kernel.
#include "ops/memory.h"

#include <string>

#include "ops/op_span.h"

namespace nexus {
namespace {

void check(const MemoryArgs& a, const char* op) {
  NEXUS_CHECK(a.b >= 1 && a.t >= 1 && a.segment >= 1 && a.head_dim >= 1 && a.kv_heads >= 1 &&
                  a.heads >= a.kv_heads && a.heads % a.kv_heads == 0,
              std::string("[") + op + "] bad shape: heads " + std::to_string(a.heads) +
                  ", kv heads " + std::to_string(a.kv_heads) + ", segment " +
                  std::to_string(a.segment));
}

// A reduced memory has 1..head_dim slots and a projection; it has no backward.
void check_slots(const float* proj, int64_t slots, int64_t head_dim, bool backward,
                 const char* op) {
  NEXUS_CHECK((proj == nullptr && slots == 0) ||
                  (proj != nullptr && slots >= 1 && slots <= head_dim && !backward),
              std::string("[") + op + "] slot reduction needs a projection and 1.." +
                  std::to_string(head_dim) + " slots (got " + std::to_string(slots) +
                  ") and is for inference only");
}

}  // namespace

void memory_forward(const MemoryArgs& a, ThreadPool* pool, Device device) {
  check(a, "memory");
  check_slots(a.proj, a.slots, a.head_dim, false, "memory");
  const int64_t dd = a.head_dim * a.head_dim;
  NEXUS_OP_SPAN("memory", 4 * a.b * a.t * (2 * a.heads + 2 * a.kv_heads) * a.head_dim,
                2 * a.b * a.t * (a.heads + 2 * a.kv_heads) * dd);
  run_op(a, pool, device);
}

void memory_backward(const MemoryBackwardArgs& a, ThreadPool* pool, Device device) {
  check(a.fwd, "memory_backward");
  check_slots(a.fwd.proj, a.fwd.slots, a.fwd.head_dim, true, "memory_backward");
  NEXUS_CHECK(a.fwd.q != nullptr && a.fwd.write,
              "[memory_backward] differentiates reads and writes");
  NEXUS_CHECK(a.fwd.saved != nullptr, "[memory_backward] needs the forward's saved memories");
  const int64_t dd = a.fwd.head_dim * a.fwd.head_dim;
  NEXUS_OP_SPAN("train.memory_backward",
                8 * a.fwd.b * a.fwd.t * (2 * a.fwd.heads + 3 * a.fwd.kv_heads) * a.fwd.head_dim,
                6 * a.fwd.b * a.fwd.t * (a.fwd.heads + 2 * a.fwd.kv_heads) * dd);
  run_op(a, pool, device);
}

void titans_forward(const TitansArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.b >= 1 && a.t >= 1 && a.segment >= 1 && a.head_dim >= 1 && a.kv_heads >= 1 &&
                  a.heads % a.kv_heads == 0 && a.eta && a.theta && a.alpha,
              "[titans_memory] bad shape or missing rates");
  check_slots(a.proj, a.slots, a.head_dim, false, "titans_memory");
  const int64_t dd = a.head_dim * a.head_dim;
  NEXUS_OP_SPAN("titans_memory", 4 * a.b * a.t * (a.heads + 2 * a.kv_heads) * a.head_dim,
                2 * a.b * a.t * (a.heads + 4 * a.kv_heads) * dd);
  run_op(a, pool, device);
}

void titans_backward(const TitansBackwardArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.fwd.saved != nullptr && a.fwd.q != nullptr && a.fwd.write,
              "[titans_memory_backward] needs the forward's saved memories, reads and writes");
  check_slots(a.fwd.proj, a.fwd.slots, a.fwd.head_dim, true, "titans_memory_backward");
  const int64_t dd = a.fwd.head_dim * a.fwd.head_dim;
  NEXUS_OP_SPAN("train.titans_memory_backward",
                8 * a.fwd.b * a.fwd.t * (a.fwd.heads + 3 * a.fwd.kv_heads) * a.fwd.head_dim,
                6 * a.fwd.b * a.fwd.t * (a.fwd.heads + 4 * a.fwd.kv_heads) * dd);
  run_op(a, pool, device);
}

void titans_mlp_forward(const TitansMlpArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.b >= 1 && a.t >= 1 && a.segment >= 1 && a.head_dim >= 1 && a.hidden >= 1 &&
                  a.kv_heads >= 1 && a.heads % a.kv_heads == 0 && a.eta && a.theta && a.alpha &&
                  a.w1 && a.w2,
              "[titans_mlp_memory] bad shape or missing rates or initial weights");
  const int64_t dh = a.head_dim * a.hidden;
  NEXUS_OP_SPAN("titans_mlp_memory", 4 * a.b * a.t * (a.heads + 2 * a.kv_heads) * a.head_dim,
                4 * a.b * a.t * (a.heads + 4 * a.kv_heads) * dh);
  run_op(a, pool, device);
}

void titans_mlp_backward(const TitansMlpBackwardArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.fwd.saved != nullptr && a.fwd.q != nullptr && a.fwd.write && a.dw1 && a.dw2,
              "[titans_mlp_memory_backward] needs the forward's saved memories, reads and writes, "
              "and the initial weights' gradients");
  const int64_t dh = a.fwd.head_dim * a.fwd.hidden;
  NEXUS_OP_SPAN("train.titans_mlp_memory_backward",
                8 * a.fwd.b * a.fwd.t * (a.fwd.heads + 3 * a.fwd.kv_heads) * a.fwd.head_dim,
                12 * a.fwd.b * a.fwd.t * (a.fwd.heads + 5 * a.fwd.kv_heads) * dh);
  run_op(a, pool, device);
}

}  // namespace nexus
