// Prefill GEMM: our AVX2 GEMM or OpenBLAS (see gemm_blas.h).
#include "backends/cpu/gemm_blas.h"

#include <cblas.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/sparse24.h"
#include "nexus/status.h"

namespace nexus::cpu {
namespace {

// f32 panel size (3 MiB). Every sgemm call packs all the tokens' activations again (perf: 8.5%
// of Q06B Q4_K prefill with 768 KiB panels), so panels are large; sgemm blocks them for L2 itself.
constexpr size_t kPanelFloats = 768 * 1024;

}  // namespace

void pin_blas_to_one_thread() {
  static std::once_flag once;
  // Our ThreadPool splits the work across threads; OpenBLAS's own threads would oversubscribe.
  std::call_once(once, [] { openblas_set_num_threads(1); });
}

// F32, F16 and BF16 weights go to our AVX2 GEMM where it is the active f32 GEMM (NEXUS_NO_F32_GEMM=1
// turns it off; NEXUS_BLAS_PREFILL=1 sends prefill to OpenBLAS instead): it converts F16 and BF16
// rows as it packs them, and skips sgemm's zeroing of C and its packing of the activations again
// for each panel: 5-14% faster prefill than sgemm on AVX2 hosts, and on this AVX-512 Xeon 1.8-2.2x
// faster than OpenBLAS's sgemm (docs/KERNELS.md).
bool prefill_on_our_gemm(DType w) {
  static const bool on = gemm_f32_active() && !env_is_one("NEXUS_BLAS_PREFILL");
  return on && (w == DType::kF32 || w == DType::kF16 || w == DType::kBF16);
}

void gemm_rows_blas(DType w_type, const uint8_t* w, size_t w_stride, int64_t w_rows, int64_t k,
                    const float* x, int64_t n, float* y, int64_t y_stride, int64_t r0, int64_t r1) {
  pin_blas_to_one_thread();
  if (r0 >= r1 || n <= 0) return;
  if (prefill_on_our_gemm(w_type))  // a group of one
    return gemm_rows_group(w_type, 1, &w, &w_stride, k, x, n, &y, &y_stride, &r0, &r1);
  // 2:4 weights: the kept products where that is faster (all prefill on AVX-512; 48-160 tokens on
  // AVX2); else the rows expanded to their dense base type a chunk at a time (bit for bit) and
  // multiplied on our GEMM (docs/KERNELS.md).
  if (is_sparse24(w_type) && gemm_2of4_takes(n))
    return gemm_2of4(w_type, w, w_stride, k, x, n, y, y_stride, r0, r1);
  if (is_sparse24(w_type) && prefill_on_our_gemm(sparse24_base(w_type))) {
    const DType base = sparse24_base(w_type);
    const size_t dense_row = row_bytes(base, k);
    // Rows per chunk: about 1 MiB of dense rows, so the expansion stays in L2 for the GEMM.
    const int64_t chunk = std::max<int64_t>(16, static_cast<int64_t>((8u << 20) / dense_row));
    thread_local std::vector<uint8_t> dense;
    if (dense.size() < dense_row * static_cast<size_t>(chunk)) dense.resize(dense_row * chunk);
    for (int64_t c0 = r0; c0 < r1; c0 += chunk) {
      const int64_t c1 = std::min(r1, c0 + chunk);
      expand_2of4(w_type, w + static_cast<size_t>(c0) * w_stride, w_stride, c1 - c0, k,
                  dense.data());
      const uint8_t* dw = dense.data() - static_cast<size_t>(c0) * dense_row;
      gemm_rows_group(base, 1, &dw, &dense_row, k, x, n, &y, &y_stride, &c0, &c1);
    }
    return;
  }
  if (w_type == DType::kF32) {
    // Weights are already f32 rows: C[n x rows] = X[n x k] * W[rows x k]^T in one call.
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                static_cast<int>(r1 - r0), static_cast<int>(k), 1.0f, x, static_cast<int>(k),
                reinterpret_cast<const float*>(w + r0 * w_stride),
                static_cast<int>(w_stride / sizeof(float)), 0.0f, y + r0,
                static_cast<int>(y_stride));
    return;
  }
  // Grown once per thread to the largest panel seen, so steady-state calls do not allocate.
  thread_local std::vector<float> panel;
  const int64_t panel_rows = std::max<int64_t>(8, static_cast<int64_t>(kPanelFloats) / k);
  if (panel.size() < static_cast<size_t>(panel_rows * k)) panel.resize(panel_rows * k);
  for (int64_t p0 = r0; p0 < r1; p0 += panel_rows) {
    const int64_t p1 = std::min(r1, p0 + panel_rows);
    for (int64_t r = p0; r < p1; ++r)
      dequantize_matrix_row(w_type, w, w_rows, k, r, panel.data() + (r - p0) * k);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n),
                static_cast<int>(p1 - p0), static_cast<int>(k), 1.0f, x, static_cast<int>(k),
                panel.data(), static_cast<int>(k), 0.0f, y + p0, static_cast<int>(y_stride));
  }
}

void gemm_rows_group(DType w_type, int count, const uint8_t* const* w, const size_t* w_stride,
                     int64_t k, const float* x, int64_t n, float* const* y, const int64_t* y_stride,
                     const int64_t* r0, const int64_t* r1) {
  NEXUS_CHECK(prefill_on_our_gemm(w_type) && count >= 1 && count <= kMaxGemmGroup,
              "[matmul] a group of " + std::to_string(count) + " " +
                  std::string(dtype_name(w_type)) + " weights is not for our GEMM here");
  const int64_t elem = w_type == DType::kF32 ? 4 : 2;
  GemmBRows bs[kMaxGemmGroup];
  int live = 0;
  for (int i = 0; i < count; ++i)
    if (r0[i] < r1[i])
      bs[live++] = {w[i] + r0[i] * w_stride[i], static_cast<int64_t>(w_stride[i]) / elem,
                    r1[i] - r0[i], y[i] + r0[i], y_stride[i]};
  if (live == 0 || n <= 0) return;
  const GemmBType type = w_type == DType::kF32   ? GemmBType::kF32
                         : w_type == DType::kF16 ? GemmBType::kF16
                                                 : GemmBType::kBF16;
  static const bool wide = avx512_active();
  if (wide)
    gemm_f32_group_avx512(type, live, bs, n, k, x, k);
  else
    gemm_f32_group_avx2(type, live, bs, n, k, x, k);
}

}  // namespace nexus::cpu
