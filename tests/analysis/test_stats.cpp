// The t distribution, mean intervals and paired differences against values computed by hand
// (closed forms of the t CDF for 1 and 2 degrees of freedom, table quantiles) and against
// Python's scipy.stats (scipy in the project's .venv, which scripts/setup installs).
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/stats.h"
#include "engine/core/error.h"

namespace tfw::analysis {
namespace {

const double kPi = 3.14159265358979323846;

TEST(StudentT, CdfMatchesTheClosedFormsForOneAndTwoDegreesOfFreedom) {
  for (double t : {-30.0, -3.0, -0.7, 0.0, 0.25, 1.0, 4.0, 100.0}) {
    // df = 1 is the Cauchy distribution; df = 2 has F(t) = 1/2 + t / (2 sqrt(2 + t^2)).
    EXPECT_NEAR(student_t_cdf(t, 1), 0.5 + std::atan(t) / kPi, 1e-13) << t;
    EXPECT_NEAR(student_t_cdf(t, 2), 0.5 + t / (2 * std::sqrt(2 + t * t)), 1e-13) << t;
  }
}

TEST(StudentT, QuantilesMatchTheTable) {
  // Two-sided 95% critical values, t_{0.975, df}.
  EXPECT_NEAR(student_t_quantile(0.975, 1), 12.706204736174707, 1e-9);
  EXPECT_NEAR(student_t_quantile(0.975, 2), 4.302652729749464, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 4), 2.7764451051977934, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 9), 2.2621571628540993, 1e-10);
  EXPECT_NEAR(student_t_quantile(0.975, 30), 2.0422724563012373, 1e-10);
  // Closed form for df = 1: tan(pi (p - 1/2)); symmetry.
  EXPECT_NEAR(student_t_quantile(0.9, 1), std::tan(kPi * 0.4), 1e-9);
  // df = 3: F(t) = 1/2 + (t / (sqrt3 (1 + t^2 / 3)) + atan(t / sqrt3)) / pi, at the quantile.
  for (double p : {0.8, 0.975, 0.995}) {
    const double t = student_t_quantile(p, 3);
    EXPECT_NEAR(0.5 + (t / (std::sqrt(3.0) * (1 + t * t / 3)) + std::atan(t / std::sqrt(3.0))) / kPi, p, 1e-14) << p;
  }
  EXPECT_DOUBLE_EQ(student_t_quantile(0.025, 4), -student_t_quantile(0.975, 4));
  EXPECT_TRUE(std::isnan(student_t_quantile(1.0, 3)));
}

TEST(MeanInterval, ThreeValuesByHand) {
  // {1, 2, 3}: mean 2, sd 1, half width t_{0.975,2} / sqrt(3).
  const MeanInterval m = mean_interval({1, 2, 3});
  EXPECT_EQ(m.n, 3u);
  EXPECT_DOUBLE_EQ(m.mean, 2);
  EXPECT_NEAR(m.sd, 1, 1e-15);
  EXPECT_NEAR(m.half_width, 4.302652729749464 / std::sqrt(3.0), 1e-10);
  EXPECT_NEAR(m.low, 2 - 2.4841377118437, 1e-10);
  EXPECT_TRUE(m.has_interval());
}

TEST(MeanInterval, OneValueHasNoInterval) {
  const MeanInterval m = mean_interval({1.25});
  EXPECT_DOUBLE_EQ(m.mean, 1.25);
  EXPECT_FALSE(m.has_interval());
  EXPECT_TRUE(std::isnan(m.half_width));
  EXPECT_THROW(mean_interval({}), UsageError);
}

TEST(PairedDifference, ByHand) {
  // Differences -0.1, -0.05, -0.2: mean -0.116667, sd sqrt(0.0116667 / 2) = 0.0763763.
  const PairedDifference d = paired_difference({1.0, 1.2, 1.1}, {1.1, 1.25, 1.3});
  EXPECT_NEAR(d.difference.mean, -0.35 / 3, 1e-12);
  EXPECT_NEAR(d.difference.sd, std::sqrt(0.035 / 6), 1e-12);
  EXPECT_NEAR(d.difference.half_width, 4.302652729749464 * std::sqrt(0.035 / 6) / std::sqrt(3.0), 1e-10);
  EXPECT_EQ(d.negative, 3u);
  EXPECT_EQ(d.positive, 0u);
  EXPECT_THROW(paired_difference({1, 2}, {1}), UsageError);
  EXPECT_THROW(paired_difference({}, {}), UsageError);
}

// scipy.stats as an independent reference.
std::string python(const std::string& code) {
  std::string command = std::string(TFW_PYTHON) + " -c \"" + code + "\" 2>/dev/null";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return "";
  std::string out;
  char buffer[256];
  while (fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  return pclose(pipe) == 0 ? out : "";
}

TEST(StudentT, AgreesWithScipy) {
  const std::string out = python(
      "import scipy.stats as s\n"
      "for df in (1, 2, 3, 5, 7.5, 20, 200):\n"
      "  print(df, s.t.ppf(0.975, df), s.t.ppf(0.995, df), s.t.cdf(1.3, df), s.t.cdf(-4.2, df))\n"
      "x = [1.5262, 1.5301, 1.5198, 1.5335]; r = s.ttest_1samp(x, 0).confidence_interval(0.95)\n"
      "print(r.low, r.high)");
  ASSERT_FALSE(out.empty()) << "scipy is missing from " TFW_PYTHON ": scripts/setup installs it into .venv";
  std::istringstream in(out);
  for (int row = 0; row < 7; ++row) {
    double df, q975, q995, c1, c2;
    ASSERT_TRUE(in >> df >> q975 >> q995 >> c1 >> c2);
    EXPECT_NEAR(student_t_quantile(0.975, df), q975, 1e-9 * q975) << df;
    // scipy's ppf is itself accurate to about 2e-9 in the far tail (at df = 3 it is 1.7e-9
    // off the closed form that the test above checks to 1e-14).
    EXPECT_NEAR(student_t_quantile(0.995, df), q995, 5e-9 * q995) << df;
    EXPECT_NEAR(student_t_cdf(1.3, df), c1, 1e-12) << df;
    EXPECT_NEAR(student_t_cdf(-4.2, df), c2, 1e-12) << df;
  }
  double low, high;
  ASSERT_TRUE(in >> low >> high);
  const MeanInterval m = mean_interval({1.5262, 1.5301, 1.5198, 1.5335});
  EXPECT_NEAR(m.low, low, 1e-12);
  EXPECT_NEAR(m.high, high, 1e-12);
}

}  // namespace
}  // namespace tfw::analysis
