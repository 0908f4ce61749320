// Prefill GEMM: 512 tokens through matmul at the benchmark models' layer shapes, reporting GFLOP/s
// (2 * tokens * rows * k per call) to set against the FMA peak (nexus_fmapeak): the f32 GEMM path
// (F32, F16 and BF16 on our AVX2 GEMM where prefill_on_our_gemm, else sgemm; NEXUS_NO_F32_GEMM=1
// gives sgemm; Q8_0/Q4_K in their file layout on sgemm) and the integer kernels of the layouts
// repacked at load (Q4_0x8, Q8_0x8, Q4_Kx8; matmul_on_blas), and W8A8's int8 GEMM (GOP/s: the
// same count, int8 multiply-adds; its activations quantized per token inside the call). Parity:
// tests/parity/matmul_parity_test.cc, gemm_f32_parity_test.cc, repack_parity_test.cc,
// repack_x8_parity_test.cc, w8a8_parity_test.cc.
#include <benchmark/benchmark.h>

#include <random>
#include <string>
#include <vector>

#include "backends/cpu/gemm_blas.h"
#include "backends/cpu/gemm_w8a8.h"
#include "backends/cpu/isa.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "backends/cpu/sparse24.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/matmul.h"

namespace nexus {
namespace {

void BM_PrefillGemm(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t rows = state.range(1), k = state.range(2), n = 512;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * k)), x(static_cast<size_t>(n * k));
  for (float& v : wf) v = normal(rng);
  for (float& v : x) v = normal(rng);
  // A repacked layout is quantized as its file type, then repacked as loading does.
  const cpu::RepackedLayout* packed = cpu::layout_of_packed(t);
  const DType file_type = packed != nullptr ? packed->base : t;
  std::vector<uint8_t> bytes(row_bytes(file_type, rows * k));
  if (t == DType::kW8A8) {  // one scale a row as `nexus quantize ... W8A8`, then repacked
    std::vector<uint8_t> src(bytes.size());
    for (int64_t r = 0; r < rows; ++r)
      cpu::quantize_row_w8a8(wf.data() + r * k, src.data() + r * row_bytes(DType::kQ8_0, k), k);
    cpu::repack_w8a8(src.data(), bytes.data(), rows, k, 0.0f);
  } else {
    cpu::quantize_row(file_type, wf.data(), bytes.data(), rows * k);
  }
  if (packed != nullptr) {
    std::vector<uint8_t> src = bytes;
    packed->repack(src.data(), bytes.data(), rows, k);
  }
  const Tensor w(t, {rows, k}, bytes.data());
  std::vector<float> y(static_cast<size_t>(n * rows));
  ThreadPool pool(static_cast<int>(state.range(3)));
  Arena scratch(matmul_scratch_bytes(w, n) + 4096, MemCategory::kScratch);
  for (auto _ : state) {
    scratch.reset();
    matmul(w, x.data(), n, y.data(), pool, scratch);
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(n * rows * k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(t)));
}

void prefill_args(benchmark::internal::Benchmark* b) {
  // {rows, k}: L15M attn (288x288) and ffn_up (768x288); Q06B attn_q (2048x1024), ffn_down
  // (1024x3072).
  const int64_t shapes[][2] = {{288, 288}, {768, 288}, {2048, 1024}, {1024, 3072}};
  for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kQ8_0, DType::kQ4_K,
                  DType::kQ4_0x8, DType::kQ8_0x8, DType::kQ4_Kx8, DType::kW8A8})
    for (const auto& s : shapes) {
      if (s[1] % traits(t).block_size != 0) continue;  // the K-quants' 256-element super-blocks
      for (int64_t threads : {1, 2}) b->Args({static_cast<int64_t>(t), s[0], s[1], threads});
    }
}

BENCHMARK(BM_PrefillGemm)->Apply(prefill_args)->UseRealTime();

// 2:4 sparse weights (sparse24.h; magnitude 2:4 by quantize_row) against their dense types at the
// L110M shapes (attn 768x768, ffn_up 2048x768, ffn_down 768x2048). GFLOP/s counts the dense
// products (2 * tokens * rows * k), so it compares with the dense rows directly.
void sparse_args(benchmark::internal::Benchmark* b) {
  const int64_t shapes[][2] = {{768, 768}, {2048, 768}, {768, 2048}};
  for (DType t : {DType::kF16, DType::kF16_2of4, DType::kF32, DType::kF32_2of4})
    for (const auto& s : shapes)
      for (int64_t threads : {1, 2}) b->Args({static_cast<int64_t>(t), s[0], s[1], threads});
}
BENCHMARK(BM_PrefillGemm)->Name("BM_PrefillGemm2of4")->Apply(sparse_args)->UseRealTime();

}  // namespace
}  // namespace nexus

namespace nexus {
namespace {

// Dense F16 against the 2:4 paths at 2048 x 768: the rows expanded to F16 and run on the dense
// GEMM, the AVX2 kept-products kernel (a broadcast weight times a token panel row) and the AVX-512
// one (vectors across rows, the activations permuted into place); gemm_2of4_takes picks from these.
void BM_Prefill2of4Variants(benchmark::State& state) {
  const int variant = static_cast<int>(state.range(0));
  if (variant == 3 && !cpu::avx512_active()) return state.SkipWithError("no AVX-512 here");
  const int64_t rows = 2048, k = 768, n = state.range(1);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> wf(static_cast<size_t>(rows * k)), x(static_cast<size_t>(n * k));
  for (float& v : wf) v = normal(rng);
  for (float& v : x) v = normal(rng);
  const DType t = variant == 0 ? DType::kF16 : DType::kF16_2of4;
  const size_t stride = row_bytes(t, k), dense_stride = row_bytes(DType::kF16, k);
  std::vector<uint8_t> w(row_bytes(t, rows * k)), dense(dense_stride * rows);
  cpu::quantize_row(t, wf.data(), w.data(), rows * k);
  std::vector<float> y(static_cast<size_t>(n * rows));
  for (auto _ : state) {
    if (variant == 0) {
      cpu::gemm_rows_blas(t, w.data(), stride, rows, k, x.data(), n, y.data(), rows, 0, rows);
    } else if (variant == 1) {
      cpu::expand_2of4(t, w.data(), stride, rows, k, dense.data());
      cpu::gemm_rows_blas(DType::kF16, dense.data(), dense_stride, rows, k, x.data(), n, y.data(),
                          rows, 0, rows);
    } else if (variant == 2) {
      cpu::gemm_2of4_avx2(t, w.data(), stride, k, x.data(), n, y.data(), rows, 0, rows);
    } else {
      cpu::gemm_2of4_avx512(t, w.data(), stride, k, x.data(), n, y.data(), rows, 0, rows);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(
      2e-9 * static_cast<double>(n * rows * k) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate);
  state.SetLabel(variant == 0   ? "F16"
                 : variant == 1 ? "2:4 expanded"
                 : variant == 2 ? "2:4 kept products (AVX2)"
                                : "2:4 permuted activations (AVX-512)");
}
BENCHMARK(BM_Prefill2of4Variants)
    ->ArgsProduct({{0, 1, 2, 3}, {16, 32, 64, 128, 512}})
    ->UseRealTime();

}  // namespace
}  // namespace nexus
