// Experiment files (docs/experiments.md): shared defaults, named runs, growth ladders (a run
// grown from its parent's final checkpoint), grids over keys, seeds, per-stage data and
// budgets, and `extends` of another file. Loaded into a list of fully validated runs in
// dependency order, with their planned tokens and FLOPs. Every error names file:line:col.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/run_config.h"
#include "engine/train/schedule.h"

namespace tfw {

struct ExperimentRun {
  std::string name;              // unique within the experiment
  std::string parent;            // the run it grows from ("" for a run from scratch)
  std::string growth_method;     // with a parent
  toml::table growth_options;
  RunConfig config;              // validated
  std::string config_toml;       // the merged run config (what `tfw train` gets)
  TrainPlan plan;
  double flops = 0;              // this run's planned training FLOPs
  double cumulative_flops = 0;   // + its ancestors'
  std::string paper;             // a key of assets/paper_results.toml, or ""
  std::string group;             // the run entry it came from (before grid and seed expansion)
};

struct Experiment {
  std::string name, description, path;
  std::vector<ExperimentRun> runs;  // parents before children
};

Experiment experiment_load(const Registry& registry, const std::string& path);

// The experiment file as one self-contained TOML text: its `extends` chain merged in and each
// run's `config` file inlined under the run's own tables (the same precedence), so it can be
// sent to another machine (`tfw submit`) without the files it names.
std::string experiment_self_contained(const std::string& path);

}  // namespace tfw
