// The AVX2 training kernels (backends/cpu/train_kernels.h) against their scalar references at odd sizes:
// attention per head (every supported head size, GQA, sequence lengths around the 4-key and 8-lane
// blocks; the OpenBLAS forward and backward against the scalar ones, the softmax rows), the fused cross-entropy row (vocabulary sizes around the 8-lane and 256-value blocks,
// extreme logits), SwiGLU (large |gate| where exp saturates) and GELU (saturated and tiny inputs).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "backends/cpu/quant.h"
#include "backends/cpu/activation.h"
#include "backends/cpu/norm.h"
#include "backends/cpu/rope.h"
#include "backends/cpu/attention_train.h"
#include "backends/cpu/train_kernels.h"
#include "test_random.h"

namespace nexus::train {
namespace {

using test::randn;

// max |a - b| / max(1, max |b|).
double rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double err = 0.0, mag = 1.0;
  for (size_t i = 0; i < a.size(); ++i) {
    err = std::max(err, std::abs(static_cast<double>(a[i]) - b[i]));
    mag = std::max(mag, std::abs(static_cast<double>(b[i])));
  }
  return err / mag;
}

// An attention kernel's outputs (index 1: probabilities, output, the three gradients) within 1e-5
// of the reference's (index 0).
void expect_attention_near(const std::vector<float>* att, const std::vector<float>* out,
                           const std::vector<float>* dq, const std::vector<float>* dk,
                           const std::vector<float>* dv) {
  const char* names[] = {"att", "out", "dq", "dk", "dv"};
  const std::vector<float>* all[] = {att, out, dq, dk, dv};
  for (int i = 0; i < 5; ++i) EXPECT_LE(rel_diff(all[i][1], all[i][0]), 1e-5) << names[i];
}

#define NEXUS_REQUIRE_AVX2() \
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2/FMA CPU"

TEST(TrainKernelsParity, AttentionForwardAndBackward) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t hd : {8, 16, 24, 48, 64}) {
    for (int64_t t : {1, 3, 4, 9, 33}) {
      const AttnShape s{2, t, 4, 2, hd};
      const int64_t n = s.b * s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
      ASSERT_TRUE(cpu::attn_avx2_supports(hd));
      const auto q = randn(n * qw, 1 + t, 2.0f), k = randn(n * kvw, 2 + t, 2.0f);
      const auto v = randn(n * kvw, 3 + t), dout = randn(n * qw, 4 + t);
      std::vector<float> out[2], att[2], dq[2], dk[2], dv[2], dp(cpu::attention_backward_scratch(t));
      for (int simd = 0; simd < 2; ++simd) {
        out[simd].assign(n * qw, 0.0f);
        att[simd].assign(s.b * s.n_heads * t * t, -1.0f);
        dq[simd].assign(n * qw, 0.5f);  // backward accumulates: start from non-zero values
        dk[simd].assign(n * kvw, 0.5f);
        dv[simd].assign(n * kvw, 0.5f);
        for (int64_t b = 0; b < s.b; ++b) {
          for (int64_t h = 0; h < s.n_heads; ++h)
            (simd ? cpu::attn_forward_head_avx2 : cpu::attn_forward_head_scalar)(
                out[simd].data(), att[simd].data(), q.data(), k.data(), v.data(), s, b, h);
          for (int64_t kh = 0; kh < s.n_kv_heads; ++kh)
            (simd ? cpu::attn_backward_group_avx2 : cpu::attn_backward_group_scalar)(
                dq[simd].data(), dk[simd].data(), dv[simd].data(), dout.data(), att[0].data(),
                q.data(), k.data(), v.data(), s, b, kh, dp.data());
        }
      }
      SCOPED_TRACE("hd " + std::to_string(hd) + " t " + std::to_string(t));
      expect_attention_near(att, out, dq, dk, dv);
    }
  }
}

// The GEMM forward and backward (OpenBLAS in causal row blocks, any head size) against the scalar
// ones: GQA groups 1-3, head sizes 8-80, lengths around 32 (where attention_forward/backward
// switch to them) and the 64-row block (63-65, 129); the backward on the same saved
// probabilities.
TEST(TrainKernelsParity, AttentionBlas) {
  for (int64_t hd : {8, 20, 48, 64, 80}) {
    for (int64_t t : {1, 5, 31, 32, 63, 64, 65, 129}) {
      for (int64_t kv_heads : {1, 2, 6}) {
        const AttnShape s{2, t, 6, kv_heads, hd};
        const int64_t n = s.b * s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
        const auto q = randn(n * qw, 11 + t, 2.0f), k = randn(n * kvw, 12 + t, 2.0f);
        const auto v = randn(n * kvw, 13 + t), dout = randn(n * qw, 14 + t);
        std::vector<float> out[2], att[2], dq[2], dk[2], dv[2], dp(cpu::attention_backward_scratch(t));
        for (int blas = 0; blas < 2; ++blas) {
          out[blas].assign(n * qw, -3.0f);
          att[blas].assign(s.b * s.n_heads * t * t, -1.0f);
          for (int64_t b = 0; b < s.b; ++b)
            for (int64_t h = 0; h < s.n_heads; ++h)
              (blas ? cpu::attn_forward_head_blas : cpu::attn_forward_head_scalar)(
                  out[blas].data(), att[blas].data(), q.data(), k.data(), v.data(), s, b, h);
          dq[blas].assign(n * qw, 0.5f);  // backward accumulates: start from non-zero values
          dk[blas].assign(n * kvw, -0.25f);
          dv[blas].assign(n * kvw, 0.5f);
          for (int64_t b = 0; b < s.b; ++b)
            for (int64_t kh = 0; kh < s.n_kv_heads; ++kh)
              (blas ? cpu::attn_backward_group_blas : cpu::attn_backward_group_scalar)(
                  dq[blas].data(), dk[blas].data(), dv[blas].data(), dout.data(), att[0].data(),
                  q.data(), k.data(), v.data(), s, b, kh, dp.data());
        }
        SCOPED_TRACE("hd " + std::to_string(hd) + " t " + std::to_string(t) + " kv heads " +
                     std::to_string(kv_heads));
        expect_attention_near(att, out, dq, dk, dv);
      }
    }
  }
}

// The register-tiled forward and backward (attention_train_tiles.h) against the scalar ones: head sizes
// 8-128 (one and several column slices), GQA groups 1-3, lengths around the tiles' rows (6 and 12
// for the dot tiles, 3-8 for the sums) and key vectors (16, 32); the tiled backward must write
// every gradient value (they start at NaN). The AVX-512 build gives the AVX2 build's bits.
TEST(TrainKernelsParity, AttentionTiled) {
  NEXUS_REQUIRE_AVX2();
  const bool wide = cpu::avx512_active();
  for (int64_t hd : {8, 16, 24, 48, 64, 128}) {
    for (int64_t t : {1, 2, 5, 12, 13, 31, 33, 64, 100}) {
      for (int64_t kv_heads : {1, 2, 6}) {
        const AttnShape s{2, t, 6, kv_heads, hd};
        const int64_t n = s.b * s.t, qw = s.n_heads * hd, kvw = s.n_kv_heads * hd;
        const auto q = randn(n * qw, 21 + t, 2.0f), k = randn(n * kvw, 22 + t, 2.0f);
        const auto v = randn(n * kvw, 23 + t), dout = randn(n * qw, 24 + t);
        std::vector<float> out[3], att[3], dq[3], dk[3], dv[3], dp(cpu::attention_backward_scratch(t));
        std::vector<float> yt(cpu::attn_tiled_scratch(t, hd));
        // 0 scalar, 1 AVX2 tiles, 2 AVX-512 tiles (head sizes that are multiples of 16)
        const int kinds = wide && hd % 16 == 0 ? 3 : 2;
        for (int kind = 0; kind < kinds; ++kind) {
          out[kind].assign(n * qw, -3.0f);
          att[kind].assign(s.b * s.n_heads * t * t, -1.0f);
          // The scalar backward adds (from zeros here); the tiled ones write every value.
          const float start = kind == 0 ? 0.0f : NAN;
          dq[kind].assign(n * qw, start);
          dk[kind].assign(n * kvw, start);
          dv[kind].assign(n * kvw, start);
          for (int64_t b = 0; b < s.b; ++b)
            for (int64_t h = 0; h < s.n_heads; ++h) {
              float *o = out[kind].data(), *a = att[kind].data();
              if (kind == 0)
                cpu::attn_forward_head_scalar(o, a, q.data(), k.data(), v.data(), s, b, h);
              else
                (kind == 2 ? cpu::attn_forward_head_tiled_avx512
                           : cpu::attn_forward_head_tiled_avx2)(o, a, q.data(), k.data(),
                                                                 v.data(), s, b, h, yt.data());
            }
          for (int64_t b = 0; b < s.b; ++b)
            for (int64_t kh = 0; kh < s.n_kv_heads; ++kh) {
              float *gq = dq[kind].data(), *gk = dk[kind].data(), *gv = dv[kind].data();
              if (kind == 0)
                cpu::attn_backward_group_scalar(gq, gk, gv, dout.data(), att[0].data(), q.data(),
                                                 k.data(), v.data(), s, b, kh, dp.data());
              else
                (kind == 2 ? cpu::attn_backward_group_tiled_avx512
                           : cpu::attn_backward_group_tiled_avx2)(
                    gq, gk, gv, dout.data(), att[0].data(), q.data(), k.data(), v.data(), s, b,
                    kh, dp.data(), yt.data());
            }
        }
        SCOPED_TRACE("hd " + std::to_string(hd) + " t " + std::to_string(t) + " kv heads " +
                     std::to_string(kv_heads));
        expect_attention_near(att, out, dq, dk, dv);
        for (const auto* g : {&dq[1], &dk[1], &dv[1]})
          EXPECT_TRUE(std::all_of(g->begin(), g->end(), [](float x) { return std::isfinite(x); }));
        if (kinds == 3) {
          EXPECT_EQ(att[2], att[1]);
          EXPECT_EQ(out[2], out[1]);
          EXPECT_EQ(dq[2], dq[1]);
          EXPECT_EQ(dk[2], dk[1]);
          EXPECT_EQ(dv[2], dv[1]);
        }
      }
    }
  }
}

// The softmax rows of the GEMM attention, AVX2 against scalar, around the 4- and 8-lane blocks.
TEST(TrainKernelsParity, SoftmaxCausalRow) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t cnt : {1, 3, 4, 7, 8, 9, 17, 100}) {
    const int64_t t = cnt + 5;
    const auto scores = randn(t, 60 + cnt, 8.0f), grad = randn(t, 61 + cnt);
    std::vector<float> p[2] = {scores, scores}, d[2] = {grad, grad};
    cpu::softmax_causal_row_scalar(p[0].data(), cnt, t);
    cpu::softmax_causal_row_avx2(p[1].data(), cnt, t);
    cpu::softmax_causal_row_backward_scalar(d[0].data(), p[0].data(), cnt, t, 0.125f);
    cpu::softmax_causal_row_backward_avx2(d[1].data(), p[0].data(), cnt, t, 0.125f);
    SCOPED_TRACE("cnt " + std::to_string(cnt));
    EXPECT_LE(rel_diff(p[1], p[0]), 1e-6);
    EXPECT_LE(rel_diff(d[1], d[0]), 1e-6);
    for (int64_t j = cnt; j < t; ++j) EXPECT_EQ(p[1][j], 0.0f) << j;
    for (int64_t j = cnt; j < t; ++j) EXPECT_EQ(d[1][j], 0.0f) << j;
    double sum = 0.0;
    for (int64_t j = 0; j < cnt; ++j) sum += p[1][j];
    EXPECT_NEAR(sum, 1.0, 1e-6);
  }
}

// The LayerNorm rows, AVX2 against scalar, bit for bit: widths around the 4- and 8-value steps
// (tails of 1-7 values), GPT-2's 768, a row with a large mean.
TEST(TrainKernelsParity, LayerNormRowsBitIdentical) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t c : {1, 3, 4, 5, 7, 8, 9, 15, 17, 100, 768, 771}) {
    SCOPED_TRACE("c " + std::to_string(c));
    auto x = randn(c, 70 + c, 2.0f);
    if (c == 771)
      for (float& v : x) v += 50.0f;
    const auto w = randn(c, 71 + c), b = randn(c, 72 + c), g = randn(c, 73 + c);
    std::vector<float> out[2], dx[2], pw[2], pb[2];
    float mean[2], rstd[2];
    for (int simd = 0; simd < 2; ++simd) {
      out[simd].assign(c, -1.0f);
      (simd ? cpu::layernorm_forward_row_avx2 : cpu::layernorm_forward_row_scalar)(
          out[simd].data(), &mean[simd], &rstd[simd], x.data(), w.data(), b.data(), c, 1e-5f);
      dx[simd].assign(c, 0.5f);  // the backward accumulates
      pw[simd].assign(c, -0.25f);
      pb[simd].assign(c, 0.125f);
      (simd ? cpu::layernorm_backward_row_avx2 : cpu::layernorm_backward_row_scalar)(
          dx[simd].data(), pw[simd].data(), pb[simd].data(), g.data(), x.data(), w.data(),
          mean[0], rstd[0], c);
    }
    EXPECT_EQ(mean[1], mean[0]);
    EXPECT_EQ(rstd[1], rstd[0]);
    EXPECT_EQ(out[1], out[0]);
    EXPECT_EQ(dx[1], dx[0]);
    EXPECT_EQ(pw[1], pw[0]);
    EXPECT_EQ(pb[1], pb[0]);
  }
}

// The RMSNorm rows and the adjacent-pair RoPE rotation, AVX2 against scalar, bit for bit: widths
// around the 4- and 8-value steps, L15M's 288, a row of large values; rotations forward and back.
TEST(TrainKernelsParity, RmsNormAndRopeRowsBitIdentical) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t c : {1, 3, 4, 5, 7, 8, 9, 15, 17, 100, 288, 291}) {
    SCOPED_TRACE("c " + std::to_string(c));
    auto x = randn(c, 80 + c, 2.0f);
    if (c == 291)
      for (float& v : x) v *= 1e3f;
    const auto w = randn(c, 81 + c), g = randn(c, 82 + c);
    std::vector<float> out[2], dx[2], pw[2];
    float rstd[2];
    for (int simd = 0; simd < 2; ++simd) {
      out[simd].assign(c, -1.0f);
      (simd ? cpu::rmsnorm_forward_row_avx2 : cpu::rmsnorm_forward_row_scalar)(
          out[simd].data(), &rstd[simd], x.data(), w.data(), c, 1e-5f);
      dx[simd].assign(c, 0.5f);  // the backward accumulates
      pw[simd].assign(c, -0.25f);
      (simd ? cpu::rmsnorm_backward_row_avx2 : cpu::rmsnorm_backward_row_scalar)(
          dx[simd].data(), pw[simd].data(), g.data(), x.data(), w.data(), rstd[0], c);
    }
    EXPECT_EQ(rstd[1], rstd[0]);
    EXPECT_EQ(out[1], out[0]);
    EXPECT_EQ(dx[1], dx[0]);
    EXPECT_EQ(pw[1], pw[0]);
    const int64_t half = (c + 1) / 2;
    const auto cs = randn(2 * half, 83 + c);
    for (float sign : {1.0f, -1.0f}) {
      std::vector<float> v[2] = {randn(2 * half, 84 + c, 3.0f), randn(2 * half, 84 + c, 3.0f)};
      cpu::rope_rotate_row_scalar(v[0].data(), cs.data(), half, sign);
      cpu::rope_rotate_row_avx2(v[1].data(), cs.data(), half, sign);
      EXPECT_EQ(v[1], v[0]) << "sign " << sign;
    }
  }
}

// The streaming clear writes zeros exactly over [begin, begin + n): unaligned starts, lengths
// around the 8-float vectors, nothing touched outside.
TEST(TrainKernelsParity, ZeroStream) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t begin : {0, 1, 3, 7, 8, 13}) {
    for (int64_t n : {0, 1, 7, 8, 9, 31, 100, 1000}) {
      std::vector<float> buf(begin + n + 9, 2.5f);
      cpu::zero_stream_avx2(buf.data() + begin, n);
      for (int64_t i = 0; i < static_cast<int64_t>(buf.size()); ++i)
        ASSERT_EQ(buf[i], i >= begin && i < begin + n ? 0.0f : 2.5f) << begin << " " << n << " " << i;
    }
  }
}

TEST(TrainKernelsParity, CrossEntropyRow) {
  NEXUS_REQUIRE_AVX2();
  for (int64_t v : {1, 7, 8, 37, 255, 257, 1000, 32000}) {
    for (float spread : {1.0f, 30.0f}) {
      const auto logits = randn(v, 40 + v, spread);
      const int32_t target = static_cast<int32_t>(v / 3);
      std::vector<float> a = logits, b = logits;
      const float la = cpu::ce_row_scalar(a.data(), v, target, 0.125f);
      const float lb = cpu::ce_row_avx2(b.data(), v, target, 0.125f);
      SCOPED_TRACE("v " + std::to_string(v) + " spread " + std::to_string(spread));
      EXPECT_NEAR(lb, la, 1e-5 * std::max(1.0f, std::abs(la)));
      EXPECT_LE(rel_diff(b, a), 1e-6);
      // The gradient of a row sums to zero (softmax sums to one, minus the one-hot).
      double sum = 0.0;
      for (float x : b) sum += x;
      EXPECT_NEAR(sum, 0.0, 1e-6);
    }
  }
  std::vector<float> ignored(19, 3.0f);
  EXPECT_EQ(cpu::ce_row_avx2(ignored.data(), 19, -1, 1.0f), 0.0f);
  EXPECT_TRUE(std::all_of(ignored.begin(), ignored.end(), [](float x) { return x == 0.0f; }));
}

// The AVX-512 rows (16-lane exp, the AVX2 kernels' 8-lane partial sums kept) give the AVX2 rows'
// bits, for lengths around their 8- and 16-value steps and the cross-entropy's 256-value chunks,
// with scores far enough apart that exp underflows to zero.
TEST(TrainKernelsParity, Avx512RowsAreBitIdenticalToAvx2) {
  if (!cpu::avx512_supported()) GTEST_SKIP() << "no AVX-512 F/VL/BW/VNNI";
  for (int64_t n : {1, 7, 8, 9, 15, 16, 17, 24, 31, 33, 200, 255, 256, 257, 263, 272, 1000, 32000,
                    50257}) {
    for (float spread : {1.0f, 40.0f}) {
      SCOPED_TRACE("n " + std::to_string(n) + " spread " + std::to_string(spread));
      const auto x = randn(n, 60 + n, spread);
      std::vector<float> a = x, b = x;
      const int32_t target = static_cast<int32_t>(n / 2);
      EXPECT_EQ(cpu::ce_row_avx512(a.data(), n, target, 0.25f),
                cpu::ce_row_avx2(b.data(), n, target, 0.25f));
      EXPECT_EQ(a, b);
      for (int64_t zeros : {0, 5, 40}) {  // the causal row's zeros after cnt
        const int64_t t = n + zeros;
        a.assign(t, 7.0f);
        b.assign(t, 7.0f);
        std::copy(x.begin(), x.end(), a.begin());
        std::copy(x.begin(), x.end(), b.begin());
        cpu::softmax_causal_row_avx512(a.data(), n, t);
        cpu::softmax_causal_row_avx2(b.data(), n, t);
        EXPECT_EQ(a, b);
        EXPECT_TRUE(std::all_of(a.begin() + n, a.end(), [](float x) { return x == 0.0f; }));
      }
    }
  }
  std::vector<float> ignored(19, 3.0f);
  EXPECT_EQ(cpu::ce_row_avx512(ignored.data(), 19, -1, 1.0f), 0.0f);
  EXPECT_TRUE(std::all_of(ignored.begin(), ignored.end(), [](float x) { return x == 0.0f; }));
}

TEST(TrainKernelsParity, SwiGlu) {
  NEXUS_REQUIRE_AVX2();
  const int64_t n = 1003;
  auto g = randn(n, 50, 4.0f);
  g[0] = 100.0f;   // exp(-g) underflows
  g[1] = -100.0f;  // exp(-g) overflows: silu -> -0
  const auto u = randn(n, 51), dout = randn(n, 52);
  std::vector<float> out[2], dg[2], du[2];
  for (int simd = 0; simd < 2; ++simd) {
    out[simd].assign(n, 0.0f);
    dg[simd].assign(n, NAN);  // the backward writes every value
    du[simd].assign(n, NAN);
    (simd ? cpu::swiglu_forward_avx2 : cpu::swiglu_forward_scalar)(out[simd].data(), g.data(),
                                                                     u.data(), n);
    (simd ? cpu::swiglu_backward_avx2 : cpu::swiglu_backward_scalar)(
        dg[simd].data(), du[simd].data(), dout.data(), g.data(), u.data(), n);
  }
  EXPECT_LE(rel_diff(out[1], out[0]), 1e-6);
  EXPECT_LE(rel_diff(dg[1], dg[0]), 1e-6);
  EXPECT_LE(rel_diff(du[1], du[0]), 1e-6);
  EXPECT_TRUE(std::isfinite(out[1][1]) && std::isfinite(dg[1][1]));
  for (int simd = 0; simd < 2; ++simd)
    for (int64_t i = 0; i < n; ++i)
      ASSERT_TRUE(std::isfinite(dg[simd][i]) && std::isfinite(du[simd][i])) << simd << " " << i;
}

TEST(TrainKernelsParity, Gelu) {
  NEXUS_REQUIRE_AVX2();
  const int64_t n = 1003;
  auto x = randn(n, 60, 3.0f);
  x[0] = 30.0f;   // tanh saturates at 1 (exp clamps)
  x[1] = -30.0f;  // ... and at -1: gelu -> -0
  x[2] = 1e-6f;   // tanh z ~ z: the 1 - 2 / (e^2z + 1) form loses relative precision here
  const auto dout = randn(n, 61);
  std::vector<float> out[2], dx[2];
  for (int simd = 0; simd < 2; ++simd) {
    out[simd].assign(n, 0.0f);
    dx[simd].assign(n, NAN);  // the backward writes every value
    (simd ? cpu::gelu_forward_avx2 : cpu::gelu_forward_scalar)(out[simd].data(), x.data(), n);
    (simd ? cpu::gelu_backward_avx2 : cpu::gelu_backward_scalar)(dx[simd].data(), dout.data(),
                                                                   x.data(), n);
  }
  // Relative to max(1, |max|): the absolute error of tanh (~1e-7) scaled by |x| <= 30; the
  // backward multiplies it by C (1 + 3 A x^2) once more (measured 2.4e-6).
  EXPECT_LE(rel_diff(out[1], out[0]), 1e-6);
  EXPECT_LE(rel_diff(dx[1], dx[0]), 5e-6);
  EXPECT_EQ(out[1][0], 30.0f);
  EXPECT_EQ(out[1][1], 0.0f);
  EXPECT_NEAR(out[1][2], 0.5e-6f, 1e-12);
  for (int simd = 0; simd < 2; ++simd)
    for (int64_t i = 0; i < n; ++i) ASSERT_TRUE(std::isfinite(dx[simd][i])) << simd << " " << i;
}

// The AVX2 bias gradient adds each column's rows in the scalar loop's order: equal bit for bit,
// on column ranges with vector parts, tails and nothing but a tail, writing nothing outside them.
TEST(TrainKernelsParity, BiasBackwardExact) {
  NEXUS_REQUIRE_AVX2();
  const int64_t n = 37, c = 101;
  const auto dout = randn(n * c, 62, 5.0f);
  for (auto [j0, j1] : {std::pair<int64_t, int64_t>{0, 101}, {3, 96}, {8, 13}, {50, 53}}) {
    std::vector<float> db[2];
    for (int simd = 0; simd < 2; ++simd) {
      db[simd] = randn(c, 63);
      (simd ? cpu::bias_backward_avx2 : cpu::bias_backward_scalar)(db[simd].data(), dout.data(),
                                                                     n, c, j0, j1);
    }
    EXPECT_EQ(db[1], db[0]) << "columns " << j0 << ".." << j1;
    const auto before = randn(c, 63);
    for (int64_t j = 0; j < c; ++j) {
      const bool inside = j >= j0 && j < j1;
      EXPECT_EQ(db[1][j] == before[j], !inside) << "column " << j << " of " << j0 << ".." << j1;
    }
  }
}

}  // namespace
}  // namespace nexus::train
