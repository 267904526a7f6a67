// The plan of a batch's run (runner/batch_plan.h): the `tfw` steps for each state a run can
// be in, checked argument by argument, without an executor, a store or a process.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "runner/batch_plan.h"
#include "tests/plugin_registry.h"

namespace tfw::runner {
namespace {

using Argv = std::vector<std::string>;

const Experiment& tiny() {
  static const Experiment experiment =
      experiment_load(test::test_plugins(), TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml");
  return experiment;
}

const ExperimentRun& run_named(const std::string& name) {
  for (const ExperimentRun& run : tiny().runs) {
    if (run.name == name) return run;
  }
  throw std::logic_error("no run " + name);
}

BatchSettings settings() { return {"/h", "/h/experiments/tiny", {}, false}; }

std::vector<StepKind> kinds(const RunPlan& plan) {
  std::vector<StepKind> out;
  for (const PlannedStep& step : plan.steps) out.push_back(step.kind);
  return out;
}

TEST(BatchPlan, ARootWithoutARecordTrainsFromItsGeneratedConfig) {
  const RunPlan plan = batch_plan_run(tiny(), run_named("small"), {}, settings());
  ASSERT_EQ(kinds(plan), std::vector<StepKind>{StepKind::train});
  EXPECT_EQ(plan.config_path, "/h/experiments/tiny/small.toml");
  EXPECT_EQ(plan.steps[0].argv, (Argv{"train", "/h/experiments/tiny/small.toml", "--name", "small", "--experiment",
                                      "tiny", "--home", "/h"}));
  EXPECT_EQ(plan.note, "");
}

TEST(BatchPlan, ARunWithACheckpointResumesAsTheSameRecordAndSaysSo) {
  RunFacts facts;
  facts.record = RunRecord{};
  facts.record->id = 42;
  facts.record->status = RunStatus::killed;
  facts.has_checkpoint = true;
  const RunPlan plan = batch_plan_run(tiny(), run_named("grown"), facts, settings());
  ASSERT_EQ(kinds(plan), std::vector<StepKind>{StepKind::resume});
  EXPECT_EQ(plan.steps[0].argv, (Argv{"train", "--resume", "42", "--home", "/h"}));
  EXPECT_EQ(plan.note, "grown: killed before, resuming");
  // A record without a checkpoint starts again (tfw train replaces the record).
  facts.has_checkpoint = false;
  facts.parent_checkpoint = "/h/runs/tiny/small/checkpoints/step-00000020.safetensors";
  EXPECT_EQ(kinds(batch_plan_run(tiny(), run_named("grown"), facts, settings())),
            (std::vector<StepKind>{StepKind::grow, StepKind::train}));
}

TEST(BatchPlan, AStageGrowsFromItsParentsCheckpointThenTrainsFromTheGrownFolder) {
  RunFacts facts;
  facts.parent_checkpoint = "/h/runs/tiny/small/checkpoints/step-00000020.safetensors";
  const RunPlan plan = batch_plan_run(tiny(), run_named("grown"), facts, settings());
  ASSERT_EQ(kinds(plan), (std::vector<StepKind>{StepKind::grow, StepKind::train}));
  EXPECT_EQ(plan.steps[0].argv,
            (Argv{"grow", "--method", "pattention_grow", "--to", "/h/experiments/tiny/grown.toml", "--out",
                  "/h/experiments/tiny/grown-grown", "--home", "/h", "--from", facts.parent_checkpoint}));
  EXPECT_EQ(plan.steps[1].argv, (Argv{"train", "/h/experiments/tiny/grown.toml", "--name", "grown", "--experiment",
                                      "tiny", "--home", "/h", "--init-from", "/h/experiments/tiny/grown-grown"}));
  // Grown already (a batch stopped between the two steps): only the training is left.
  facts.grown = true;
  const RunPlan again = batch_plan_run(tiny(), run_named("grown"), facts, settings());
  ASSERT_EQ(kinds(again), std::vector<StepKind>{StepKind::train});
  EXPECT_EQ(again.steps[0].argv, plan.steps[1].argv);
}

TEST(BatchPlan, AParentWithoutACheckpointIsAnErrorUnlessTheExecutorSchedulesDependencies) {
  try {
    batch_plan_run(tiny(), run_named("grown"), {}, settings());
    FAIL() << "planned a growth from nothing";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "grown: its parent small has no checkpoint to grow from");
  }
  BatchSettings cluster = settings();
  cluster.schedules_dependencies = true;
  const RunPlan plan = batch_plan_run(tiny(), run_named("grown"), {}, cluster);
  ASSERT_EQ(kinds(plan), (std::vector<StepKind>{StepKind::grow, StepKind::train}));
  const Argv& grow = plan.steps[0].argv;
  ASSERT_GE(grow.size(), 2u);
  EXPECT_EQ(Argv(grow.end() - 2, grow.end()), (Argv{"--from-run", "tiny/small"}));
}

TEST(BatchPlan, EvaluationsFollowTrainingAndRecordingToAServiceLeavesThemOut) {
  Experiment experiment = tiny();
  experiment.eval.corpora = {"kjv", "gcide"};
  experiment.eval.cloze = 7;
  const ExperimentRun& small = experiment.runs.front();
  const RunPlan plan = batch_plan_run(experiment, small, {}, settings());
  ASSERT_EQ(kinds(plan), (std::vector<StepKind>{StepKind::train, StepKind::eval}));
  EXPECT_EQ(plan.steps[1].argv, (Argv{"eval", "/h/runs/tiny/small", "--corpus", "kjv", "--corpus", "gcide", "--cloze",
                                      "--cloze-passages", "7", "--home", "/h"}));
  // A finished run that lacks its evaluations: the evaluation alone.
  RunFacts finished;
  finished.evaluate_only = true;
  EXPECT_EQ(kinds(batch_plan_run(experiment, small, finished, settings())), std::vector<StepKind>{StepKind::eval});
  // Runs that record to a service: its arguments on every step, and no evaluation.
  BatchSettings remote = settings();
  remote.record_arguments = {"--record-to", "127.0.0.1:9"};
  const RunPlan recorded = batch_plan_run(experiment, small, {}, remote);
  ASSERT_EQ(kinds(recorded), std::vector<StepKind>{StepKind::train});
  EXPECT_EQ(Argv(recorded.steps[0].argv.end() - 2, recorded.steps[0].argv.end()), (Argv{"--record-to", "127.0.0.1:9"}));
}

}  // namespace
}  // namespace tfw::runner
