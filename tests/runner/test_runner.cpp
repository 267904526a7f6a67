// The runner: a batch executed through the local executor (real `tfw` child processes, a
// real SQLite store), its lineage and cumulative FLOPs, skipping on a second execution, and
// the executor's task states on success, failure and cancel.
#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <set>

#include "engine/core/error.h"
#include "engine/config/experiment.h"
#include "engine/plugin/registry.h"
#include "tests/plugin_registry.h"
#include "runner/batch.h"
#include "runner/executor_local.h"
#include "runner/lineage.h"
#include "storage/store.h"
#include "tests/runner/tiny_lineage.h"

namespace tfw::runner {
namespace {

namespace fs = std::filesystem;

using test::test_plugins;

std::string fresh_home(const std::string& name) {
  const std::string home = (fs::temp_directory_path() / ("tfw-runner-test-" + name)).string();
  fs::remove_all(home);
  fs::create_directories(home);
  return home;
}

LocalOptions local_options(std::size_t slots = 1) {
  LocalOptions options;
  options.program = TFW_BINARY;
  options.slots = slots;
  return options;
}

TEST(Runner, ExecutesAGrowthLadderAndABaselineWithLineageAndCumulativeFlops) {
  const std::string home = fresh_home("ladder");
  const Experiment experiment = experiment_load(test_plugins(), TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml");
  std::vector<std::string> messages;
  BatchOptions options;
  options.home = home;
  options.on_message = [&](const std::string& line) { messages.push_back(line); };
  {
    LocalExecutor executor(local_options(2));
    const BatchResult result = batch_execute(experiment, batch_select(experiment, ""), executor, options);
    EXPECT_EQ(result.runs, 3u);
    EXPECT_EQ(result.finished, 3u);
    EXPECT_EQ(result.failed + result.blocked + result.stopped, 0u);
    EXPECT_FALSE(result.interrupted);
  }
  auto store = Store::open_readonly(home + "/runs.db");
  test::expect_tiny_lineage(*store);
  // The stage was grown into the folder lineage names, from small's last checkpoint.
  const std::string work = home + "/experiments/tiny";
  const std::optional<std::string> grown = grown_checkpoint(grown_dir(work, "grown"));
  ASSERT_TRUE(grown);
  const Lineage lineage = lineage_of(*store, *grown);
  EXPECT_EQ(lineage.parent, store->run_in_experiment("tiny", "small")->id);
  EXPECT_EQ(lineage.stage, 1);
  EXPECT_EQ(lineage.growth_method, "pattention_grow");
  EXPECT_EQ(lineage.inherited_flops, store->run_in_experiment("tiny", "small")->flops);
  EXPECT_EQ(checkpoint_owner(*store, last_checkpoint(*store, store->run_in_experiment("tiny", "small")->id)),
            store->run_in_experiment("tiny", "small")->id);
  // The growth happened before the stage trained (the parent finished first).
  auto at = [&](const std::string& line) {
    return std::find(messages.begin(), messages.end(), line) - messages.begin();
  };
  EXPECT_LT(at("small: finished"), at("grown: growing from small (log " + work + "/grown.log)"));

  // Executed again: every run is finished, so nothing runs and the records stay as they were.
  const std::vector<RunRecord> before = store->runs();
  messages.clear();
  LocalExecutor again(local_options());
  const BatchResult second = batch_execute(experiment, batch_select(experiment, ""), again, options);
  EXPECT_EQ(second.finished, 3u);
  EXPECT_EQ(messages, (std::vector<std::string>{"small: finished before, skipped", "grown: finished before, skipped",
                                                "baseline: finished before, skipped"}));
  const std::vector<RunRecord> after = store->runs();
  ASSERT_EQ(after.size(), before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    EXPECT_EQ(after[i].id, before[i].id);
    EXPECT_EQ(after[i].ended, before[i].ended);
  }
}

TEST(Runner, OnlySelectsTheMatchingRunsAndTheirAncestors) {
  const Experiment experiment = experiment_load(test_plugins(), TFW_SOURCE_DIR "/tests/data/tiny-experiment.toml");
  std::vector<std::string> names;
  for (const ExperimentRun* run : batch_select(experiment, "gro*")) names.push_back(run->name);
  EXPECT_EQ(names, (std::vector<std::string>{"small", "grown"}));
  EXPECT_THROW(batch_select(experiment, "nothing*"), UsageError);
}

TEST(LocalExecutor, StepsRunInOrderAndTheFirstFailureEndsTheTask) {
  const std::string home = fresh_home("executor");
  const std::string config = TFW_SOURCE_DIR "/experiments/mini/tiny-tokenformer.toml";
  LocalExecutor executor(local_options(1));
  executor.submit({"good", {{"params", config}, {"params", config, "--json"}}, home + "/good.log", ""});
  executor.submit({"bad", {{"params", home + "/missing.toml"}, {"params", config}}, home + "/bad.log", ""});
  executor.submit({"never", {{"params", config}}, home + "/never.log", ""});
  EXPECT_EQ(executor.capacity(), 1u);
  EXPECT_EQ(executor.active(), 3u);
  executor.cancel("never");  // still pending: it never starts
  EXPECT_EQ(executor.status("never").state, TaskState::cancelled);
  std::set<std::string> ended;
  for (int i = 0; i < 600 && executor.active() > 0; ++i) {
    for (const std::string& name : executor.poll(0.1)) ended.insert(name);
  }
  EXPECT_EQ(ended, (std::set<std::string>{"good", "bad"}));
  EXPECT_EQ(executor.status("good").state, TaskState::succeeded);
  EXPECT_EQ(executor.status("good").step, 1u);
  EXPECT_EQ(executor.status("good").exit_code, 0);
  EXPECT_EQ(executor.status("bad").state, TaskState::failed);
  EXPECT_EQ(executor.status("bad").step, 0u);      // the second step never ran
  EXPECT_EQ(executor.status("bad").exit_code, 2);  // a usage error
  EXPECT_FALSE(fs::exists(home + "/never.log"));
  std::ifstream log(home + "/good.log");
  const std::string text((std::istreambuf_iterator<char>(log)), {});
  EXPECT_NE(text.find("\"parameters\""), std::string::npos);  // the second step's JSON
  EXPECT_THROW(executor.status("unknown"), UsageError);
}

TEST(Runner, AStoppedBatchCheckpointsItsRunAndResumesItNextTime) {
  const std::string home = fresh_home("stop");
  // One long run: stopped once it has checkpointed (at 20; its points come ten steps at a
  // time, and the batch looks twice a second, so the stop lands by step 30 and half a second
  // more), then executed again to its end. 200 steps keep it running seconds past the stop,
  // and the resume trains what is left (it had 400, stopped past step 40: 9 s of the suite
  // for steps no assertion reads).
  const std::string file = home + "/long.toml";
  std::ofstream(file) << "[experiment]\nname = \"long\"\n[runs.long]\nconfig = \"" TFW_SOURCE_DIR
                         "/experiments/mini/tiny-train-tokenformer.toml\"\ntrain = { max_steps = 200, "
                         "checkpoint_every = 20 }\n";
  const Experiment experiment = experiment_load(test_plugins(), file);
  std::atomic<bool> stop{false};
  BatchOptions options;
  options.home = home;
  options.stop = &stop;
  options.on_progress = [&](const std::vector<RunProgress>& progress) {
    if (!progress.empty() && progress.front().phase == "training" && progress.front().step > 20) stop = true;
  };
  {
    LocalExecutor executor(local_options());
    const BatchResult result = batch_execute(experiment, batch_select(experiment, ""), executor, options);
    EXPECT_TRUE(result.interrupted);
    EXPECT_EQ(result.stopped, 1u);
  }
  auto store = Store::open_readonly(home + "/runs.db");
  std::optional<RunRecord> run = store->run_in_experiment("long", "long");
  ASSERT_TRUE(run);
  EXPECT_EQ(run->status, RunStatus::killed);
  EXPECT_FALSE(store->checkpoints(run->id).empty());
  const std::int64_t stopped_at = run->tokens;
  stop = false;
  options.on_progress = nullptr;
  std::vector<std::string> messages;
  options.on_message = [&](const std::string& line) { messages.push_back(line); };
  LocalExecutor executor(local_options());
  const BatchResult result = batch_execute(experiment, batch_select(experiment, ""), executor, options);
  EXPECT_EQ(result.finished, 1u);
  EXPECT_EQ(messages.front(), "long: killed before, resuming");
  run = store->run_in_experiment("long", "long");
  EXPECT_EQ(run->status, RunStatus::finished);
  EXPECT_EQ(store->runs().size(), 1u);  // the same run, continued
  EXPECT_GT(run->tokens, stopped_at);
  EXPECT_EQ(store->metrics(run->id, "train/loss").size(), 200u);  // every step once
}

}  // namespace
}  // namespace tfw::runner
