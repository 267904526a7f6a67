// A recorded run: one training, from a config or resumed, with everything the store keeps
// about it. It creates (or takes up again) the run's record, attaches its lineage, beats
// its heartbeat, connects the trainer's metric, checkpoint and event sinks to the store
// writer, and writes the final status: finished, killed (stopped on request: a signal),
// failed (an error), or, when the process dies, crashed (the heartbeat goes stale).
// `tfw train` is a thin caller; every executor's training step ends up here.
// docs/design/ARCHITECTURE.md, "The runner".
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "engine/train/trainer.h"
#include "storage/status.h"

namespace tfw::runner {

class RunBook;

struct RunRequest {
  std::string home;                    // TFW_HOME (resolved)
  std::string config;                  // run config file; with `resume`, optional and checked against the run's
  std::vector<std::string> overrides;  // --set key=value
  std::string name;                    // run name ("" : the config's)
  std::string experiment = "default";  // the experiment it is recorded under
  std::string resume;                  // a run to continue: its id, name or folder
  std::string init_from;  // a checkpoint, or a folder `tfw grow` wrote, to start from: the run records its lineage
  std::string extend;     // with resume and a new budget: "keep" or "stretch"
  std::int64_t profile_steps = 0;  // `tfw train --profile N` (engine/train/profile.h)
  // Where the record goes: null for the store in `home` (runner/run_book.h); a service's
  // book for `tfw train --record-to`.
  std::shared_ptr<RunBook> book;
};

struct RunHooks {
  // Once the run is recorded, before training starts.
  std::function<void(const RunConfig& config, const std::string& run_dir, bool resuming)> on_start;
  std::function<void(const TrainProgress&)> on_progress;  // every step
  std::function<void(const std::string&)> on_message;     // data preparation, checkpoints, notes
};

struct RunOutcome {
  std::int64_t run_id = 0;
  std::string run_dir;
  std::string model_name, family;          // the config's name and model family
  RunStatus status = RunStatus::finished;  // finished, or killed when stopped on request
  TrainSummary summary;
  double other_cpu_share = 0;    // other processes' share of the CPUs while it trained (NaN: unknown)
  bool contended = false;        // enough to make its times incomparable with an idle machine's
  int rank = 0, world_size = 1;  // data-parallel runs: only rank 0's outcome is recorded
};

// Trains and records one run. `stop` (may be null) stops it after the current step, with a
// checkpoint: the run ends as killed and resumes later. Errors are recorded as failed and
// rethrown (UsageError for bad input, Error otherwise). With a process group (`dist`, this
// process being its rank 0), the ranks agree on the config before anything is recorded,
// and the run records its world size (runner/parallel.h starts the other ranks).
RunOutcome run_recorded(const Registry& registry, const RunRequest& request, const std::atomic<bool>* stop,
                        const RunHooks& hooks, std::shared_ptr<DistGroup> dist = nullptr);

}  // namespace tfw::runner
