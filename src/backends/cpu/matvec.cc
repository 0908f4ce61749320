// The dequantizing matrix-vector product on the CPU: the f32 reference the GPU's kernels are
// checked against (decoding on the CPU goes through ops/matmul.h's dot kernels instead).
#include "backends/cpu/matvec.h"

#include <vector>

#include "backends/cpu/parallel.h"
#include "backends/cpu/quant.h"

namespace nexus::cpu {
namespace {

void matvec(const MatvecArgs& a, ThreadPool* pool) {
  const size_t stride = row_bytes(a.dtype, a.k);
  par::for_ranges(pool, a.rows, 16, [&](int64_t r0, int64_t r1) {
    std::vector<float> w(static_cast<size_t>(a.k));
    for (int64_t r = r0; r < r1; ++r) {
      const auto* row = static_cast<const uint8_t*>(a.w) + static_cast<size_t>(r) * stride;
      if (a.dtype == DType::kF32)
        std::copy_n(reinterpret_cast<const float*>(row), a.k, w.begin());
      else
        dequantize_row(a.dtype, row, w.data(), a.k);
      for (int64_t t = 0; t < a.n; ++t) {
        const float* x = a.x + t * a.k;
        float s = 0.0f;
        for (int64_t j = 0; j < a.k; ++j) s += w[j] * x[j];
        a.y[t * a.rows + r] = s;
      }
    }
  });
}

bool takes(const MatvecArgs& a) {
  return (a.dtype == DType::kF32 || has_kernels(a.dtype)) && a.k % traits(a.dtype).block_size == 0;
}

const KernelVariant<MatvecArgs> kMatvec[] = {{"scalar", always_available, matvec, takes}};

}  // namespace

KernelVariants<MatvecArgs> matvec_kernels() { return kMatvec; }

}  // namespace nexus::cpu
