// See lineage.h.
#include "runner/lineage.h"

#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "engine/checkpoint/checkpoint_meta.h"
#include "engine/core/error.h"
#include "storage/store.h"

namespace tfw::runner {

namespace fs = std::filesystem;

std::string grown_dir(const std::string& work_dir, const std::string& name) { return work_dir + "/grown-" + name; }

std::optional<std::string> grown_checkpoint(const std::string& dir) {
  // tfw grow writes one checkpoint, atomically (archive, then manifest): a listed one is whole.
  const std::vector<CheckpointInfo> found = checkpoint_list(dir);
  if (found.empty()) return std::nullopt;
  return found.back().path;
}

std::optional<std::int64_t> checkpoint_owner(Store& store, const std::string& checkpoint) {
  return store.checkpoint_run(fs::absolute(checkpoint).string());
}

std::string run_dir_of(const std::string& home, const std::string& experiment, const std::string& name) {
  return experiment == "default" ? home + "/runs/" + name : home + "/runs/" + experiment + "/" + name;
}

std::string last_checkpoint(Store& store, std::int64_t run) {
  const std::vector<CheckpointRow> rows = store.checkpoints(run);
  return rows.empty() ? "" : rows.back().path;
}

std::string checkpoint_of(const std::string& target, const std::string& home) {
  if (fs::is_regular_file(target)) return target;
  std::string run_dir, run_label;
  if (fs::is_directory(target)) {
    if (std::optional<std::string> grown = grown_checkpoint(target)) return *grown;
    run_dir = target;
    run_label = target;
  } else if (fs::exists(home + "/runs.db")) {
    std::unique_ptr<Store> store = Store::open_readonly(home + "/runs.db");
    std::optional<RunRecord> record = store->run_find(target);
    if (!record) {
      throw UsageError(
          with_hint(fmt::format("'{}' is not a checkpoint file, a run folder, nor a run in {}", target, store->path()),
                    "list the runs with `tfw runs list`, or pass a checkpoint's .safetensors path"));
    }
    run_dir = record->run_dir;
    run_label = fmt::format("run {} ({})", record->id, record->name);
  } else {
    throw UsageError(with_hint(fmt::format("'{}' is not a checkpoint file or a run folder, and there is no store at {}",
                                           target, home + "/runs.db"),
                               "pass a checkpoint's .safetensors path, or set --home / TFW_HOME"));
  }
  std::vector<CheckpointInfo> checkpoints = checkpoint_list(run_dir + "/checkpoints");
  if (checkpoints.empty()) {
    throw UsageError(with_hint(fmt::format("{} has no complete checkpoint in {}/checkpoints", run_label, run_dir),
                               "train it further (a checkpoint is written every train.checkpoint_every steps and "
                               "at the end), or pass a checkpoint path"));
  }
  return checkpoints.back().path;
}

LineageSource lineage_source(const std::string& checkpoint) {
  const CheckpointMeta origin = checkpoint_read_meta(checkpoint);
  LineageSource source;
  source.checkpoint = fs::absolute(checkpoint).string();
  source.parent_run = origin.parent_run;
  source.inherited_flops = origin.inherited_flops + origin.flops;
  source.growth_method = origin.growth_method;
  source.growth_options = origin.growth_options;
  return source;
}

Lineage lineage_from(Store& store, const LineageSource& source) {
  Lineage lineage;
  lineage.inherited_flops = source.inherited_flops;
  lineage.growth_method = source.growth_method;
  lineage.growth_options = source.growth_options;
  std::optional<RunRecord> parent;
  if (source.parent_run != 0) parent = store.run_get(source.parent_run);  // grown: the run it was grown from
  if (!parent) {
    if (std::optional<std::int64_t> owner = checkpoint_owner(store, source.checkpoint)) parent = store.run_get(*owner);
  }
  if (parent) {
    lineage.parent = parent->id;
    lineage.stage = parent->stage + 1;
  }
  return lineage;
}

Lineage lineage_of(Store& store, const std::string& checkpoint) {
  return lineage_from(store, lineage_source(checkpoint));
}

}  // namespace tfw::runner
