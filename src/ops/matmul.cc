// matmul front-end: checks shapes and dtypes, converts the activations once to the weight type's
// dot-product type, then splits the weight rows over the thread pool (backends/cpu/gemm).
#include "ops/matmul.h"

#include <algorithm>
#include <string>

#include "backends/cpu/gemm.h"
#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/status.h"

namespace nexus {
namespace {

// Rows per parallel_for chunk below which splitting is not worth a thread wake-up.
constexpr int64_t kMinRowsPerThread = 4;
// Multiply-adds below which a matmul runs on the calling thread: waking a worker and meeting at
// the barrier costs about as much as ~50k multiply-adds (measured on stories260K's 64x64 layers).
constexpr int64_t kMinParallelWork = 64 * 1024;

// The activation type of a weight dtype; Q4_0x8 is Q4_0 reordered (backends/cpu/repack.h).
DType dot_type(DType w) { return w == DType::kQ4_0x8 ? DType::kQ8_0 : cpu::vec_dot_type(w); }
bool computable(DType w) { return w == DType::kQ4_0x8 || cpu::has_kernels(w); }

void check_args(const Tensor& w, const float* x, int64_t n_tokens, const float* y) {
  NEXUS_CHECK(w.rank() == 2, "[matmul] weight must be 2-D {rows, k}, got " + w.shape_str());
  NEXUS_CHECK(!w.empty(), "[matmul] weight " + w.shape_str() + " has no data");
  NEXUS_CHECK(computable(w.dtype()),
              "[matmul] unsupported weight dtype " + std::string(dtype_name(w.dtype())));
  NEXUS_CHECK(n_tokens >= 0, "[matmul] negative token count " + std::to_string(n_tokens));
  NEXUS_CHECK(
      n_tokens == 0 || (x != nullptr && y != nullptr),
      "[matmul] null activation or output pointer for " + std::to_string(n_tokens) + " tokens");
  const DType dot = dot_type(w.dtype());
  const int64_t k = w.dim(1);
  NEXUS_CHECK(k % traits(dot).block_size == 0,
              "[matmul] k mismatch: weight " + w.shape_str() + " has k=" + std::to_string(k) +
                  ", not a multiple of the " + std::string(dtype_name(dot)) + " block size " +
                  std::to_string(traits(dot).block_size));
}

}  // namespace

size_t matmul_scratch_bytes(const Tensor& w, int64_t n_tokens) {
  const DType dot = dot_type(w.dtype());
  if (dot == DType::kF32) return 0;
  return row_bytes(dot, w.dim(1)) * static_cast<size_t>(n_tokens);
}

void matmul(const Tensor& w, const float* x, int64_t n_tokens, float* y, ThreadPool& pool,
            Arena& scratch) {
  check_args(w, x, n_tokens, y);
  if (n_tokens == 0 || w.dim(0) == 0) return;
  const int64_t rows = w.dim(0);
  const int64_t k = w.dim(1);
  const DType dot = dot_type(w.dtype());

  // Many tokens: compute-bound, so expand weights to f32 panels and use a packed sgemm.
  if (n_tokens >= cpu::kBlasMinTokens) {
    pool.parallel_for(
        rows,
        [&](int64_t r0, int64_t r1) {
          cpu::gemm_rows_blas(w.dtype(), w.row(0), w.row_stride(), rows, k, x, n_tokens, y, rows, r0,
                              r1);
        },
        // One chunk per thread: each sgemm call re-packs all the tokens' activations, so fewer,
        // larger calls pay that once per thread (L15M pp512 with 4 chunks per thread: 10% slower).
        std::max<int64_t>(kMinRowsPerThread, rows / pool.size()));
    return;
  }

  // F32/F16/BF16 weights take f32 activations as they are; block types get one conversion.
  const uint8_t* xq = reinterpret_cast<const uint8_t*>(x);
  size_t x_stride = static_cast<size_t>(k) * sizeof(float);
  if (dot != DType::kF32) {
    x_stride = row_bytes(dot, k);
    auto* buf = static_cast<uint8_t*>(scratch.alloc(x_stride * static_cast<size_t>(n_tokens)));
    const cpu::QuantizeFn quantize = cpu::kernels(dot).quantize;
    auto convert = [&](int64_t t0, int64_t t1) {
      for (int64_t t = t0; t < t1; ++t) quantize(x + t * k, buf + t * x_stride, k);
    };
    if (n_tokens > 1)
      pool.parallel_for(n_tokens, convert);
    else
      convert(0, n_tokens);
    xq = buf;
  }

  const cpu::GemmProblem p{w.dtype(), w.row(0), w.row_stride(), k, xq, x_stride, n_tokens, y, rows};
  if (w.dtype() == DType::kQ4_0x8) {
    // Work in whole groups of eight rows (the last one may be the partial tail).
    constexpr int64_t g = cpu::kRepackRows;
    const int64_t units = (rows + g - 1) / g;
    auto run = [&](int64_t u0, int64_t u1) {
      cpu::gemm_rows_q4_0x8(p, rows, u0 * g, std::min(rows, u1 * g));
    };
    if (units < 2 || pool.size() == 1 || rows * k * n_tokens < kMinParallelWork)
      run(0, units);
    else
      pool.parallel_for(units, run);
    return;
  }
  if (rows < kMinRowsPerThread * 2 || pool.size() == 1 || rows * k * n_tokens < kMinParallelWork) {
    cpu::gemm_rows(p, 0, rows);
    return;
  }
  pool.parallel_for(rows, [&](int64_t r0, int64_t r1) { cpu::gemm_rows(p, r0, r1); });
}

}  // namespace nexus
