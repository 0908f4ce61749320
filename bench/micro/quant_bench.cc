// Micro-benchmarks of the quantized kernels: vec_dot per weight type at n=4096 and matmul of a
// 1024x1024 weight with 1 and 16 tokens, reporting weight bytes/s (decode is bound by streaming
// the weights, so bytes/s against the machine's memory bandwidth is the figure of merit).
// Run briefly with --benchmark_min_time=0.01 for a smoke test.
#include <benchmark/benchmark.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "backends/cpu/gemm.h"
#include "backends/cpu/quant.h"
#include "backends/cpu/repack.h"
#include "nexus/core/allocator.h"
#include "nexus/core/thread_pool.h"
#include "ops/matmul.h"

namespace nexus {
namespace {

const DType kTypes[] = {DType::kF32,  DType::kF16,  DType::kBF16, DType::kQ4_0,
                        DType::kQ4_1, DType::kQ5_0, DType::kQ5_1, DType::kQ8_0,
                        DType::kQ4_K, DType::kQ5_K, DType::kQ6_K, DType::kQ8_K};

std::vector<float> random_floats(int64_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = normal(rng);
  return v;
}

std::vector<uint8_t> encode(DType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, static_cast<int64_t>(x.size())));
  cpu::quantize_row(t, x.data(), q.data(), static_cast<int64_t>(x.size()));
  return q;
}

// One weight row times one activation row: the decode inner loop.
void BM_VecDot(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  constexpr int64_t kN = 4096;
  const auto w = encode(t, random_floats(kN, 1));
  const auto x = encode(cpu::vec_dot_type(t), random_floats(kN, 2));
  for (auto _ : state) benchmark::DoNotOptimize(cpu::vec_dot(t, kN, w.data(), x.data()));
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.size()));
  state.SetLabel(std::string(dtype_name(t)));
}

// A tiny model's F32 decode matvec (rows x k in L1: stories260K's 64 x 64, 172 x 64 and
// 64 x 172) in passes of four rows (range(2) == 4, dot4_f32_avx2) or eight (8, dot8_f32_avx2).
// Reports multiply-adds as items/s.
void BM_ShortF32Rows(benchmark::State& state) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) {
    state.SkipWithError("needs AVX2");
    return;
  }
  const int64_t rows = state.range(0), k = state.range(1);
  const int pass = static_cast<int>(state.range(2));
  const auto w = random_floats(rows * k, 3);
  const auto x = random_floats(k, 4);
  std::vector<float> y(static_cast<size_t>(rows));
  for (auto _ : state) {
    for (int64_t r = 0; r + pass <= rows; r += pass) {
      const float* wr = w.data() + r * k;
      if (pass == 8)
        cpu::dot8_f32_avx2(k, wr, static_cast<size_t>(k), x.data(), y.data() + r);
      else
        cpu::dot4_f32_avx2(k, wr, static_cast<size_t>(k), x.data(), y.data() + r);
    }
    benchmark::DoNotOptimize(y.data());
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * (rows / pass * pass) * k);
}
BENCHMARK(BM_ShortF32Rows)->ArgsProduct({{64, 172, 4096}, {64, 172}, {4, 8}});

// Four activation rows against one weight row: four vec_dot calls (range(1) == 0) or one
// vec_dot_rows pass that decodes each weight block once (range(1) == 1, types that have one).
void BM_VecDot4Rows(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const bool fused = state.range(1) != 0;
  constexpr int64_t kN = 4096;
  const cpu::TypeKernels& k = cpu::kernels(t);
  if (fused && k.vec_dot_rows == nullptr) {
    state.SkipWithError("no vec_dot_rows kernel for this type");
    return;
  }
  const auto w = encode(t, random_floats(kN, 1));
  const DType dt = cpu::vec_dot_type(t);
  const size_t xs = row_bytes(dt, kN);
  std::vector<uint8_t> x(4 * xs);
  for (int j = 0; j < 4; ++j) {
    const auto xf = random_floats(kN, 10 + j);
    cpu::quantize_row(dt, xf.data(), x.data() + j * xs, kN);
  }
  float out[4];
  for (auto _ : state) {
    if (fused) {
      k.vec_dot_rows(kN, w.data(), x.data(), xs, 4, out);
    } else {
      for (int j = 0; j < 4; ++j) out[j] = k.vec_dot(kN, w.data(), x.data() + j * xs);
    }
    benchmark::DoNotOptimize(out);
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * 4);
  state.SetLabel(std::string(dtype_name(t)) + (fused ? " rows" : " separate"));
}

// 1024x1024 weight, range(1) tokens, range(2) threads.
void BM_Matmul(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int64_t n_tokens = state.range(1);
  constexpr int64_t kRows = 1024, kK = 1024;
  auto bytes = encode(t, random_floats(kRows * kK, 3));
  const Tensor w(t, {kRows, kK}, bytes.data());
  const auto x = random_floats(n_tokens * kK, 4);
  std::vector<float> y(static_cast<size_t>(n_tokens * kRows));
  ThreadPool pool(static_cast<int>(state.range(2)));
  Arena scratch(matmul_scratch_bytes(w, n_tokens) + 4096, MemCategory::kScratch);
  for (auto _ : state) {
    scratch.reset();
    matmul(w, x.data(), n_tokens, y.data(), pool, scratch);
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(bytes.size()));
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(n_tokens) * static_cast<double>(state.iterations()),
                         benchmark::Counter::kIsRate);
  state.SetLabel(std::string(dtype_name(t)));
}

// Decode kernel lab: one activation row against a large weight matrix (65536 rows of 1024: out of
// a 32 MiB L3; or 512 rows, in L2, for the kernel's own speed), one thread. range(1) == 0: vec_dot
// per row (the one-row kernel); == 1: vec_dot_wrows over kMaxWeightRows rows at a time (what matmul
// uses for one token; Q5_0 has none); == 2 (Q4_0, Q5_0, Q8_0, Q4_K, Q6_K): the same matrix
// repacked to Q4_0x8 / Q5_0x8 / Q8_0x8 / Q4_Kx8 / Q6_Kx8 (backends/cpu/repack.h) through its AVX2
// kernel, what matmul runs on weights repacked at load; == 3: the same through the AVX512-VNNI
// kernel.
// Weight bytes/s against the machine's per-core bandwidth is the figure of merit.
void BM_DecodeRows(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const bool multi = state.range(1) == 1;
  const bool vnni = state.range(1) == 3;
  const bool repacked = state.range(1) >= 2;
  const cpu::RepackedLayout* rk = cpu::layout_of_base(t);
  if (repacked && rk == nullptr) {
    state.SkipWithError("no repacked layout for this type");
    return;
  }
  if (vnni && (rk->vnni == nullptr || !cpu::avx512_supported())) {
    state.SkipWithError("no AVX512-VNNI kernel for this layout or CPU");
    return;
  }
  const cpu::TypeKernels& k = cpu::kernels(t);
  if (multi && k.vec_dot_wrows == nullptr) {
    state.SkipWithError("no vec_dot_wrows kernel for this type");
    return;
  }
  // range(2): weight rows, 65536 (37.7 MB of Q4_0, out of cache) or 512 (295 KB, in L2).
  const int64_t kRows = state.range(2);
  constexpr int64_t kK = 1024, kDistinct = 64;
  const size_t rb = row_bytes(t, kK);
  std::vector<uint8_t> w(rb * kRows);
  for (int64_t r = 0; r < kDistinct; ++r) {
    const auto q = encode(t, random_floats(kK, 100 + static_cast<uint32_t>(r)));
    for (int64_t c = r; c < kRows; c += kDistinct)
      std::copy(q.begin(), q.end(), w.begin() + c * rb);
  }
  const auto x = encode(cpu::vec_dot_type(t), random_floats(kK, 2));
  std::vector<float> y(kRows);
  if (repacked) {
    std::vector<uint8_t> packed(w.size());
    rk->repack(w.data(), packed.data(), kRows, kK);
    w.swap(packed);
  }
  for (auto _ : state) {
    if (repacked) {
      (vnni ? rk->vnni : rk->avx2)(kK, w.data(), kRows / cpu::kRepackRows, x.data(), x.size(), 1,
                                   y.data(), kRows);
    } else if (multi) {
      for (int64_t r = 0; r < kRows; r += cpu::kMaxWeightRows)
        k.vec_dot_wrows(kK, w.data() + r * rb, rb, x.data(), cpu::kMaxWeightRows, y.data() + r);
    } else {
      for (int64_t r = 0; r < kRows; ++r) y[r] = k.vec_dot(kK, w.data() + r * rb, x.data());
    }
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) *
                          static_cast<int64_t>(w.size()));
  state.SetLabel(std::string(dtype_name(t)) + (vnni       ? " x8 repacked vnni"
                                               : repacked ? " x8 repacked"
                                               : multi  ? " wrows"
                                                        : " vec_dot"));
}

// Batched-decode kernel lab: 8 tokens against a 3072 x 1024 weight (Q06B's FFN up projection),
// one thread, walked like gemm_rows: ~128 KiB weight-row tiles, each applied to the 8 tokens in
// passes of range(1) rows x range(2) tokens. range(1) == 0 is the previous path: per weight row,
// vec_dot_rows over 4 tokens at a time (vec_dot per token for types without it). Counts one (row,
// token) dot product as an item.
void BM_DecodeTile(benchmark::State& state) {
  const auto t = static_cast<DType>(state.range(0));
  const int pr = static_cast<int>(state.range(1)), px = static_cast<int>(state.range(2));
  const cpu::TypeKernels& k = cpu::kernels(t);
  if (pr > 0 && k.vec_dot_tile == nullptr) {
    state.SkipWithError("no kernel for this type");
    return;
  }
  constexpr int64_t kK = 1024, kRows = 3072, kTokens = 8;
  const size_t ws = row_bytes(t, kK);
  const auto w = encode(t, random_floats(kRows * kK, 5));
  const DType dt = cpu::vec_dot_type(t);
  const size_t xs = row_bytes(dt, kK);
  const auto x = encode(dt, random_floats(kTokens * kK, 6));
  std::vector<float> y(static_cast<size_t>(kTokens * kRows));
  const int64_t row_tile = std::max<int64_t>(8, static_cast<int64_t>(128 * 1024 / ws));
  for (auto _ : state) {
    for (int64_t rt = 0; rt < kRows; rt += row_tile) {
      const int64_t rt_end = std::min(kRows, rt + row_tile);
      if (pr == 0) {
        for (int64_t r = rt; r < rt_end; ++r) {
          for (int64_t j = 0; j < kTokens; j += 4) {
            float out[4];
            if (k.vec_dot_rows != nullptr) {
              k.vec_dot_rows(kK, w.data() + r * ws, x.data() + j * xs, xs, 4, out);
            } else {
              for (int64_t b = 0; b < 4; ++b)
                out[b] = k.vec_dot(kK, w.data() + r * ws, x.data() + (j + b) * xs);
            }
            for (int64_t b = 0; b < 4; ++b) y[(j + b) * kRows + r] = out[b];
          }
        }
        continue;
      }
      for (int64_t j = 0; j < kTokens; j += px) {
        for (int64_t r = rt; r < rt_end; r += pr) {
          const int nr = static_cast<int>(std::min<int64_t>(pr, rt_end - r));
          const int nx = static_cast<int>(std::min<int64_t>(px, kTokens - j));
          k.vec_dot_tile(kK, w.data() + r * ws, ws, x.data() + j * xs, xs, nr, nx,
                         y.data() + j * kRows + r, kRows);
        }
      }
    }
    benchmark::ClobberMemory();
  }
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()) * kRows * kTokens);
  state.SetLabel(
      std::string(dtype_name(t)) +
      (pr == 0 ? " previous" : " tile " + std::to_string(pr) + "x" + std::to_string(px)));
}

// A decode token's layer matmuls, Q06B's shapes (28 layers of QKV 2048+1024+1024 x 1024, output
// 1024 x 2048, gate and up 2 x 3072 x 1024, down 1024 x 3072) in Q4_0 repacked to Q4_0x8, laid
// out one after another in one 2 MiB-aligned buffer advised for huge pages (as models/
// weight_repack.cc places them), 248 MB, through matmul_group / matmul on a pool of range(0)
// threads: what the row split (ThreadPool::steal_for) and the per-call costs do to the weight
// stream, without the rest of the model. Weight bytes/s against nexus_membw is the figure.
void BM_DecodeLayerMatmuls(benchmark::State& state) {
  constexpr int kLayers = 28;
  constexpr int64_t kDim = 1024, kQ = 2048, kKv = 1024, kFfn = 3072;
  struct Shape {
    int64_t rows, k;
  };
  const Shape per_layer[7] = {{kQ, kDim}, {kKv, kDim}, {kKv, kDim}, {kDim, kQ},
                              {kFfn, kDim}, {kFfn, kDim}, {kDim, kFfn}};
  size_t total = 0;
  for (const Shape& s : per_layer) total += row_bytes(DType::kQ4_0, s.k) * s.rows;
  total *= kLayers;
  constexpr size_t kHuge = size_t{2} << 20;
  const size_t alloc = (total + kHuge - 1) / kHuge * kHuge;
  auto* base = static_cast<uint8_t*>(std::aligned_alloc(kHuge, alloc));
  madvise(base, alloc, MADV_HUGEPAGE);
  std::vector<Tensor> w;
  size_t off = 0;
  for (int l = 0; l < kLayers; ++l) {
    for (const Shape& s : per_layer) {
      const size_t rb = row_bytes(DType::kQ4_0, s.k);
      std::vector<uint8_t> plain(rb * static_cast<size_t>(s.rows));
      const auto one = encode(DType::kQ4_0, random_floats(s.k, 7 + static_cast<uint32_t>(l)));
      for (int64_t r = 0; r < s.rows; ++r)
        std::copy(one.begin(), one.end(), plain.begin() + r * rb);
      cpu::repack_q4_0x8(plain.data(), base + off, s.rows, s.k);
      w.emplace_back(DType::kQ4_0x8, std::vector<int64_t>{s.rows, s.k}, base + off);
      off += plain.size();
    }
  }
  const auto x = random_floats(kFfn, 8);
  std::vector<float> y(kFfn * 3);
  ThreadPool pool(static_cast<int>(state.range(0)));
  Arena scratch(1 << 20, MemCategory::kScratch);
  for (auto _ : state) {
    for (int l = 0; l < kLayers; ++l) {
      const Tensor* lw = &w[static_cast<size_t>(l) * 7];
      const MatmulOut qkv[3] = {
          {&lw[0], y.data()}, {&lw[1], y.data() + kFfn}, {&lw[2], y.data() + 2 * kFfn}};
      scratch.reset();
      matmul_group(qkv, 3, x.data(), 1, pool, scratch);
      scratch.reset();
      matmul(lw[3], x.data(), 1, y.data(), pool, scratch);
      const MatmulOut gate_up[2] = {{&lw[4], y.data()}, {&lw[5], y.data() + kFfn}};
      scratch.reset();
      matmul_group(gate_up, 2, x.data(), 1, pool, scratch);
      scratch.reset();
      matmul(lw[6], x.data(), 1, y.data(), pool, scratch);
    }
    benchmark::ClobberMemory();
  }
  std::free(base);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(total));
  state.SetLabel("Q06B layer matmuls, Q4_0x8, " + std::to_string(state.range(0)) + " threads");
}
BENCHMARK(BM_DecodeLayerMatmuls)->Arg(1)->Arg(2)->UseRealTime()->Unit(benchmark::kMillisecond);

void vec_dot_args(benchmark::internal::Benchmark* b) {
  for (DType t : kTypes) b->Arg(static_cast<int64_t>(t));
}
void matmul_args(benchmark::internal::Benchmark* b) {
  for (DType t : kTypes)
    for (int64_t tokens : {1, 16}) b->Args({static_cast<int64_t>(t), tokens, 1});
}

BENCHMARK(BM_VecDot)->Apply(vec_dot_args);
BENCHMARK(BM_VecDot4Rows)
    ->ArgsProduct({{static_cast<int64_t>(DType::kQ4_0), static_cast<int64_t>(DType::kQ8_0),
                    static_cast<int64_t>(DType::kQ4_K), static_cast<int64_t>(DType::kQ6_K)},
                   {0, 1}});
// Per block type: the file layout one row and kMaxWeightRows at a time out of cache, then the
// repacked layout out of cache, and the multi-row and repacked kernels in L2.
void decode_rows_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kQ4_0, DType::kQ5_0, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K}) {
    const auto ti = static_cast<int64_t>(t);
    for (auto [mode, rows] : {std::pair{0, 65536}, {1, 65536}, {2, 65536}, {1, 512}, {2, 512}})
      if (mode != 1 || t != DType::kQ5_0) b->Args({ti, mode, rows});
    for (int64_t rows : {65536, 512}) b->Args({ti, 3, rows});
  }
  // Q5_K: no repacked layout; its multi-row kernel is Q4_K's with the fifth bit.
  for (auto [mode, rows] : {std::pair{0, 65536}, {1, 65536}, {0, 512}, {1, 512}})
    b->Args({static_cast<int64_t>(DType::kQ5_K), mode, rows});
}
BENCHMARK(BM_DecodeRows)->Apply(decode_rows_args)->UseRealTime();
void decode_tile_args(benchmark::internal::Benchmark* b) {
  for (DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_K, DType::kQ6_K})
    for (auto [r, x] : {std::pair{0, 4}, {1, 4}, {2, 2}, {2, 4}, {4, 1}, {4, 2}, {4, 4}, {8, 8}})
      b->Args({static_cast<int64_t>(t), r, x});
}
BENCHMARK(BM_DecodeTile)->Apply(decode_tile_args);
BENCHMARK(BM_Matmul)->Apply(matmul_args)->UseRealTime();

}  // namespace
}  // namespace nexus
