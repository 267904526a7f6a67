// See batch_plan.h.
#include "runner/batch_plan.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <toml++/toml.h>

#include "engine/core/error.h"
#include "runner/lineage.h"

namespace tfw::runner {

namespace {

std::string option_text(const toml::node& node) {
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  return out.str();
}

// The `tfw eval` steps of [experiment.eval] for a run: one per distinct blocks setting, each
// on the run's folder (its newest checkpoint, the final one once it has trained).
std::vector<PlannedStep> eval_steps(const Experiment& experiment, const ExperimentRun& run, const std::string& home) {
  const ExperimentEval& eval = experiment.eval;
  std::vector<std::pair<std::optional<std::vector<std::string>>, std::vector<std::string>>>
      groups;  // blocks -> corpora
  for (const std::string& corpus : eval.corpora) {
    const std::optional<std::vector<std::string>> blocks = batch_eval_blocks(eval, run, corpus);
    auto group = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == blocks; });
    if (group == groups.end()) group = groups.insert(groups.end(), {blocks, {}});
    group->second.push_back(corpus);
  }
  std::vector<PlannedStep> steps;
  for (const auto& [blocks, corpora] : groups) {
    std::vector<std::string> step = {"eval", run_dir_of(home, experiment.name, run.name)};
    for (const std::string& corpus : corpora) step.insert(step.end(), {"--corpus", corpus});
    if (eval.cloze > 0) step.insert(step.end(), {"--cloze", "--cloze-passages", std::to_string(eval.cloze)});
    if (blocks)
      step.insert(step.end(),
                  {"--blocks", blocks->empty() ? std::string("all") : fmt::format("{}", fmt::join(*blocks, ","))});
    step.insert(step.end(), {"--home", home});
    steps.push_back({StepKind::eval, std::move(step)});
  }
  return steps;
}

// A stage: grow it from its parent (unless its grown folder holds the checkpoint already),
// then train from the grown folder (lineage finds its checkpoint there).
void plan_stage(const Experiment& experiment, const ExperimentRun& run, const RunFacts& facts,
                const BatchSettings& settings, std::vector<std::string> train, RunPlan& plan) {
  const std::string grown = grown_dir(settings.work_dir, run.name);
  if (!facts.grown) {
    std::vector<std::string> grow = {"grow",  "--method", run.growth_method, "--to",       plan.config_path,
                                     "--out", grown,      "--home",          settings.home};
    if (settings.schedules_dependencies) {
      // The parent may not have trained yet: the step finds its last checkpoint when it runs.
      grow.insert(grow.end(), {"--from-run", experiment.name + "/" + run.parent});
    } else {
      if (facts.parent_checkpoint.empty()) {
        throw Error(fmt::format("{}: its parent {} has no checkpoint to grow from", run.name, run.parent));
      }
      grow.insert(grow.end(), {"--from", facts.parent_checkpoint});
    }
    for (const auto& [key, value] : run.growth_options) {
      grow.insert(grow.end(), {"--option", fmt::format("{}={}", key.str(), option_text(value))});
    }
    plan.steps.push_back({StepKind::grow, std::move(grow)});
  }
  train.insert(train.end(), {"--init-from", grown});
  plan.steps.push_back({StepKind::train, std::move(train)});
}

// The training steps: resume, or (grow and) train.
void plan_training(const Experiment& experiment, const ExperimentRun& run, const RunFacts& facts,
                   const BatchSettings& settings, RunPlan& plan) {
  if (facts.record && facts.has_checkpoint) {
    // killed, crashed or failed before: continue it as the same run (one that never
    // checkpointed starts again, and tfw train replaces its record)
    plan.note = fmt::format("{}: {} before, resuming", run.name, status_name(facts.record->status));
    plan.steps.push_back(
        {StepKind::resume, {"train", "--resume", std::to_string(facts.record->id), "--home", settings.home}});
    return;
  }
  std::vector<std::string> train = {"train",        plan.config_path, "--name", run.name,
                                    "--experiment", experiment.name,  "--home", settings.home};
  if (run.parent.empty()) {
    plan.steps.push_back({StepKind::train, std::move(train)});
  } else {
    plan_stage(experiment, run, facts, settings, std::move(train), plan);
  }
}

}  // namespace

const char* step_kind_name(StepKind kind) {
  switch (kind) {
    case StepKind::grow: return "grow";
    case StepKind::train: return "train";
    case StepKind::resume: return "resume";
    case StepKind::eval: return "eval";
  }
  return "?";
}

std::vector<std::vector<std::string>> RunPlan::argv() const {
  std::vector<std::vector<std::string>> out;
  for (const PlannedStep& step : steps) out.push_back(step.argv);
  return out;
}

std::optional<std::vector<std::string>> batch_eval_blocks(const ExperimentEval& eval, const ExperimentRun& run,
                                                          const std::string& corpus) {
  const std::vector<std::string>* blocks = eval.blocks_for(corpus);
  if (blocks == nullptr || run.config.train.mask.blocks.empty()) return std::nullopt;
  std::vector<std::string> defined;  // the names this run defines (experiment_load checked one is left)
  for (const std::string& name : *blocks) {
    if (run.config.train.mask.block(name) != nullptr) defined.push_back(name);
  }
  return defined;
}

RunPlan batch_plan_run(const Experiment& experiment, const ExperimentRun& run, const RunFacts& facts,
                       const BatchSettings& settings) {
  RunPlan plan;
  plan.name = run.name;
  plan.config_path = settings.work_dir + "/" + run.name + ".toml";
  if (!facts.evaluate_only) plan_training(experiment, run, facts, settings, plan);
  for (PlannedStep& step : plan.steps) {
    step.argv.insert(step.argv.end(), settings.record_arguments.begin(), settings.record_arguments.end());
  }
  // Recording to a service, the evaluations (kept in this home's store) are left out.
  if (settings.record_arguments.empty()) {
    for (PlannedStep& step : eval_steps(experiment, run, settings.home)) plan.steps.push_back(std::move(step));
  }
  return plan;
}

}  // namespace tfw::runner
