// The CUDA backend's ops against the CPU's reference on a device (odd sizes, random inputs):
// RMSNorm, LayerNorm, SwiGLU, GELU, the dense layer and the embedding, forward and backward;
// RoPE; the fused cross-entropy; AdamW, the sum of squares and scaling; the dequantizing matvec;
// training's causal attention; mixed precision's rounding. Each test skips, naming the reason,
// where no CUDA device can be used (a build without nvcc, no driver, no GPU). scripts/gpu_check.sh
// runs them on a machine with one.
#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <vector>

#include "backends/cpu/quant.h"
#include "backends/cuda/cuda.h"
#include "ops/activation.h"
#include "ops/causal_attention.h"
#include "ops/dense.h"
#include "ops/device.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/matvec.h"
#include "ops/norm.h"
#include "ops/optim.h"
#include "ops/rope.h"
#include "ops/round.h"
#include "test_random.h"

namespace nexus {
namespace {

const Device kGpu = Device::cuda(0);

#define NEXUS_REQUIRE_CUDA()                                                    \
  do {                                                                          \
    if (auto m = device_memory(kGpu); !m) GTEST_SKIP() << m.status().message(); \
  } while (0)

// A device tensor of `dtype` holding `host` (T: the dtype's element or its 16-bit encoding).
template <class T>
Tensor upload_as(DType dtype, const std::vector<T>& host) {
  Tensor h = Tensor::zeros(dtype, {static_cast<int64_t>(host.size())});
  std::copy(host.begin(), host.end(), h.data_as<T>());
  Result<Tensor> d = to_device(h, kGpu);
  EXPECT_TRUE(d) << d.status().message();
  return std::move(d).value();
}
Tensor upload(const std::vector<float>& host) { return upload_as(DType::kF32, host); }
Tensor upload_ids(const std::vector<int32_t>& ids) { return upload_as(DType::kI32, ids); }

// A zero-filled device tensor of n floats.
Tensor zeros(int64_t n) {
  Result<Tensor> t = zeros_on(DType::kF32, {n}, kGpu);
  EXPECT_TRUE(t) << t.status().message();
  return std::move(t).value();
}

template <class T>
std::vector<T> download_as(const Tensor& d) {
  Result<Tensor> h = to_device(d, Device::cpu());
  EXPECT_TRUE(h) << h.status().message();
  const T* p = h.value().data_as<T>();
  return std::vector<T>(p, p + h.value().numel());
}
std::vector<float> download(const Tensor& d) { return download_as<float>(d); }

void expect_near(const std::vector<float>& got, const std::vector<float>& want, float tol,
                 const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * (1.0f + std::abs(want[i]))) << what << " at " << i;
}

TEST(CudaOps, RmsNormForwardAndBackwardMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {5, 4099}}) {
    const auto n = static_cast<size_t>(rows * dim);
    const std::vector<float> x = test::randn(n, 1), w = test::randn(dim, 2), dy = test::randn(n, 3),
                             dx0 = test::randn(n, 4), dw0 = test::randn(dim, 5);
    std::vector<float> y(n), rstd(rows), dx = dx0, dw = dw0;
    rms_norm(RmsNormArgs{x.data(), w.data(), 1e-5f, y.data(), rstd.data(), rows, dim});
    rms_norm_backward(RmsNormBackwardArgs{dx.data(), dw.data(), dy.data(), x.data(), w.data(),
                                          rstd.data(), rows, dim});
    Tensor gx = upload(x), gw = upload(w), gdy = upload(dy), gdx = upload(dx0), gdw = upload(dw0);
    Tensor gy = zeros(n), gr = zeros(rows);
    rms_norm(RmsNormArgs{gx.data_as<float>(), gw.data_as<float>(), 1e-5f, gy.data_as<float>(),
                         gr.data_as<float>(), rows, dim},
             nullptr, kGpu);
    rms_norm_backward(RmsNormBackwardArgs{gdx.data_as<float>(), gdw.data_as<float>(),
                                          gdy.data_as<float>(), gx.data_as<float>(),
                                          gw.data_as<float>(), gr.data_as<float>(), rows, dim},
                      nullptr, kGpu);
    expect_near(download(gy), y, 1e-5f, "y");
    expect_near(download(gr), rstd, 1e-5f, "rstd");
    expect_near(download(gdx), dx, 1e-4f, "dx");
    expect_near(download(gdw), dw, 1e-4f, "dw");
  }
}

TEST(CudaOps, LayerNormForwardAndBackwardMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (const auto& [rows, dim] : {std::pair<int64_t, int64_t>{1, 1}, {7, 33}, {5, 4099}}) {
    const auto n = static_cast<size_t>(rows * dim);
    const std::vector<float> x = test::randn(n, 11), w = test::randn(dim, 12),
                             b = test::randn(dim, 13), dy = test::randn(n, 14),
                             dx0 = test::randn(n, 15), dw0 = test::randn(dim, 16),
                             db0 = test::randn(dim, 17);
    std::vector<float> y(n), mean(rows), rstd(rows), dx = dx0, dw = dw0, db = db0;
    layer_norm(LayerNormArgs{x.data(), w.data(), b.data(), 1e-5f, y.data(), mean.data(),
                             rstd.data(), rows, dim});
    layer_norm_backward(LayerNormBackwardArgs{dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                                              w.data(), mean.data(), rstd.data(), rows, dim});
    Tensor gx = upload(x), gw = upload(w), gb = upload(b), gdy = upload(dy), gdx = upload(dx0),
           gdw = upload(dw0), gdb = upload(db0), gy = zeros(n), gm = zeros(rows), gr = zeros(rows);
    layer_norm(
        LayerNormArgs{gx.data_as<float>(), gw.data_as<float>(), gb.data_as<float>(), 1e-5f,
                      gy.data_as<float>(), gm.data_as<float>(), gr.data_as<float>(), rows, dim},
        nullptr, kGpu);
    layer_norm_backward(
        LayerNormBackwardArgs{gdx.data_as<float>(), gdw.data_as<float>(), gdb.data_as<float>(),
                              gdy.data_as<float>(), gx.data_as<float>(), gw.data_as<float>(),
                              gm.data_as<float>(), gr.data_as<float>(), rows, dim},
        nullptr, kGpu);
    expect_near(download(gy), y, 1e-5f, "y");
    expect_near(download(gm), mean, 1e-5f, "mean");
    expect_near(download(gr), rstd, 1e-4f, "rstd");
    expect_near(download(gdx), dx, 1e-4f, "dx");
    expect_near(download(gdw), dw, 1e-4f, "dw");
    expect_near(download(gdb), db, 1e-4f, "db");
  }
}

TEST(CudaOps, ActivationsForwardAndBackwardMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (const int64_t n : {int64_t{1}, int64_t{1000}, int64_t{300001}}) {
    const auto m = static_cast<size_t>(n);
    const std::vector<float> g = test::randn(m, 11, 4.0f), u = test::randn(m, 12),
                             d = test::randn(m, 13);
    std::vector<float> out(m), dg(m), du(m), gout(m), gdx(m);
    swiglu(SwigluArgs{out.data(), g.data(), u.data(), n});
    swiglu_backward(SwigluBackwardArgs{dg.data(), du.data(), d.data(), g.data(), u.data(), n});
    gelu(GeluArgs{gout.data(), g.data(), n});
    gelu_backward(GeluBackwardArgs{gdx.data(), d.data(), g.data(), n});
    Tensor tg = upload(g), tu = upload(u), td = upload(d);
    Tensor t_out = zeros(m), t_dg = zeros(m), t_du = zeros(m), t_gout = zeros(m), t_gdx = zeros(m);
    const float *pg = tg.data_as<float>(), *pu = tu.data_as<float>(), *pd = td.data_as<float>();
    swiglu(SwigluArgs{t_out.data_as<float>(), pg, pu, n}, nullptr, kGpu);
    swiglu_backward(SwigluBackwardArgs{t_dg.data_as<float>(), t_du.data_as<float>(), pd, pg, pu, n},
                    nullptr, kGpu);
    gelu(GeluArgs{t_gout.data_as<float>(), pg, n}, nullptr, kGpu);
    gelu_backward(GeluBackwardArgs{t_gdx.data_as<float>(), pd, pg, n}, nullptr, kGpu);
    expect_near(download(t_out), out, 1e-5f, "swiglu");
    expect_near(download(t_dg), dg, 1e-5f, "swiglu dg");
    expect_near(download(t_du), du, 1e-5f, "swiglu du");
    expect_near(download(t_gout), gout, 1e-5f, "gelu");
    expect_near(download(t_gdx), gdx, 1e-5f, "gelu dx");
  }
}

TEST(CudaOps, RopeBothStylesAndItsInverseMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  const int64_t rows = 13, heads = 3, head_dim = 24, rope_dim = 16;
  std::vector<int32_t> pos(rows);
  for (int64_t r = 0; r < rows; ++r) pos[r] = static_cast<int32_t>(7 * r + 1);
  std::vector<float> cs(static_cast<size_t>(rows * rope_dim));
  rope_table(pos.data(), rows, rope_dim, 10000.0f, cs.data());
  Tensor tcs = upload(cs);
  for (const RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox})
    for (const bool inverse : {false, true}) {
      std::vector<float> x = test::randn(static_cast<size_t>(rows * heads * head_dim), 21);
      Tensor tx = upload(x);
      rope(RopeArgs{x.data(), rows, heads, head_dim, rope_dim, style, cs.data(), rows, inverse});
      rope(RopeArgs{tx.data_as<float>(), rows, heads, head_dim, rope_dim, style,
                    tcs.data_as<float>(), rows, inverse},
           nullptr, kGpu);
      expect_near(download(tx), x, 1e-6f, inverse ? "rope inverse" : "rope");
    }
}

// cuBLAS is opened at first use, not linked: where the backend is built, the library and its
// functions must be found (no device needed).
TEST(CudaOps, CublasOpensWhereTheBackendIsBuilt) {
  const Status s = cuda::blas_status();
  if (cuda::built())
    EXPECT_TRUE(s) << s.message();
  else
    EXPECT_NE(s.message().find("without CUDA"), std::string::npos) << s.message();
}

TEST(CudaOps, DenseForwardAndBackwardMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  const int64_t n = 37, c = 65, oc = 19;
  const std::vector<float> inp = test::randn(n * c, 31), w = test::randn(oc * c, 32),
                           res = test::randn(n * oc, 33), bias = test::randn(oc, 34),
                           dout = test::randn(n * oc, 35), dinp0 = test::randn(n * c, 36),
                           dw0 = test::randn(oc * c, 37), db0 = test::randn(oc, 38);
  std::vector<float> out(n * oc), dinp = dinp0, dw = dw0, db = db0;
  run_op(DenseArgs{out.data(), inp.data(), w.data(), n, c, oc, res.data(), bias.data()}, nullptr,
         Device::cpu());
  run_op(DenseBackwardArgs{dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), n,
                           c, oc},
         nullptr, Device::cpu());
  Tensor ti = upload(inp), tw = upload(w), tr = upload(res), tb = upload(bias), td = upload(dout);
  Tensor to = zeros(n * oc), tdi = upload(dinp0), tdw = upload(dw0), tdb = upload(db0);
  run_op(DenseArgs{to.data_as<float>(), ti.data_as<float>(), tw.data_as<float>(), n, c, oc,
                   tr.data_as<float>(), tb.data_as<float>()},
         nullptr, kGpu);
  run_op(DenseBackwardArgs{tdi.data_as<float>(), tdw.data_as<float>(), tdb.data_as<float>(),
                           td.data_as<float>(), ti.data_as<float>(), tw.data_as<float>(), n, c, oc},
         nullptr, kGpu);
  expect_near(download(to), out, 1e-4f, "out");
  expect_near(download(tdi), dinp, 1e-4f, "dinp");
  expect_near(download(tdw), dw, 1e-4f, "dw");
  expect_near(download(tdb), db, 1e-4f, "dbias");
}

TEST(CudaOps, EmbeddingGathersChecksIdsAndScattersInOrder) {
  NEXUS_REQUIRE_CUDA();
  const int64_t vocab = 11, dim = 37, n = 9;
  const std::vector<int32_t> ids = {3, 0, 10, 3, 7, 3, 1, 10, 5};  // repeats add up in order
  const std::vector<float> table = test::randn(vocab * dim, 41), dout = test::randn(n * dim, 42),
                           dt0 = test::randn(vocab * dim, 43);
  std::vector<float> out(n * dim), dt = dt0;
  embedding(EmbeddingArgs{table.data(), DType::kF32, vocab, dim, ids.data(), n, out.data()});
  embedding_backward(EmbeddingBackwardArgs{dt.data(), dout.data(), ids.data(), n, dim});
  Tensor tid = upload_ids(ids);
  Tensor tt = upload(table), to = zeros(n * dim), td = upload(dout), tdt = upload(dt0);
  embedding(EmbeddingArgs{tt.data_as<float>(), DType::kF32, vocab, dim, tid.data_as<int32_t>(), n,
                          to.data_as<float>()},
            nullptr, kGpu);
  embedding_backward(EmbeddingBackwardArgs{tdt.data_as<float>(), td.data_as<float>(),
                                           tid.data_as<int32_t>(), n, dim},
                     nullptr, kGpu);
  expect_near(download(to), out, 0.0f, "rows");
  expect_near(download(tdt), dt, 1e-6f, "dtable");
  // An id outside the vocab: the same error as the CPU's, position and value.
  try {
    embedding(EmbeddingArgs{tt.data_as<float>(), DType::kF32, 4, dim, tid.data_as<int32_t>(), n,
                            to.data_as<float>()},
              nullptr, kGpu);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("token id 10 at position 2"), std::string::npos)
        << e.what();
  }
}

TEST(CudaOps, CrossEntropyLossAndGradientMatchTheCpuInEveryPrecision) {
  NEXUS_REQUIRE_CUDA();
  for (const auto& [n, v] : {std::pair<int64_t, int64_t>{1, 1}, {5, 7}, {9, 4099}, {3, 32000}})
    for (const Precision p : {Precision::kF32, Precision::kBF16, Precision::kF16}) {
      const auto nv = static_cast<size_t>(n * v);
      std::vector<float> logits = test::randn(nv, 51, 3.0f), loss(n);
      std::vector<int32_t> targets;
      for (int64_t i = 0; i < n; ++i)  // every third row ignored
        targets.push_back(i % 3 == 1 ? -1 : static_cast<int32_t>((i * 7919) % v));
      Tensor gl = upload(logits), gloss = zeros(n), gt = upload_ids(targets);
      const double want =
          cross_entropy_fused(logits.data(), loss.data(), targets.data(), n, v, 0.25f, nullptr, p);
      const double got = cross_entropy_fused(gl.data_as<float>(), gloss.data_as<float>(),
                                             gt.data_as<int32_t>(), n, v, 0.25f, nullptr, p, kGpu);
      EXPECT_NEAR(got, want, 1e-4 * (1.0 + std::abs(want))) << "n " << n << " v " << v;
      expect_near(download(gloss), loss, 1e-4f, "row losses");
      // A 16-bit gradient may land one rounding step away from the CPU's.
      expect_near(download(gl), logits, p == Precision::kF32 ? 1e-5f : 1e-2f, "gradient");
    }
}

TEST(CudaOps, CrossEntropyNamesATargetOutsideTheClasses) {
  NEXUS_REQUIRE_CUDA();
  const int64_t n = 4, v = 10;
  Tensor gl = upload(test::randn(n * v, 52)), gloss = zeros(n), gt = upload_ids({3, -1, 10, 12});
  try {
    cross_entropy_fused(gl.data_as<float>(), gloss.data_as<float>(), gt.data_as<int32_t>(), n, v,
                        1.0f, nullptr, Precision::kF32, kGpu);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 10 of row 2 is not below the 10 classes"),
              std::string::npos)
        << e.what();
  }
}

// Every rounding is spelled out on both sides, so the GPU's step is the CPU's bit for bit.
TEST(CudaOps, AdamWGivesTheCpusBitsWithF32AndBf16Moments) {
  NEXUS_REQUIRE_CUDA();
  for (const int64_t n : {int64_t{1}, int64_t{1003}, int64_t{140001}}) {
    const auto un = static_cast<size_t>(n);
    const std::vector<float> p0 = test::randn(un, 61), g = test::randn(un, 62),
                             m0 = test::randn(un, 63, 0.1f);
    std::vector<float> v0 = test::randn(un, 64, 0.1f);
    for (float& x : v0) x = std::abs(x);
    AdamWCoef k{0.9f, 0.95f, 0.9999f, 1e-3f / 0.271f, 1.0f / std::sqrt(0.1426f), 1e-8f, 0.7f};
    // f32 moments
    std::vector<float> p = p0, m = m0, v = v0;
    AdamWArgs a{p.data(), g.data(), m.data(), v.data()};
    a.n = n, a.k = k;
    adamw_update(a);
    Tensor gp = upload(p0), gg = upload(g), gm = upload(m0), gv = upload(v0);
    AdamWArgs d{gp.data_as<float>(), gg.data_as<float>(), gm.data_as<float>(), gv.data_as<float>()};
    d.n = n, d.k = k;
    adamw_update(d, nullptr, kGpu);
    EXPECT_EQ(download(gp), p);
    EXPECT_EQ(download(gm), m);
    EXPECT_EQ(download(gv), v);
    // bf16 moments, stochastically rounded with the same bits
    std::vector<uint16_t> m16(un), v16(un);
    for (size_t i = 0; i < un; ++i) m16[i] = f32_to_bf16(m0[i]), v16[i] = f32_to_bf16(v0[i]);
    std::vector<float> pb = p0;
    std::vector<uint16_t> mb = m16, vb = v16;
    AdamWArgs b{pb.data(), g.data()};
    b.m16 = mb.data(), b.v16 = vb.data(), b.n = n, b.index0 = 17, b.seed = mix32(3), b.k = k;
    adamw_update(b);
    Tensor hp = upload(p0), hm = upload_as(DType::kBF16, m16), hv = upload_as(DType::kBF16, v16);
    AdamWArgs e{hp.data_as<float>(), gg.data_as<float>()};
    e.m16 = hm.data_as<uint16_t>(), e.v16 = hv.data_as<uint16_t>(), e.n = n, e.index0 = 17,
    e.seed = mix32(3), e.k = k;
    adamw_update(e, nullptr, kGpu);
    EXPECT_EQ(download(hp), pb);
    EXPECT_EQ(download_as<uint16_t>(hm), mb);
    EXPECT_EQ(download_as<uint16_t>(hv), vb);
  }
}

TEST(CudaOps, SumOfSquaresAndScalingMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (const int64_t n : {int64_t{1}, int64_t{1003}, int64_t{3000017}}) {
    std::vector<float> g = test::randn(static_cast<size_t>(n), 65);
    Tensor dg = upload(g);
    const double want = sum_squares(g.data(), n),
                 got = sum_squares(dg.data_as<float>(), n, nullptr, kGpu);
    EXPECT_NEAR(got, want, 1e-12 * want) << n;  // doubles, summed in another order
    scale_values(g.data(), n, 0.37f);
    scale_values(dg.data_as<float>(), n, 0.37f, nullptr, kGpu);
    EXPECT_EQ(download(dg), g);
  }
}

TEST(CudaOps, MatvecDequantizesEveryTypeAsTheCpu) {
  NEXUS_REQUIRE_CUDA();
  for (const DType t : {DType::kF32, DType::kF16, DType::kQ8_0, DType::kQ4_0, DType::kQ4_K})
    for (const auto& [rows, k, n] :
         {std::tuple<int64_t, int64_t, int64_t>{1, 256, 1}, {37, 512, 1}, {9, 2816, 3}}) {
      const std::vector<float> wf = test::randn(static_cast<size_t>(rows * k), 71);
      const std::vector<float> x = test::randn(static_cast<size_t>(n * k), 72);
      std::vector<uint8_t> w(row_bytes(t, k) * rows);
      for (int64_t r = 0; r < rows; ++r)
        cpu::quantize_row(t, wf.data() + r * k, w.data() + r * row_bytes(t, k), k);
      std::vector<float> y(static_cast<size_t>(n * rows));
      matvec(MatvecArgs{w.data(), t, rows, k, x.data(), n, y.data()});
      Tensor dw = upload_as(DType::kI8, w), dx = upload(x), dy = zeros(n * rows);
      matvec(MatvecArgs{dw.data_as<uint8_t>(), t, rows, k, dx.data_as<float>(), n,
                        dy.data_as<float>()},
             nullptr, kGpu);
      // sums of k products in another order: relative to the row's scale sqrt(k)
      expect_near(download(dy), y, 2e-5f * std::sqrt(float(k)), dtype_name(t).data());
    }
}

TEST(CudaOps, CausalAttentionForwardAndBackwardMatchTheCpu) {
  NEXUS_REQUIRE_CUDA();
  // full causal, grouped queries, a sliding window; odd lengths and head sizes
  for (const AttnShape s : {AttnShape{1, 1, 1, 1, 8}, AttnShape{2, 37, 4, 2, 24},
                            AttnShape{1, 300, 6, 3, 64, 64}, AttnShape{3, 19, 2, 2, 7, 5}}) {
    const auto nq = static_cast<size_t>(s.b * s.t * s.n_heads * s.head_dim);
    const auto nk = static_cast<size_t>(s.b * s.t * s.n_kv_heads * s.head_dim);
    const auto na = static_cast<size_t>(s.b * s.n_heads * s.t * s.t);
    const std::vector<float> q = test::randn(nq, 81), k = test::randn(nk, 82),
                             v = test::randn(nk, 83), dout = test::randn(nq, 84);
    std::vector<float> out(nq), att(na), dq(nq), dk(nk), dv(nk);
    std::vector<float> scratch(static_cast<size_t>(attention_backward_scratch(s.t)));
    attention_forward(out.data(), att.data(), q.data(), k.data(), v.data(), s);
    attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), att.data(), q.data(), k.data(),
                       v.data(), s, scratch.data());
    Tensor gq = upload(q), gk = upload(k), gv = upload(v), gd = upload(dout);
    Tensor go = zeros(nq), ga = zeros(na), gdq = zeros(nq), gdk = zeros(nk), gdv = zeros(nk);
    attention_forward(go.data_as<float>(), ga.data_as<float>(), gq.data_as<float>(),
                      gk.data_as<float>(), gv.data_as<float>(), s, nullptr, kGpu);
    attention_backward(gdq.data_as<float>(), gdk.data_as<float>(), gdv.data_as<float>(),
                       gd.data_as<float>(), ga.data_as<float>(), gq.data_as<float>(),
                       gk.data_as<float>(), gv.data_as<float>(), s, nullptr, nullptr, kGpu);
    expect_near(download(ga), att, 1e-5f, "att");
    expect_near(download(go), out, 1e-4f, "out");
    expect_near(download(gdq), dq, 1e-4f, "dq");
    expect_near(download(gdk), dk, 1e-4f, "dk");
    expect_near(download(gdv), dv, 1e-4f, "dv");
  }
}

// Rounding to bf16 and fp16, values and encodings: the CPU's bits, edge values included (ties,
// fp16's overflow to inf, subnormals, signed zeros, infinities, NaN).
TEST(CudaOps, RoundingGivesTheCpusBits) {
  NEXUS_REQUIRE_CUDA();
  std::vector<float> x = test::randn(10007, 91, 300.0f);
  const float inf = std::numeric_limits<float>::infinity();
  for (const float e : {65504.0f, 65519.0f, 65520.0f, 1e-7f, -3e-8f, 6e-5f, -0.0f, inf, -inf,
                        std::numeric_limits<float>::quiet_NaN(), 1.00390625f, 1.01171875f})
    x.push_back(e);
  const auto n = static_cast<int64_t>(x.size());
  auto same_bits = [](const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * 4) == 0;
  };
  for (const Precision p : {Precision::kBF16, Precision::kF16}) {
    std::vector<float> y(x.size()), xp = x;
    std::vector<uint16_t> h(x.size());
    round_copy(p, x.data(), y.data(), n);
    round_pack(p, xp.data(), h.data(), n);
    std::vector<float> back(x.size());
    unpack(p, h.data(), back.data(), n);
    Tensor gx = upload(x), gy = zeros(n), gxp = upload(x), gback = zeros(n);
    Tensor gh = upload_as(DType::kBF16, std::vector<uint16_t>(x.size()));
    round_copy(p, gx.data_as<float>(), gy.data_as<float>(), n, nullptr, kGpu);
    round_pack(p, gxp.data_as<float>(), gh.data_as<uint16_t>(), n, nullptr, kGpu);
    unpack(p, gh.data_as<uint16_t>(), gback.data_as<float>(), n, nullptr, kGpu);
    EXPECT_TRUE(same_bits(download(gy), y)) << int(p);
    EXPECT_TRUE(same_bits(download(gxp), xp)) << int(p);
    EXPECT_EQ(download_as<uint16_t>(gh), h) << int(p);
    EXPECT_TRUE(same_bits(download(gback), back)) << int(p);
  }
}

// Without a usable device the front-end says why, before touching the pointers.
TEST(CudaOps, CrossEntropyOnAnUnusableDeviceIsAClearError) {
  if (device_memory(kGpu)) GTEST_SKIP() << "a CUDA device is present";
  float logits[4] = {}, loss[1] = {};
  const int32_t target[1] = {0};
  try {
    cross_entropy_fused(logits, loss, target, 1, 4, 1.0f, nullptr, Precision::kF32, kGpu);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[cross_entropy] cuda:0"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace nexus
