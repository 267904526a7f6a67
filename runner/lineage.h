// Lineage has one owner: where a grown stage's checkpoint lives, which run a checkpoint
// belongs to, and what a run started from a checkpoint inherits (parent, stage, growth
// method and options, FLOPs). `tfw grow`, `tfw train --init-from` and the batch executor
// call these; no other file knows checkpoint file names. docs/design/GROWTH.md, "Lineage".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace tfw {
class Store;
}

namespace tfw::runner {

// What a run started from a checkpoint records about where it came from.
struct Lineage {
  std::int64_t parent = 0;     // store id of the run it continues (0: none known)
  std::int64_t stage = 0;      // the parent's stage + 1 (0 without a parent)
  double inherited_flops = 0;  // the lineage's training FLOPs up to the checkpoint
  std::string growth_method;   // "" when the checkpoint was not grown
  std::string growth_options;  // TOML
};

// The folder a batch writes run `name`'s grown checkpoint to, under the experiment's work
// folder (TFW_HOME/experiments/NAME).
std::string grown_dir(const std::string& work_dir, const std::string& name);

// The grown checkpoint in `dir` (written by `tfw grow --out dir`), or nothing when growth has
// not happened (or did not complete) there.
std::optional<std::string> grown_checkpoint(const std::string& dir);

// The store id of the run that wrote `checkpoint`, if the store knows it: the parent a model
// grown from it records.
std::optional<std::int64_t> checkpoint_owner(Store& store, const std::string& checkpoint);

// The run folder `tfw train --experiment E --name N` uses (runner/recorded_run.cpp).
std::string run_dir_of(const std::string& home, const std::string& experiment, const std::string& name);

// The newest checkpoint the store holds for run `run`, or "" when it has none.
std::string last_checkpoint(Store& store, std::int64_t run);

// The checkpoint a command names: a checkpoint file; a folder `tfw grow --out` wrote (its
// checkpoint); a run folder (its newest complete checkpoint); or a run id or name in the
// store of `home` (its folder's newest). UsageError naming what was tried.
std::string checkpoint_of(const std::string& target, const std::string& home);

// What a checkpoint's metadata says about where it came from (its file is read on the
// machine that has it; the store that resolves it may be elsewhere: a service).
struct LineageSource {
  std::string checkpoint;       // absolute path, as the store records checkpoints
  std::int64_t parent_run = 0;  // the run it was grown from, when its metadata names one
  double inherited_flops = 0;   // the lineage's FLOPs up to the checkpoint (its own included)
  std::string growth_method, growth_options;
};
LineageSource lineage_source(const std::string& checkpoint);  // reads and verifies the metadata
Lineage lineage_from(Store& store, const LineageSource& source);

// The lineage of a run started from `checkpoint` (a grown one, or a plain checkpoint of
// another run): its metadata names the run it was grown from; otherwise the run that wrote
// it is the parent. Reads and verifies the checkpoint's metadata (throws UsageError).
Lineage lineage_of(Store& store, const std::string& checkpoint);

}  // namespace tfw::runner
