// The Slurm executor: each task (one run of an experiment) becomes a Slurm job. Independent
// tasks submitted in one round go out as one job array (`sbatch --array`, with a cap on how
// many run at once); a task with a parent waits for it with `--dependency=afterok:JOB`
// (and `--kill-on-invalid-dep=yes`, so a failed parent cancels its children). A run with
// several ranks (`nproc`) launches them with `srun` inside its allocation. The scripts are
// kept: one per run in its run folder (`slurm-job.sh`), and the array's in the experiment's
// work folder. Every submission is a row of the store's `cluster_jobs` (cluster_jobs.h),
// whose state comes from `squeue`, then `sacct`, then `scontrol`. Cancelling is `scancel`.
// docs/cluster.md, docs/design/ARCHITECTURE.md "The runner".
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/cluster_jobs.h"
#include "runner/executor.h"
#include "storage/store.h"

namespace tfw::runner {

struct SlurmOptions {
  std::string program;     // the tfw executable the jobs run (default: this one)
  std::string home;        // TFW_HOME, absolute: the jobs' store and run folders
  std::string experiment;  // its name: the store rows, the job names
  std::string work_dir;    // TFW_HOME/experiments/NAME: the array scripts, Slurm's own output
  // sbatch options ("" or 0: sbatch's default). An option sbatch rejects is a UsageError
  // carrying its message.
  std::string partition, account, time, gres;
  int cpus_per_task = 0;  // also each rank's torch threads (1 when not given)
  int nodes_per_run = 1;
  int nproc = 1;              // ranks per run, started with srun (data parallel, docs/cluster.md)
  std::size_t array_cap = 0;  // at most this many array tasks at once (0: no cap)
};

// The scheduler's view of a job: its state word, exit code and reason.
struct SlurmJobState {
  std::string state;  // PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, TIMEOUT, ..., UNKNOWN
  int exit_code = -1;
  std::string reason;
};

// Queries the states of `job_ids` ("123", "123_4"): squeue for jobs it still holds, then
// sacct (a cluster with accounting), then scontrol (jobs the controller still remembers).
// A job none of them knows is UNKNOWN; one they cannot be asked about now is left out.
// Throws Error when squeue fails (the controller does not answer).
std::map<std::string, SlurmJobState> slurm_query(const std::vector<std::string>& job_ids);

// A Slurm state that will not change any more.
bool slurm_state_final(const std::string& state);

// Refreshes the store's rows that are not final (of `experiment`, or all when empty) from
// Slurm, and returns every row, by id.
std::vector<ClusterJobRow> slurm_refresh(Store& store, const std::string& experiment);

// scancel of the newest unfinished job of `target` (a run name, or a job id); returns what
// it cancelled. UsageError when nothing matches, Error when scancel fails.
std::vector<ClusterJobRow> slurm_cancel(Store& store, const std::string& target);

class SlurmExecutor final : public Executor {
 public:
  explicit SlurmExecutor(SlurmOptions options);

  std::string describe() const override;
  std::size_t capacity() const override { return 1u << 20; }  // Slurm queues; the array cap limits
  std::size_t active() const override;
  void submit(const Task& task) override;
  TaskStatus status(const std::string& name) const override;
  void cancel(const std::string& name) override;
  std::vector<std::string> poll(double seconds) override;
  bool schedules_dependencies() const override { return true; }
  void flush() override;
  bool adopt(const std::string& name) override;
  std::string where(const std::string& name) const override;

 private:
  struct Entry {
    Task task;
    TaskStatus status;
    std::string job_id;    // "" until flushed
    std::int64_t row = 0;  // its cluster_jobs row
    std::string state = "PENDING";
    bool reported = false;  // returned by poll() as final
  };
  std::string run_script(const Entry& entry) const;  // writes the run's script; returns its path
  std::vector<std::string> sbatch_options() const;
  std::string sbatch(std::vector<std::string> arguments, const std::string& what);
  SlurmOptions options_;
  std::unique_ptr<Store> store_;
  std::map<std::string, Entry> tasks_;
  std::vector<std::string> queued_;  // submitted, not yet flushed, in order
  double last_query_ = 0;
};

}  // namespace tfw::runner
