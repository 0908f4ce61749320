// Training hot kernels at the L15M shape (dim 288, 6 heads of 48, vocab 32000, 256 tokens per
// sequence): attention forward / backward per head, the fused cross-entropy row and SwiGLU, each
// scalar (arg 0) against AVX2 (arg 1) on one thread; one GPT-2 attention layer warm and cold on
// two threads; and the output head (logits GEMM, fused loss,
// both backward GEMMs) over 2048 rows cut into blocks of `rows` rows, which is how the block size
// in TrainModel (train_model.cc) was chosen. Parity tests:
// tests/parity/train_kernels_parity_test.cc.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <random>
#include <vector>

#include "ops/round.h"
#include "backends/cpu/gemm_amx.h"
#include "backends/cpu/gemm_f32.h"
#include "backends/cpu/quant.h"
#include "nexus/core/thread_pool.h"
#include "nexus/train/precision.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/train_kernels.h"
#include "ops/train_ops.h"

namespace nexus::train {
namespace {

std::vector<float> randn(size_t n, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool skip_without_avx2(benchmark::State& state) {
  if (state.range(0) == 1 && !cpu::isa_supported(cpu::Isa::kAvx2)) {
    state.SkipWithError("no AVX2/FMA CPU");
    return true;
  }
  return false;
}

// range(1): head dim, 48 (L15M) or 64 (GPT-2 124M); 6 heads, t = 256.
AttnShape attn_shape(const benchmark::State& state) { return {1, 256, 6, 6, state.range(1)}; }

// range(0): 0 scalar, 1 AVX2 loops, 2 OpenBLAS GEMMs in row blocks (one thread, as
// attention_forward runs them), 3 AVX2 register tiles, 4 AVX-512 register tiles (the same bits).
bool skip_attention(benchmark::State& state) {
  if (skip_without_avx2(state)) return true;
  if (state.range(0) >= 3 && !cpu::isa_supported(cpu::Isa::kAvx2)) {
    state.SkipWithError("no AVX2/FMA CPU");
    return true;
  }
  if (state.range(0) == 4 && !cpu::avx512_active()) {
    state.SkipWithError("no AVX-512 (or NEXUS_NO_AVX512=1)");
    return true;
  }
  return false;
}

void BM_TrainAttentionForward(benchmark::State& state) {
  if (skip_attention(state)) return;
  const AttnShape kAttn = attn_shape(state);
  const int64_t n = kAttn.t, w = kAttn.n_heads * kAttn.head_dim;
  const auto q = randn(n * w, 1), k = randn(n * w, 2), v = randn(n * w, 3);
  std::vector<float> out(n * w), att(kAttn.t * kAttn.t),
      yt(cpu::attn_tiled_scratch(kAttn.t, kAttn.head_dim));
  const int64_t kind = state.range(0);
  if (kind == 2) openblas_set_num_threads(1);
  for (auto _ : state) {
    if (kind == 4)
      cpu::attn_forward_head_tiled_avx512(out.data(), att.data(), q.data(), k.data(), v.data(),
                                           kAttn, 0, 0, yt.data());
    else if (kind == 3)
      cpu::attn_forward_head_tiled_avx2(out.data(), att.data(), q.data(), k.data(), v.data(),
                                         kAttn, 0, 0, yt.data());
    else
      (kind == 2   ? cpu::attn_forward_head_blas
       : kind == 1 ? cpu::attn_forward_head_avx2
                   : cpu::attn_forward_head_scalar)(out.data(), att.data(), q.data(), k.data(),
                                                     v.data(), kAttn, 0, 0);
  }
  // Causal q k^T and p v: 2 * t (t + 1) / 2 * hd multiply-adds each.
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * 2 * kAttn.t * (kAttn.t + 1) / 2 * kAttn.head_dim,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainAttentionForward)->ArgsProduct({{0, 1, 2, 3, 4}, {48, 64}});

void BM_TrainAttentionBackward(benchmark::State& state) {
  if (skip_attention(state)) return;
  const AttnShape kAttn = attn_shape(state);
  const int64_t n = kAttn.t, w = kAttn.n_heads * kAttn.head_dim;
  const auto q = randn(n * w, 1), k = randn(n * w, 2), v = randn(n * w, 3), dout = randn(n * w, 4);
  std::vector<float> out(n * w), att(kAttn.n_heads * kAttn.t * kAttn.t),
      dp(attention_backward_scratch(kAttn.t)), yt(cpu::attn_tiled_scratch(kAttn.t, kAttn.head_dim));
  std::vector<float> dq(n * w), dk(n * w), dv(n * w);
  cpu::attn_forward_head_scalar(out.data(), att.data(), q.data(), k.data(), v.data(), kAttn, 0, 0);
  const int64_t kind = state.range(0);
  if (kind == 2) openblas_set_num_threads(1);
  for (auto _ : state) {
    if (kind == 4)
      cpu::attn_backward_group_tiled_avx512(dq.data(), dk.data(), dv.data(), dout.data(),
                                             att.data(), q.data(), k.data(), v.data(), kAttn, 0,
                                             0, dp.data(), yt.data());
    else if (kind == 3)
      cpu::attn_backward_group_tiled_avx2(dq.data(), dk.data(), dv.data(), dout.data(),
                                           att.data(), q.data(), k.data(), v.data(), kAttn, 0, 0,
                                           dp.data(), yt.data());
    else
      (kind == 2   ? cpu::attn_backward_group_blas
       : kind == 1 ? cpu::attn_backward_group_avx2
                   : cpu::attn_backward_group_scalar)(dq.data(), dk.data(), dv.data(),
                                                       dout.data(), att.data(), q.data(), k.data(),
                                                       v.data(), kAttn, 0, 0, dp.data());
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * 4 * kAttn.t * (kAttn.t + 1) / 2 * kAttn.head_dim,
                         benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainAttentionBackward)->ArgsProduct({{0, 1, 2, 3, 4}, {48, 64}});

// One GPT-2 124M layer of attention as a step runs it (4 sequences x 12 heads of 64, t 256, two
// threads, the default kernels), its buffers warm (range(0) = 0: the same layer again) or cold (1:
// 256 MiB written between iterations, outside the timing, as the GEMMs between two attention calls
// do). range(1): 0 forward, 1 backward. The per-head benchmarks above keep everything in L2; this
// one shows what memory adds. Medians of 3 (Intel host): forward 2.18 ms warm, 2.68 cold;
// backward 3.64 and 4.29 (in a GPT-2 step: 2.6-2.8 and 4.7-4.8 ms a layer).
void BM_TrainAttentionLayer(benchmark::State& state) {
  const AttnShape s{4, 256, 12, 12, 64};
  const int64_t n = s.b * s.t, w = s.n_heads * s.head_dim;
  const auto q = randn(n * w, 11), k = randn(n * w, 12), v = randn(n * w, 13),
             dout = randn(n * w, 14);
  std::vector<float> out(n * w), att(s.b * s.n_heads * s.t * s.t), dq(n * w), dk(n * w),
      dv(n * w), scratch(2 * attention_backward_scratch(s.t));
  std::vector<char> flush(state.range(0) ? size_t{256} << 20 : 0);
  ThreadPool pool(2);
  openblas_set_num_threads(1);
  attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s, &pool);
  int fill = 0;
  for (auto _ : state) {
    if (!flush.empty()) {
      state.PauseTiming();
      std::fill(flush.begin(), flush.end(), static_cast<char>(++fill));
      state.ResumeTiming();
    }
    if (state.range(1) == 0)
      attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s, &pool);
    else
      attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), att.data(), q.data(),
                         k.data(), v.data(), s, scratch.data(), &pool);
  }
}
BENCHMARK(BM_TrainAttentionLayer)
    ->ArgsProduct({{0, 1}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

// GPT-2 124M's block GEMMs as a step runs them: 12 layers, each with its own weights and
// activations (so operands come from memory, not cache), on a pool of two threads through
// matmul_forward and matmul_backward. range(0): 0 = the forward's six GEMMs a layer, 1 = the
// backward's twelve (in reverse layer order). Which GEMM runs is the process's: our f32 GEMM where
// it is active, OpenBLAS with NEXUS_NO_F32_GEMM=1 (run the binary both ways to compare).
// Intel host (medians of 3, two alternating runs, GFLOP/s): forward 387-388 against
// OpenBLAS's 363-364, backward 381-385 against 361-363.
void BM_TrainBlockGemms(benchmark::State& state) {
  constexpr int kLayers = 12;
  constexpr int64_t n = 1024, d = 768, f = 3072;
  struct Layer {
    std::vector<float> wq, wk, wv, wo, wf, wp, ln1, atty, ln2, gl, out_d, out_f, dwq, dwk, dwv, dwo,
        dwf, dwp, dy_d, dy_f, dx_d, dx_f;
  };
  std::vector<Layer> layers(kLayers);
  uint64_t seed = 100;
  for (Layer& l : layers) {
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.dwq, &l.dwk, &l.dwv, &l.dwo})
      *w = randn(d * d, ++seed, 0.02f);
    for (auto* w : {&l.wf, &l.wp, &l.dwf, &l.dwp}) *w = randn(d * f, ++seed, 0.02f);
    for (auto* x : {&l.ln1, &l.atty, &l.ln2, &l.out_d, &l.dy_d, &l.dx_d}) *x = randn(n * d, ++seed);
    for (auto* x : {&l.gl, &l.out_f, &l.dy_f, &l.dx_f}) *x = randn(n * f, ++seed);
  }
  ThreadPool pool(2);
  openblas_set_num_threads(1);
  const bool forward = state.range(0) == 0;
  for (auto _ : state) {
    if (forward) {
      for (Layer& l : layers) {
        for (const auto* w : {&l.wq, &l.wk, &l.wv})
          matmul_forward(l.out_d.data(), l.ln1.data(), w->data(), n, d, d, &pool);
        matmul_forward(l.out_d.data(), l.atty.data(), l.wo.data(), n, d, d, &pool);
        matmul_forward(l.out_f.data(), l.ln2.data(), l.wf.data(), n, d, f, &pool);
        matmul_forward(l.out_d.data(), l.gl.data(), l.wp.data(), n, f, d, &pool);
      }
    } else {
      for (int i = kLayers - 1; i >= 0; --i) {
        Layer& l = layers[i];
        matmul_backward(l.dx_f.data(), l.dwp.data(), l.dy_d.data(), l.gl.data(), l.wp.data(), n, f,
                        d, &pool);
        matmul_backward(l.dx_d.data(), l.dwf.data(), l.dy_f.data(), l.ln2.data(), l.wf.data(), n, d,
                        f, &pool);
        matmul_backward(l.dx_d.data(), l.dwo.data(), l.dy_d.data(), l.atty.data(), l.wo.data(), n,
                        d, d, &pool);
        matmul_backward(l.dx_d.data(), l.dwq.data(), l.dy_d.data(), l.ln1.data(), l.wq.data(), n, d,
                        d, &pool);
        matmul_backward(l.dx_d.data(), l.dwk.data(), l.dy_d.data(), l.ln1.data(), l.wk.data(), n, d,
                        d, &pool);
        matmul_backward(l.dx_d.data(), l.dwv.data(), l.dy_d.data(), l.ln1.data(), l.wv.data(), n, d,
                        d, &pool);
      }
    }
  }
  const double flops = 2.0 * n * d * (4 * d + 2 * f) * kLayers * (forward ? 1 : 2);
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainBlockGemms)->Arg(0)->Arg(1)->UseRealTime()->Unit(benchmark::kMillisecond);

void BM_TrainCrossEntropyRow(benchmark::State& state) {
  if (skip_without_avx2(state)) return;
  const int64_t v = 32000;
  const auto logits = randn(v, 5, 3.0f);
  std::vector<float> row(v);
  if (state.range(0) == 2 && !cpu::avx512_active()) {
    state.SkipWithError("no AVX-512 (or NEXUS_NO_AVX512=1)");
    return;
  }
  // 0 scalar, 1 AVX2, 2 AVX-512 (bit-identical to AVX2).
  const auto fn = state.range(0) == 2   ? cpu::ce_row_avx512
                  : state.range(0) == 1 ? cpu::ce_row_avx2
                                        : cpu::ce_row_scalar;
  for (auto _ : state) {
    state.PauseTiming();
    row = logits;
    state.ResumeTiming();
    benchmark::DoNotOptimize(fn(row.data(), v, 17, 1.0f / 2048));
  }
  state.SetItemsProcessed(state.iterations() * v);
}
BENCHMARK(BM_TrainCrossEntropyRow)->Arg(0)->Arg(1)->Arg(2);

void BM_TrainSwiGlu(benchmark::State& state) {
  if (skip_without_avx2(state)) return;
  const int64_t n = 256 * 768;
  const auto g = randn(n, 6, 2.0f), u = randn(n, 7), dout = randn(n, 8);
  std::vector<float> out(n), dg(n), du(n);
  const bool simd = state.range(0) == 1;
  for (auto _ : state) {
    (simd ? cpu::swiglu_forward_avx2 : cpu::swiglu_forward_scalar)(out.data(), g.data(), u.data(),
                                                                     n);
    (simd ? cpu::swiglu_backward_avx2 : cpu::swiglu_backward_scalar)(
        dg.data(), du.data(), dout.data(), g.data(), u.data(), n);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TrainSwiGlu)->Arg(0)->Arg(1);

// GPT-2's GELU forward + backward over one sequence of a 124M-shape FFN (256 x 3072 values).
void BM_TrainGelu(benchmark::State& state) {
  if (skip_without_avx2(state)) return;
  const int64_t n = 256 * 3072;
  const auto x = randn(n, 11, 2.0f), dout = randn(n, 12);
  std::vector<float> out(n), dx(n);
  const bool simd = state.range(0) == 1;
  for (auto _ : state) {
    (simd ? cpu::gelu_forward_avx2 : cpu::gelu_forward_scalar)(out.data(), x.data(), n);
    (simd ? cpu::gelu_backward_avx2 : cpu::gelu_backward_scalar)(dx.data(), dout.data(),
                                                                   x.data(), n);
  }
  state.SetItemsProcessed(state.iterations() * n);
}
BENCHMARK(BM_TrainGelu)->Arg(0)->Arg(1);

// The mixed-precision passes over one L15M block's FFN activations (2048 x 768 values): bf16
// round-and-pack in forward, unpack in backward.
void BM_TrainBf16PackUnpack(benchmark::State& state) {
  if (skip_without_avx2(state)) return;
  const int64_t n = 2048 * 768;
  auto x = randn(n, 13);
  std::vector<uint16_t> h(n);
  const bool simd = state.range(0) == 1;
  for (auto _ : state) {
    (simd ? cpu::round_pack_avx2 : cpu::round_pack_scalar)(Precision::kBF16, x.data(), h.data(),
                                                             n);
    (simd ? cpu::unpack_avx2 : cpu::unpack_scalar)(Precision::kBF16, h.data(), x.data(), n);
  }
  state.SetBytesProcessed(state.iterations() * n * (4 + 4 + 2 + 2 + 4));
}
BENCHMARK(BM_TrainBf16PackUnpack)->Arg(0)->Arg(1);

// The output head of TrainModel::head_forward over 1024 rows in blocks of state.range(0) rows,
// as TrainModel runs it: GEMMs split over a pool of two threads, OpenBLAS on one thread each.
// range(1): 0 = L15M's head (d 288, vocab 32000), 1 = GPT-2 124M's (d 768, vocab 50257).
void BM_TrainOutputHead(benchmark::State& state) {
  const bool gpt2 = state.range(1) == 1;
  const int64_t n = 1024, d = gpt2 ? 768 : 288, nv = gpt2 ? 50257 : 32000, rows = state.range(0);
  const auto lnf = randn(n * d, 9), w = randn(nv * d, 10, 0.02f);
  std::vector<float> logits(rows * nv), row_loss(n), dlnf(n * d), dw(nv * d);
  std::vector<int32_t> targets(n);
  for (int64_t i = 0; i < n; ++i) targets[i] = static_cast<int32_t>(i * 7919 % nv);
  openblas_set_num_threads(1);
  ThreadPool pool(2);
  for (auto _ : state) {
    for (int64_t r0 = 0; r0 < n; r0 += rows) {
      const int64_t m = std::min(rows, n - r0);
      matmul_forward(logits.data(), lnf.data() + r0 * d, w.data(), m, d, nv, &pool);
      cross_entropy_fused(logits.data(), row_loss.data() + r0, targets.data() + r0, m, nv,
                          1.0f / n, &pool);
      matmul_backward(dlnf.data() + r0 * d, dw.data(), logits.data(), lnf.data() + r0 * d, w.data(),
                      m, d, nv, &pool);
    }
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(3.0 * 2 * n * d * nv, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainOutputHead)
    ->ArgsProduct({{64, 166, 256, 512, 1024}, {0, 1}})
    ->UseRealTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nexus::train

namespace nexus::train {
namespace {

// One thread's share of GPT-2 124M's MLP GEMMs at batch 4 x 256 (1024 tokens, 768 -> 1536 of the
// 3072 columns): range(0) 0 = forward (x W^T), 1 = d input (dY W), 2 = d weight (dY^T X);
// range(1) 0 = OpenBLAS sgemm, 1 = AMX-BF16 (cpu::gemm_bf16_amx) on the same bf16-valued
// operands, conversions included, 2 = our f32 GEMM (cpu::gemm_f32: AVX-512 or AVX2), packing
// included. One thread, operands in cache after the first run (the step's rates, with operands
// from memory and two threads, are in PERFORMANCE.md).
void BM_TrainGemm(benchmark::State& state) {
  const int kind = static_cast<int>(state.range(0));
  const bool amx = state.range(1) == 1, ours = state.range(1) == 2;
  if (amx && !cpu::amx_bf16_active()) {
    state.SkipWithError("no AMX-BF16 on this CPU or OS");
    return;
  }
  if (ours && !cpu::gemm_f32_active()) {
    state.SkipWithError("our f32 GEMM is off (no AVX2/FMA, or NEXUS_NO_F32_GEMM=1)");
    return;
  }
  openblas_set_num_threads(1);  // as in training
  constexpr int64_t n = 1024, c = 768, oc = 1536;
  auto x = randn(n * c, 1), w = randn(oc * c, 2), dy = randn(n * oc, 3);
  round_to(Precision::kBF16, x.data(), n * c);
  round_to(Precision::kBF16, w.data(), oc * c);
  round_to(Precision::kBF16, dy.data(), n * oc);
  std::vector<float> out(n * oc), dx(n * c), dw(oc * c);
  for (auto _ : state) {
    if (ours) {
      if (kind == 0)
        cpu::gemm_f32(false, true, n, oc, c, x.data(), c, w.data(), c, false, out.data(), oc);
      else if (kind == 1)
        cpu::gemm_f32(false, false, n, c, oc, dy.data(), oc, w.data(), c, true, dx.data(), c);
      else
        cpu::gemm_f32(true, false, oc, c, n, dy.data(), oc, x.data(), c, true, dw.data(), c);
    } else if (kind == 0) {
      if (amx)
        cpu::gemm_bf16_amx(false, true, n, oc, c, x.data(), c, w.data(), c, false, out.data(), oc);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, oc, c, 1.0f, x.data(), c,
                    w.data(), c, 0.0f, out.data(), oc);
    } else if (kind == 1) {
      if (amx)
        cpu::gemm_bf16_amx(false, false, n, c, oc, dy.data(), oc, w.data(), c, true, dx.data(), c);
      else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, c, oc, 1.0f, dy.data(), oc,
                    w.data(), c, 1.0f, dx.data(), c);
    } else {
      if (amx)
        cpu::gemm_bf16_amx(true, false, oc, c, n, dy.data(), oc, x.data(), c, true, dw.data(), c);
      else
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, oc, c, n, 1.0f, dy.data(), oc,
                    x.data(), c, 1.0f, dw.data(), c);
    }
    benchmark::ClobberMemory();
  }
  state.counters["GFLOP/s"] = benchmark::Counter(static_cast<double>(2 * n * c * oc),
                                                 benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainGemm)->ArgsProduct({{0, 1, 2}, {0, 1, 2}})->UseRealTime();

// The three GEMMs of L15M's output head over a whole step's 2048 rows (TrainModel's head_rows_
// for L15M at batch 8 x 256), timed apart: range(0) 0 = logits (x W^T), 1 = d input (dL W),
// 2 = d weight (dL^T x). Two threads; the one [n x vocab] buffer (262 MB: the logits part 0 writes,
// the d logits parts 1 and 2 read) is in memory, not cache, as in the step.
void BM_TrainHeadParts(benchmark::State& state) {
  const int part = static_cast<int>(state.range(0));
  const int64_t n = 2048, d = 288, nv = 32000;
  const auto lnf = randn(n * d, 9), w = randn(nv * d, 10, 0.02f);
  auto dl = randn(n * nv, 11, 1e-4f);
  std::vector<float> dlnf(n * d), dw(nv * d);
  ThreadPool pool(2);
  for (auto _ : state) {
    if (part == 0) matmul_forward(dl.data(), lnf.data(), w.data(), n, d, nv, &pool);
    if (part == 1)
      matmul_backward(dlnf.data(), nullptr, dl.data(), lnf.data(), w.data(), n, d, nv, &pool);
    if (part == 2)
      matmul_backward(nullptr, dw.data(), dl.data(), lnf.data(), w.data(), n, d, nv, &pool);
  }
  state.counters["GFLOP/s"] =
      benchmark::Counter(2.0 * n * d * nv, benchmark::Counter::kIsIterationInvariantRate);
}
BENCHMARK(BM_TrainHeadParts)->DenseRange(0, 2)->UseRealTime()->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace nexus::train
