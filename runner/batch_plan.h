// The plan of one run of a batch: the `tfw` steps that bring it to finished, as a pure
// function of the run, what the store and the file system say of it (RunFacts), and the
// batch's settings. batch_execute gathers the facts and drives the executor; the plan itself
// touches neither, so tests check it directly (tests/runner/test_batch_plan.cpp).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "engine/config/experiment.h"
#include "storage/store.h"

namespace tfw::runner {

enum class StepKind {
  grow,    // tfw grow: the parent's checkpoint into this run's model
  train,   // tfw train: from scratch, or --init-from the grown folder
  resume,  // tfw train --resume: a run stopped, crashed or failed after a checkpoint
  eval,    // tfw eval: [experiment.eval]
};

const char* step_kind_name(StepKind kind);

struct PlannedStep {
  StepKind kind;
  std::vector<std::string> argv;  // the `tfw` arguments
};

// What the store and the file system say of a run when its task is planned.
struct RunFacts {
  std::optional<RunRecord> record;  // its record in this experiment
  bool has_checkpoint = false;      // the record's run folder holds a checkpoint
  bool grown = false;               // its grown folder already holds the grown checkpoint
  std::string parent_checkpoint;    // the parent's last checkpoint ("": none)
  bool evaluate_only = false;       // finished before; only its [experiment.eval] is left
};

// The batch's side: where things go and how the executor schedules.
struct BatchSettings {
  std::string home;                           // TFW_HOME
  std::string work_dir;                       // TFW_HOME/experiments/NAME
  std::vector<std::string> record_arguments;  // BatchOptions::record_arguments
  bool schedules_dependencies = false;        // the executor starts a child once its parent succeeds
};

struct RunPlan {
  std::string name;
  std::string config_path;  // the generated config the train and grow steps read
  std::vector<PlannedStep> steps;
  std::string note;  // a line to say before submitting ("" : none)
  StepKind first() const { return steps.empty() ? StepKind::eval : steps.front().kind; }
  std::vector<std::vector<std::string>> argv() const;
};

// The steps of `run`: an evaluation only; or resume it; or grow it from its parent (unless
// grown already) and train it; or train it; then its [experiment.eval] steps unless the runs
// record to a service. Error when a stage's parent has no checkpoint to grow from and the
// executor does not schedule dependencies.
RunPlan batch_plan_run(const Experiment& experiment, const ExperimentRun& run, const RunFacts& facts,
                       const BatchSettings& settings);

// The parameter blocks [experiment.eval] evaluates `corpus` with on `run`: none given (the
// run's own train.mask.use), or the listed ones the run defines (empty: every token, "all").
std::optional<std::vector<std::string>> batch_eval_blocks(const ExperimentEval& eval, const ExperimentRun& run,
                                                          const std::string& corpus);

}  // namespace tfw::runner
