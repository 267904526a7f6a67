// A batch: an experiment's runs executed in dependency order through an executor. It skips
// finished runs, resumes stopped ones from their checkpoints, refuses finished runs whose
// config the file has since changed, grows each stage from its parent's last checkpoint
// (lineage.h) and blocks the children of a failed run. `tfw run` and the service's workers
// both execute experiments through batch_execute. docs/design/ARCHITECTURE.md, "The runner".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "engine/config/experiment.h"
#include "runner/executor.h"

namespace tfw::runner {

// Runs matching the glob `only` ("" : all), with their ancestors (a stage needs its parent),
// in the experiment's order. UsageError when nothing matches.
std::vector<const ExperimentRun*> batch_select(const Experiment& experiment, const std::string& only);
// The runs of the file's unit `unit` ([units]), parents first; throws UsageError naming the
// units when there is no such unit.
std::vector<const ExperimentRun*> batch_select_unit(const Experiment& experiment, const std::string& unit);

// Where a running run is, read from the store while the batch waits.
struct RunProgress {
  std::string name;
  std::string phase;  // growing, starting, preparing (no step yet) or training
  std::int64_t step = 0, total_steps = 0;
  double loss = 0, tokens_per_second = 0;
  double eta_seconds = -1;  // -1: not known yet
};

struct BatchOptions {
  std::string home;                                    // TFW_HOME (resolved)
  const std::atomic<bool>* stop = nullptr;             // set: the running runs checkpoint and stop; the batch returns
  std::function<void(const std::string&)> on_message;  // a line per event (started, finished, ...)
  std::function<void(const std::vector<RunProgress>&)> on_progress;  // the running runs, every poll
  // Return once every run that can be is submitted, without waiting for them (a cluster
  // back-end that schedules dependencies runs them on its own).
  bool detach = false;
  // Arguments added to every `tfw train` and `tfw grow` step: --record-to HOST:PORT
  // [--token-file F], for runs that record to the service that serves this TFW_HOME.
  std::vector<std::string> record_arguments;
};

struct BatchResult {
  std::size_t runs = 0, finished = 0, failed = 0, blocked = 0, stopped = 0;
  bool interrupted = false;            // the stop flag was set
  std::string work_dir;                // TFW_HOME/experiments/NAME: generated configs and logs
  std::vector<std::string> contended;  // notes on runs whose times other processes disturbed
  std::string summary;                 // "experiment E: 2 of 3 runs finished, 1 failed, 0 blocked ..."
  std::vector<std::string> submitted;  // runs submitted (or taken over) by this batch
  bool detached = false;               // returned after submitting (BatchOptions::detach)
};

// Executes `runs` (from batch_select) through `executor`. Throws UsageError before anything
// runs when a finished run's stored config differs from the file's.
BatchResult batch_execute(const Experiment& experiment, const std::vector<const ExperimentRun*>& runs,
                          Executor& executor, const BatchOptions& options);

}  // namespace tfw::runner
