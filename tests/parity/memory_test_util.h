// What the long-term memory tests share: fixture arrays and a comparison scaled by the reference's
// largest magnitude (the gradients through several segments grow).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace nexus::test {

inline std::vector<float> floats(const nlohmann::json& j) { return j.get<std::vector<float>>(); }

inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double tol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 0;
  for (float w : want) scale = std::max(scale, std::fabs(double(w)));
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, scale)) << what << " at " << i;
}

}  // namespace nexus::test
