// The compressive memory op (backends/api/memory.h) against PyTorch: outputs and the gradients of
// q, k and v from autograd in float64 (scripts/gen_memory_fixtures.py), with segment lengths that
// divide the sequence and that do not, grouped and one-to-one key/value heads; its backward
// against central finite differences; and one call over a sequence against the same sequence fed
// a segment at a time with the memory carried in `state`.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "backends/cpu/memory.h"
#include "ops/memory.h"
#include "parity/memory_test_util.h"
#include "test_paths.h"

namespace nexus {
namespace {

using test::expect_close;
using test::floats;

TEST(MemoryGolden, MatchesPyTorchAutograd) {
  std::ifstream in(test::fixtures_dir() + "/memory/infini.json");
  ASSERT_TRUE(in) << "tests/fixtures/memory/infini.json (scripts/gen_memory_fixtures.py)";
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 3u);
  for (const nlohmann::json& c : cases) {
    const int64_t b = c["b"], t = c["t"], seg = c["segment"], heads = c["heads"],
                  kv = c["kv_heads"], d = c["head_dim"];
    const std::string what = "t " + std::to_string(t) + " segment " + std::to_string(seg);
    const std::vector<float> q = floats(c["q"]), k = floats(c["k"]), v = floats(c["v"]),
                             dy = floats(c["dy"]);
    std::vector<float> y(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> saved(
        static_cast<size_t>(b * memory_segments(t, seg) * kv * memory_floats(d)));
    ThreadPool pool(2);
    const MemoryArgs a{q.data(), k.data(), v.data(), y.data(), saved.data(), nullptr,
                       b,        t,        seg,      heads,    kv,           d};
    memory_forward(a, &pool);
    expect_close(y, floats(c["y"]), 1e-5, what + " y");
    memory_backward({a, dy.data(), dq.data(), dk.data(), dv.data()}, &pool);
    expect_close(dq, floats(c["dq"]), 1e-4, what + " dq");
    expect_close(dk, floats(c["dk"]), 1e-4, what + " dk");
    expect_close(dv, floats(c["dv"]), 1e-4, what + " dv");
  }
}

std::vector<float> random(size_t n, unsigned seed, float scale = 0.6f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = nd(rng);
  return v;
}

TEST(MemoryGolden, BackwardMatchesFiniteDifferences) {
  const int64_t b = 1, t = 7, seg = 3, heads = 2, kv = 1, d = 3;
  std::vector<float> q = random(b * t * heads * d, 1), k = random(b * t * kv * d, 2),
                     v = random(b * t * kv * d, 3), dy = random(b * t * heads * d, 4, 1.0f);
  std::vector<float> saved(
      static_cast<size_t>(b * memory_segments(t, seg) * kv * memory_floats(d)));
  auto loss = [&]() {
    std::vector<float> y(q.size());
    memory_forward(
        {q.data(), k.data(), v.data(), y.data(), nullptr, nullptr, b, t, seg, heads, kv, d});
    double s = 0;
    for (size_t i = 0; i < y.size(); ++i) s += double(y[i]) * dy[i];
    return s;
  };
  std::vector<float> y(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  const MemoryArgs a{q.data(), k.data(), v.data(), y.data(), saved.data(), nullptr,
                     b,        t,        seg,      heads,    kv,           d};
  memory_forward(a);
  memory_backward({a, dy.data(), dq.data(), dk.data(), dv.data()});
  for (auto [x, g, name] : {std::tuple{&q, &dq, "q"}, {&k, &dk, "k"}, {&v, &dv, "v"}})
    for (size_t i = 0; i < x->size(); ++i) {
      const float x0 = (*x)[i], h = 1e-2f;
      (*x)[i] = x0 + h;
      const double up = loss();
      (*x)[i] = x0 - h;
      const double down = loss();
      (*x)[i] = x0;
      const double num = (up - down) / (2 * h);
      EXPECT_NEAR((*g)[i], num, 2e-2 * std::max(1.0, std::fabs(num))) << name << "[" << i << "]";
    }
}

TEST(MemoryGolden, OneCallEqualsSegmentBySegmentWithTheStateCarried) {
  const int64_t b = 2, t = 12, seg = 4, heads = 4, kv = 2, d = 8;
  const std::vector<float> q = random(b * t * heads * d, 5), k = random(b * t * kv * d, 6),
                           v = random(b * t * kv * d, 7);
  std::vector<float> whole(q.size()), state_whole(static_cast<size_t>(b * kv * memory_floats(d)));
  memory_forward({q.data(), k.data(), v.data(), whole.data(), nullptr, state_whole.data(), b, t,
                  seg, heads, kv, d});
  // Sequence by sequence and segment by segment, the memory carried in `state`.
  std::vector<float> parts(q.size());
  for (int64_t s = 0; s < b; ++s) {
    std::vector<float> state(static_cast<size_t>(kv * memory_floats(d)), 0.0f);
    for (int64_t i0 = 0; i0 < t; i0 += seg) {
      const size_t r = static_cast<size_t>(s * t + i0);
      memory_forward({q.data() + r * heads * d, k.data() + r * kv * d, v.data() + r * kv * d,
                      parts.data() + r * heads * d, nullptr, state.data(), 1, seg, seg, heads, kv,
                      d});
    }
    EXPECT_EQ(0, std::memcmp(state.data(), state_whole.data() + s * kv * memory_floats(d),
                             state.size() * sizeof(float)));
  }
  EXPECT_EQ(parts, whole);
  // The first segment reads an empty memory: nothing.
  for (int64_t i = 0; i < seg * heads * d; ++i) EXPECT_EQ(whole[i], 0.0f);
}

TEST(MemoryGolden, TitansMatchesPyTorchAutograd) {
  std::ifstream in(test::fixtures_dir() + "/memory/titans.json");
  ASSERT_TRUE(in) << "tests/fixtures/memory/titans.json (scripts/gen_memory_fixtures.py)";
  const nlohmann::json cases = nlohmann::json::parse(in);
  ASSERT_EQ(cases.size(), 3u);
  for (const nlohmann::json& c : cases) {
    const int64_t b = c["b"], t = c["t"], seg = c["segment"], heads = c["heads"],
                  kv = c["kv_heads"], d = c["head_dim"];
    const std::string what = "titans t " + std::to_string(t) + " segment " + std::to_string(seg);
    const std::vector<float> q = floats(c["q"]), k = floats(c["k"]), v = floats(c["v"]),
                             dy = floats(c["dy"]), eta = floats(c["eta"]),
                             theta = floats(c["theta"]), alpha = floats(c["alpha"]);
    std::vector<float> y(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
    std::vector<float> deta(kv, 0.0f), dtheta(kv, 0.0f), dalpha(kv, 0.0f);
    std::vector<float> saved(
        static_cast<size_t>(b * memory_segments(t, seg) * kv * titans_floats(d)));
    ThreadPool pool(2);
    const TitansArgs a{q.data(),     k.data(),     v.data(), y.data(), eta.data(), theta.data(),
                       alpha.data(), saved.data(), nullptr,  b,        t,          seg,
                       heads,        kv,           d};
    titans_forward(a, &pool);
    expect_close(y, floats(c["y"]), 1e-5, what + " y");
    titans_backward(
        {a, dy.data(), dq.data(), dk.data(), dv.data(), deta.data(), dtheta.data(), dalpha.data()},
        &pool);
    expect_close(dq, floats(c["dq"]), 1e-4, what + " dq");
    expect_close(dk, floats(c["dk"]), 1e-4, what + " dk");
    expect_close(dv, floats(c["dv"]), 1e-4, what + " dv");
    expect_close(deta, floats(c["deta"]), 1e-4, what + " deta");
    expect_close(dtheta, floats(c["dtheta"]), 1e-4, what + " dtheta");
    expect_close(dalpha, floats(c["dalpha"]), 1e-4, what + " dalpha");
  }
}

// Every variant this machine runs against the scalar reference, forward (with the state carried
// in and out, read-only and write-only calls) and backward, at 1 and 2 threads.
TEST(MemoryGolden, EveryVariantMatchesTheReference) {
  const KernelVariants<MemoryArgs> fwd = cpu::memory_kernels();
  const KernelVariants<MemoryBackwardArgs> bwd = cpu::memory_backward_kernels();
  struct Shape {
    int64_t b, t, seg, heads, kv, d;
  };
  for (const Shape& sh : {Shape{2, 37, 8, 4, 2, 16}, Shape{1, 64, 64, 3, 3, 48},
                          Shape{3, 20, 6, 8, 1, 8}, Shape{1, 5, 16, 2, 1, 64}}) {
    const size_t qn = sh.b * sh.t * sh.heads * sh.d, kn = sh.b * sh.t * sh.kv * sh.d;
    const size_t sn = sh.b * memory_segments(sh.t, sh.seg) * sh.kv * memory_floats(sh.d);
    const std::vector<float> q = random(qn, 8), k = random(kn, 9), v = random(kn, 10),
                             dy = random(qn, 11, 1.0f),
                             state0 = random(sh.b * sh.kv * memory_floats(sh.d), 12, 0.1f);
    auto run = [&](size_t variant, int threads, bool write, bool reads) {
      ThreadPool pool(threads);
      std::vector<float> y(qn, 0.0f), saved(sn), state(state0.size()), dq(qn), dk(kn), dv(kn);
      for (size_t i = 0; i < state.size(); ++i) state[i] = std::fabs(state0[i]);  // z >= 0
      MemoryArgs a{reads ? q.data() : nullptr,
                   k.data(),
                   v.data(),
                   y.data(),
                   saved.data(),
                   state.data(),
                   sh.b,
                   sh.t,
                   sh.seg,
                   sh.heads,
                   sh.kv,
                   sh.d};
      a.write = write;
      fwd[variant].run(a, &pool);
      std::vector<float> out = y;
      out.insert(out.end(), state.begin(), state.end());
      if (write && reads) {
        a.state = nullptr;
        std::fill(saved.begin(), saved.end(), 0.0f);
        fwd[variant].run(a, &pool);  // from zeros, keeping the memories for the backward
        bwd[variant].run({a, dy.data(), dq.data(), dk.data(), dv.data()}, &pool);
        out.insert(out.end(), dq.begin(), dq.end());
        out.insert(out.end(), dk.begin(), dk.end());
        out.insert(out.end(), dv.begin(), dv.end());
      }
      return out;
    };
    for (auto [write, reads] : {std::pair{true, true}, {false, true}, {true, false}}) {
      const std::vector<float> want = run(fwd.size() - 1, 1, write, reads);
      for (size_t vi = 0; vi < fwd.size(); ++vi) {
        if (!fwd[vi].available()) continue;
        for (int threads : {1, 2})
          expect_close(run(vi, threads, write, reads), want, 2e-5,
                       std::string(fwd[vi].name) + " t " + std::to_string(sh.t) + " d " +
                           std::to_string(sh.d) + " threads " + std::to_string(threads) +
                           (write ? " write" : "") + (reads ? " reads" : ""));
      }
    }
  }
}

TEST(MemoryGolden, EveryTitansVariantMatchesTheReference) {
  const KernelVariants<TitansArgs> fwd = cpu::titans_kernels();
  const KernelVariants<TitansBackwardArgs> bwd = cpu::titans_backward_kernels();
  struct Shape {
    int64_t b, t, seg, heads, kv, d;
  };
  for (const Shape& sh :
       {Shape{2, 37, 8, 4, 2, 16}, Shape{1, 64, 64, 3, 3, 48}, Shape{3, 20, 6, 8, 1, 8}}) {
    const size_t qn = sh.b * sh.t * sh.heads * sh.d, kn = sh.b * sh.t * sh.kv * sh.d;
    const size_t sn = sh.b * memory_segments(sh.t, sh.seg) * sh.kv * titans_floats(sh.d);
    const std::vector<float> q = random(qn, 8), k = random(kn, 9), v = random(kn, 10),
                             dy = random(qn, 11, 1.0f),
                             state0 = random(sh.b * sh.kv * titans_floats(sh.d), 12, 0.1f);
    std::vector<float> eta(sh.kv), theta(sh.kv), alpha(sh.kv);
    for (int64_t g = 0; g < sh.kv; ++g) {
      eta[g] = 0.6f + 0.05f * g;
      theta[g] = 0.2f;
      alpha[g] = 0.05f + 0.01f * g;
    }
    auto run = [&](size_t variant, int threads, bool write, bool reads) {
      ThreadPool pool(threads);
      std::vector<float> y(qn, 0.0f), saved(sn), state = state0, dq(qn), dk(kn), dv(kn);
      std::vector<float> de(sh.kv, 0.0f), dt(sh.kv, 0.0f), da(sh.kv, 0.0f);
      TitansArgs a{reads ? q.data() : nullptr,
                   k.data(),
                   v.data(),
                   y.data(),
                   eta.data(),
                   theta.data(),
                   alpha.data(),
                   saved.data(),
                   state.data(),
                   sh.b,
                   sh.t,
                   sh.seg,
                   sh.heads,
                   sh.kv,
                   sh.d};
      a.write = write;
      fwd[variant].run(a, &pool);
      std::vector<float> out = y;
      out.insert(out.end(), state.begin(), state.end());
      if (write && reads) {
        a.state = nullptr;
        fwd[variant].run(a, &pool);
        bwd[variant].run(
            {a, dy.data(), dq.data(), dk.data(), dv.data(), de.data(), dt.data(), da.data()},
            &pool);
        for (const auto* g : {&dq, &dk, &dv, &de, &dt, &da})
          out.insert(out.end(), g->begin(), g->end());
      }
      return out;
    };
    for (auto [write, reads] : {std::pair{true, true}, {false, true}, {true, false}}) {
      const std::vector<float> want = run(fwd.size() - 1, 1, write, reads);
      for (size_t vi = 0; vi < fwd.size(); ++vi) {
        if (!fwd[vi].available()) continue;
        for (int threads : {1, 2})
          expect_close(run(vi, threads, write, reads), want, 2e-5,
                       std::string("titans ") + fwd[vi].name + " t " + std::to_string(sh.t) +
                           " threads " + std::to_string(threads) + (write ? " write" : "") +
                           (reads ? " reads" : ""));
      }
    }
  }
}

}  // namespace
}  // namespace nexus
