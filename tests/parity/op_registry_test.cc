// Every registered op, from its kernel tables (ops/kernels.h), in the spirit of llama.cpp's
// test-backend-ops: each variant of each device this machine runs, at odd sizes and 1-3 threads,
// against the table's last variant (the scalar reference), and each backward against central
// finite differences of its forward. A new variant or device is covered by registering it; a new
// op by one row below.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops/activation.h"
#include "ops/causal_attention.h"
#include "ops/dense.h"
#include "ops/embedding.h"
#include "ops/loss.h"
#include "ops/memory.h"
#include "ops/norm.h"
#include "ops/optim.h"
#include "ops/rope.h"
#include "ops/round.h"
#include "ops/ssm.h"

namespace nexus {
namespace {

using Buffers = std::vector<std::vector<float>>;

Buffers random_buffers(const std::vector<size_t>& sizes, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  Buffers b;
  for (size_t n : sizes) {
    b.emplace_back(n);
    for (float& x : b.back()) x = nd(rng);
  }
  return b;
}

double max_rel_diff(const std::vector<float>& a, const std::vector<float>& b) {
  double m = 0.0, scale = 1.0;
  for (float x : b) scale = std::max(scale, static_cast<double>(std::fabs(x)));
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]) / scale);
  return m;
}

// One op at one size: `sizes` are its buffers (the first `outputs` are written by the op; the
// rest are inputs), `bind` points an argument struct at them. Every variant on every thread
// count must match the reference: bit for bit when tol is 0, else within tol relative to the
// largest reference value.
template <class Args>
void check_variants(const std::string& what, const std::vector<size_t>& sizes, int outputs,
                    const std::function<Args(Buffers&)>& bind, double tol, float scale = 1.0f) {
  const Buffers init =
      random_buffers(sizes, static_cast<uint32_t>(sizes.back() * 31 + outputs), scale);
  const KernelVariants<Args> variants = op_kernels<Args>(Device::cpu());
  ASSERT_FALSE(variants.empty()) << what;
  Buffers ref = init;
  variants.back().run(bind(ref), nullptr);
  for (const KernelVariant<Args>& k : variants) {
    Buffers probe = init;
    if (!k.runs(bind(probe))) continue;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      Buffers got = init;
      k.run(bind(got), &pool);
      for (int o = 0; o < outputs; ++o) {
        SCOPED_TRACE(what + " " + k.name + " threads " + std::to_string(threads) + " output " +
                     std::to_string(o));
        if (tol == 0.0)
          ASSERT_EQ(got[o], ref[o]);
        else
          ASSERT_LE(max_rel_diff(got[o], ref[o]), tol);
      }
    }
  }
}

// The backward of an op against central differences of its forward on the scalar reference:
// with L = sum(dy * forward(inputs)), dL/d input[i] must match the backward's gradient. `forward`
// returns the op's output for the given inputs; `backward` returns the gradient of each input in
// `wrt` (indices into inputs) for dy.
void check_gradient(
    const std::string& what, Buffers inputs, const std::vector<int>& wrt,
    const std::function<std::vector<float>(const Buffers&)>& forward,
    const std::function<Buffers(const Buffers&, const std::vector<float>&)>& backward, double tol) {
  const std::vector<float> y = forward(inputs);
  std::vector<float> dy(y.size());
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (float& v : dy) v = nd(rng);
  const Buffers grads = backward(inputs, dy);
  auto loss = [&](const Buffers& in) {
    const std::vector<float> out = forward(in);
    double s = 0.0;
    for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(dy[i]) * out[i];
    return s;
  };
  for (size_t g = 0; g < wrt.size(); ++g) {
    std::vector<float>& x = inputs[wrt[g]];
    for (size_t i = 0; i < x.size(); ++i) {
      const float x0 = x[i], h = 1e-2f * std::max(1.0f, std::fabs(x0));
      x[i] = x0 + h;
      const double up = loss(inputs);
      x[i] = x0 - h;
      const double down = loss(inputs);
      x[i] = x0;
      const double num = (up - down) / (2.0 * h);
      EXPECT_NEAR(grads[g][i], num, tol * std::max(1.0, std::fabs(num)))
          << what << " d input " << wrt[g] << "[" << i << "]";
    }
  }
}

template <class Args>
const KernelVariant<Args>& reference() {
  return op_kernels<Args>(Device::cpu()).back();
}

constexpr int64_t kWidths[] = {1, 3, 7, 8, 9, 17, 100, 291};

TEST(OpRegistry, RmsNorm) {
  for (int64_t c : kWidths) {
    const int64_t rows = 5;
    const size_t n = rows * c;
    // outputs: y, rstd; inputs: x, w
    check_variants<RmsNormArgs>(
        "rms_norm c " + std::to_string(c), {n, size_t(rows), n, size_t(c)}, 2,
        [&](Buffers& b) {
          return RmsNormArgs{b[2].data(), b[3].data(), 1e-5f, b[0].data(), b[1].data(), rows, c};
        },
        0.0, 2.0f);
    // outputs: dx, dw (accumulated into their random start); inputs: dy, x, w, rstd
    check_variants<RmsNormBackwardArgs>(
        "rms_norm_backward c " + std::to_string(c), {n, size_t(c), n, n, size_t(c), size_t(rows)},
        2,
        [&](Buffers& b) {
          for (float& r : b[5]) r = std::fabs(r) + 0.5f;
          return RmsNormBackwardArgs{b[0].data(), b[1].data(), b[2].data(), b[3].data(),
                                     b[4].data(), b[5].data(), rows,        c};
        },
        0.0);
  }
  const int64_t rows = 3, c = 7;
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(rows * c), rstd(rows);
    reference<RmsNormArgs>().run(
        {in[0].data(), in[1].data(), 1e-5f, y.data(), rstd.data(), rows, c}, nullptr);
    return y;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> y(rows * c), rstd(rows), dx(rows * c, 0.0f), dw(c, 0.0f);
    reference<RmsNormArgs>().run(
        {in[0].data(), in[1].data(), 1e-5f, y.data(), rstd.data(), rows, c}, nullptr);
    reference<RmsNormBackwardArgs>().run(
        {dx.data(), dw.data(), dy.data(), in[0].data(), in[1].data(), rstd.data(), rows, c},
        nullptr);
    return Buffers{dx, dw};
  };
  check_gradient("rms_norm", random_buffers({size_t(rows * c), size_t(c)}, 3, 1.0f), {0, 1}, fwd,
                 bwd, 2e-3);
}

TEST(OpRegistry, LayerNorm) {
  for (int64_t c : kWidths) {
    const int64_t rows = 5;
    const size_t n = rows * c, r = rows;
    check_variants<LayerNormArgs>(
        "layer_norm c " + std::to_string(c), {n, r, r, n, size_t(c), size_t(c)}, 3,
        [&](Buffers& b) {
          return LayerNormArgs{b[3].data(), b[4].data(), b[5].data(), 1e-5f, b[0].data(),
                               b[1].data(), b[2].data(), rows,        c};
        },
        0.0, 2.0f);
    check_variants<LayerNormBackwardArgs>(
        "layer_norm_backward c " + std::to_string(c),
        {n, size_t(c), size_t(c), n, n, size_t(c), r, r}, 3,
        [&](Buffers& b) {
          for (float& v : b[7]) v = std::fabs(v) + 0.5f;
          return LayerNormBackwardArgs{
              b[0].data(), b[1].data(), b[2].data(), b[3].data(), b[4].data(),
              b[5].data(), b[6].data(), b[7].data(), rows,        c};
        },
        0.0);
  }
  const int64_t rows = 3, c = 7;
  auto run_fwd = [&](const Buffers& in, std::vector<float>& y, std::vector<float>& m,
                     std::vector<float>& rs) {
    reference<LayerNormArgs>().run(
        {in[0].data(), in[1].data(), in[2].data(), 1e-5f, y.data(), m.data(), rs.data(), rows, c},
        nullptr);
  };
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(rows * c), m(rows), rs(rows);
    run_fwd(in, y, m, rs);
    return y;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> y(rows * c), m(rows), rs(rows), dx(rows * c, 0.0f), dw(c, 0.0f), db(c, 0.0f);
    run_fwd(in, y, m, rs);
    reference<LayerNormBackwardArgs>().run(
        {dx.data(), dw.data(), db.data(), dy.data(), in[0].data(), in[1].data(), m.data(),
         rs.data(), rows, c},
        nullptr);
    return Buffers{dx, dw, db};
  };
  check_gradient("layer_norm", random_buffers({size_t(rows * c), size_t(c), size_t(c)}, 4, 1.0f),
                 {0, 1, 2}, fwd, bwd, 2e-3);
}

TEST(OpRegistry, Swiglu) {
  for (int64_t n : {1, 7, 8, 9, 63, 1003, 9000}) {
    const size_t s = n;
    check_variants<SwigluArgs>(
        "swiglu n " + std::to_string(n), {s, s, s}, 1,
        [&](Buffers& b) {
          return SwigluArgs{b[0].data(), b[1].data(), b[2].data(), n};
        },
        1e-6, 4.0f);
    check_variants<SwigluBackwardArgs>(
        "swiglu_backward n " + std::to_string(n), {s, s, s, s, s}, 2,
        [&](Buffers& b) {
          return SwigluBackwardArgs{b[0].data(), b[1].data(), b[2].data(),
                                    b[3].data(), b[4].data(), n};
        },
        1e-6, 4.0f);
  }
  const int64_t n = 20;
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(n);
    reference<SwigluArgs>().run({y.data(), in[0].data(), in[1].data(), n}, nullptr);
    return y;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> dg(n), du(n);
    reference<SwigluBackwardArgs>().run(
        {dg.data(), du.data(), dy.data(), in[0].data(), in[1].data(), n}, nullptr);
    return Buffers{dg, du};
  };
  check_gradient("swiglu", random_buffers({size_t(n), size_t(n)}, 5, 2.0f), {0, 1}, fwd, bwd, 2e-3);
}

TEST(OpRegistry, Gelu) {
  for (int64_t n : {1, 7, 8, 9, 63, 1003, 9000}) {
    const size_t s = n;
    check_variants<GeluArgs>(
        "gelu n " + std::to_string(n), {s, s}, 1,
        [&](Buffers& b) {
          return GeluArgs{b[0].data(), b[1].data(), n};
        },
        1e-6, 3.0f);
    check_variants<GeluBackwardArgs>(
        "gelu_backward n " + std::to_string(n), {s, s, s}, 1,
        [&](Buffers& b) {
          return GeluBackwardArgs{b[0].data(), b[1].data(), b[2].data(), n};
        },
        5e-6, 3.0f);
  }
  const int64_t n = 20;
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(n);
    reference<GeluArgs>().run({y.data(), in[0].data(), n}, nullptr);
    return y;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> dx(n);
    reference<GeluBackwardArgs>().run({dx.data(), dy.data(), in[0].data(), n}, nullptr);
    return Buffers{dx};
  };
  check_gradient("gelu", random_buffers({size_t(n)}, 6, 2.0f), {0}, fwd, bwd, 2e-3);
}

TEST(OpRegistry, Rope) {
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox})
    for (bool inverse : {false, true})
      for (int64_t hd : {2, 8, 18, 64}) {
        const int64_t rows = 7, heads = 3, rope_dim = hd == 18 ? 10 : hd, cs_rows = 4;
        const std::string what = std::string("rope ") +
                                 (style == RopeStyle::kNeox ? "neox" : "normal") +
                                 (inverse ? " inverse" : "") + " hd " + std::to_string(hd);
        check_variants<RopeArgs>(
            what, {size_t(rows * heads * hd), size_t(cs_rows * rope_dim)}, 1,
            [&](Buffers& b) {
              return RopeArgs{b[0].data(), rows,        heads,   hd,     rope_dim,
                              style,       b[1].data(), cs_rows, inverse};
            },
            0.0, 2.0f);
      }
  // The backward is the inverse rotation: against finite differences of the forward.
  const int64_t rows = 3, heads = 2, hd = 8;
  std::vector<int32_t> pos = {0, 5, 11};
  std::vector<float> cs(rows * hd);
  rope_table(pos.data(), rows, hd, 10000.0f, cs.data());
  for (RopeStyle style : {RopeStyle::kNormal, RopeStyle::kNeox}) {
    auto fwd = [&](const Buffers& in) {
      std::vector<float> y = in[0];
      reference<RopeArgs>().run({y.data(), rows, heads, hd, hd, style, cs.data(), rows, false},
                                nullptr);
      return y;
    };
    auto bwd = [&](const Buffers&, const std::vector<float>& dy) {
      std::vector<float> dx = dy;
      reference<RopeArgs>().run({dx.data(), rows, heads, hd, hd, style, cs.data(), rows, true},
                                nullptr);
      return Buffers{dx};
    };
    check_gradient("rope", random_buffers({size_t(rows * heads * hd)}, 8, 1.0f), {0}, fwd, bwd,
                   2e-3);
  }
}

TEST(OpRegistry, Embedding) {
  const int64_t vocab = 11, dim = 9, n = 40;
  std::vector<int32_t> ids(n);
  for (int64_t i = 0; i < n; ++i) ids[i] = static_cast<int32_t>((i * 7) % vocab);  // repeats
  check_variants<EmbeddingArgs>(
      "embedding", {size_t(n * dim), size_t(vocab * dim)}, 1,
      [&](Buffers& b) {
        return EmbeddingArgs{b[1].data(), DType::kF32, vocab, dim, ids.data(), n, b[0].data()};
      },
      0.0);
  check_variants<EmbeddingBackwardArgs>(
      "embedding_backward", {size_t(vocab * dim), size_t(n * dim)}, 1,
      [&](Buffers& b) {
        return EmbeddingBackwardArgs{b[0].data(), b[1].data(), ids.data(), n, dim};
      },
      0.0);
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(n * dim);
    reference<EmbeddingArgs>().run({in[0].data(), DType::kF32, vocab, dim, ids.data(), n, y.data()},
                                   nullptr);
    return y;
  };
  auto bwd = [&](const Buffers&, const std::vector<float>& dy) {
    std::vector<float> dt(vocab * dim, 0.0f);
    reference<EmbeddingBackwardArgs>().run({dt.data(), dy.data(), ids.data(), n, dim}, nullptr);
    return Buffers{dt};
  };
  check_gradient("embedding", random_buffers({size_t(vocab * dim)}, 9, 1.0f), {0}, fwd, bwd, 2e-3);
  // An id outside the table is named.
  std::vector<float> table(vocab * dim), out(dim);
  const int32_t bad = 11;
  EXPECT_THROW(embedding(EmbeddingArgs{table.data(), DType::kF32, vocab, dim, &bad, 1, out.data()}),
               Error);
}

TEST(OpRegistry, Dense) {
  struct Shape {
    int64_t n, c, oc;
  };
  for (const Shape sh : {Shape{1, 1, 1}, Shape{5, 7, 3}, Shape{33, 17, 40}, Shape{70, 48, 300}})
    for (int extra = 0; extra < 4; ++extra) {  // bit 0: a residual, bit 1: a bias
      const int64_t n = sh.n, c = sh.c, oc = sh.oc;
      const std::string what = "dense " + std::to_string(n) + "x" + std::to_string(c) + "x" +
                               std::to_string(oc) + " extra " + std::to_string(extra);
      // outputs: out; inputs: inp, w, add_rows, bias
      check_variants<DenseArgs>(
          what, {size_t(n * oc), size_t(n * c), size_t(oc * c), size_t(n * oc), size_t(oc)}, 1,
          [&](Buffers& b) {
            return DenseArgs{b[0].data(), b[1].data(), b[2].data(), n, c, oc,
                             extra & 1 ? b[3].data() : nullptr, extra & 2 ? b[4].data() : nullptr};
          },
          1e-5);
      // outputs: dinp, dw, dbias (added to); inputs: dout, inp, w
      check_variants<DenseBackwardArgs>(
          what + " backward",
          {size_t(n * c), size_t(oc * c), size_t(oc), size_t(n * oc), size_t(n * c), size_t(oc * c)},
          3,
          [&](Buffers& b) {
            return DenseBackwardArgs{b[0].data(), b[1].data(), extra & 2 ? b[2].data() : nullptr,
                                     b[3].data(), b[4].data(), b[5].data(), n, c, oc};
          },
          1e-5);
    }
  const int64_t n = 3, c = 4, oc = 5;
  auto fwd = [&](const Buffers& in) {
    std::vector<float> y(n * oc);
    reference<DenseArgs>().run(
        {y.data(), in[0].data(), in[1].data(), n, c, oc, nullptr, in[2].data()}, nullptr);
    return y;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> dx(n * c, 0.0f), dw(oc * c, 0.0f), db(oc, 0.0f);
    reference<DenseBackwardArgs>().run(
        {dx.data(), dw.data(), db.data(), dy.data(), in[0].data(), in[1].data(), n, c, oc},
        nullptr);
    return Buffers{dx, dw, db};
  };
  check_gradient("dense", random_buffers({size_t(n * c), size_t(oc * c), size_t(oc)}, 10, 1.0f),
                 {0, 1, 2}, fwd, bwd, 2e-3);
}

TEST(OpRegistry, CausalAttention) {
  struct Case {
    int64_t b, t, heads, kv_heads, hd, window;
  };
  const Case cases[] = {{1, 1, 1, 1, 8, 0},   {2, 5, 4, 2, 8, 0},   {1, 40, 2, 1, 16, 0},
                        {2, 9, 3, 3, 12, 0},  {1, 33, 4, 2, 64, 0}, {2, 11, 2, 1, 8, 3},
                        {1, 40, 2, 2, 16, 7}, {1, 6, 2, 1, 5, 2}};
  for (const Case& k : cases) {
    const AttnShape s{k.b, k.t, k.heads, k.kv_heads, k.hd, k.window};
    const size_t nq = k.b * k.t * k.heads * k.hd, nkv = k.b * k.t * k.kv_heads * k.hd,
                 natt = k.b * k.heads * k.t * k.t;
    const std::string what = "causal_attention b " + std::to_string(k.b) + " t " +
                             std::to_string(k.t) + " heads " + std::to_string(k.heads) + "/" +
                             std::to_string(k.kv_heads) + " hd " + std::to_string(k.hd) +
                             " window " + std::to_string(k.window);
    // outputs: out, att; inputs: q, k, v
    check_variants<CausalAttentionArgs>(
        what, {nq, natt, nq, nkv, nkv}, 2,
        [&](Buffers& b) {
          return CausalAttentionArgs{b[0].data(), b[1].data(), b[2].data(), b[3].data(),
                                     b[4].data(), s};
        },
        1e-5);
    // outputs: dq, dk, dv; inputs: dout, q, k, v, att (the reference forward's), scratch
    const size_t scratch = 3 * attention_backward_scratch(k.t);
    check_variants<CausalAttentionBackwardArgs>(
        what + " backward", {nq, nkv, nkv, nq, nq, nkv, nkv, natt, nq, scratch}, 3,
        [&](Buffers& b) {
          reference<CausalAttentionArgs>().run(
              {b[8].data(), b[7].data(), b[4].data(), b[5].data(), b[6].data(), s}, nullptr);
          return CausalAttentionBackwardArgs{b[0].data(), b[1].data(), b[2].data(), b[3].data(),
                                             b[7].data(), b[4].data(), b[5].data(), b[6].data(),
                                             s,           b[9].data()};
        },
        1e-5);
  }
  for (int64_t window : {0, 2}) {
    const AttnShape s{1, 4, 2, 1, 3, window};
    const size_t nq = 4 * 2 * 3, nkv = 4 * 3, natt = 2 * 4 * 4;
    auto fwd = [&](const Buffers& in) {
      std::vector<float> y(nq), att(natt);
      reference<CausalAttentionArgs>().run(
          {y.data(), att.data(), in[0].data(), in[1].data(), in[2].data(), s}, nullptr);
      return y;
    };
    auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
      std::vector<float> y(nq), att(natt), dq(nq), dk(nkv), dv(nkv),
          scratch(attention_backward_scratch(4));
      reference<CausalAttentionArgs>().run(
          {y.data(), att.data(), in[0].data(), in[1].data(), in[2].data(), s}, nullptr);
      reference<CausalAttentionBackwardArgs>().run({dq.data(), dk.data(), dv.data(), dy.data(),
                                                    att.data(), in[0].data(), in[1].data(),
                                                    in[2].data(), s, scratch.data()},
                                                   nullptr);
      return Buffers{dq, dk, dv};
    };
    check_gradient("causal_attention window " + std::to_string(window),
                   random_buffers({nq, nkv, nkv}, 11, 1.0f), {0, 1, 2}, fwd, bwd, 2e-3);
  }
}

TEST(OpRegistry, CrossEntropy) {
  for (Precision round : {Precision::kF32, Precision::kBF16, Precision::kF16})
    for (int64_t v : {1, 7, 16, 33, 1000}) {
      const int64_t n = 6;
      std::vector<int32_t> targets(n);
      for (int64_t i = 0; i < n; ++i) targets[i] = i == 2 ? -1 : static_cast<int32_t>((i * 5) % v);
      // outputs: logits (become the gradient), row_loss
      check_variants<CrossEntropyArgs>(
          "cross_entropy v " + std::to_string(v) + " round " + std::to_string(int(round)),
          {size_t(n * v), size_t(n)}, 2,
          [&](Buffers& b) {
            return CrossEntropyArgs{b[0].data(), b[1].data(), targets.data(), n, v, 0.25f, round};
          },
          1e-6, 3.0f);
    }
  const int64_t n = 3, v = 5;
  const std::vector<int32_t> targets = {4, -1, 0};
  auto fwd = [&](const Buffers& in) {
    std::vector<float> x = in[0], loss(n);
    reference<CrossEntropyArgs>().run({x.data(), loss.data(), targets.data(), n, v, 1.0f}, nullptr);
    return loss;
  };
  auto bwd = [&](const Buffers& in, const std::vector<float>& dy) {
    std::vector<float> x = in[0], loss(n);
    reference<CrossEntropyArgs>().run({x.data(), loss.data(), targets.data(), n, v, 1.0f}, nullptr);
    for (int64_t i = 0; i < n; ++i)  // the row's gradient is for a unit weight on its loss
      for (int64_t j = 0; j < v; ++j) x[i * v + j] *= dy[i];
    return Buffers{x};
  };
  check_gradient("cross_entropy", random_buffers({size_t(n * v)}, 12, 2.0f), {0}, fwd, bwd, 2e-3);
  std::vector<float> logits(v), loss(1);
  const int32_t bad = 5;
  EXPECT_THROW(cross_entropy_fused(logits.data(), loss.data(), &bad, 1, v, 1.0f), Error);
}

TEST(OpRegistry, Round) {
  for (Precision p : {Precision::kBF16, Precision::kF16})
    for (int64_t n : {1, 7, 8, 9, 1003, 70000}) {
      // outputs: y; inputs: x (wide values: fp16 overflows past 65504)
      check_variants<RoundArgs>(
          "round n " + std::to_string(n) + " p " + std::to_string(int(p)), {size_t(n), size_t(n)},
          1, [&](Buffers& b) { return RoundArgs{p, b[1].data(), b[0].data(), n}; }, 0.0,
          30000.0f);
    }
}

// AdamW with f32 moments over pieces of 64K elements: every variant and thread count gives the
// reference's bits. (The bf16 moments' variants: optimizer_parity_test.cc.)
TEST(OpRegistry, AdamW) {
  for (int64_t n : {1, 7, 9, 1003, 70000, 140001}) {
    // outputs: p, m, v; input: g
    check_variants<AdamWArgs>(
        "adamw n " + std::to_string(n), {size_t(n), size_t(n), size_t(n), size_t(n)}, 3,
        [&](Buffers& b) {
          for (float& x : b[2]) x = std::fabs(x);  // second moments are >= 0
          AdamWArgs a{b[0].data(), b[3].data(), b[1].data(), b[2].data()};
          a.n = n;
          a.k = AdamWCoef{0.9f,  0.95f, 0.9999f, 1e-3f / 0.271f, 1.0f / std::sqrt(0.1426f),
                          1e-8f, 0.7f};
          return a;
        },
        0.0);
  }
}

TEST(OpRegistry, Scale) {
  for (int64_t n : {1, 7, 9, 1003, 140001})
    check_variants<ScaleArgs>(
        "scale n " + std::to_string(n), {size_t(n), size_t(n)}, 1,
        [&](Buffers& b) {
          return ScaleArgs{b[0].data(), n, 0.37f};
        },
        0.0);
}

// The sum of squares adds 64K-element pieces in order: the same double for every variant and
// thread count, and within rounding of a plain sum.
TEST(OpRegistry, SumSquares) {
  for (int64_t n : {1, 7, 9, 1003, 140001}) {
    const std::vector<float> g = random_buffers({size_t(n)}, 5, 1.0f)[0];
    double plain = 0.0;
    for (const float x : g) plain += double(x) * x;
    double want = 0.0;
    reference<SumSquaresArgs>().run(SumSquaresArgs{g.data(), n, &want}, nullptr);
    EXPECT_NEAR(want, plain, 1e-12 * plain) << n;
    for (const auto& k : op_kernels<SumSquaresArgs>(Device::cpu())) {
      if (!k.available()) continue;
      for (int threads : {1, 2, 3}) {
        ThreadPool pool(threads);
        double got = -1.0;
        k.run(SumSquaresArgs{g.data(), n, &got}, &pool);
        EXPECT_EQ(got, want) << k.name << " n " << n << " threads " << threads;
      }
    }
  }
}

// The selective scan at Mamba-2 shapes (one decay per head, groups) and Mamba-1 shapes (a decay per
// state entry): every variant from a random state over lengths around the chunk size, so the
// chunked SSD form must equal the sequential recurrence, and the state it leaves too.
struct ScanShape {
  int64_t b, t, heads, head_dim, state, groups, a_width;
};

SsmScanArgs bind_scan(Buffers& v, const ScanShape& s) {
  // buffers: y, state (outputs); x, dt, a, B, C, d
  for (float& x : v[3]) x = 0.05f + 0.5f * std::fabs(x);  // step sizes > 0
  for (float& x : v[4]) x = -0.2f - std::fabs(x);         // decays < 0
  const int64_t bc = s.groups * s.state;
  return SsmScanArgs{v[2].data(), s.heads * s.head_dim, v[3].data(), s.heads, v[4].data(),
                     s.a_width,   v[5].data(),         v[6].data(), bc,      v[7].data(),
                     v[1].data(), v[0].data(),         s.b,         s.t,     s.heads,
                     s.head_dim,  s.state,             s.groups};
}

std::vector<size_t> scan_sizes(const ScanShape& s) {
  const size_t rows = s.b * s.t, y = rows * s.heads * s.head_dim;
  return {y, size_t(s.b * s.heads * s.head_dim * s.state), y, rows * s.heads,
          size_t(s.heads * s.a_width), rows * s.groups * s.state, rows * s.groups * s.state,
          size_t(s.heads)};
}

TEST(OpRegistry, SsmScan) {
  // 600 tokens of 2 sequences: more chunks than ssd_gemm's window holds; 12 heads in 2 groups:
  // more heads per group than its unit.
  for (int64_t t : {1, 5, 63, 64, 65, 130, 600})
    for (const ScanShape& s : {ScanShape{2, t, 4, 8, 16, 2, 1}, ScanShape{1, t, 6, 3, 5, 1, 1},
                               ScanShape{2, t, 12, 8, 16, 2, 1}, ScanShape{2, t, 12, 1, 8, 1, 8}}) {
      const std::string what = "ssm_scan t " + std::to_string(t) + " heads " +
                               std::to_string(s.heads) + " a_width " + std::to_string(s.a_width);
      check_variants<SsmScanArgs>(what, scan_sizes(s), 2,
                                  [&](Buffers& b) { return bind_scan(b, s); }, 2e-5, 0.5f);
    }
}

TEST(OpRegistry, SsmScanBackward) {
  for (const ScanShape& s : {ScanShape{2, 5, 4, 2, 3, 2, 1}, ScanShape{1, 4, 3, 1, 3, 1, 3}}) {
    Buffers in = random_buffers(scan_sizes(s), 17, 0.7f);
    bind_scan(in, s);  // make dt positive and a negative, in place
    auto forward = [&](const Buffers& v) {
      Buffers w = v;
      SsmScanArgs a = bind_scan(w, s);
      a.state = nullptr;
      // bind_scan maps dt and a again: undo by passing the values through unchanged
      a.dt = v[3].data();
      a.a = v[4].data();
      reference<SsmScanArgs>().run(a, nullptr);
      return w[0];
    };
    auto backward = [&](const Buffers& v, const std::vector<float>& dy) {
      Buffers w = v;
      SsmScanArgs a = bind_scan(w, s);
      a.state = nullptr;
      a.dt = v[3].data();
      a.a = v[4].data();
      Buffers g = {std::vector<float>(v[2].size()), std::vector<float>(v[3].size()),
                   std::vector<float>(v[4].size()), std::vector<float>(v[5].size()),
                   std::vector<float>(v[6].size()), std::vector<float>(v[7].size())};
      ssm_scan_backward(SsmScanBackwardArgs{a, dy.data(), g[0].data(), g[1].data(), g[3].data(),
                                            g[4].data(), g[2].data(), g[5].data()});
      return g;
    };
    check_gradient("ssm_scan heads " + std::to_string(s.heads), in, {2, 3, 4, 5, 6, 7}, forward,
                   backward, 2e-2);
  }
}

// Every scan backward variant against the reference, Mamba-2 and Mamba-1 shapes.
TEST(OpRegistry, SsmScanBackwardVariants) {
  for (int64_t t : {1, 7, 70, 150})
    for (const ScanShape& s : {ScanShape{2, t, 4, 8, 16, 2, 1}, ScanShape{1, t, 6, 4, 8, 1, 1},
                               ScanShape{1, t, 12, 1, 8, 1, 8}}) {
      std::vector<size_t> sizes = scan_sizes(s);
      const size_t rows = s.b * s.t, bc = rows * s.groups * s.state;
      // outputs: dx, ddt, dB, dC, da, dd; then the forward's buffers and dy
      std::vector<size_t> all = {sizes[2], sizes[3], bc, bc, sizes[4], sizes[7]};
      all.insert(all.end(), sizes.begin(), sizes.end());
      all.push_back(sizes[0]);
      check_variants<SsmScanBackwardArgs>(
          "ssm_scan_backward t " + std::to_string(t) + " a_width " + std::to_string(s.a_width),
          all, 6,
          [&](Buffers& v) {
            Buffers fwd(v.begin() + 6, v.begin() + 14);
            SsmScanArgs a = bind_scan(fwd, s);
            std::copy(fwd[3].begin(), fwd[3].end(), v[9].begin());  // the mapped dt and a
            std::copy(fwd[4].begin(), fwd[4].end(), v[10].begin());
            a = bind_scan(fwd, s);
            a.x = v[8].data();
            a.dt = v[9].data();
            a.a = v[10].data();
            a.B = v[11].data();
            a.C = v[12].data();
            a.d = v[13].data();
            a.state = nullptr;
            a.y = v[6].data();
            return SsmScanBackwardArgs{a,           v[14].data(), v[0].data(), v[1].data(),
                                       v[2].data(), v[3].data(),  v[4].data(), v[5].data()};
          },
          1e-4, 0.5f);
    }
}

TEST(OpRegistry, SsmConv) {
  for (int64_t t : {1, 2, 7, 40})
    for (int64_t k : {2, 4}) {
      const int64_t b = 2, ch = 70, ld = ch + 3;
      // outputs: y, pre, state; inputs: x, w, bias
      check_variants<SsmConvArgs>(
          "ssm_conv t " + std::to_string(t) + " k " + std::to_string(k),
          {size_t(b * t * ch), size_t(b * t * ch), size_t(b * (k - 1) * ch), size_t(b * t * ld),
           size_t(ch * k), size_t(ch)},
          3,
          [&](Buffers& v) {
            return SsmConvArgs{v[3].data(), ld,       v[2].data(), v[4].data(), v[5].data(),
                               v[1].data(), v[0].data(), b,        t,           ch,
                               k};
          },
          1e-6);  // FMA contraction in the AVX2 build
    }
  // Backward against finite differences (state zero, as in training).
  const int64_t b = 2, t = 6, ch = 5, k = 4, ld = 7;
  auto run = [&](const Buffers& v, std::vector<float>* pre) {
    std::vector<float> y(b * t * ch);
    pre->resize(y.size());
    ssm_conv(SsmConvArgs{v[0].data(), ld, nullptr, v[1].data(), v[2].data(), pre->data(),
                         y.data(), b, t, ch, k});
    return y;
  };
  check_gradient(
      "ssm_conv", random_buffers({size_t(b * t * ld), size_t(ch * k), size_t(ch)}, 5, 0.8f),
      {0, 1, 2},
      [&](const Buffers& v) {
        std::vector<float> pre;
        return run(v, &pre);
      },
      [&](const Buffers& v, const std::vector<float>& dy) {
        std::vector<float> pre;
        run(v, &pre);
        Buffers g = {std::vector<float>(v[0].size()), std::vector<float>(v[1].size()),
                     std::vector<float>(v[2].size())};
        ssm_conv_backward(SsmConvBackwardArgs{dy.data(), v[0].data(), ld, pre.data(), v[1].data(),
                                              g[0].data(), ld, g[1].data(), g[2].data(), b, t,
                                              ch, k});
        return g;
      },
      2e-2);
}

// A device whose backend has no kernel for an op (the memory ops have none on CUDA yet): an
// error naming the op and the device.
TEST(OpRegistry, DeviceWithoutKernelsIsAClearError) {
  float x[4] = {1, 2, 3, 4}, y[4];
  try {
    memory_forward(MemoryArgs{x, x, x, y, nullptr, nullptr, 1, 1, 1, 1, 1, 4}, nullptr,
                   Device::cuda(0));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[memory] no kernel for device cuda:0"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(swiglu(SwigluArgs{y, x, nullptr, 4}), Error);  // a null input is named
}

}  // namespace
}  // namespace nexus
