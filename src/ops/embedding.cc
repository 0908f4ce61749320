// embed_rows: bounds-checked row gather through the CPU dequantizers (any weight layout).
#include "ops/embedding.h"

#include <string>

#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/status.h"

namespace nexus {

void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out) {
  NEXUS_CHECK(table.rank() == 2,
              "[embed_rows] table must be 2-D {vocab, dim}, got " + table.shape_str());
  NEXUS_CHECK(cpu::has_kernels(table.dtype()) || cpu::is_repacked(table.dtype()),
              "[embed_rows] unsupported table dtype " + std::string(dtype_name(table.dtype())));
  const int64_t vocab = table.dim(0);
  const int64_t dim = table.dim(1);
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (id < 0 || id >= vocab)
      throw Error("[embed_rows] token id " + std::to_string(id) + " at position " +
                  std::to_string(i) + " is out of range for vocab size " + std::to_string(vocab));
    // Through dequantize_matrix_row: a tied table may be repacked for the output head.
    cpu::dequantize_matrix_row(table.dtype(), table.row(0), vocab, dim, id,
                               out + static_cast<int64_t>(i) * dim);
  }
}

}  // namespace nexus
