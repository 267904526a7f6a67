// Growing a model while it trains (train.growth, train.growth_repeat): the exact growth keeps
// the loss and counts FLOPs per stage, a run stopped before, after or in the middle of a
// growth (msg's ramp) resumes exactly, repeated growth, and events refused before training.
#include <cstdint>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "engine/train/observer.h"
#include "engine/config/schedule.h"
#include "engine/train/trainer.h"
#include "tests/engine/trainer_test_support.h"
#include "tests/support.h"

namespace tfw {
namespace test_online_growth {

using namespace trainer_test;

// Keeps the events of one kind, as "STEP:PAYLOAD".
class EventsOf : public RunObserver {
 public:
  explicit EventsOf(std::string kind) : kind_(std::move(kind)) {}
  void event(const std::string& kind, std::int64_t step, const std::string& payload) override {
    if (kind == kind_) events.push_back(fmt::format("{}:{}", step, payload));
  }
  std::vector<std::string> events;

 private:
  std::string kind_;
};

// Online growth: kTokenformer (n_attn 32, n_ffn 64) grown at step 10.
const std::vector<std::string> kGrowAt10 = {"train.max_steps=30", "train.checkpoint_every=1000"};

std::string with_growth(const std::string& options) {
  return std::string(kTokenformer) + R"(
[[train.growth]]
at_step = 10
method = "pattention_grow"
to = { n_attn = 48, n_ffn = 96 }
)" + options;
}

TEST(OnlineGrowth, ExactGrowthKeepsTheLossAndCountsFlopsPerStage) {
  RunConfig config = config_of(with_growth(""), kGrowAt10);
  TrainOptions options = options_for("grow-online");
  EventsOf growth("growth");
  options.observer = &growth;
  TrainSummary summary = train_run(test::plugins(), config, options);
  const std::vector<std::string>& events = growth.events;
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].rfind("10:{\"method\":\"pattention_grow\"", 0), 0u) << events[0];
  std::vector<double> before = logged(options.run_dir, "growth/loss_before");
  std::vector<double> after = logged(options.run_dir, "growth/loss_after");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_NEAR(after[0], before[0], 1e-5);  // zero keys, fixed tau: the function is kept
  RunConfig grown = config_of(with_growth(""), {"model.n_attn=48", "model.n_ffn=96", "train.max_steps=30"});
  EXPECT_EQ(summary.parameters, grown.model.spec->parameter_count());
  const double small = train_plan(config).flops_per_step, large = train_plan(grown).flops_per_step;
  EXPECT_DOUBLE_EQ(summary.flops, 10 * small + 20 * large);
  EXPECT_EQ(summary.growth_events, 1);
  // The evaluations after the growth at 10 (steps 25 and 30; eval_every 25) say how the
  // appended tokens are used: zero keys at first, moved by 15 and 20 steps of training.
  const std::vector<double> mass = logged(options.run_dir, "token_use/appended_mass");
  ASSERT_EQ(mass.size(), 2u);
  for (double m : mass) {
    EXPECT_GT(m, 0.0);
    EXPECT_LT(m, 1.0 / 3.0);  // 16 of 48 attention and 32 of 96 FFN tokens are new: less than if used alike
  }
  EXPECT_EQ(logged(options.run_dir, "token_use/layers.1.ffn/appended_active").size(), 2u);
  EXPECT_GT(logged(options.run_dir, "token_use/layers.0.q/key_norm_old").at(0), 0.0);
}

TEST(OnlineGrowth, ResumeAfterAndBeforeTheEventContinuesExactly) {
  hold_threads_fixed();
  RunConfig config = config_of(with_growth(""), kGrowAt10);
  TrainOptions straight = options_for("grow-straight");
  train_run(test::plugins(), config, straight);
  const std::vector<double> expected = logged(straight.run_dir, "train/loss");
  ASSERT_EQ(expected.size(), 30u);
  for (std::int64_t stop_at : {5, 20}) {  // before and after the growth event
    SCOPED_TRACE(stop_at);
    TrainOptions interrupted = options_for("grow-interrupted-" + std::to_string(stop_at));
    train_until(config, interrupted, stop_at);
    TrainOptions resumed = resuming(interrupted);
    TrainSummary summary =
        train_run(test::plugins(), train_resume_config(test::plugins(), resumed.run_dir, {}), resumed);
    EXPECT_EQ(summary.steps, 30);
    std::vector<double> got = logged(interrupted.run_dir, "train/loss");
    ASSERT_EQ(got.size(), 30u);
    for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "step " << i + 1;
    EXPECT_EQ(logged(interrupted.run_dir, "growth/loss_after").size(), 1u);
  }
}

// msg grows the Transformer at step 10 in width and depth; its masks ramp over steps 10 to 22.
// The growth keeps the loss, the config carries the ramp, and a run stopped in the middle of
// the ramp resumes exactly.
TEST(OnlineGrowth, MsgRampResumesExactlyMidRamp) {
  hold_threads_fixed();
  const std::string text = std::string(kTransformer) + R"(
[[train.growth]]
at_step = 10
method = "msg"
to = { d = 48, heads = 6, d_ffn = 160, layers = 3 }
options = { ramp_steps = 12, at = "interleave" }
)";
  RunConfig config = config_of(text, kGrowAt10);
  TrainOptions straight = options_for("msg-straight");
  train_run(test::plugins(), config, straight);
  const std::vector<double> expected = logged(straight.run_dir, "train/loss");
  ASSERT_EQ(expected.size(), 30u);
  const std::vector<double> before = logged(straight.run_dir, "growth/loss_before");
  const std::vector<double> after = logged(straight.run_dir, "growth/loss_after");
  ASSERT_EQ(before.size(), 1u);
  EXPECT_NEAR(after[0], before[0], 1e-5);  // c = 0 at the growth: the function is kept
  TrainOptions interrupted = options_for("msg-interrupted");
  train_until(config, interrupted, 15);  // c = 5/12
  TrainOptions resumed = resuming(interrupted);
  const RunConfig resume_config = train_resume_config(test::plugins(), resumed.run_dir, {});
  const toml::table model = resume_config.model.spec->to_toml();
  ASSERT_TRUE(model.contains("msg")) << model;
  EXPECT_EQ(model["msg"]["start_step"].value<std::int64_t>(), 10);
  EXPECT_EQ(model["msg"]["ramp_steps"].value<std::int64_t>(), 12);
  TrainSummary summary = train_run(test::plugins(), resume_config, resumed);
  EXPECT_EQ(summary.steps, 30);
  std::vector<double> got = logged(interrupted.run_dir, "train/loss");
  ASSERT_EQ(got.size(), 30u);
  for (std::size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], expected[i]) << "step " << i + 1;
}

TEST(OnlineGrowth, RepeatedScheduleAddsTokensEveryFSteps) {
  std::string text = std::string(kTokenformer) + R"(
[train.growth_repeat]
every_steps = 5
add_attn = 8
add_ffn = 16
options = { optimizer = "reset", lr_schedule = "restart" }
)";
  RunConfig config = config_of(text, {"train.max_steps=20", "train.checkpoint_every=1000"});
  TrainOptions options = options_for("grow-repeat");
  TrainSummary summary = train_run(test::plugins(), config, options);
  EXPECT_EQ(summary.growth_events, 3);  // steps 5, 10, 15
  RunConfig grown = config_of(kTokenformer, {"model.n_attn=56", "model.n_ffn=112", "train.max_steps=20"});
  EXPECT_EQ(summary.parameters, grown.model.spec->parameter_count());
  // The schedule restarts at 15: warm-up again (10 steps) over the last 5 steps.
  std::vector<double> lr = logged(options.run_dir, "train/lr");
  EXPECT_DOUBLE_EQ(lr[15], 3e-3 * 1 / 10);  // the update of step 15 (0-based) is the first after the restart
}

TEST(OnlineGrowth, BadEventsAreRefusedBeforeTraining) {
  RunConfig impossible = config_of(std::string(kTokenformer) + R"(
[[train.growth]]
at_step = 3
method = "pattention_grow"
to = { d = 64 }
)",
                                   {"train.max_steps=10"});
  try {
    train_run(test::plugins(), impossible, options_for("grow-bad"));
    FAIL() << "expected a UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("pattention_grow keeps d"), std::string::npos) << e.what();
  }
  EXPECT_THROW(config_of(with_growth(""), {"train.max_flops=1e9"}), UsageError);
  EXPECT_THROW(config_of(std::string(kTokenformer) + "[[train.growth]]\nat_step = 3\n", {"train.max_steps=10"}),
               UsageError);  // no method
}

}  // namespace test_online_growth
}  // namespace tfw
