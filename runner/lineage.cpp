// See lineage.h.
#include "runner/lineage.h"

#include <filesystem>

#include "engine/checkpoint_meta.h"
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

std::string last_checkpoint(Store& store, std::int64_t run) {
  const std::vector<CheckpointRow> rows = store.checkpoints(run);
  return rows.empty() ? "" : rows.back().path;
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

Lineage lineage_of(Store& store, const std::string& checkpoint) { return lineage_from(store, lineage_source(checkpoint)); }

}  // namespace tfw::runner
