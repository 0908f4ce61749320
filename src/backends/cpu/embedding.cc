// Embedding kernels: a row gather through the dtype's dequantizer (a plain copy for F32, the
// eight-row layouts through dequantize_matrix_row), and the gradient's scatter-add. Both are
// bound by memory, so there is one variant each; the gather splits its rows over the pool, the
// scatter stays in order (repeated ids).
#include "backends/cpu/embedding.h"

#include <cstring>

#include "backends/cpu/parallel.h"
#include "backends/cpu/repack.h"

namespace nexus::cpu {
namespace {

void gather(const EmbeddingArgs& a, ThreadPool* pool) {
  const size_t row_floats = static_cast<size_t>(a.dim);
  par::for_ranges(pool, a.n, 64, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      float* out = a.out + i * a.dim;
      if (a.dtype == DType::kF32)
        std::memcpy(out, static_cast<const float*>(a.table) + a.ids[i] * a.dim,
                    row_floats * sizeof(float));
      else
        dequantize_matrix_row(a.dtype, static_cast<const uint8_t*>(a.table), a.vocab, a.dim,
                              a.ids[i], out);
    }
  });
}

void scatter_add(const EmbeddingBackwardArgs& a, ThreadPool*) {
  for (int64_t i = 0; i < a.n; ++i) {
    float* row = a.dtable + a.ids[i] * a.dim;
    const float* g = a.dout + i * a.dim;
    for (int64_t j = 0; j < a.dim; ++j) row[j] += g[j];
  }
}

const KernelVariant<EmbeddingArgs> kGather[] = {{"scalar", always_available, gather}};
const KernelVariant<EmbeddingBackwardArgs> kScatter[] = {{"scalar", always_available, scatter_add}};

}  // namespace

KernelVariants<EmbeddingArgs> embedding_kernels() { return kGather; }
KernelVariants<EmbeddingBackwardArgs> embedding_backward_kernels() { return kScatter; }

}  // namespace nexus::cpu
