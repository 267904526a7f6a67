// Experiment files -> Experiment. See experiment.h and docs/experiments.md.
//
// An experiment is read in experiment_read.cpp and its runs planned in experiment_plan.cpp
// (experiment_parts.h); `extends` and file order are experiment_files.cpp's. This file puts
// them together.
#include "engine/config/experiment.h"

#include <algorithm>
#include <deque>
#include <filesystem>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "engine/config/experiment_files.h"
#include "engine/config/experiment_parts.h"
#include "engine/core/error.h"
#include "engine/plugin/registry.h"

namespace tfw {

namespace fs = std::filesystem;
using experiment_files::merge_into;
using experiment_files::read_with_extends;
using namespace experiment_parts;

namespace {

Experiment experiment_build(const Registry& registry, const toml::table& file, const Source& source) {
  ConfigTable top(file, "");
  Experiment experiment;
  experiment.path = source.name;
  read_header(top, file, source, experiment);
  top.raw_table("defaults");
  top.take("comparisons");  // read after the runs are planned: they name runs
  top.take("units");        // likewise
  ConfigTable runs = top.sub("runs");
  top.finish();

  std::map<std::string, std::vector<std::int64_t>> seeds_of;  // entry -> its seeds (for pairing children)
  // A deque keeps its elements where they are as it grows: by_name's pointers stay valid.
  std::map<std::string, const ExperimentRun*> by_name;
  std::deque<ExperimentRun> planned;
  for (const std::string& name : entries_in_order(file, runs, source.name)) {
    const Entry entry = read_entry(file, name, experiment.seeds, seeds_of);
    seeds_of[name] = entry.seeds;
    for (const Expansion& x : expand(file, entry, planned.size(), source.name)) {
      ExperimentRun run = plan_run(registry, source, entry, x, merge_run(source, entry, x), file, by_name);
      if (by_name.count(run.name)) throw UsageError(fmt::format("{}: two runs are named '{}'", source.name, run.name));
      planned.push_back(std::move(run));
      by_name[planned.back().name] = &planned.back();
    }
  }
  experiment.runs.assign(std::make_move_iterator(planned.begin()), std::make_move_iterator(planned.end()));
  // experiment.eval.blocks: a run that defines parameter blocks must define at least one of
  // those each corpus names (names it does not define are left out for it).
  for (const ExperimentRun& run : experiment.runs) {
    if (run.config.train.mask.blocks.empty()) continue;
    for (const auto& [corpus, names] : experiment.eval.blocks) {
      const bool any = names.empty() || std::any_of(names.begin(), names.end(), [&](const std::string& block) {
                         return run.config.train.mask.block(block) != nullptr;
                       });
      if (!any) {
        throw UsageError(
            with_hint(fmt::format("{}: experiment.eval.blocks evaluates {} with blocks {}, none of which run "
                                  "{} defines in train.mask.blocks",
                                  source.name, corpus, fmt::join(names, ", "), run.name),
                      "define one in the run's [train.mask.blocks], or change the eval blocks"));
      }
    }
  }
  experiment.comparisons = comparisons_read(file, experiment, source.name);
  experiment.units = units_read(file, experiment, source.name);
  return experiment;
}

}  // namespace

const ExperimentUnit& Experiment::unit(const std::string& unit_name) const {
  for (const ExperimentUnit& u : units) {
    if (u.name == unit_name) return u;
  }
  std::vector<std::string> names;
  for (const ExperimentUnit& u : units) names.push_back(u.name);
  throw UsageError(with_hint(fmt::format("{} has no unit '{}'", path.empty() ? name : path, unit_name),
                             units.empty() ? std::string("the file has no [units] table: pick runs with --only PATTERN")
                                           : fmt::format("its units: {}", fmt::join(names, ", "))));
}

toml::table experiment_merge(const std::string& path) {
  std::set<std::string> seen;
  return read_with_extends(path, seen);
}

Experiment experiment_load(const Registry& registry, const std::string& path) {
  Source source{path, fs::path(path).parent_path().string(), [&path] { return experiment_merge(path); }};
  return experiment_build(registry, experiment_merge(path), source);
}

Experiment experiment_parse(const Registry& registry, const toml::table& table, const std::string& name,
                            const std::string& base_dir) {
  if (const toml::node* extends = table["experiment"]["extends"].node()) {
    // Resolved here as a file would resolve it, against base_dir; this table wins.
    std::set<std::string> seen;
    toml::table file = experiment_files::extends_base(*extends, base_dir, name, "the experiment's folder", seen);
    // A copy has no source positions: the table's own runs come first, then the base's.
    merge_into(file, toml::table(table));
    Source source{name, base_dir, [&file] { return file; }};
    return experiment_build(registry, file, source);
  }
  // The table itself for the structure (its positions give the runs' order and errors'
  // lines); a copy per run to merge from.
  Source source{name, base_dir, [&table] { return table; }};
  return experiment_build(registry, table, source);
}

}  // namespace tfw
