// Slot reduction of nexus-ltm's memory: the kernels with a projection against a float64
// transcription of their equations; the eigen solver; a reduction that keeps every slot is a
// rotation of the key features and keeps the model's logits; fewer slots shrink the memory; a
// reduced model is refused for training and for a second reduction. Titans' deep memory reduces
// its hidden units: keeping them all keeps the logits, and units that are never active are dropped
// without changing them.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <random>

#include "nexus/compress/memory_reduce.h"
#include "nexus/context.h"
#include "nexus/model.h"
#include "nexus/runtime/memory_stats.h"
#include "nexus/train/train_model.h"
#include "ops/memory.h"
#include "test_random.h"

namespace nexus {
namespace {

using test::randn;

// [kv][d][r] with orthonormal columns per head (Gram-Schmidt on random vectors).
std::vector<float> random_projection(int64_t kv, int64_t d, int64_t r, unsigned seed) {
  std::vector<float> p(static_cast<size_t>(kv * d * r));
  for (int64_t g = 0; g < kv; ++g) {
    std::vector<std::vector<double>> cols;
    std::vector<float> raw = randn(static_cast<size_t>(d * r), seed + static_cast<unsigned>(g));
    for (int64_t a = 0; a < r; ++a) {
      std::vector<double> c(static_cast<size_t>(d));
      for (int64_t x = 0; x < d; ++x) c[x] = raw[x * r + a];
      for (const auto& prev : cols) {
        double dot = 0;
        for (int64_t x = 0; x < d; ++x) dot += c[x] * prev[x];
        for (int64_t x = 0; x < d; ++x) c[x] -= dot * prev[x];
      }
      double n = 0;
      for (double v : c) n += v * v;
      for (double& v : c) v /= std::sqrt(n);
      cols.push_back(c);
    }
    for (int64_t x = 0; x < d; ++x)
      for (int64_t a = 0; a < r; ++a) p[(g * d + x) * r + a] = static_cast<float>(cols[a][x]);
  }
  return p;
}

struct Shape {
  int64_t b = 2, t = 11, seg = 4, heads = 4, kv = 2, d = 8, r = 3;
};

// The memory ops' equations with each feature f replaced by P_g^T f, in float64.
std::vector<double> reference(bool titans, const Shape& s, const std::vector<float>& q,
                              const std::vector<float>& k, const std::vector<float>& v,
                              const std::vector<float>& p, const float rates[3]) {
  const int64_t d = s.d, r = s.r, qw = s.heads * d, kw = s.kv * d, group = s.heads / s.kv;
  std::vector<double> y(q.size(), 0.0);
  auto feature = [&](const float* x, int64_t g) {
    std::vector<double> f(static_cast<size_t>(d)), out(static_cast<size_t>(r), 0.0);
    double n = 1e-6;
    for (int64_t i = 0; i < d; ++i) n += static_cast<double>(x[i]) * x[i];
    for (int64_t i = 0; i < d; ++i)
      f[i] = titans ? x[i] / std::sqrt(n) : (x[i] > 0 ? x[i] + 1.0 : std::exp(x[i]));
    for (int64_t i = 0; i < d; ++i)
      for (int64_t a = 0; a < r; ++a) out[a] += p[(g * d + i) * r + a] * f[i];
    return out;
  };
  for (int64_t sq = 0; sq < s.b; ++sq)
    for (int64_t g = 0; g < s.kv; ++g) {
      std::vector<double> m(static_cast<size_t>(r * d), 0.0), z(static_cast<size_t>(r), 0.0),
          mom(static_cast<size_t>(r * d), 0.0);
      for (int64_t i0 = 0; i0 < s.t; i0 += s.seg) {
        const int64_t i1 = std::min(s.t, i0 + s.seg);
        for (int64_t i = i0; i < i1; ++i)
          for (int64_t h = g * group; h < (g + 1) * group; ++h) {
            const std::vector<double> f = feature(&q[(sq * s.t + i) * qw + h * d], g);
            double den = 1e-6;
            for (int64_t a = 0; a < r; ++a) den += f[a] * z[a];
            for (int64_t c = 0; c < d; ++c) {
              double acc = 0;
              for (int64_t a = 0; a < r; ++a) acc += f[a] * m[a * d + c];
              y[(sq * s.t + i) * qw + h * d + c] = titans ? acc : acc / den;
            }
          }
        std::vector<double> upd(static_cast<size_t>(r * d), 0.0), dz(static_cast<size_t>(r), 0.0);
        for (int64_t i = i0; i < i1; ++i) {
          const std::vector<double> f = feature(&k[(sq * s.t + i) * kw + g * d], g);
          const float* vi = &v[(sq * s.t + i) * kw + g * d];
          double den = 1e-6;
          for (int64_t a = 0; a < r; ++a) den += f[a] * z[a];
          for (int64_t c = 0; c < d; ++c) {
            double read = 0;
            for (int64_t a = 0; a < r; ++a) read += f[a] * m[a * d + c];
            // Infini: delta-rule error; Titans: the gradient (2 / n) f (f^T M - v) of the
            // segment's n keys.
            const double e =
                titans ? 2.0 / static_cast<double>(i1 - i0) * (read - vi[c]) : vi[c] - read / den;
            for (int64_t a = 0; a < r; ++a) upd[a * d + c] += f[a] * e;
          }
          for (int64_t a = 0; a < r; ++a) dz[a] += f[a];
        }
        for (int64_t x = 0; x < r * d; ++x) {
          if (titans) {
            mom[x] = rates[0] * mom[x] - rates[1] * upd[x];
            m[x] = (1 - rates[2]) * m[x] + mom[x];
          } else {
            m[x] += upd[x];
          }
        }
        for (int64_t a = 0; a < r; ++a) z[a] += dz[a];
      }
    }
  return y;
}

class SlotKinds : public ::testing::TestWithParam<bool> {};

TEST_P(SlotKinds, KernelsWithAProjectionFollowTheEquations) {
  const bool titans = GetParam();
  const Shape s;
  const auto n = static_cast<size_t>(s.b * s.t);
  const std::vector<float> q = randn(n * s.heads * s.d, 1), k = randn(n * s.kv * s.d, 2),
                           v = randn(n * s.kv * s.d, 3, 0.5f);
  const std::vector<float> p = random_projection(s.kv, s.d, s.r, 7);
  const float rates[3] = {0.6f, 0.3f, 0.1f};
  std::vector<float> eta(s.kv, rates[0]), theta(s.kv, rates[1]), alpha(s.kv, rates[2]);
  std::vector<float> y(q.size(), 0.0f);
  const std::vector<double> want = reference(titans, s, q, k, v, p, rates);
  if (titans) {
    TitansArgs a{q.data(),     k.data(),     v.data(), y.data(), eta.data(),
                 theta.data(), alpha.data(), nullptr,  nullptr,  s.b,
                 s.t,          s.seg,        s.heads,  s.kv,     s.d};
    a.proj = p.data();
    a.slots = s.r;
    titans_forward(a);
  } else {
    MemoryArgs a{q.data(), k.data(), v.data(), y.data(), nullptr, nullptr,
                 s.b,      s.t,      s.seg,    s.heads,  s.kv,    s.d};
    a.proj = p.data();
    a.slots = s.r;
    memory_forward(a);
  }
  // (A random projection's denominators can be small: the tolerance is relative.)
  for (size_t i = 0; i < y.size(); ++i)
    ASSERT_NEAR(y[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << i;
  // (The first segment reads an empty memory; later ones must not.)
  double later = 0;
  for (size_t i = s.seg * s.heads * s.d; i < static_cast<size_t>(s.t * s.heads * s.d); ++i)
    later += std::abs(y[i]);
  EXPECT_GT(later, 0.1);
}

TEST_P(SlotKinds, AProjectionHasNoBackward) {
  const Shape s;
  std::vector<float> x(static_cast<size_t>(s.b * s.t * s.heads * s.d), 0.1f), g(s.kv, 0.5f);
  const std::vector<float> p = random_projection(s.kv, s.d, s.r, 3);
  std::vector<float> saved(static_cast<size_t>(s.b * 3 * s.kv * titans_floats(s.d)));
  if (GetParam()) {
    TitansArgs a{x.data(), x.data(), x.data(), x.data(), g.data(), g.data(), g.data(), saved.data(),
                 nullptr,  s.b,      s.t,      s.seg,    s.heads,  s.kv,     s.d};
    a.proj = p.data();
    a.slots = s.r;
    EXPECT_THROW(
        titans_backward({a, x.data(), x.data(), x.data(), x.data(), g.data(), g.data(), g.data()}),
        Error);
  } else {
    MemoryArgs a{x.data(), x.data(), x.data(), x.data(), saved.data(), nullptr,
                 s.b,      s.t,      s.seg,    s.heads,  s.kv,         s.d};
    a.proj = p.data();
    a.slots = s.r;
    EXPECT_THROW(memory_backward({a, x.data(), x.data(), x.data(), x.data()}), Error);
  }
}

INSTANTIATE_TEST_SUITE_P(Memory, SlotKinds, ::testing::Values(false, true), [](const auto& info) {
  return std::string(info.param ? "titans" : "infini");
});

TEST(MemoryReduce, SymmetricEigenDecomposes) {
  const int64_t n = 7;
  const std::vector<float> r = randn(n * n, 5);
  std::vector<double> a(n * n);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < n; ++j) a[i * n + j] = r[i * n + j] + r[j * n + i];
  std::vector<double> values, vectors;
  symmetric_eigen(a, n, values, vectors);
  for (int64_t j = 0; j < n; ++j) {
    if (j > 0) {
      EXPECT_GE(values[j - 1], values[j]);
    }
    for (int64_t i = 0; i < n; ++i) {
      double av = 0;
      for (int64_t x = 0; x < n; ++x) av += a[i * n + x] * vectors[x * n + j];
      EXPECT_NEAR(av, values[j] * vectors[i * n + j], 1e-9);
    }
    for (int64_t k = 0; k < n; ++k) {
      double dot = 0;
      for (int64_t x = 0; x < n; ++x) dot += vectors[x * n + j] * vectors[x * n + k];
      EXPECT_NEAR(dot, j == k ? 1.0 : 0.0, 1e-9);
    }
  }
}

// What a reduction test runs on: the memory's kind, and the deep memory's hidden units (0:
// linear).
struct ReduceCase {
  MemoryKind kind;
  int64_t hidden = 0;
};

// A random nexus-ltm model (2 layers, 2 kv heads of 8) written to a GGUF, with its memory gates
// half open; `dead` hidden units of a deep memory get zero initial weights in and out.
std::string ltm_file(ReduceCase rc, const std::string& tag, const std::vector<int64_t>& dead = {}) {
  ModelConfig c;
  c.arch = Arch::kLtm;
  c.arch_name = "nexus-ltm";
  c.dim = 32;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.head_dim = 8;
  c.rope_dim = 8;
  c.ffn_dim = 48;
  c.n_vocab = 24;
  c.n_ctx_train = 64;
  c.memory_segment = 4;
  c.memory_kind = rc.kind;
  c.memory_hidden = rc.hidden;
  auto m = train::TrainModel::create(c, 2, 8, {0.4f, 3, true});
  EXPECT_TRUE(m) << m.status().message();
  for (const train::ParamInfo& t : m.value()->tensors())
    for (int64_t h = 0; h < t.numel; ++h) {
      float& p = m.value()->params()[t.offset + h];
      if (t.name.ends_with(".memory_gate")) p = 0.5f;
      if (t.name.ends_with(".memory_theta")) p = 1.0f;
      // W1 [kv][8][hidden]: unit h % hidden; W2 [kv][hidden][8]: unit (h / 8) % hidden.
      const int64_t unit = t.name.ends_with(".memory_w1")   ? h % rc.hidden
                           : t.name.ends_with(".memory_w2") ? (h / 8) % rc.hidden
                                                            : -1;
      if (unit >= 0 && std::find(dead.begin(), dead.end(), unit) != dead.end()) p = 0.0f;
    }
  const std::string path =
      ::testing::TempDir() + "/slots_" + tag + std::to_string(::getpid()) + ".gguf";
  EXPECT_TRUE(m.value()->export_gguf(path));
  return path;
}

std::vector<int32_t> tokens(int64_t n, int seed) {
  std::vector<int32_t> t;
  for (int64_t i = 0; i < n; ++i)
    t.push_back(static_cast<int32_t>((i * 7 + seed * 5 + i / 3) % 24));
  return t;
}

// The mass memory_stats says was written to layer l's memory, from its raw floats: the
// normaliser's sum (infini), or the squared norm of M (titans) or of D1 and D2 (deep), mean over
// the heads.
double written_mass(const ModelConfig& c, std::span<const float> mem, int64_t l) {
  const int64_t d = c.head_dim, kv = c.n_kv_heads;
  const int64_t rows = c.memory_slots_at(l) > 0 ? c.memory_slots_at(l) : d;
  const auto per_head = static_cast<int64_t>(mem.size()) / kv;
  const int64_t h = c.memory_hidden > 0 ? per_head / (4 * d) : 0;  // D1, D2, S1, S2
  double sum = 0;
  for (int64_t g = 0; g < kv; ++g) {
    const float* m = mem.data() + g * per_head;
    if (c.memory_kind != MemoryKind::kTitans)
      for (int64_t a = 0; a < rows; ++a) sum += m[rows * d + a];
    else
      for (int64_t e = 0; e < (h > 0 ? 2 * d * h : rows * d); ++e) sum += double{m[e]} * m[e];
  }
  return sum / static_cast<double>(kv);
}

std::vector<float> logits(const Model& m, const std::vector<int32_t>& toks, size_t* memory_bytes,
                          std::vector<LayerMemoryStats>* stats = nullptr) {
  ContextOptions o;
  o.n_ctx = 256;
  o.kv_type = DType::kF32;
  auto ctx = Context::create(m, o);
  EXPECT_TRUE(ctx) << ctx.status().message();
  Batch b;
  for (size_t i = 0; i < toks.size(); ++i) b.add(toks[i], static_cast<int32_t>(i), 0, true);
  std::vector<float> out;
  EXPECT_TRUE(ctx.value()->decode(b, &out));
  *memory_bytes = 0;
  for (int64_t l = 0; l < m.config().n_layers; ++l)
    *memory_bytes += ctx.value()->long_term_memory(0, l).size() * sizeof(float);
  if (stats) {
    *stats = memory_stats(**ctx, 0);
    for (int64_t l = 0; l < m.config().n_layers; ++l)
      EXPECT_NEAR(stats->at(l).written,
                  written_mass(m.config(), ctx.value()->long_term_memory(0, l), l),
                  1e-4 * (1 + stats->at(l).written))
          << "layer " << l;
  }
  return out;
}

// The largest difference between two models' logits over the same 40 tokens (10 segments), and
// their memories' bytes.
double logit_diff(const Model& a, const Model& b, size_t* a_bytes, size_t* b_bytes) {
  const std::vector<int32_t> text = tokens(40, 2);
  const std::vector<float> x = logits(a, text, a_bytes), y = logits(b, text, b_bytes);
  EXPECT_EQ(x.size(), y.size());
  double diff = 0;
  for (size_t i = 0; i < x.size() && i < y.size(); ++i)
    diff = std::max<double>(diff, std::abs(x[i] - y[i]));
  return diff;
}

// `full` reduced as `plan` says, written next to `path` and loaded back (the file removed); null,
// with a failure, when any step fails.
std::unique_ptr<Model> load_reduced(const Model& full, const MemoryReducePlan& plan,
                                    const std::string& path) {
  const std::string out = path + ".reduced.gguf";
  auto w = memory_reduce_gguf(full, plan);
  EXPECT_TRUE(w) << w.status().message();
  if (!w || !w->write(out)) return nullptr;
  auto m = Model::load(out);
  std::filesystem::remove(out);
  EXPECT_TRUE(m) << m.status().message();
  return m ? std::move(m.value()) : nullptr;
}

class ReduceKinds : public ::testing::TestWithParam<ReduceCase> {
 protected:
  // Slots a layer before reduction: head_dim, or the deep memory's hidden units.
  int64_t width() const { return GetParam().hidden > 0 ? GetParam().hidden : 8; }
};

TEST_P(ReduceKinds, EverySlotKeptIsARotationThatKeepsTheLogits) {
  const std::string path = ltm_file(GetParam(), "all");
  auto full = Model::load(path);
  ASSERT_TRUE(full) << full.status().message();
  MemoryReduceOptions o;
  o.energy = 1.0;
  auto plan = plan_memory_reduce(**full, tokens(200, 1), o);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->segments, 50);
  EXPECT_EQ(plan->width, width());
  EXPECT_EQ(plan->slots, (std::vector<int64_t>{width(), width()}));
  auto reduced = load_reduced(**full, *plan, path);
  ASSERT_NE(reduced, nullptr);
  EXPECT_EQ(reduced->config().memory_slots, (std::vector<int64_t>{width(), width()}));
  size_t full_bytes = 0, reduced_bytes = 0;
  EXPECT_LT(logit_diff(**full, *reduced, &full_bytes, &reduced_bytes), 2e-4);
  EXPECT_EQ(full_bytes, reduced_bytes);
  // A reduced model is not trained or reduced again.
  EXPECT_FALSE(plan_memory_reduce(*reduced, tokens(40, 1), o));
  EXPECT_FALSE(train::TrainModel::create(reduced->config(), 2, 8, {}));
  std::filesystem::remove(path);
}

TEST_P(ReduceKinds, FewerSlotsShrinkTheMemory) {
  const std::string path = ltm_file(GetParam(), "half");
  auto full = Model::load(path);
  ASSERT_TRUE(full);
  const std::vector<int32_t> text = tokens(40, 2);
  size_t full_bytes = 0;
  const std::vector<float> a = logits(**full, text, &full_bytes);
  for (bool adaptive : {false, true}) {
    MemoryReduceOptions o;
    o.ratio = 2;
    o.adaptive = adaptive;
    auto plan = plan_memory_reduce(**full, tokens(200, 1), o);
    ASSERT_TRUE(plan) << plan.status().message();
    EXPECT_EQ(plan->slots[0] + plan->slots[1], width());
    if (!adaptive) {
      EXPECT_EQ(plan->slots, (std::vector<int64_t>{width() / 2, width() / 2}));
    }
    for (int64_t l = 0; l < 2; ++l) {
      EXPECT_GT(plan->kept[l], 0.5);
      EXPECT_LE(plan->kept[l], 1.0 + 1e-9);
    }
    auto reduced = load_reduced(**full, *plan, path);
    ASSERT_NE(reduced, nullptr);
    size_t bytes = 0;
    std::vector<LayerMemoryStats> stats;
    const std::vector<float> b = logits(*reduced, text, &bytes, &stats);
    // --memory-stats reads the reduced memory as what it is: its slots, and what was written.
    ASSERT_EQ(stats.size(), 2u);
    for (int64_t l = 0; l < 2; ++l) {
      EXPECT_EQ(stats[l].slots, plan->slots[l]);
      EXPECT_GT(stats[l].written, 0);
    }
    // Infini's head holds (slots + 1) x 8 floats of (8 + 1) x 8, Titans' 2 x slots x 8 of 2 x 8
    // x 8, the deep memory's 4 x 8 x units of 4 x 8 x hidden.
    const int64_t kv = 2, d = 8, slots = plan->slots[0] + plan->slots[1];
    const int64_t want = GetParam().hidden > 0                    ? kv * 4 * d * slots
                         : GetParam().kind == MemoryKind::kTitans ? kv * 2 * slots * d
                                                                  : kv * (d + 1) * slots;
    EXPECT_EQ(bytes, static_cast<size_t>(want) * sizeof(float));
    EXPECT_LT(bytes, full_bytes);
    // The first segment reads an empty linear memory: its logits are the same (the deep memory's
    // first read is its initial weights, cut too); later ones moved (by how much on a trained
    // model: bench/ltm_reduce.sh).
    double diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_TRUE(std::isfinite(b[i]));
      diff = std::max<double>(diff, std::abs(a[i] - b[i]));
    }
    if (GetParam().hidden == 0)
      for (size_t i = 0; i < 4 * 24; ++i) ASSERT_NEAR(a[i], b[i], 1e-5) << i;
    EXPECT_GT(diff, 1e-6);
  }
  std::filesystem::remove(path);
}

// A deep memory's hidden unit with zero initial weights in and out is never active and never
// written (its gradients are zero too): the reduction finds and drops exactly those, and the
// logits stay.
TEST(MemoryReduce, DeepMemoryDropsUnitsThatAreNeverActive) {
  const std::vector<int64_t> dead = {1, 4, 5, 9, 14};
  const std::string path = ltm_file({MemoryKind::kTitans, 16}, "dead", dead);
  auto full = Model::load(path);
  ASSERT_TRUE(full) << full.status().message();
  MemoryReduceOptions o;
  o.energy = 1.0;
  auto plan = plan_memory_reduce(**full, tokens(200, 1), o);
  ASSERT_TRUE(plan) << plan.status().message();
  EXPECT_EQ(plan->slots, (std::vector<int64_t>{11, 11}));
  const std::vector<int64_t> live = {0, 2, 3, 6, 7, 8, 10, 11, 12, 13, 15};
  for (const std::vector<int64_t>& units : plan->units) {
    ASSERT_EQ(units.size(), 2 * live.size());
    EXPECT_EQ(std::vector<int64_t>(units.begin(), units.begin() + 11), live);
    EXPECT_EQ(std::vector<int64_t>(units.begin() + 11, units.end()), live);
  }
  size_t full_bytes = 0, reduced_bytes = 0;
  auto live_only = load_reduced(**full, *plan, path);
  ASSERT_NE(live_only, nullptr);
  EXPECT_LT(logit_diff(**full, *live_only, &full_bytes, &reduced_bytes), 2e-5);
  EXPECT_EQ(full_bytes * 11, reduced_bytes * 16);
  // Ratio 2 (8 of 16 units) drops live ones too: the logits move.
  o.energy = 0;
  o.ratio = 2;
  plan = plan_memory_reduce(**full, tokens(200, 1), o);
  ASSERT_TRUE(plan);
  auto half = load_reduced(**full, *plan, path);
  ASSERT_NE(half, nullptr);
  EXPECT_GT(logit_diff(**full, *half, &full_bytes, &reduced_bytes), 1e-4);
  std::filesystem::remove(path);
}

TEST(MemoryReduce, RefusesBadOptionsAndModelsWithoutAMemory) {
  const std::string path = ltm_file({MemoryKind::kInfini}, "opts");
  auto m = Model::load(path);
  ASSERT_TRUE(m);
  const std::vector<int32_t> t = tokens(40, 1);
  MemoryReduceOptions both;
  both.ratio = 2;
  both.energy = 0.9;
  EXPECT_FALSE(plan_memory_reduce(**m, t, both));
  MemoryReduceOptions none;
  EXPECT_FALSE(plan_memory_reduce(**m, t, none));
  MemoryReduceOptions small;
  small.ratio = 0.5;
  EXPECT_FALSE(plan_memory_reduce(**m, t, small));
  MemoryReduceOptions ok;
  ok.ratio = 2;
  auto short_text = plan_memory_reduce(**m, tokens(3, 1), ok);
  ASSERT_FALSE(short_text);
  EXPECT_NE(short_text.status().message().find("fewer than one memory segment of 4"),
            std::string::npos)
      << short_text.status().message();
  std::filesystem::remove(path);
}

INSTANTIATE_TEST_SUITE_P(Memory, ReduceKinds,
                         ::testing::Values(ReduceCase{MemoryKind::kInfini},
                                           ReduceCase{MemoryKind::kTitans},
                                           ReduceCase{MemoryKind::kTitans, 16}),
                         [](const auto& info) {
                           return std::string(info.param.hidden > 0                    ? "deep"
                                              : info.param.kind == MemoryKind::kTitans ? "titans"
                                                                                       : "infini");
                         });

}  // namespace
}  // namespace nexus
