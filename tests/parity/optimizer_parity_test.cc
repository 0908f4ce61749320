// The optimizer loops: AVX2 against the scalar reference (bit for bit, at odd sizes) and threaded
// steps against single-threaded ones (bit for bit), for AdamW, SGD, Adafactor and clipping.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "backends/cpu/optim.h"
#include "backends/cpu/quant.h"
#include "nexus/dtype.h"
#include "nexus/train/optimizer.h"
#include "test_random.h"

namespace nexus::train {
namespace {

using test::randn;

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

const size_t kSizes[] = {1, 7, 8, 9, 15, 16, 17, 31, 1000, cpu::optim::kChunk + 13};

// Inputs of the AdamW loop tests: parameters, gradients and moments (v non-negative) of n
// elements, and the coefficients of a step early in training.
struct AdamWInputs {
  std::vector<float> p, g, m, v;
  cpu::optim::AdamWCoef k{0.9f, 0.95f, 0.9999f, 1e-3f / 0.271f, 1.0f / std::sqrt(0.1426f), 1e-8f};
  explicit AdamWInputs(size_t n)
      : p(randn(n, 1, 0.1f)), g(randn(n, 2, 1e-3f)), m(randn(n, 3, 1e-3f)), v(randn(n, 4, 1e-3f)) {
    for (float& x : v) x = x * x;
  }
};

TEST(OptimizerParity, AdamWAvx2MatchesScalarBitForBit) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  for (size_t n : kSizes) {
    SCOPED_TRACE(n);
    AdamWInputs in(n);
    std::vector<float> &p = in.p, &g = in.g, &m = in.m, &v = in.v;
    std::vector<float> p2 = p, m2 = m, v2 = v;
    const cpu::optim::AdamWCoef& k = in.k;
    for (int rep = 0; rep < 3; ++rep) {
      cpu::optim::adamw_scalar(p.data(), g.data(), m.data(), v.data(), n, k);
      cpu::optim::adamw_avx2(p2.data(), g.data(), m2.data(), v2.data(), n, k);
    }
    EXPECT_TRUE(same_bits(p, p2));
    EXPECT_TRUE(same_bits(m, m2));
    EXPECT_TRUE(same_bits(v, v2));
  }
}

std::vector<uint16_t> to_bf16(const std::vector<float>& x) {
  std::vector<uint16_t> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = f32_to_bf16(x[i]);
  return out;
}

TEST(OptimizerParity, AdamWBf16StateAvx2MatchesScalarBitForBit) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  for (size_t n : kSizes) {
    SCOPED_TRACE(n);
    AdamWInputs in(n);
    std::vector<float> &p = in.p, &g = in.g;
    std::vector<uint16_t> m = to_bf16(in.m), v = to_bf16(in.v);
    std::vector<float> p2 = p;
    std::vector<uint16_t> m2 = m, v2 = v;
    const cpu::optim::AdamWCoef& k = in.k;
    for (uint32_t rep = 0; rep < 3; ++rep) {
      const uint32_t index0 = 1000 * rep + 5, seed = cpu::optim::mix32(rep + 1);
      cpu::optim::adamw_bf16_scalar(p.data(), g.data(), m.data(), v.data(), n, index0, seed, k);
      cpu::optim::adamw_bf16_avx2(p2.data(), g.data(), m2.data(), v2.data(), n, index0, seed, k);
    }
    EXPECT_TRUE(same_bits(p, p2));
    EXPECT_EQ(m, m2);
    EXPECT_EQ(v, v2);
  }
}

// Stochastic rounding keeps v's small increments in expectation: with beta2 = 0.999 each step
// adds 0.1% of g^2, under bf16's half-ulp (0.2-0.4%), so round-to-nearest would leave v at its
// first value for good. After 200 steps of g = 1 from v = 1e-3... the bf16 mean over 64 Ki
// elements stays within 0.5% of the f32 recurrence, and the spread is real (not every element
// rounded the same way).
TEST(OptimizerParity, AdamWBf16StateIsUnbiased) {
  const size_t n = 65536;
  std::vector<float> p(n, 0.0f), g(n, 1.0f);
  std::vector<uint16_t> m(n, 0), v(n, 0);
  float v_ref = 0.0f, m_ref = 0.0f;
  for (uint32_t t = 1; t <= 200; ++t) {
    const cpu::optim::AdamWCoef k{0.9f, 0.999f, 1.0f, 0.0f, 1.0f, 1e-8f};
    cpu::optim::adamw_bf16_scalar(p.data(), g.data(), m.data(), v.data(), n, 0,
                                  cpu::optim::mix32(t), k);
    m_ref = 0.9f * m_ref + 0.1f;
    v_ref = 0.999f * v_ref + 0.001f;
  }
  auto mean = [&](const std::vector<uint16_t>& x, int* distinct) {
    double s = 0;
    std::vector<uint16_t> seen;
    for (uint16_t h : x) {
      s += bf16_to_f32(h);
      if (std::find(seen.begin(), seen.end(), h) == seen.end()) seen.push_back(h);
    }
    *distinct = static_cast<int>(seen.size());
    return s / static_cast<double>(x.size());
  };
  int dm = 0, dv = 0;
  const double mm = mean(m, &dm), mv = mean(v, &dv);
  std::printf("bf16 state after 200 steps: mean m %.6f (f32 %.6f), mean v %.6f (f32 %.6f)\n", mm,
              m_ref, mv, v_ref);
  EXPECT_NEAR(mm, m_ref, 5e-3 * m_ref);
  EXPECT_NEAR(mv, v_ref, 5e-3 * v_ref);
  EXPECT_GE(dv, 2);
}

TEST(OptimizerParity, SumSquaresAndScaleAvx2MatchScalarBitForBit) {
  if (!cpu::isa_supported(cpu::Isa::kAvx2)) GTEST_SKIP() << "no AVX2/FMA on this CPU";
  for (size_t n : kSizes) {
    SCOPED_TRACE(n);
    std::vector<float> g = randn(n, 5, 3.0f);
    const double s = cpu::optim::sumsq_scalar(g.data(), n);
    EXPECT_EQ(s, cpu::optim::sumsq_avx2(g.data(), n));
    double ref = 0.0;  // plain sequential sum: the chunked one agrees to double rounding
    for (float x : g) ref += static_cast<double>(x) * x;
    EXPECT_NEAR(s, ref, 1e-13 * ref);
    std::vector<float> g2 = g;
    cpu::optim::scale_scalar(g.data(), n, 0.37f);
    cpu::optim::scale_avx2(g2.data(), n, 0.37f);
    EXPECT_TRUE(same_bits(g, g2));
  }
}

// A matrix spanning several chunks (Adafactor: 4 row blocks), a vector and a small matrix.
std::vector<ParamInfo> tensors() {
  return {{"w", {600, 500}, 0, 300000}, {"b", {77}, 300000, 77}, {"e", {3, 7}, 300077, 21}};
}

TEST(OptimizerParity, ThreadedStepsMatchSingleThreaded) {
  const size_t n = 300098;
  for (const char* name : {"adamw", "sgd", "adafactor"}) {
    SCOPED_TRACE(name);
    OptimizerOptions o;
    o.name = name;
    o.sgd_weight_decay = 0.01f;
    std::vector<float> p1 = randn(n, 6, 0.1f), p3 = p1;
    auto a = make_optimizer(tensors(), o);
    auto b = make_optimizer(tensors(), o);
    (*b)->set_threads(3);
    for (int s = 0; s < 3; ++s) {
      const std::vector<float> g = randn(n, 10 + s, 1e-2f);
      (*a)->step(p1, g, 1e-3f);
      (*b)->step(p3, g, 1e-3f);
    }
    EXPECT_TRUE(same_bits(p1, p3));
    for (size_t i = 0; i < (*a)->state().size(); ++i) {
      const auto sa = (*a)->state()[i].data, sb = (*b)->state()[i].data;
      EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(float)), 0);
    }
  }
}

TEST(OptimizerParity, ClipIsIndependentOfThreads) {
  const size_t n = 3 * cpu::optim::kChunk + 5;
  std::vector<float> g1 = randn(n, 7, 0.01f), g3 = g1;
  double ref = 0.0;
  for (float x : g1) ref += static_cast<double>(x) * x;
  ThreadPool pool(3);
  const float norm1 = clip_grad_norm(g1, 0.1f);
  const float norm3 = clip_grad_norm(g3, 0.1f, &pool);
  EXPECT_EQ(norm1, norm3);
  EXPECT_NEAR(norm1, std::sqrt(ref), 1e-6 * std::sqrt(ref));
  EXPECT_TRUE(same_bits(g1, g3));
  ASSERT_GT(norm1, 0.1f);  // the clip actually scaled
  double after = 0.0;
  for (float x : g1) after += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(after), 0.1, 1e-5);
}

// step_scaled (the clip factor folded into the update: AdamW multiplies as it reads, the others
// scale first) against clip_grad_norm followed by step(): the same bits, threaded, every
// optimizer; AdamW leaves the gradients unscaled.
TEST(OptimizerParity, ScaledStepMatchesClipThenStep) {
  const size_t n = 300098;
  for (const char* name : {"adamw", "sgd", "adafactor"}) {
    SCOPED_TRACE(name);
    OptimizerOptions o;
    o.name = name;
    std::vector<float> p1 = randn(n, 8, 0.1f), p2 = p1;
    auto a = make_optimizer(tensors(), o);
    auto b = make_optimizer(tensors(), o);
    (*a)->set_threads(2);
    (*b)->set_threads(2);
    for (int s = 0; s < 3; ++s) {
      std::vector<float> g1 = randn(n, 20 + s, 1e-2f), g2 = g1;
      const float norm = clip_grad_norm(g1, 0.5f, (*a)->pool());
      (*a)->step(p1, g1, 1e-3f);
      const float norm2 = grad_norm(g2, (*b)->pool());
      ASSERT_EQ(norm, norm2);
      const float c = clip_factor(norm2, 0.5f);
      ASSERT_LT(c, 1.0f);  // the clip is active
      const std::vector<float> g_before = g2;
      (*b)->step_scaled(p2, g2, 1e-3f, c);
      if (std::string(name) == "adamw") {
        EXPECT_TRUE(same_bits(g2, g_before));
      }
    }
    EXPECT_TRUE(same_bits(p1, p2));
    for (size_t i = 0; i < (*a)->state().size(); ++i) {
      const auto sa = (*a)->state()[i].data, sb = (*b)->state()[i].data;
      EXPECT_EQ(std::memcmp(sa.data(), sb.data(), sa.size() * sizeof(float)), 0);
    }
  }
  EXPECT_EQ(clip_factor(0.25f, 1.0f), 1.0f);
  EXPECT_EQ(clip_factor(std::nanf(""), 1.0f), 1.0f);
  EXPECT_EQ(clip_factor(2.0f, std::numeric_limits<float>::infinity()), 1.0f);
}

}  // namespace
}  // namespace nexus::train
