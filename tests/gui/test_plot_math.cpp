// The plot widget's arithmetic (workbench/common/plot_math.h) against hand-computed values:
// tick positions and labels, axis fitting on log axes, min/max downsampling that keeps every
// column's extremes, bias-corrected EMA, nearest-point search in screen space.
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "workbench/common/plot_math.h"

namespace tfw::gui {
namespace {

std::vector<std::string> labels(const std::vector<Tick>& ticks, bool major_only = false) {
  std::vector<std::string> out;
  for (const Tick& t : ticks) {
    if (!major_only || t.major) out.push_back(t.label);
  }
  return out;
}

TEST(PlotMath, LinearTicksStepOneTwoFive) {
  AxisMap axis{0, 1, false};
  EXPECT_EQ(labels(axis_ticks(axis, 5)), (std::vector<std::string>{"0", "0.2", "0.4", "0.6", "0.8", "1"}));
  AxisMap wide{-3, 47, false};  // raw step 10 -> 10
  EXPECT_EQ(labels(axis_ticks(wide, 5)), (std::vector<std::string>{"0", "10", "20", "30", "40"}));
  AxisMap flops{0, 1.9e13, false};  // raw 3.8e12 -> 5e12
  EXPECT_EQ(labels(axis_ticks(flops, 5)), (std::vector<std::string>{"0", "5e12", "1e13", "1.5e13"}));
  // Issue 13: one format per axis, never "50000" beside "1e+05".
  AxisMap steps{0, 1.6e5, false};  // raw 3.2e4 -> 5e4
  EXPECT_EQ(labels(axis_ticks(steps, 5)), (std::vector<std::string>{"0", "5e4", "1e5", "1.5e5"}));
  AxisMap small{0, 0.004, false};  // raw 8e-4 -> 1e-3
  EXPECT_EQ(labels(axis_ticks(small, 4)), (std::vector<std::string>{"0", "0.001", "0.002", "0.003", "0.004"}));
  AxisMap tiny{0, 4e-4, false};
  EXPECT_EQ(labels(axis_ticks(tiny, 4)), (std::vector<std::string>{"0", "1e-4", "2e-4", "3e-4", "4e-4"}));
}

TEST(PlotMath, LogTicksAreDecadesWithTwoAndFiveInsideShortRanges) {
  AxisMap six{0, 6, true};  // 1 .. 1e6
  EXPECT_EQ(labels(axis_ticks(six, 10)), (std::vector<std::string>{"1e0", "1e1", "1e2", "1e3", "1e4", "1e5", "1e6"}));
  AxisMap one{0, 1, true};  // 1 .. 10
  EXPECT_EQ(labels(axis_ticks(one, 6)), (std::vector<std::string>{"1", "2", "5", "10"}));
  EXPECT_EQ(labels(axis_ticks(one, 6), true), (std::vector<std::string>{"1", "10"}));
  // Under one decade (a loss from 1.5 to 5 on log y): 1-2-5 steps in data units, not the
  // one or two decade marks that fall inside.
  AxisMap loss{std::log10(1.5), std::log10(5.0), true};
  EXPECT_EQ(labels(axis_ticks(loss, 6)), (std::vector<std::string>{"2", "3", "4", "5"}));
}

TEST(PlotMath, TheLegendGoesWhereItHidesTheFewestPoints) {
  // A curve rising to the top right (the FLOPs view): the legend leaves the top right.
  std::vector<std::pair<double, double>> rising;
  for (int i = 0; i <= 100; ++i) rising.emplace_back(i / 100.0, (i / 100.0) * (i / 100.0));
  EXPECT_EQ(least_covered_corner(rising, 0.3, 0.2), 1);  // top left is empty
  // Loss curves falling from the top left: top right is free, and preferred on ties.
  std::vector<std::pair<double, double>> falling;
  for (int i = 0; i <= 100; ++i) falling.emplace_back(i / 100.0, 1.0 / (1 + 10 * i / 100.0));
  EXPECT_EQ(least_covered_corner(falling, 0.3, 0.2), 0);
  EXPECT_EQ(least_covered_corner({}, 0.3, 0.2), 0);
}

TEST(PlotMath, AxisFitSkipsValuesALogAxisCannotShow) {
  std::vector<double> values = {-5, 0, 10, 1000};
  AxisMap axis;
  ASSERT_TRUE(axis_fit({&values}, true, 0.0, axis));
  EXPECT_DOUBLE_EQ(axis.lo, 1.0);
  EXPECT_DOUBLE_EQ(axis.hi, 3.0);
  ASSERT_TRUE(axis_fit({&values}, false, 0.1, axis));
  EXPECT_DOUBLE_EQ(axis.lo, -5 - 100.5);
  EXPECT_DOUBLE_EQ(axis.hi, 1000 + 100.5);
  EXPECT_NEAR(axis.unit(-5), 0.1 / 1.2, 1e-15);
  std::vector<double> none = {-1, 0};
  EXPECT_FALSE(axis_fit({&none}, true, 0.0, axis));
  std::vector<double> flat = {2, 2};
  ASSERT_TRUE(axis_fit({&flat}, false, 0.0, axis));  // a flat line gets a unit-wide range
  EXPECT_DOUBLE_EQ(axis.lo, 1.5);
  EXPECT_DOUBLE_EQ(axis.hi, 2.5);
}

TEST(PlotMath, DownsamplingKeepsEveryColumnsExtremesAndEnds) {
  const std::size_t n = 100000;
  const int columns = 500;
  std::vector<double> x(n), y(n);
  std::mt19937 random(3);
  std::normal_distribution<double> noise(0, 1);
  for (std::size_t i = 0; i < n; ++i) {
    x[i] = static_cast<double>(i);
    y[i] = std::exp(-static_cast<double>(i) / 20000.0) + 0.05 * noise(random);
  }
  y[54321] = 100;  // a spike and a dip must survive
  y[70001] = -100;
  std::vector<std::size_t> kept = downsample_minmax(x, y, 0, static_cast<double>(n - 1), false, columns);
  ASSERT_LE(kept.size(), static_cast<std::size_t>(2 * columns + 2));
  EXPECT_GE(kept.size(), static_cast<std::size_t>(columns));
  EXPECT_EQ(kept.front(), 0u);
  EXPECT_EQ(kept.back(), n - 1);
  EXPECT_TRUE(std::is_sorted(kept.begin(), kept.end()));
  EXPECT_TRUE(std::adjacent_find(kept.begin(), kept.end()) == kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), 54321u), kept.end());
  EXPECT_NE(std::find(kept.begin(), kept.end(), 70001u), kept.end());
  // Per pixel column: the kept points have the full data's minimum and maximum.
  const double scale = columns / static_cast<double>(n - 1);
  std::vector<double> full_min(columns + 1, 1e300), full_max(columns + 1, -1e300), kept_min = full_min,
                                                                                   kept_max = full_max;
  for (std::size_t i = 0; i < n; ++i) {
    const auto c = static_cast<std::size_t>(std::floor(x[i] * scale));
    full_min[c] = std::min(full_min[c], y[i]);
    full_max[c] = std::max(full_max[c], y[i]);
  }
  for (std::size_t i : kept) {
    const auto c = static_cast<std::size_t>(std::floor(x[i] * scale));
    kept_min[c] = std::min(kept_min[c], y[i]);
    kept_max[c] = std::max(kept_max[c], y[i]);
  }
  EXPECT_EQ(kept_min, full_min);
  EXPECT_EQ(kept_max, full_max);
}

TEST(PlotMath, DownsamplingAVisibleWindowKeepsOnePointEitherSide) {
  std::vector<double> x = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, y(10, 1.0);
  EXPECT_EQ(downsample_minmax(x, y, 3.5, 6.5, false, 100), (std::vector<std::size_t>{3, 4, 5, 6, 7}));
  EXPECT_TRUE(downsample_minmax({}, {}, 0, 1, false, 100).empty());
}

TEST(PlotMath, EmaIsBiasCorrected) {
  // w = 0.5: s = 0.5, 1.25, 2.125 over norms 0.5, 0.75, 0.875.
  std::vector<double> smoothed = ema({1, 2, 3}, 0.5);
  EXPECT_DOUBLE_EQ(smoothed[0], 1.0);
  EXPECT_DOUBLE_EQ(smoothed[1], 1.25 / 0.75);
  EXPECT_DOUBLE_EQ(smoothed[2], 2.125 / 0.875);
  EXPECT_EQ(ema({1, 2, 3}, 0.0), (std::vector<double>{1, 2, 3}));
  std::vector<double> with_nan = ema({2, std::nan(""), 2}, 0.9);
  EXPECT_DOUBLE_EQ(with_nan[1], 2.0);  // a NaN point shows the running value
  EXPECT_DOUBLE_EQ(with_nan[2], 2.0);
}

TEST(PlotMath, SeedBandIsMeanMinMaxWhereEverySeedHasAValue) {
  // A: (0,4) (10,2) (20,1); B: (5,3) (15,3) (25,0). Both cover [5, 20]; the grid is 5, 10, 15, 20.
  // A at 5 = 3 and at 15 = 1.5; B at 10 = 3 and at 20 = 3 + (20-15)/(25-15)·(0-3) = 1.5.
  const std::vector<double> ax = {0, 10, 20}, ay = {4, 2, 1}, bx = {5, 15, 25}, by = {3, 3, 0};
  const SeedBand band = seed_band({{&ax, &ay}, {&bx, &by}});
  EXPECT_EQ(band.x, (std::vector<double>{5, 10, 15, 20}));
  EXPECT_EQ(band.mean, (std::vector<double>{3, 2.5, 2.25, 1.25}));
  EXPECT_EQ(band.low, (std::vector<double>{3, 2, 1.5, 1}));
  EXPECT_EQ(band.high, (std::vector<double>{3, 3, 3, 1.5}));
  EXPECT_EQ(band.count, (std::vector<int>{2, 2, 2, 2}));
  // A NaN evaluation leaves its run out of that x only.
  const std::vector<double> cy = {4, std::nan(""), 1};
  const SeedBand with_nan = seed_band({{&ax, &ay}, {&ax, &cy}});
  EXPECT_EQ(with_nan.mean, (std::vector<double>{4, 2, 1}));
  EXPECT_EQ(with_nan.count, (std::vector<int>{2, 1, 2}));
  // Runs that share no span, or an empty run, give no band.
  const std::vector<double> late = {30, 40}, none;
  EXPECT_TRUE(seed_band({{&ax, &ay}, {&late, &late}}).x.empty());
  EXPECT_TRUE(seed_band({{&ax, &ay}, {&none, &none}}).x.empty());
  EXPECT_TRUE(seed_band({}).x.empty());
}

TEST(PlotMath, InterpolateInsideAndOutsideByTheEdgeRule) {
  const std::vector<double> xs = {20, 21, 22, 24}, ys = {5120, 5376, 5632, 6400};
  for (Outside o : {Outside::nan, Outside::hold, Outside::extend}) {
    EXPECT_EQ(interpolate(xs, ys, 21, o), 5376);     // a point's own y
    EXPECT_EQ(interpolate(xs, ys, 23, o), 6016);     // halfway between 5632 and 6400
    EXPECT_EQ(interpolate(xs, ys, 21.25, o), 5440);  // 5376 + 0.25 * 256
    EXPECT_TRUE(std::isnan(interpolate({}, {}, 1, o)));
  }
  EXPECT_TRUE(std::isnan(interpolate(xs, ys, 19, Outside::nan)));
  EXPECT_TRUE(std::isnan(interpolate(xs, ys, 25, Outside::nan)));
  EXPECT_EQ(interpolate(xs, ys, 19, Outside::hold), 5120);
  EXPECT_EQ(interpolate(xs, ys, 25, Outside::hold), 6400);
  // Before the first point, along the first segment: from (21, 5376) and (22, 5632) back to 20.
  EXPECT_EQ(interpolate({21, 22}, {5376, 5632}, 20, Outside::extend), 5120);
  EXPECT_EQ(interpolate(xs, ys, 26, Outside::extend), 7168);  // 6400 + 2 * 384
  EXPECT_EQ(interpolate({3}, {7}, 9, Outside::extend), 7);    // one point holds
  // The shorter vector bounds the points; equal x take the first one's y.
  EXPECT_EQ(interpolate({1, 2, 3}, {10, 20}, 3, Outside::hold), 20);
  EXPECT_EQ(interpolate({1, 2, 2, 3}, {10, 20, 30, 40}, 2, Outside::nan), 20);
}

TEST(PlotMath, NearestPointInScreenSpace) {
  std::vector<double> x = {0, 1, 2}, y = {0, 1, 4};
  AxisMap ax{0, 2, false}, ay{0, 4, false};
  // 100 px per x unit, 50 px per y unit: the points sit at (0,0), (100,50), (200,200).
  EXPECT_EQ(nearest_point(x, y, ax, ay, 100, 50, 105, 45, 10), 1);
  EXPECT_EQ(nearest_point(x, y, ax, ay, 100, 50, 195, 190, 20), 2);
  EXPECT_EQ(nearest_point(x, y, ax, ay, 100, 50, 150, 125, 10), -1);
  AxisMap log_x{0, 2, true};  // 1 .. 100: x = 10 sits mid-axis
  std::vector<double> lx = {1, 10, 100}, ly = {0, 0, 0};
  EXPECT_EQ(nearest_point(lx, ly, log_x, ay, 100, 50, 101, 0, 5), 1);
}

}  // namespace
}  // namespace tfw::gui
