// Where a client reads runs from: one interface for a run's record, metric points, events
// and checkpoints, whether they come from the store on this machine (LocalRunSource) or
// from an engine service over its socket (service::RemoteRunSource, workbench/service/).
// The GUI's store watcher and the service's poller read through it
// (docs/design/ARCHITECTURE.md, "Reading runs").
//
// Reads are incremental: `news` returns what a RunCursor has not seen and advances it, so a
// reader that polls gets each point and event once. Every call may throw (a store that
// cannot be read, a service that went away); after a throw the source reconnects on the
// next call. Torch-free.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "runner/cluster_jobs.h"
#include "storage/store.h"

namespace tfw {

class RunSource {
 public:
  virtual ~RunSource() = default;
  // For status lines: "store /home/x/runs.db" or "service 10.0.0.2:7433".
  virtual std::string describe() const = 0;
  // The TFW_HOME the runs live in (on the service's machine for a remote source).
  virtual std::string home() const = 0;
  // Whether the runs are read from another machine (their checkpoint files are not here).
  virtual bool remote() const { return false; }
  // Whether there is a store to read yet (false: a local home without runs.db).
  virtual bool exists() = 0;
  // Every run, by id.
  virtual std::vector<RunRecord> runs() = 0;
  virtual std::optional<RunRecord> run(std::int64_t id) = 0;
  // The points (by key, then step) and events (by id) of `run` that `cursor` has not seen;
  // advances the cursor past them.
  virtual RunNews news(std::int64_t run, RunCursor& cursor) = 0;
  virtual std::vector<CheckpointRow> checkpoints(std::int64_t run) = 0;
  // Runs submitted to a cluster scheduler (`tfw run --executor slurm`), by id; empty when the
  // source cannot tell (a service does not serve them yet).
  virtual std::vector<runner::ClusterJobRow> cluster_jobs() { return {}; }
  // Every run's `tfw eval` results, by id; empty when the source cannot tell (a service does
  // not serve them yet).
  virtual std::vector<EvaluationRow> evaluations() { return {}; }
  // Forgets the connection or the open store; the next call opens it again.
  virtual void reset() = 0;
};

// The store in `home`/runs.db, opened read-only when first needed (so a store created later
// is found), never written.
class LocalRunSource : public RunSource {
 public:
  explicit LocalRunSource(std::string home);
  std::string describe() const override;
  std::string home() const override { return home_; }
  bool exists() override;
  std::vector<RunRecord> runs() override;
  std::optional<RunRecord> run(std::int64_t id) override;
  RunNews news(std::int64_t run, RunCursor& cursor) override;
  std::vector<CheckpointRow> checkpoints(std::int64_t run) override;
  // The store's rows; while some are queued or running and Slurm's commands are here, their
  // states are refreshed from Slurm (executor_slurm.h) at most every 5 s.
  std::vector<runner::ClusterJobRow> cluster_jobs() override;
  std::vector<EvaluationRow> evaluations() override { return store().evaluations(0); }
  void reset() override { store_.reset(); }

 private:
  double slurm_asked_ = 0;  // steady seconds of the last refresh from Slurm
  Store& store();           // throws when runs.db is not there
  std::string home_, path_;
  std::unique_ptr<Store> store_;
};

}  // namespace tfw
