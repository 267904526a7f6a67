// Internal to the experiment sources: the pieces that experiment.cpp puts together. An
// experiment file is read for structure in experiment_read.cpp (the header, the entries in
// order, the comparisons) and each entry is planned into runs in experiment_plan.cpp (its grid
// and seeds expanded, each run's table merged, validated and costed). `extends` and file order
// are experiment_files.h's.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <toml++/toml.h>

#include "engine/config/experiment.h"
#include "engine/core/config_table.h"

namespace tfw {
class Registry;
}

namespace tfw::experiment_parts {

struct Expansion {
  std::string suffix;
  std::vector<std::pair<std::string, std::size_t>> grid;  // key, index into its values
  std::int64_t seed = -1;
};

// The most runs one experiment may plan (grids x seeds, over all its entries).
constexpr std::size_t kMaxRuns = 4096;

// One [runs.NAME] entry, read for structure: what it expands to is planned from it.
struct Entry {
  std::string name, base_config, parent, method, paper;
  std::string script;  // growth.script: the script of a `script` growth, as the file names it
  toml::table grid;
  std::vector<std::int64_t> seeds;
};

// Where the pieces of an experiment come from: a file (re-parsed for every run, so that
// errors keep file:line:col) or an in-memory table (copied; positions are those it has).
struct Source {
  std::string name;      // the file's path, or what the caller calls the table
  std::string base_dir;  // `config` and `extends` paths resolve against it
  std::function<toml::table()> fresh;
};

// ---- Reading (experiment_read.cpp).

// [experiment]: name, description, seeds, figures, eval.
void read_header(ConfigTable& top, const toml::table& file, const Source& source, Experiment& experiment);
// The [runs.NAME] entries in file order with parents before their children.
std::vector<std::string> entries_in_order(const toml::table& file, ConfigTable& runs, const std::string& where);
// An entry's keys, checked for kind and consistency with its parent; `seeds_of` holds the
// seeds of the entries read before it.
Entry read_entry(const toml::table& file, const std::string& name, const std::vector<std::int64_t>& experiment_seeds,
                 const std::map<std::string, std::vector<std::int64_t>>& seeds_of);
// [comparisons], read after the runs are planned: they name runs.
std::vector<ComparisonSpec> comparisons_read(const toml::table& file, const Experiment& experiment,
                                             const std::string& path);

// [units], read after the runs are planned: they name runs. Every run in exactly one unit.
std::vector<ExperimentUnit> units_read(const toml::table& file, const Experiment& experiment, const std::string& path);

// ---- Planning (experiment_plan.cpp).

// The entry's grid (cartesian) and seeds; `planned` runs exist already, and the total is
// held to kMaxRuns before anything is expanded.
std::vector<Expansion> expand(const toml::table& file, const Entry& entry, std::size_t planned,
                              const std::string& where);
// One run's config table, built by moves from a fresh copy of the experiment.
toml::table merge_run(const Source& source, const Entry& entry, const Expansion& x);
// One run validated, with its training plan, FLOPs and (for a stage) its growth; `by_name`
// holds the runs planned so far.
ExperimentRun plan_run(const Registry& registry, const Source& source, const Entry& entry, const Expansion& x,
                       toml::table merged, const toml::table& file,
                       const std::map<std::string, const ExperimentRun*>& by_name);

}  // namespace tfw::experiment_parts
