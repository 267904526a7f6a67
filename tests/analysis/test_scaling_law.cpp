// The scaling-law fit recovers known parameters from synthetic points, and refuses too few.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/scaling_law.h"
#include "engine/core/error.h"

namespace tfw::analysis {
namespace {

TEST(ScalingLaw, RecoversChinchillaLikeParametersFromExactPoints) {
  const ScalingLaw truth{1.69, 406.4, 0.34, 410.7, 0.28};  // Hoffmann et al.'s fit
  std::vector<ScalingPoint> points;
  for (double n : {1e5, 3e5, 1e6, 3e6, 1e7, 3e7}) {
    for (double d : {1e6, 1e7, 1e8, 1e9}) points.push_back({n, d, truth.predict(n, d)});
  }
  const ScalingFit fit = scaling_law_fit(points);
  EXPECT_EQ(fit.points, 24u);
  EXPECT_EQ(fit.distinct, 24u);
  // Tolerances: exponents to 0.01, E to 1%, A and B to 10% (they trade off with the exponents).
  EXPECT_NEAR(fit.law.alpha, truth.alpha, 0.01);
  EXPECT_NEAR(fit.law.beta, truth.beta, 0.01);
  EXPECT_NEAR(fit.law.E / truth.E, 1, 0.01);
  EXPECT_NEAR(fit.law.A / truth.A, 1, 0.1);
  EXPECT_NEAR(fit.law.B / truth.B, 1, 0.1);
  EXPECT_LT(fit.max_relative_error, 1e-3);
  // And it predicts a point it was not given.
  EXPECT_NEAR(fit.law.predict(2e6, 5e8) / truth.predict(2e6, 5e8), 1, 1e-3);
}

TEST(ScalingLaw, NoisyPointsStillGiveTheTrendWithItsError) {
  const ScalingLaw truth{1.2, 60, 0.3, 200, 0.35};
  std::vector<ScalingPoint> points;
  int k = 0;
  for (double n : {2e5, 5e5, 1e6, 2e6}) {
    for (double d : {5e5, 1e6, 2e6, 4e6}) {
      const double noise = 1 + 0.01 * std::sin(7.0 * ++k);  // within ±1%
      points.push_back({n, d, truth.predict(n, d) * noise});
    }
  }
  const ScalingFit fit = scaling_law_fit(points);
  EXPECT_LT(fit.rms_log_error, 0.011);
  EXPECT_LT(fit.max_relative_error, 0.03);
  EXPECT_NEAR(fit.law.predict(1e6, 2e6) / truth.predict(1e6, 2e6), 1, 0.02);
}

TEST(ScalingLaw, RefusesFewerThanFiveDistinctPoints) {
  std::vector<ScalingPoint> points;
  for (double n : {1e5, 1e6}) {
    for (double d : {1e6, 1e7}) {
      points.push_back({n, d, 3.0});
      points.push_back({n, d, 3.1});  // seeds of the same (N, D): still four distinct points
    }
  }
  try {
    scaling_law_fit(points);
    FAIL() << "expected a refusal";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("at least 5 distinct"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("there are 4"), std::string::npos) << e.what();
  }
  EXPECT_THROW(scaling_law_fit({{1e5, 1e6, -1}, {2e5, 1e6, 3}, {3e5, 1e6, 3}, {4e5, 1e6, 3}, {5e5, 1e6, 3}}),
               UsageError);
}

}  // namespace
}  // namespace tfw::analysis
