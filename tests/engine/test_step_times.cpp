// StepTimes (engine/train/step_times.h): the totals the summary reads and the window the
// progress line reads, against hand-computed values.
#include <cmath>

#include <gtest/gtest.h>

#include "engine/train/step_times.h"

TEST(StepTimes, TotalsAndTheRecentWindowByHand) {
  tfw::StepTimes times;
  EXPECT_EQ(times.tokens_per_second(1000, true), 0.0);  // nothing yet: no division by zero
  EXPECT_EQ(times.eta_seconds(10), 0.0);
  // A slow first step (1 s), then 25 steps of 0.1 s with 0.02 s of data each.
  times.add(1.0, 0.5);
  for (int i = 0; i < 25; ++i) times.add(0.1, 0.02);
  EXPECT_EQ(times.steps(), 26);
  EXPECT_NEAR(times.step_total(), 1.0 + 25 * 0.1, 1e-12);
  EXPECT_NEAR(times.data_total(), 0.5 + 25 * 0.02, 1e-12);
  EXPECT_NEAR(times.step_mean(), 3.5 / 26, 1e-12);
  // The window holds the last 20 steps only: the slow first one is gone.
  EXPECT_NEAR(times.recent_step_mean(), 0.1, 1e-12);
  EXPECT_NEAR(times.recent_wall_mean(), 0.12, 1e-12);
  EXPECT_NEAR(times.tokens_per_second(1000, true), 10000.0, 1e-6);
  EXPECT_NEAR(times.tokens_per_second(1000, false), 1000.0 * 26 / 3.5, 1e-6);
  EXPECT_NEAR(times.mfu(1e9, 1e11, true), 0.1, 1e-12);  // 1e9 FLOPs in 0.1 s of a 1e11 FLOP/s peak
  // Issue 51: never above 1 (a peak probed beside busy processes gave 223%), and without a peak
  // (not measured) not a number: NaN, never a figure known to be wrong.
  EXPECT_NEAR(times.mfu(9.9e9, 1e11, true), 0.99, 1e-12);
  EXPECT_TRUE(std::isnan(times.mfu(1.0001e10, 1e11, true)));
  EXPECT_TRUE(std::isnan(times.mfu(1e9, 0, true)));
  EXPECT_TRUE(std::isnan(tfw::StepTimes().mfu(1e9, 1e11, true)));  // no step yet
  EXPECT_NEAR(times.eta_seconds(50), 50 * 0.12, 1e-9);
  EXPECT_EQ(times.eta_seconds(-3), 0.0);
}

TEST(StepTimes, AWindowNotYetFullAveragesWhatItHas) {
  tfw::StepTimes times;
  times.add(0.3, 0.0);
  times.add(0.1, 0.1);
  EXPECT_NEAR(times.recent_step_mean(), 0.2, 1e-12);
  EXPECT_NEAR(times.recent_wall_mean(), 0.25, 1e-12);
}

// A read-back's wait for an asynchronous device is the pending steps' own work: it counts as
// step time, in the totals and in the window (on its most recent step), and not before a step.
TEST(StepTimes, AReadBacksWaitCountsAsStepTime) {
  tfw::StepTimes times;
  times.add_wait(5.0);  // nothing to wait for yet: ignored
  EXPECT_EQ(times.step_total(), 0.0);
  for (int i = 0; i < 10; ++i) times.add(0.01, 0.0);  // launches only
  times.add_wait(0.9);                                // the device finishes the ten steps
  EXPECT_NEAR(times.step_total(), 1.0, 1e-12);
  EXPECT_NEAR(times.step_mean(), 0.1, 1e-12);
  EXPECT_NEAR(times.recent_step_mean(), 0.1, 1e-12);
  EXPECT_NEAR(times.tokens_per_second(1000, false), 10000.0, 1e-6);
  EXPECT_EQ(times.data_total(), 0.0);
}
