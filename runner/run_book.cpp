// See run_book.h.
#include "runner/run_book.h"

#include <nlohmann/json.hpp>

#include "engine/config/config_diff.h"

#include <filesystem>

#include <fmt/format.h>

#include "engine/core/error.h"

namespace tfw::runner {

namespace {

namespace fs = std::filesystem;

class LocalRunBook final : public RunBook {
 public:
  explicit LocalRunBook(const std::string& home)
      : store_(Store::open(home + "/runs.db")), writer_(std::make_unique<MetricWriter>(home + "/runs.db")) {}

  std::string describe() const override { return "store " + store_->path(); }

  std::pair<std::string, std::int64_t> resolve(const std::string& run, const std::string& home) override {
    if (std::optional<RunRecord> record = store_->run_find(run); record && fs::is_directory(record->run_dir)) {
      return {record->run_dir, record->id};
    }
    for (const std::string& dir : {run, home + "/runs/" + run}) {
      if (!fs::is_directory(dir)) continue;
      for (const RunRecord& record : store_->runs()) {
        std::error_code ec;  // a record whose folder is gone (or was in a home moved elsewhere) is no match
        if (fs::equivalent(record.run_dir, dir, ec)) return {dir, record.id};
      }
      return {dir, 0};  // a run folder the store does not know: recorded anew
    }
    throw UsageError(
        with_hint(fmt::format("run '{}' not found: not a run id or name in {}, nor a run folder", run, store_->path()),
                  "list the runs with `tfw runs list`"));
  }

  void clear_name(const std::string& experiment, const std::string& name, const std::string& /*run_dir*/,
                  const std::function<void(const std::string&)>& say) override {
    book_clear_name(*store_, experiment, name, say);
  }
  std::int64_t create(RunRecord record, const LineageSource* source) override {
    return book_create(*store_, std::move(record), source);
  }
  void resume(std::int64_t run, const std::string& config, std::int64_t step) override {
    book_resume(*store_, run, config, step);
  }
  void beat(std::int64_t run, bool on) override {
    if (on)
      writer_->heartbeat_add(run);
    else
      writer_->heartbeat_remove(run);
  }
  void metric(const MetricPoint& point) override { writer_->push(point); }
  void event(const EventRow& row) override { store_->event_add(row); }
  void flush() override { writer_->flush(); }
  void checkpoint_added(const CheckpointRow& row, std::int64_t tokens, double flops) override {
    store_->run_set_progress(row.run, tokens, flops);
    store_->checkpoint_add(row);
  }
  void checkpoint_removed(std::int64_t run, const std::string& path) override { store_->checkpoint_remove(run, path); }
  void finish(std::int64_t run, RunStatus status, std::int64_t tokens, double flops, const std::string& final_metrics,
              const std::string& error) override {
    writer_->flush();
    writer_->heartbeat_remove(run);
    store_->run_set_progress(run, tokens, flops);
    store_->run_finish(run, status, final_metrics, error);
  }

 private:
  std::unique_ptr<Store> store_;
  std::unique_ptr<MetricWriter> writer_;
};

}  // namespace

std::unique_ptr<RunBook> local_run_book(const std::string& home) { return std::make_unique<LocalRunBook>(home); }

void book_clear_name(Store& store, const std::string& experiment, const std::string& name,
                     const std::function<void(const std::string&)>& say) {
  // A run of that name that never wrote a checkpoint (killed early, failed on its data) has
  // nothing to resume: starting it again replaces its record instead of refusing the name.
  std::optional<RunRecord> old = store.run_in_experiment(experiment, name);
  if (!old) return;
  if (old->status == RunStatus::running) {
    throw UsageError(with_hint(fmt::format("run '{}' (id {}) is running (its heartbeat is fresh)", name, old->id),
                               "wait for it, or stop it; a run that died shows as crashed after "
                               "TFW_HEARTBEAT_TIMEOUT seconds"));
  }
  // The store's rows decide, not the files the caller sees: a record with checkpoints is a
  // run's history, and nobody starting a run of the same name may delete it.
  if (!store.checkpoints(old->id).empty()) {
    throw UsageError(with_hint(fmt::format("run '{}' (id {}) already has checkpoints in the store", name, old->id),
                               "resume it, choose another name, or delete it first with `tfw runs delete`"));
  }
  store.run_delete(old->id);
  if (say) {
    say(fmt::format("run '{}' (id {}, {}) never wrote a checkpoint: starting it again replaces its record", name,
                    old->id, status_name(old->status)));
  }
}

std::int64_t book_create(Store& store, RunRecord record, const LineageSource* source) {
  if (source != nullptr) {
    const Lineage lineage = lineage_from(store, *source);
    record.parent = lineage.parent;
    record.stage = lineage.stage;
    record.inherited_flops = lineage.inherited_flops;
    record.growth_method = lineage.growth_method;
    record.growth_options = lineage.growth_options;
  }
  return store.run_create(record);
}

}  // namespace tfw::runner

namespace tfw::runner {

void book_resume(Store& store, std::int64_t run, const std::string& config, std::int64_t step) {
  std::optional<RunRecord> record = store.run_get(run);
  // A run deleted since it was looked up: training it would record into nothing.
  if (!record) {
    throw UsageError(
        with_hint(fmt::format("run {} is no longer in the store (deleted meanwhile); nothing was trained", run),
                  "start it again from its config"));
  }
  // Compared key by key as TOML values, not as text: a config written another way is the same.
  const std::vector<ConfigDifference> differences =
      record && !config.empty() ? config_differences(record->config, config) : std::vector<ConfigDifference>{};
  if (!differences.empty()) {
    nlohmann::json changes = nlohmann::json::array();
    for (const ConfigDifference& d : differences) {
      changes.push_back({{"key", d.key}, {"old", d.a}, {"new", d.b}});
    }
    store.run_set_config(
        run, config, {run, step, "config", nlohmann::json{{"changes", changes}, {"reason", "resume"}}.dump(), 0, 0});
  }
  store.run_set_status(run, RunStatus::running);
}

}  // namespace tfw::runner
