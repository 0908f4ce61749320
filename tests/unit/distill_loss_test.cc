// The distillation loss (ops/loss.h) against a double-precision transcription of Hinton et al.'s
// loss, alpha CE + (1 - alpha) T^2 KL(softmax(t / T) || softmax(s / T)), its gradient against
// central differences of that loss, every variant and thread count against the reference, and
// its limits: alpha 1 is the cross-entropy, a student equal to its teacher has no soft loss.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "nexus/core/thread_pool.h"
#include "ops/loss.h"

namespace nexus {
namespace {

std::vector<double> log_softmax(const float* x, int64_t v, double inv_t) {
  double m = -1e300;
  for (int64_t j = 0; j < v; ++j) m = std::max(m, x[j] * inv_t);
  double z = 0.0;
  for (int64_t j = 0; j < v; ++j) z += std::exp(x[j] * inv_t - m);
  std::vector<double> out(v);
  for (int64_t j = 0; j < v; ++j) out[j] = x[j] * inv_t - m - std::log(z);
  return out;
}

double ref_loss(const float* s, const float* t, int64_t v, int32_t target, double temp,
                double alpha) {
  if (target < 0) return 0.0;
  const std::vector<double> ls = log_softmax(s, v, 1.0), lq = log_softmax(s, v, 1.0 / temp),
                            lt = log_softmax(t, v, 1.0 / temp);
  double kl = 0.0;
  for (int64_t j = 0; j < v; ++j) kl += std::exp(lt[j]) * (lt[j] - lq[j]);
  return alpha * -ls[target] + (1.0 - alpha) * temp * temp * kl;
}

struct Rows {
  int64_t n, v;
  std::vector<float> s, t;
  std::vector<int32_t> targets;
};

Rows random_rows(int64_t n, int64_t v, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  Rows r{n, v, std::vector<float>(n * v), std::vector<float>(n * v), std::vector<int32_t>(n)};
  for (float& x : r.s) x = nd(rng);
  for (float& x : r.t) x = nd(rng);
  for (int64_t i = 0; i < n; ++i) r.targets[i] = static_cast<int32_t>(rng() % v);
  r.targets[1] = -1;  // an ignored row
  return r;
}

TEST(DistillLoss, MatchesTheDoubleReferenceAndItsCentralDifferences) {
  for (int64_t v : {7, 64, 1027})
    for (auto [temp, alpha] : {std::pair{1.0f, 0.5f}, {2.0f, 0.3f}, {4.0f, 0.0f}, {0.5f, 1.0f}}) {
      SCOPED_TRACE("v " + std::to_string(v) + " T " + std::to_string(temp) + " alpha " +
                   std::to_string(alpha));
      Rows r = random_rows(5, v, static_cast<uint32_t>(v));
      const float scale = 0.25f;
      std::vector<float> g = r.s, row_loss(r.n);
      const double total = distill_loss_fused(g.data(), r.t.data(), row_loss.data(),
                                              r.targets.data(), r.n, v, scale, temp, alpha);
      double want_total = 0.0;
      for (int64_t i = 0; i < r.n; ++i) {
        const double want = ref_loss(&r.s[i * v], &r.t[i * v], v, r.targets[i], temp, alpha);
        want_total += want;
        EXPECT_NEAR(row_loss[i], want, 2e-5 * (1.0 + std::fabs(want))) << "row " << i;
        // d(scale * loss)/d s_j by central differences in double, on a few entries.
        for (int64_t j : {int64_t{0}, v / 2, v - 1, int64_t(r.targets[i] < 0 ? 0 : r.targets[i])}) {
          std::vector<float> p(r.s.begin() + i * v, r.s.begin() + (i + 1) * v), m = p;
          const float h = 1e-2f;
          p[j] += h;
          m[j] -= h;
          const double fd =
              scale *
              (ref_loss(p.data(), &r.t[i * v], v, r.targets[i], temp, alpha) -
               ref_loss(m.data(), &r.t[i * v], v, r.targets[i], temp, alpha)) /
              (double(p[j]) - m[j]);
          EXPECT_NEAR(g[i * v + j], fd, 2e-4 * scale + 1e-3 * std::fabs(fd))
              << "row " << i << " logit " << j;
        }
      }
      EXPECT_NEAR(total, want_total, 1e-4 * (1.0 + want_total));
      for (int64_t j = 0; j < v; ++j) EXPECT_EQ(g[1 * v + j], 0.0f) << "ignored row";
    }
}

TEST(DistillLoss, EveryVariantAndThreadCountAgreesWithTheReference) {
  const Rows r = random_rows(37, 515, 3);
  const KernelVariants<DistillLossArgs> ks = op_kernels<DistillLossArgs>(Device::cpu());
  ASSERT_FALSE(ks.empty());
  std::vector<float> ref = r.s, ref_loss_rows(r.n);
  ks.back().run(DistillLossArgs{ref.data(), r.t.data(), ref_loss_rows.data(), r.targets.data(),
                                r.n, r.v, 0.5f, 2.0f, 0.4f},
                nullptr);
  for (const auto& k : ks) {
    if (!k.available()) continue;
    for (int threads : {1, 2, 3}) {
      ThreadPool pool(threads);
      std::vector<float> g = r.s, l(r.n);
      k.run(DistillLossArgs{g.data(), r.t.data(), l.data(), r.targets.data(), r.n, r.v, 0.5f,
                            2.0f, 0.4f},
            &pool);
      for (size_t i = 0; i < g.size(); ++i)
        ASSERT_NEAR(g[i], ref[i], 1e-6) << k.name << " threads " << threads << " at " << i;
      for (int64_t i = 0; i < r.n; ++i)
        ASSERT_NEAR(l[i], ref_loss_rows[i], 1e-5 * (1.0 + std::fabs(ref_loss_rows[i])))
            << k.name << " row " << i;
    }
  }
}

TEST(DistillLoss, AlphaOneIsTheCrossEntropyAndAnEqualTeacherAddsNothing) {
  Rows r = random_rows(9, 300, 11);
  std::vector<float> a = r.s, b = r.s, la(r.n), lb(r.n);
  distill_loss_fused(a.data(), r.t.data(), la.data(), r.targets.data(), r.n, r.v, 1.0f, 3.0f,
                     1.0f);
  cross_entropy_fused(b.data(), lb.data(), r.targets.data(), r.n, r.v, 1.0f);
  for (int64_t i = 0; i < r.n; ++i) EXPECT_NEAR(la[i], lb[i], 1e-5 * (1.0 + lb[i]));
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-6);
  // alpha 0 and the teacher's logits equal to the student's: no loss, no gradient.
  std::vector<float> c = r.s, lc(r.n);
  distill_loss_fused(c.data(), r.s.data(), lc.data(), r.targets.data(), r.n, r.v, 1.0f, 2.0f,
                     0.0f);
  for (int64_t i = 0; i < r.n; ++i) EXPECT_NEAR(lc[i], 0.0f, 1e-5);
  for (float x : c) EXPECT_NEAR(x, 0.0f, 1e-6);
  std::vector<float> d = r.s, ld(r.n);
  EXPECT_THROW(distill_loss_fused(d.data(), r.t.data(), ld.data(), r.targets.data(), r.n, r.v,
                                  1.0f, 0.0f, 0.5f),
               Error);
  EXPECT_THROW(distill_loss_fused(d.data(), r.t.data(), ld.data(), r.targets.data(), r.n, r.v,
                                  1.0f, 2.0f, 1.5f),
               Error);
}

}  // namespace
}  // namespace nexus
