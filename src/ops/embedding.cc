// Embedding front-ends: bounds-checked ids and table types, then the device's kernel.
#include "ops/embedding.h"

#include <string>

#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/status.h"

namespace nexus {
namespace {

void check_ids(const char* op, const int32_t* ids, int64_t n, int64_t vocab) {
  for (int64_t i = 0; i < n; ++i)
    if (ids[i] < 0 || ids[i] >= vocab)
      throw Error(std::string("[") + op + "] token id " + std::to_string(ids[i]) + " at position " +
                  std::to_string(i) + " is out of range for vocab size " + std::to_string(vocab));
}

// The checks of the forward, with `op` naming the caller in errors, then the kernel.
void checked_embedding(const char* op, const EmbeddingArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(
      cpu::has_kernels(a.dtype) || cpu::is_repacked(a.dtype) || a.dtype == DType::kW8A8,
      std::string("[") + op + "] unsupported table dtype " + std::string(dtype_name(a.dtype)));
  NEXUS_CHECK(a.vocab >= 1 && a.dim >= 1 && a.n >= 0,
              std::string("[") + op + "] bad shape: vocab " + std::to_string(a.vocab) +
                  ", dim " + std::to_string(a.dim));
  if (device.is_cpu()) check_ids(op, a.ids, a.n, a.vocab);
  run_op(a, pool, device);
}

}  // namespace

void embedding(const EmbeddingArgs& a, ThreadPool* pool, Device device) {
  checked_embedding("embedding", a, pool, device);
}

void embedding_backward(const EmbeddingBackwardArgs& a, ThreadPool* pool, Device device) {
  NEXUS_CHECK(a.dim >= 1 && a.n >= 0,
              "[embedding_backward] bad shape: dim " + std::to_string(a.dim));
  run_op(a, pool, device);
}

void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out) {
  NEXUS_CHECK(table.rank() == 2,
              "[embed_rows] table must be 2-D {vocab, dim}, got " + table.shape_str());
  // Errors name embed_rows, the forward pass's entry point; the ids are checked once.
  checked_embedding("embed_rows",
                    EmbeddingArgs{table.data(), table.dtype(), table.dim(0), table.dim(1),
                                  ids.data(), static_cast<int64_t>(ids.size()), out},
                    nullptr, Device::cpu());
}

}  // namespace nexus
