// TEMPORARY (lead): replaced by the quant branch.
#include "ops/matmul.h"
#include "backends/cpu/quant.h"
namespace nexus {
void matmul(const Tensor& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool, Arena&) {
  const int64_t rows = w.dim(0), k = w.dim(1);
  pool.parallel_for(rows, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) for (int64_t t = 0; t < n_tokens; ++t)
      y[t * rows + r] = cpu::vec_dot(w.dtype(), k, w.row(r), x + t * k);
  });
}
void embed_rows(const Tensor& table, std::span<const int32_t> ids, float* out) {
  const int64_t k = table.dim(1);
  for (size_t i = 0; i < ids.size(); ++i) cpu::dequantize_row(table.dtype(), table.row(ids[i]), out + i * k, k);
}
}
