// Experiment files (docs/experiments.md): shared defaults, named runs, growth ladders (a run
// grown from its parent's final checkpoint), grids over keys, seeds, per-stage data and
// budgets, and `extends` of another file. Loaded into a list of fully validated runs in
// dependency order, with their planned tokens and FLOPs. Every error names file:line:col.
// Torch-free.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engine/config/run_config.h"
#include "engine/config/schedule.h"

namespace tfw {

struct ExperimentRun {
  std::string name;           // unique within the experiment
  std::string parent;         // the run it grows from ("" for a run from scratch)
  std::string growth_method;  // with a parent
  toml::table growth_options;
  RunConfig config;         // validated
  std::string config_toml;  // the merged run config (what `tfw train` gets)
  TrainPlan plan;
  double flops = 0;             // this run's planned training FLOPs
  double cumulative_flops = 0;  // + its ancestors'
  std::string paper;            // a key of assets/paper_results.toml, or ""
  std::string group;            // the run entry it came from (before grid and seed expansion)
  std::string variant;          // the name without its seed suffix: runs that differ only in seed share it
  std::int64_t seed = -1;       // from `seeds` (-1: the entry has none)
};

// [comparisons.NAME] of an experiment file (docs/experiments.md): two groups of runs (a
// variant each, so all its seeds), paired by seed, and what is compared.
struct ComparisonSpec {
  std::string name;
  std::string a, b;                 // variants of this experiment
  std::string measure = "loss";     // "loss", "compute_to_reach" or "forgetting"
  std::string metric = "val/loss";  // measure = loss: the metric read
  std::string at = "end";           // measure = loss: "end", "flops" (cumulative) or "tokens" (cumulative)
  std::string budget_side;          // at = flops|tokens: "a" or "b" (that side's final value, per seed), or ""
  double budget = 0;                //   ... or this number
  std::string reach_side;           // measure = compute_to_reach: the target is that side's final loss ("a"/"b")
  double reach = 0;                 //   ... or this loss
  std::string corpus;               // measure = forgetting: the earlier corpus
  std::string expect = "a < b";     // the claimed direction of the quantity: "a < b" or "a > b"
  std::string claim, paper;         // for the report: the claim in one line, and where the paper makes it
};

// [units] of an experiment file (docs/experiments.md): the pieces the experiment is run in,
// one `tfw run --unit NAME` each, for a machine that is at hand for minutes at a time. Each
// entry is NAME = "PATTERN", a glob over run names without their seed suffix; it becomes one
// unit per seed (NAME-sN), which trains the matching runs of that seed and their ancestors.
// Every run belongs to exactly one unit, so a lineage always runs whole within one unit.
struct ExperimentUnit {
  std::string name;               // NAME-sN (NAME when the runs have no seeds)
  std::string pattern;            // the glob over run names without their seed suffix
  std::int64_t seed = -1;         // -1: runs without a seed
  std::vector<std::string> runs;  // what it trains, ancestors included, parents first
};

// [experiment.eval] (docs/experiments.md): `tfw eval` of every run's last checkpoint once it
// has trained, kept in the store's evaluations.
struct ExperimentEval {
  std::vector<std::string> corpora;  // empty: no evaluation
  std::int64_t cloze = 0;            // cloze passages per corpus (0: no cloze test)
  // corpus -> the parameter blocks (train.mask) to evaluate it with, for runs that define
  // blocks (names a run does not define are left out for it; [] is every token); a corpus
  // not listed uses the run's own train.mask.use.
  std::vector<std::pair<std::string, std::vector<std::string>>> blocks;
  bool empty() const { return corpora.empty(); }
  // The blocks for `corpus` ("" when the run's own; "all" for every token).
  const std::vector<std::string>* blocks_for(const std::string& corpus) const {
    for (const auto& [c, b] : blocks) {
      if (c == corpus) return &b;
    }
    return nullptr;
  }
};

struct Experiment {
  std::string name, description, path;
  ExperimentEval eval;
  std::vector<ExperimentRun> runs;          // parents before children
  std::vector<ComparisonSpec> comparisons;  // in file order
  std::vector<ExperimentUnit> units;        // [units]: seed by seed, each seed's in file order
  std::vector<std::int64_t> seeds;          // [experiment] seeds (empty: none set there)
  // [experiment.figures]: figure kind -> the paper figure it mirrors ("" for none), in
  // kFigureKinds order. Absent: loss_vs_flops alone.
  std::vector<std::pair<std::string, std::string>> figures;
  // The unit named `name`; throws UsageError listing the units when there is none.
  const ExperimentUnit& unit(const std::string& name) const;
};

// The figures `tfw export --figures` draws (docs/experiments.md).
inline const std::vector<std::string> kFigureKinds = {"loss_vs_flops", "new_data", "flops_vs_length", "token_use"};

// An experiment file, planned: merge (its `extends` chain, then each run's defaults, base
// config, entry, grid value and seed), expand (grids and seeds into runs) and plan (each run
// validated, with its budget, FLOPs and growth). Errors name file:line:col.
Experiment experiment_load(const Registry& registry, const std::string& path);

// The same on an in-memory table (the designer's design, a service submission): no temporary
// file. `name` stands for the file in messages and gives the default experiment name;
// `config` and `extends` paths resolve against `base_dir`.
Experiment experiment_parse(const Registry& registry, const toml::table& table, const std::string& name,
                            const std::string& base_dir);

// The experiment file with its `extends` chain applied (the extending file wins).
toml::table experiment_merge(const std::string& path);

// The experiment file as one self-contained TOML text: its `extends` chain merged in and each
// run's `config` file inlined under the run's own tables (the same precedence), so it can be
// sent to another machine (`tfw submit`) without the files it names.
std::string experiment_self_contained(const std::string& path);

}  // namespace tfw
