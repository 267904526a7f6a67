// Reading curves at a budget, on synthetic curves with known answers: y = 5 - 0.5 ln x is a
// straight line in log x, so interpolation between its points is exact.
#include <cmath>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/curves.h"
#include "engine/core/error.h"

namespace tfw::analysis {
namespace {

double line(double x) { return 5 - 0.5 * std::log(x); }

std::vector<CurvePoint> line_curve() {
  std::vector<CurvePoint> curve;
  for (double x : {1e12, 1e10, 1e11, 1e13}) curve.push_back({x, line(x)});  // out of order on purpose
  return curve;
}

TEST(Curves, ValueAtEqualComputeIsExactOnALogLinearCurve) {
  const auto curve = line_curve();
  for (double x : {1e10, 3.3e10, std::pow(10.0, 11.5), 9.99e12, 1e13}) {
    EXPECT_NEAR(value_at(curve, x), line(x), 1e-12) << x;
  }
}

TEST(Curves, ValueAtOutsideTheCurveIsRefused) {
  const auto curve = line_curve();
  EXPECT_THROW(value_at(curve, 9e9), UsageError);
  EXPECT_THROW(value_at(curve, 2e13), UsageError);
  EXPECT_THROW(value_at({}, 1e10), UsageError);
}

TEST(Curves, FirstReachingInvertsTheCurve) {
  const auto curve = line_curve();
  // line(x) = target  <=>  x = exp((5 - target) / 0.5).
  for (double target : {-7.0, -8.0, -9.5, line(1e11)}) {
    const auto x = first_reaching(curve, target);
    ASSERT_TRUE(x.has_value()) << target;
    EXPECT_NEAR(*x / std::exp((5 - target) / 0.5), 1, 1e-12) << target;
  }
  EXPECT_DOUBLE_EQ(*first_reaching(curve, 100), 1e10);     // already there at the first point
  EXPECT_FALSE(first_reaching(curve, line(1e13) - 1e-9));  // never reached
}

TEST(Curves, AGrowthJumpCountsTheLaterPointAndTheFirstCrossing) {
  // A lineage: the parent ends at (1e12, 2.0); the grown run starts there at 2.3 (a growth
  // that is not function-preserving) and goes down to 1.7.
  const std::vector<CurvePoint> curve = {{1e11, 2.5}, {1e12, 2.0}, {1e12, 2.3}, {1e13, 1.7}};
  EXPECT_DOUBLE_EQ(value_at(curve, 1e12), 2.3);
  EXPECT_NEAR(value_at(curve, std::sqrt(1e12 * 1e13)), 2.0, 1e-12);
  // 2.0 is first reached by the parent, at 1e12, not by the grown run later.
  EXPECT_DOUBLE_EQ(*first_reaching(curve, 2.0), 1e12);
  EXPECT_NEAR(*first_reaching(curve, 1.9) / std::pow(10.0, 12 + 0.4 / 0.6), 1, 1e-12);
}

}  // namespace
}  // namespace tfw::analysis
