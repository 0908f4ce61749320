// Finite-difference helpers of the training-op gradient tests (train_ops_grad_test.cc,
// train_ops_gpt2_grad_test.cc): random inputs, a weighted-sum loss and the error measure.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <vector>

#include "test_random.h"
namespace nexus::train {

using test::randn;

inline double weighted_sum(const std::vector<float>& out, const std::vector<float>& r) {
  double s = 0.0;
  for (size_t i = 0; i < out.size(); ++i) s += static_cast<double>(out[i]) * r[i];
  return s;
}

// Max |numeric - analytic| over x's elements divided by max |analytic|; prints and returns it.
inline double fd_error(const char* what, std::vector<float>& x, const std::vector<float>& analytic,
                       const std::function<double()>& loss, float h = 1e-3f) {
  double max_err = 0.0, max_abs = 0.0;
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double lp = loss();
    x[i] = keep - h;
    const double lm = loss();
    x[i] = keep;
    const double num = (lp - lm) / (2.0 * h);
    max_err = std::max(max_err, std::abs(num - analytic[i]));
    max_abs = std::max(max_abs, std::abs(static_cast<double>(analytic[i])));
  }
  EXPECT_GT(max_abs, 1e-3) << what << ": gradient is (nearly) zero, the check would be vacuous";
  const double rel = max_err / max_abs;
  std::printf("  %-22s max fd error %.2e of max |grad| %.3f\n", what, rel, max_abs);
  return rel;
}

}  // namespace nexus::train
