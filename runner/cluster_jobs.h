// Runs submitted to a cluster scheduler (`tfw run --executor slurm`), one row per submission:
// the store's `cluster_jobs` table (schema v3, storage/migrations.cpp), read and written on
// the store's own connection. The Slurm executor adds and updates the rows
// (executor_slurm.h); `tfw jobs --slurm`, `tfw cancel --slurm` and the GUI's runs panel read them.
// docs/store.md, docs/cluster.md.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "storage/store.h"

namespace tfw::runner {

// A run submitted to a cluster scheduler: one row per submission.
struct ClusterJobRow {
  std::int64_t id = 0;
  std::string experiment, run;  // the run it executes
  std::string scheduler = "slurm";
  std::string job_id;       // the scheduler's id: "123", or "123_4" for an array task
  std::string state;        // the scheduler's word: PENDING, RUNNING, COMPLETED, FAILED, CANCELLED, ...
  std::string script, log;  // the generated script (kept for the user) and the run's output
  double submitted = 0, updated = 0;
  std::int64_t exit_code = -1;  // -1: none yet
  std::string reason;           // why it waits, or how it ended (the scheduler's reason)
};

// The cluster jobs of one store, on its connection: cheap to make, holds only the store,
// which must outlive it. Reads work on a read-only store; writes need a writable one.
class ClusterJobs {
 public:
  explicit ClusterJobs(Store& store) : store_(store) {}

  // The columns a row is read from, in order: its one list (a test holds it to the schema).
  static std::vector<std::string> columns();

  std::int64_t add(const ClusterJobRow& job);  // submitted and updated now; its id
  // The scheduler's state, exit code (kept when negative) and reason; updated now.
  void update(std::int64_t id, const std::string& state, std::int64_t exit_code, const std::string& reason);
  // By id; of one experiment when `experiment` is not empty.
  std::vector<ClusterJobRow> list(const std::string& experiment = "");

 private:
  Store& store_;
};

}  // namespace tfw::runner
