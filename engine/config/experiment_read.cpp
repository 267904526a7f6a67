// Reading an experiment file for structure: its header, its [runs] entries in order, and its
// comparisons. See experiment_parts.h; the runs are planned in experiment_plan.cpp.
#include "engine/config/experiment_parts.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/config/experiment_files.h"
#include "engine/config/growth_script.h"
#include "engine/core/error.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"

namespace tfw::experiment_parts {

namespace fs = std::filesystem;
using experiment_files::keys_in_file_order;

namespace {

// `seeds = [...]` of a table: distinct integers.
std::vector<std::int64_t> seeds_read(ConfigTable& check, const toml::table& table) {
  std::vector<std::int64_t> seeds;
  check.take("seeds");
  const toml::node* node = table.get("seeds");
  if (node == nullptr) return seeds;
  const toml::array* array = node->as_array();
  if (array == nullptr) check.fail("seeds", "expected an array of integers", "write seeds = [0, 1, 2]");
  // Each seed is a run: more seeds than runs allowed is refused before they are read.
  if (array->size() > kMaxRuns) {
    check.fail("seeds",
               fmt::format("{} seeds, more than the limit of {} runs in one experiment", array->size(), kMaxRuns),
               "split the study into several experiment files");
  }
  std::set<std::int64_t> seen;
  for (const toml::node& seed : *array) {
    const auto value = seed.value_exact<std::int64_t>();
    if (!value || *value < 0) check.fail("seeds", "expected an array of integers >= 0", "write seeds = [0, 1, 2]");
    if (!seen.insert(*value).second) {
      check.fail("seeds", fmt::format("seed {} is listed twice", *value), "list each seed once");
    }
    seeds.push_back(*value);
  }
  return seeds;
}

// A budget or target: a number, or "a" / "b" (that side's own final value, per seed).
void number_or_side(ConfigTable& check, const toml::table& table, const char* key, double& number, std::string& side) {
  const toml::node* node = table.get(key);
  if (node == nullptr)
    check.fail(key, "missing", fmt::format("add {} = \"b\" (that side's own final value) or a number", key));
  check.take(key);
  if (auto text = node->value_exact<std::string>()) {
    if (*text != "a" && *text != "b") check.fail(key, fmt::format("'{}' is not \"a\", \"b\" or a number", *text), "");
    side = *text;
  } else if (auto value = node->value<double>()) {
    if (!std::isfinite(*value) || *value <= 0) check.fail(key, fmt::format("must be positive, got {}", *value), "");
    number = *value;
  } else {
    check.fail(key, "expected \"a\", \"b\" or a number", "");
  }
}

}  // namespace

std::vector<ComparisonSpec> comparisons_read(const toml::table& file, const Experiment& experiment,
                                             const std::string& path) {
  std::vector<ComparisonSpec> specs;
  const toml::table* table = file["comparisons"].as_table();
  if (file.get("comparisons") != nullptr && table == nullptr) {
    throw UsageError(fmt::format("{}: comparisons: expected tables [comparisons.NAME]", path));
  }
  if (table == nullptr) return specs;
  std::set<std::string> variants;
  for (const ExperimentRun& run : experiment.runs) variants.insert(run.variant);
  for (const std::string& key : keys_in_file_order(*table)) {  // a comparison's order is the report's
    const toml::node& node = *table->get(key);
    if (!node.is_table()) {
      throw UsageError(
          fmt::format("{}: comparisons.{}: expected a table ([comparisons.{}])", config_where(node), key, key));
    }
    const toml::table& entry = *node.as_table();
    ConfigTable check(entry, "comparisons." + key);
    ComparisonSpec spec;
    spec.name = key;
    name_check(spec.name, "comparison name", path + ": comparisons");
    for (auto [side, out] : {std::pair{"a", &spec.a}, std::pair{"b", &spec.b}}) {
      *out = check.require_string(side);
      if (!variants.count(*out)) {
        check.fail(side, fmt::format("'{}' is not a run of this experiment", *out),
                   "name a [runs.NAME] entry (or a grid run's name), without its seed suffix -sN");
      }
    }
    if (spec.a == spec.b) check.fail("b", "compares a run with itself", "name two different runs");
    spec.measure = check.get_choice("measure", spec.measure, {"loss", "compute_to_reach", "forgetting"});
    spec.metric = check.get_string("metric", spec.metric);
    spec.at = check.get_choice("at", spec.at, {"end", "flops", "tokens"});
    if (spec.measure == "loss" && spec.at != "end") {
      number_or_side(check, entry, "budget", spec.budget, spec.budget_side);
    } else if (entry.get("budget") != nullptr) {
      check.fail("budget", "only a comparison at = \"flops\" or \"tokens\" takes a budget", "");
    }
    if (spec.measure == "compute_to_reach") number_or_side(check, entry, "reach", spec.reach, spec.reach_side);
    if (spec.measure == "forgetting") spec.corpus = check.require_string("corpus");
    spec.expect = check.get_choice("expect", spec.expect, {"a < b", "a > b"});
    spec.claim = check.get_string("claim", "");
    spec.paper = check.get_string("paper", "");
    check.finish();
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::vector<ExperimentUnit> units_read(const toml::table& file, const Experiment& experiment, const std::string& path) {
  const toml::node* node = file.get("units");
  if (node == nullptr) return {};
  const toml::table* table = node->as_table();
  const std::string form = "write [units] with one NAME = \"PATTERN\" a unit (docs/experiments.md)";
  if (table == nullptr) throw UsageError(with_hint(fmt::format("{}: units: expected a table", path), form));
  std::vector<std::pair<std::string, std::string>> patterns;
  for (const std::string& key : keys_in_file_order(*table)) {
    const toml::node& entry = *table->get(key);
    const auto pattern = entry.value_exact<std::string>();
    if (!pattern || pattern->empty() || pattern->size() > 200) {
      throw UsageError(with_hint(
          fmt::format("{}: units.{}: expected a glob over run names (1 to 200 characters)", config_where(entry), key),
          form));
    }
    name_check(key, "unit name", path + ": units");
    patterns.emplace_back(key, *pattern);
  }
  std::map<std::string, const ExperimentRun*> by_name;
  std::set<std::int64_t> seeds;
  for (const ExperimentRun& run : experiment.runs) {
    by_name[run.name] = &run;
    seeds.insert(run.seed);
  }
  std::map<std::string, std::string> unit_of;  // run -> the unit that trains it
  std::set<std::string> matched;               // the patterns that matched a run
  std::vector<ExperimentUnit> units;
  for (std::int64_t seed : seeds) {
    for (const auto& [key, pattern] : patterns) {
      ExperimentUnit unit{seed >= 0 ? fmt::format("{}-s{}", key, seed) : key, pattern, seed, {}};
      std::set<std::string> keep;
      for (const ExperimentRun& run : experiment.runs) {
        if (run.seed != seed || fnmatch(pattern.c_str(), run.variant.c_str(), 0) != 0) continue;
        for (const ExperimentRun* r = &run; r != nullptr; r = r->parent.empty() ? nullptr : by_name.at(r->parent)) {
          keep.insert(r->name);
        }
      }
      if (keep.empty()) continue;
      matched.insert(key);
      for (const ExperimentRun& run : experiment.runs) {
        if (!keep.count(run.name)) continue;
        auto [it, fresh] = unit_of.emplace(run.name, unit.name);
        if (!fresh) {
          throw UsageError(with_hint(
              fmt::format("{}: units: run {} is in two units, {} and {}", path, run.name, it->second, unit.name),
              "a run belongs to one unit, and a grown run's ancestors to its unit: make the patterns "
              "disjoint, and name a lineage by its last stage in one unit"));
        }
        unit.runs.push_back(run.name);
      }
      units.push_back(std::move(unit));
    }
  }
  for (const auto& [key, pattern] : patterns) {
    if (!matched.count(key)) {
      throw UsageError(with_hint(fmt::format("{}: units.{}: '{}' matches no run", path, key, pattern),
                                 "the pattern is a glob over run names without their seed suffix -sN"));
    }
  }
  for (const ExperimentRun& run : experiment.runs) {
    if (!unit_of.count(run.name)) {
      throw UsageError(with_hint(fmt::format("{}: units: run {} is in no unit", path, run.name),
                                 "every run belongs to one unit: add a pattern that matches it"));
    }
  }
  return units;
}

// [experiment]: name, description, seeds, figures.
void read_header(ConfigTable& top, const toml::table& file, const Source& source, Experiment& experiment) {
  ConfigTable header = top.sub("experiment");
  experiment.name = header.get_string("name", fs::path(source.name).stem().string());
  name_check(experiment.name, "experiment name", source.name + ": experiment.name");
  experiment.description = header.get_string("description", "");
  header.get_string("extends", "");
  header.get_string("measured", "");  // the measured wall time of the whole file, for its header
  // Seeds for every run from scratch that names none (grown runs follow their parents).
  const toml::table no_table;
  const toml::table* header_table = file["experiment"].as_table();
  experiment.seeds = seeds_read(header, header_table ? *header_table : no_table);
  const toml::table figures = header.raw_table("figures");
  ConfigTable eval = header.sub("eval");
  experiment.eval.corpora = eval.get_string_array("corpora");
  experiment.eval.cloze = eval.get_int("cloze", 0);
  if (experiment.eval.cloze < 0) eval.fail("cloze", "must be 0 (no cloze test) or more passages", "write cloze = 200");
  ConfigTable blocks = eval.sub("blocks");
  for (const auto& [key, node] : blocks.raw_self()) {
    const std::string corpus(key.str());
    if (std::find(experiment.eval.corpora.begin(), experiment.eval.corpora.end(), corpus) ==
        experiment.eval.corpora.end()) {
      blocks.fail(corpus, "is not one of experiment.eval.corpora", "list the corpus in corpora, or remove its blocks");
    }
    experiment.eval.blocks.emplace_back(corpus, blocks.get_string_array(corpus));
  }
  blocks.finish();
  eval.finish();
  if (experiment.eval.corpora.empty() && (experiment.eval.cloze > 0 || !experiment.eval.blocks.empty())) {
    eval.fail("corpora", "cloze and blocks need the corpora to evaluate", "add corpora = [\"jargon\"]");
  }
  header.finish();
  for (const std::string& kind : kFigureKinds) {
    if (const toml::node* node = figures.get(kind)) {
      const auto mirrors = node->value_exact<std::string>();
      if (!mirrors)
        header.fail("figures." + kind, "expected a string: the paper figure it mirrors", "write \"Fig. 3\" or \"\"");
      experiment.figures.emplace_back(kind, *mirrors);
    }
  }
  for (const auto& [key, node] : figures) {
    if (std::find(kFigureKinds.begin(), kFigureKinds.end(), std::string(key.str())) == kFigureKinds.end()) {
      header.fail("figures." + std::string(key.str()), "is not a figure this tool draws",
                  fmt::format("choose among: {}", fmt::join(kFigureKinds, ", ")));
    }
  }
  if (figures.empty()) experiment.figures.emplace_back("loss_vs_flops", "");
}

// The [runs.NAME] entries in file order with parents before their children.
std::vector<std::string> entries_in_order(const toml::table& file, ConfigTable& runs, const std::string& where) {
  std::vector<std::string> names;
  const toml::table no_runs;
  const toml::table* runs_table = file["runs"].as_table() ? file["runs"].as_table() : &no_runs;
  for (const std::string& key : keys_in_file_order(*runs_table)) {
    const toml::node& node = *runs_table->get(key);
    if (!node.is_table()) {
      throw UsageError(fmt::format("{}: runs.{}: expected a table ([runs.{}])", config_where(node), key, key));
    }
    names.push_back(key);
    runs.sub(key);  // marks it known
  }
  if (names.empty())
    throw UsageError(with_hint(fmt::format("{}: no runs", where), "add at least one [runs.NAME] table"));
  // Each entry is at least one run: more entries than runs allowed is refused before ordering
  // them (a 5,000-stage chain listed children first took minutes to order).
  if (names.size() > kMaxRuns) {
    throw UsageError(with_hint(fmt::format("{}: {} [runs.*] entries, more than the limit of {} runs in one experiment",
                                           where, names.size(), kMaxRuns),
                               "split the study into several experiment files"));
  }
  // In file order (above); now parents before their children.
  const toml::table& tables = *runs_table;
  std::vector<std::string> ordered;
  std::set<std::string> placed;
  while (ordered.size() < names.size()) {
    bool progress = false;
    for (const std::string& entry : names) {
      if (placed.count(entry)) continue;
      const std::string parent = tables[entry]["parent"].value_or(std::string());
      if (!parent.empty() && !placed.count(parent) && tables.contains(parent)) continue;
      ordered.push_back(entry);
      placed.insert(entry);
      progress = true;
    }
    if (!progress) throw UsageError(fmt::format("{}: the runs' parents form a cycle", where));
  }
  return ordered;
}

// An entry's keys, checked for kind and consistency with its parent.
Entry read_entry(const toml::table& file, const std::string& name, const std::vector<std::int64_t>& experiment_seeds,
                 const std::map<std::string, std::vector<std::int64_t>>& seeds_of) {
  const toml::table& structure = *file["runs"][name].as_table();
  ConfigTable check(structure, "runs." + name);
  Entry entry;
  entry.name = name;
  // The run-config keys are validated in the merged config; here only their kind.
  for (const char* key : {"family", "name", "description"}) check.get_string(key, "");
  for (const char* key : {"model", "data", "train"}) check.raw_table(key);
  entry.base_config = check.get_string("config", "");
  entry.parent = check.get_string("parent", "");
  ConfigTable growth = check.sub("growth");
  entry.method = growth.get_string("method", "");
  entry.script = growth.get_string("script", "");
  if (!entry.script.empty() && entry.method != kScriptGrowthMethod) {
    growth.fail("script",
                fmt::format("a script is run by method = \"{}\", not \"{}\"", kScriptGrowthMethod, entry.method),
                "write growth = { method = \"script\", script = \"grow.py\" }, or drop script");
  }
  growth.raw_table("options");
  growth.finish();
  entry.grid = check.raw_table("grid");
  entry.seeds = seeds_read(check, structure);
  if (entry.parent.empty() && !structure.get("seeds")) entry.seeds = experiment_seeds;  // [experiment] seeds
  entry.paper = check.get_string("paper", "");
  check.finish();
  const std::string& parent = entry.parent;
  if (!parent.empty() && !seeds_of.count(parent)) {
    check.fail("parent", fmt::format("'{}' is not a run of this experiment", parent),
               "name a [runs.NAME] table of this file");
  }
  if (!parent.empty() && entry.method.empty()) {
    check.fail("growth", "a run with a parent needs growth.method", "add growth = { method = \"pattention_grow\" }");
  }
  if (!parent.empty() && !entry.grid.empty()) {
    check.fail("grid", "a grown run cannot have a grid", "put the grid on the ladder's first stage");
  }
  if (!parent.empty() && entry.seeds.empty())
    entry.seeds = seeds_of.at(parent);  // children follow their parent's seeds
  if (!parent.empty() && entry.seeds != seeds_of.at(parent)) {
    check.fail("seeds", "a grown run must have its parent's seeds", "drop seeds here: children inherit them");
  }
  return entry;
}

}  // namespace tfw::experiment_parts
