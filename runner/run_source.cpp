// See run_source.h.
#include "runner/run_source.h"

#include <chrono>

#include "runner/executor_slurm.h"
#include "engine/core/process.h"

#include <filesystem>

#include "engine/core/error.h"

namespace tfw {

LocalRunSource::LocalRunSource(std::string home) : home_(std::move(home)), path_(home_ + "/runs.db") {}

std::string LocalRunSource::describe() const { return "store " + path_; }

bool LocalRunSource::exists() { return store_ || std::filesystem::exists(path_); }

Store& LocalRunSource::store() {
  if (!store_) {
    if (!std::filesystem::exists(path_)) {
      throw UsageError(with_hint("no run store at " + path_, "train a run first, or pass --home DIR"));
    }
    store_ = Store::open_readonly(path_);
  }
  return *store_;
}

std::vector<RunRecord> LocalRunSource::runs() {
  if (!exists()) return {};
  return store().runs();
}

std::optional<RunRecord> LocalRunSource::run(std::int64_t id) {
  if (!exists()) return std::nullopt;
  return store().run_get(id);
}

RunNews LocalRunSource::news(std::int64_t run, RunCursor& cursor) { return store().news(run, cursor); }

std::vector<CheckpointRow> LocalRunSource::checkpoints(std::int64_t run) { return store().checkpoints(run); }

std::vector<runner::ClusterJobRow> LocalRunSource::cluster_jobs() {
  std::vector<runner::ClusterJobRow> rows = runner::ClusterJobs(store()).list();
  bool live = false;
  for (const runner::ClusterJobRow& row : rows) live = live || !runner::slurm_state_final(row.state);
  const double now = std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  if (live && now - slurm_asked_ >= 5 && !program_path("squeue").empty()) {
    slurm_asked_ = now;
    try {
      std::unique_ptr<Store> writable = Store::open(path_);  // the refresh writes the states it learns
      rows = runner::slurm_refresh(*writable, "");
    } catch (const std::exception&) {
      // Slurm did not answer: the stored states stand until the next try.
    }
  }
  return rows;
}

}  // namespace tfw
