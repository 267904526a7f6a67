// Where a recorded run's record goes (recorded_run.h). Two implementations:
// - local_run_book: the store on this machine (TFW_HOME/runs.db, a MetricWriter thread);
// - a remote book (workbench/service/remote_book.h, `tfw train --record-to HOST:PORT`): an
//   engine service writes its own store, so runs on nodes without a safely shared file
//   system (SQLite must not be shared over NFS) still land in one store.
// The store-side logic both need (replacing a record that never checkpointed, creating a
// record with its lineage) is book_clear_name / book_create, which the service calls too.
// docs/design/ARCHITECTURE.md, "The runner"; docs/cluster.md, "Recording to a service".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "runner/lineage.h"
#include "storage/store.h"

namespace tfw::runner {

class RunBook {
 public:
  virtual ~RunBook() = default;
  virtual std::string describe() const = 0;  // "store PATH" or "service HOST:PORT"
  // A run to resume (its id, name or folder): its folder and store id. UsageError when
  // neither knows it.
  virtual std::pair<std::string, std::int64_t> resolve(const std::string& run, const std::string& home) = 0;
  // Before a new run named `name` starts in `run_dir`: a record of that name that never wrote
  // a checkpoint is deleted (said through `say`); UsageError when it is running or has
  // checkpoint rows.
  virtual void clear_name(const std::string& experiment, const std::string& name, const std::string& run_dir,
                          const std::function<void(const std::string&)>& say) = 0;
  // Records a new running run with the lineage of `source` (when it has a checkpoint); its id.
  virtual std::int64_t create(RunRecord record, const LineageSource* source) = 0;
  // A known run is running again, from the checkpoint of `step`, with `config` (the resolved
  // TOML it resumes with): when that differs from the stored config (`--resume --set/--extend`),
  // the store's config becomes it, with a "config" event of the keys' old and new values, in
  // one transaction.
  virtual void resume(std::int64_t run, const std::string& config, std::int64_t step) = 0;
  virtual void beat(std::int64_t run, bool on) = 0;  // keep its heartbeat fresh while on
  virtual void metric(const MetricPoint& point) = 0;
  virtual void event(const EventRow& row) = 0;
  // Returns when every point and event so far is stored: called before each checkpoint, so
  // a checkpoint never exists without its points. Throws when that cannot be done.
  virtual void flush() = 0;
  virtual void checkpoint_added(const CheckpointRow& row, std::int64_t tokens, double flops) = 0;
  virtual void checkpoint_removed(std::int64_t run, const std::string& path) = 0;
  virtual void finish(std::int64_t run, RunStatus status, std::int64_t tokens, double flops,
                      const std::string& final_metrics, const std::string& error) = 0;
};

// The store TFW_HOME/runs.db of this machine.
std::unique_ptr<RunBook> local_run_book(const std::string& home);

// The store-side halves, shared by the local book and the service.
void book_clear_name(Store& store, const std::string& experiment, const std::string& name,
                     const std::function<void(const std::string&)>& say);
std::int64_t book_create(Store& store, RunRecord record, const LineageSource* source);
void book_resume(Store& store, std::int64_t run, const std::string& config, std::int64_t step);

}  // namespace tfw::runner
