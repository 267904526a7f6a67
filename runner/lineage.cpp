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

Lineage lineage_of(Store& store, const std::string& checkpoint) {
  const CheckpointMeta origin = checkpoint_read_meta(checkpoint);
  Lineage lineage;
  lineage.inherited_flops = origin.inherited_flops + origin.flops;
  lineage.growth_method = origin.growth_method;
  lineage.growth_options = origin.growth_options;
  std::optional<RunRecord> parent;
  if (origin.parent_run != 0) parent = store.run_get(origin.parent_run);  // grown: the run it was grown from
  if (!parent) {
    if (std::optional<std::int64_t> owner = checkpoint_owner(store, checkpoint)) parent = store.run_get(*owner);
  }
  if (parent) {
    lineage.parent = parent->id;
    lineage.stage = parent->stage + 1;
  }
  return lineage;
}

}  // namespace tfw::runner
