// The trainer reads a step's loss and gradient norm back from the device every
// train.log_every steps (engine/train/trainer.cpp): the records are the same, bit for bit, as with a
// read-back after every step; a non-finite loss is recorded at its own step, and "stop" stops
// at the next read-back, train.log_every - 1 steps late at most, as docs/configs.md says.
#include <cmath>
#include <tuple>

#include <gtest/gtest.h>

#include "engine/core/error.h"
#include "engine/train/trainer.h"
#include "tests/engine/trainer_test_support.h"
#include "tests/support.h"

namespace tfw {
namespace test_readback {

using namespace trainer_test;

// Every value the trainer gives its observers, exactly (not metrics.jsonl's 9 digits), but the
// wall times, which differ from run to run.
struct Recorder : RunObserver {
  std::vector<std::tuple<std::string, std::int64_t, std::int64_t, double, double>> metrics;
  std::vector<std::tuple<std::int64_t, double, double, double, double, bool>> steps;
  std::vector<std::pair<std::string, std::int64_t>> events;
  void metric(const char* key, std::int64_t step, std::int64_t tokens, double flops, double, double value) override {
    metrics.emplace_back(key, step, tokens, flops, value);
  }
  void event(const std::string& kind, std::int64_t step, const std::string&) override {
    if (kind != "provenance") events.emplace_back(kind, step);
  }
  void progress(const TrainProgress& p) override {
    steps.emplace_back(p.step, p.loss, p.grad_norm, p.lr, p.val_loss, p.evaluated);
  }
};

// NaN == NaN, for values that are not finite on purpose.
bool same(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void expect_same(const Recorder& a, const Recorder& b) {
  ASSERT_EQ(a.metrics.size(), b.metrics.size());
  for (std::size_t i = 0; i < a.metrics.size(); ++i) {
    const auto& [key, step, tokens, flops, value] = a.metrics[i];
    const auto& [key_b, step_b, tokens_b, flops_b, value_b] = b.metrics[i];
    EXPECT_EQ(key, key_b) << "record " << i;
    EXPECT_EQ(step, step_b) << key;
    EXPECT_EQ(tokens, tokens_b) << key;
    EXPECT_EQ(flops, flops_b) << key;
    EXPECT_TRUE(same(value, value_b)) << key << " at step " << step << ": " << value << " against " << value_b;
  }
  ASSERT_EQ(a.steps.size(), b.steps.size());
  for (std::size_t i = 0; i < a.steps.size(); ++i) {
    const auto& [step, loss, norm, lr, val, evaluated] = a.steps[i];
    const auto& [step_b, loss_b, norm_b, lr_b, val_b, evaluated_b] = b.steps[i];
    EXPECT_EQ(step, step_b);
    EXPECT_TRUE(same(loss, loss_b) && same(norm, norm_b) && lr == lr_b && same(val, val_b)) << "step " << step;
    EXPECT_EQ(evaluated, evaluated_b) << "step " << step;
  }
  EXPECT_EQ(a.events, b.events);
}

Recorder run_with(const std::string& name, const std::vector<std::string>& overrides) {
  Recorder recorder;
  TrainOptions options = options_for(name);
  options.observer = &recorder;
  train_run(test::plugins(), config_of(kTokenformer, overrides), options);
  return recorder;
}

// 30 steps: an evaluation and a checkpoint at 25 (kTraining), neither a multiple of 10 or 7.
TEST(ReadBack, EveryStepsRecordsAreTheSameWhetherReadBackEveryStepOrEveryTenOrSeven) {
  hold_threads_fixed();
  const Recorder every = run_with("readback-1", {"train.max_steps=30", "train.log_every=1"});
  ASSERT_EQ(every.steps.size(), 30u);
  for (std::size_t i = 0; i < every.steps.size(); ++i) EXPECT_EQ(std::get<0>(every.steps[i]), i + 1);
  EXPECT_TRUE(std::get<5>(every.steps[24])) << "step 25 evaluated";
  SCOPED_TRACE("log_every = 10");
  expect_same(every, run_with("readback-10", {"train.max_steps=30", "train.log_every=10"}));
  SCOPED_TRACE("log_every = 7");
  expect_same(every, run_with("readback-7", {"train.max_steps=30", "train.log_every=7"}));
}

// Values of 1e30 overflow the attention scores: every loss is not finite. "skip" records each
// at its own step, the same with any read-back interval; "stop" records the first, at step 0,
// and stops at the read-back after step 10 (log_every = 10) or 1, and no train/* value of a
// step after it is recorded.
TEST(ReadBack, ANonFiniteLossIsRecordedAtItsStepAndStopsAtTheNextReadBack) {
  const std::vector<std::string> nan = {"train.max_steps=12", "model.init.value_std=1e30"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), nan.begin(), nan.end());
    return more;
  };
  const Recorder skip_1 = run_with("nan-skip-1", with({"train.nan_policy=skip", "train.log_every=1"}));
  const Recorder skip_10 = run_with("nan-skip-10", with({"train.nan_policy=skip", "train.log_every=10"}));
  expect_same(skip_1, skip_10);
  std::vector<std::pair<std::string, std::int64_t>> nan_events;
  for (const auto& e : skip_10.events) {
    if (e.first == "nan") nan_events.push_back(e);
  }
  ASSERT_EQ(nan_events.size(), 12u);
  EXPECT_EQ(nan_events.front().second, 0);
  EXPECT_EQ(nan_events.back().second, 11);
  for (const auto& [every, read_at] : {std::pair{1, 1}, std::pair{10, 10}, std::pair{4, 4}}) {
    SCOPED_TRACE(fmt::format("log_every = {}", every));
    Recorder recorder;
    TrainOptions options = options_for(fmt::format("nan-stop-{}", every));
    options.observer = &recorder;
    try {
      train_run(test::plugins(), config_of(kTokenformer, with({fmt::format("train.log_every={}", every)})), options);
      ADD_FAILURE() << "a non-finite loss did not stop the run";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("loss is nan at step 0"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(fmt::format("read back after step {}", read_at)), std::string::npos)
          << e.what();
    }
    ASSERT_EQ(recorder.metrics.size(), 1u);
    EXPECT_EQ(std::get<0>(recorder.metrics[0]), "event/nonfinite_loss");
    EXPECT_EQ(std::get<1>(recorder.metrics[0]), 0);
    EXPECT_TRUE(recorder.steps.empty());
  }
}

}  // namespace test_readback
}  // namespace tfw
