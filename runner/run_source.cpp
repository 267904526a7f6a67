// See run_source.h.
#include "runner/run_source.h"

#include <filesystem>

#include "engine/error.h"

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

}  // namespace tfw
