// Titans' deep memory op (backends/api/memory.h, TitansMlpArgs) against PyTorch: outputs and the
// gradients of q, k, v, the rates and the initial weights from autograd in float64 through the
// memory's own gradient steps (scripts/gen_memory_fixtures.py); its backward against central
// finite differences; one call against segment-by-segment calls with the state carried; and
// every variant against the scalar reference.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backends/cpu/memory.h"
#include "ops/memory.h"
#include "parity/memory_test_util.h"
#include "test_paths.h"
#include "test_random.h"

namespace nexus {
namespace {

using test::expect_close;
using test::floats;
using test::randn;

// One head's rates, initial weights and their gradients for a test shape.
struct Params {
  std::vector<float> eta, theta, alpha, w1, w2;
  Params(int64_t kv, int64_t d, int64_t h, uint64_t seed)
      : w1(randn(kv * d * h, seed)), w2(randn(kv * h * d, seed + 1, 1.0f / std::sqrt(float(h)))) {
    for (int64_t g = 0; g < kv; ++g) {
      eta.push_back(0.6f + 0.05f * g);
      theta.push_back(0.2f);
      alpha.push_back(0.05f + 0.01f * g);
    }
  }
};

struct Shape {
  int64_t b, t, seg, heads, kv, d, h;
  size_t qn() const { return b * t * heads * d; }
  size_t kn() const { return b * t * kv * d; }
  size_t saved() const { return b * memory_segments(t, seg) * kv * titans_mlp_floats(d, h); }
};

TitansMlpArgs args(const Shape& s, const float* q, const float* k, const float* v, float* y,
                   const Params& p, float* saved, float* state) {
  return {q,           k,     v,     y,   p.eta.data(), p.theta.data(), p.alpha.data(), p.w1.data(),
          p.w2.data(), saved, state, s.b, s.t,          s.seg,          s.heads,        s.kv,
          s.d,         s.h};
}

// Outputs, then the gradients of q, k, v, eta, theta, alpha, w1, w2, from `variant` (the op's
// first available one when null).
std::vector<float> forward_backward(const Shape& s, const std::vector<float>& q,
                                    const std::vector<float>& k, const std::vector<float>& v,
                                    const std::vector<float>& dy, const Params& p, ThreadPool* pool,
                                    const char* variant = nullptr) {
  std::vector<float> y(s.qn()), saved(s.saved()), dq(s.qn()), dk(s.kn()), dv(s.kn());
  std::vector<float> de(s.kv, 0.0f), dt(s.kv, 0.0f), da(s.kv, 0.0f), dw1(p.w1.size(), 0.0f),
      dw2(p.w2.size(), 0.0f);
  const TitansMlpArgs a = args(s, q.data(), k.data(), v.data(), y.data(), p, saved.data(), nullptr);
  const TitansMlpBackwardArgs ba{a,         dy.data(), dq.data(), dk.data(),  dv.data(),
                                 de.data(), dt.data(), da.data(), dw1.data(), dw2.data()};
  if (variant == nullptr) {
    titans_mlp_forward(a, pool);
    titans_mlp_backward(ba, pool);
  } else {
    for (const auto& k : cpu::titans_mlp_kernels())
      if (std::string(k.name) == variant) k.run(a, pool);
    for (const auto& k : cpu::titans_mlp_backward_kernels())
      if (std::string(k.name) == variant) k.run(ba, pool);
  }
  std::vector<float> out = y;
  for (const auto* g : {&dq, &dk, &dv, &de, &dt, &da, &dw1, &dw2})
    out.insert(out.end(), g->begin(), g->end());
  return out;
}

TEST(TitansMlpGolden, MatchesPyTorchAutograd) {
  std::ifstream in(test::fixtures_dir() + "/memory/titans_mlp.json");
  ASSERT_TRUE(in) << "tests/fixtures/memory/titans_mlp.json (scripts/gen_memory_fixtures.py)";
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 4u);
  for (const nlohmann::json& c : cases) {
    const Shape s{c["b"],        c["t"],        c["segment"], c["heads"],
                  c["kv_heads"], c["head_dim"], c["hidden"]};
    Params p(s.kv, s.d, s.h, 0);
    p.eta = floats(c["eta"]), p.theta = floats(c["theta"]), p.alpha = floats(c["alpha"]);
    p.w1 = floats(c["w1"]), p.w2 = floats(c["w2"]);
    ThreadPool pool(2);
    for (const auto& kernel : cpu::titans_mlp_kernels()) {
      if (!kernel.available()) continue;
      const std::vector<float> got =
          forward_backward(s, floats(c["q"]), floats(c["k"]), floats(c["v"]), floats(c["dy"]), p,
                           &pool, kernel.name);
      const std::string what = std::string(kernel.name) + " t " + std::to_string(s.t) +
                               " segment " + std::to_string(s.seg) + " ";
      size_t at = 0;
      for (const char* name : {"y", "dq", "dk", "dv", "deta", "dtheta", "dalpha", "dw1", "dw2"}) {
        const std::vector<float> want = floats(c[name]);
        const std::vector<float> part(got.begin() + at, got.begin() + at + want.size());
        expect_close(part, want, name[0] == 'y' ? 1e-5 : 1e-4, what + name);
        at += want.size();
      }
      EXPECT_EQ(at, got.size());
    }
  }
}

// Small values keep the gradient clamp near the identity; large ones saturate it.
class TitansMlpFiniteDifferences : public ::testing::TestWithParam<float> {};

TEST_P(TitansMlpFiniteDifferences, BackwardMatches) {
  const Shape s{1, 7, 3, 2, 1, 3, 4};
  std::vector<float> q = randn(s.qn(), 1, 0.6f), k = randn(s.kn(), 2, 0.6f),
                     v = randn(s.kn(), 3, GetParam()), dy = randn(s.qn(), 4);
  Params p(s.kv, s.d, s.h, 5);
  p.eta = {0.5f}, p.theta = {0.3f}, p.alpha = {0.1f};
  auto loss = [&]() {
    std::vector<float> y(s.qn());
    titans_mlp_forward(args(s, q.data(), k.data(), v.data(), y.data(), p, nullptr, nullptr));
    double sum = 0;
    for (size_t i = 0; i < y.size(); ++i) sum += double(y[i]) * dy[i];
    return sum;
  };
  const std::vector<float> all = forward_backward(s, q, k, v, dy, p, nullptr);
  size_t at = s.qn();
  for (auto [x, name] : {std::pair{&q, "q"},
                         {&k, "k"},
                         {&v, "v"},
                         {&p.eta, "eta"},
                         {&p.theta, "theta"},
                         {&p.alpha, "alpha"},
                         {&p.w1, "w1"},
                         {&p.w2, "w2"}}) {
    for (size_t i = 0; i < x->size(); ++i) {
      const float x0 = (*x)[i], h = 1e-2f;
      (*x)[i] = x0 + h;
      const double up = loss();
      (*x)[i] = x0 - h;
      const double down = loss();
      (*x)[i] = x0;
      const double num = (up - down) / (2 * h);
      EXPECT_NEAR(all[at + i], num, 2e-2 * std::max(1.0, std::fabs(num)))
          << name << "[" << i << "]";
    }
    at += x->size();
  }
  EXPECT_EQ(at, all.size());
}

INSTANTIATE_TEST_SUITE_P(ValueScales, TitansMlpFiniteDifferences, ::testing::Values(0.6f, 15.0f));

TEST(TitansMlpGolden, OneCallEqualsSegmentBySegmentWithTheStateCarried) {
  const Shape s{2, 12, 4, 4, 2, 8, 16};
  const std::vector<float> q = randn(s.qn(), 5), k = randn(s.kn(), 6), v = randn(s.kn(), 7);
  const Params p(s.kv, s.d, s.h, 8);
  const int64_t tf = titans_mlp_floats(s.d, s.h);
  std::vector<float> whole(s.qn()), state_whole(static_cast<size_t>(s.b * s.kv * tf));
  titans_mlp_forward(
      args(s, q.data(), k.data(), v.data(), whole.data(), p, nullptr, state_whole.data()));
  std::vector<float> parts(s.qn());
  for (int64_t b = 0; b < s.b; ++b) {
    std::vector<float> state(static_cast<size_t>(s.kv * tf), 0.0f);
    for (int64_t i0 = 0; i0 < s.t; i0 += s.seg) {
      const size_t r = static_cast<size_t>(b * s.t + i0);
      const Shape one{1, s.seg, s.seg, s.heads, s.kv, s.d, s.h};
      titans_mlp_forward(args(one, q.data() + r * s.heads * s.d, k.data() + r * s.kv * s.d,
                              v.data() + r * s.kv * s.d, parts.data() + r * s.heads * s.d, p,
                              nullptr, state.data()));
    }
    EXPECT_EQ(0, std::memcmp(state.data(), state_whole.data() + b * s.kv * tf,
                             state.size() * sizeof(float)));
  }
  EXPECT_EQ(parts, whole);
  // The first segment reads the initial memory: silu(q^ W1_0) W2_0, not zeros.
  double first = 0;
  for (int64_t i = 0; i < s.seg * s.heads * s.d; ++i) first += std::fabs(whole[i]);
  EXPECT_GT(first, 1.0);
}

TEST(TitansMlpGolden, EveryVariantMatchesTheReference) {
  const auto fwd = cpu::titans_mlp_kernels();
  for (const Shape& s : {Shape{2, 37, 8, 4, 2, 16, 32}, Shape{1, 64, 64, 3, 3, 48, 24},
                         Shape{3, 20, 6, 8, 1, 8, 8}}) {
    const std::vector<float> q = randn(s.qn(), 8, 0.6f), k = randn(s.kn(), 9, 0.6f),
                             v = randn(s.kn(), 10, 0.6f), dy = randn(s.qn(), 11);
    const Params p(s.kv, s.d, s.h, 12);
    const std::vector<float> want = forward_backward(s, q, k, v, dy, p, nullptr, "scalar");
    for (const auto& kernel : fwd) {
      if (!kernel.available()) continue;
      for (int threads : {1, 2}) {
        ThreadPool pool(threads);
        expect_close(forward_backward(s, q, k, v, dy, p, &pool, kernel.name), want, 2e-5,
                     std::string(kernel.name) + " t " + std::to_string(s.t) + " threads " +
                         std::to_string(threads));
      }
    }
  }
}

}  // namespace
}  // namespace nexus
