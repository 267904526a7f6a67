// Executors: where the steps of a batch run. A task (one run of an experiment) is submitted,
// has a state, can be cancelled, and reports to the store through the `tfw` commands it runs
// (`tfw train` records itself: recorded_run.h). The batch (batch.h) decides what each task
// runs and in which order; an executor only runs them. Today's implementation runs child
// processes on this machine (executor_local.h); a cluster back-end (Slurm: sbatch, squeue,
// scancel) or a multi-process one implements the same interface.
// docs/design/ARCHITECTURE.md, "The runner".
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace tfw::runner {

enum class TaskState { pending, running, succeeded, failed, cancelled };

inline bool task_final(TaskState state) { return state != TaskState::pending && state != TaskState::running; }

struct Task {
  std::string name;                             // unique among the executor's tasks: the run's name
  std::vector<std::vector<std::string>> steps;  // `tfw` argument lists, run in order; the first failure ends the task
  std::string log_path;                         // where every step's output goes (appended)
  // The task that must succeed before this one starts. Only for an executor that
  // schedules_dependencies(); the batch leaves it empty otherwise.
  std::string after;
};

// The exit status of a `tfw` step that was asked to stop (SIGINT, SIGTERM) and checkpointed
// (workbench/cli/main.cpp): the task is stopped, not failed, and the next batch resumes it.
inline constexpr int kExitStopped = 130;

struct TaskStatus {
  TaskState state = TaskState::pending;
  std::size_t step = 0;  // the step running, or the one that ended the task
  int exit_code = -1;    // of the step that ended it (-1: none yet); 128 + N for signal N
};

class Executor {
 public:
  virtual ~Executor() = default;
  virtual std::string describe() const = 0;  // for messages: "local, 2 slots of 1 thread"
  // Tasks it runs at once. The batch submits no more than this many unfinished tasks.
  virtual std::size_t capacity() const = 0;
  // Tasks submitted and not yet final.
  virtual std::size_t active() const = 0;
  // Queues a task (throws tfw::Error when it cannot: a failing cluster command, say).
  virtual void submit(const Task& task) = 0;
  // A submitted task's state (UsageError for an unknown name).
  virtual TaskStatus status(const std::string& name) const = 0;
  // Stops a task: its running step is asked to stop (a training checkpoints and ends as
  // killed, resumable) and no further step starts. It ends as cancelled.
  virtual void cancel(const std::string& name) = 0;
  // Advances the tasks (starts, reaps, moves to the next step) and returns the names of the
  // tasks that became final since the last call, waiting up to `seconds` for one.
  virtual std::vector<std::string> poll(double seconds) = 0;

  // A cluster back-end holds a task until its `after` task has succeeded, so the batch may
  // submit a child as soon as its parent is submitted.
  virtual bool schedules_dependencies() const { return false; }
  // Sends what submit() queued (a cluster back-end submits independent tasks as one array).
  // The batch calls it after each round of submissions.
  virtual void flush() {}
  // An earlier submission of this task that is still queued or running (a batch run again
  // while a cluster still holds its jobs): the executor takes it over and returns true.
  virtual bool adopt(const std::string& name) {
    (void)name;
    return false;
  }
  // Where a task runs, for messages ("job 123_4"); "" when there is nothing to say.
  virtual std::string where(const std::string& name) const {
    (void)name;
    return "";
  }
};

}  // namespace tfw::runner
