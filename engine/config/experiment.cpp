// Experiment files -> Experiment. See experiment.h and docs/experiments.md.
//
// Source positions: toml++ drops a node's source region when it is copied, so every merged
// run table is built by MOVING nodes out of a fresh parse of the files (one parse per run),
// which keeps file:line:col in every error.
#include "engine/config/experiment.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <filesystem>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "engine/core/error.h"
#include "engine/config/experiment_files.h"
#include "engine/core/home.h"
#include "engine/plugin/registry.h"

namespace tfw {

namespace fs = std::filesystem;
using experiment_files::merge_into;
using experiment_files::keys_in_file_order;
using experiment_files::read_with_extends;

namespace {

std::string value_text(const toml::node& node) {
  if (auto number = node.value_exact<double>()) return fmt::format("{:g}", *number);
  std::ostringstream out;
  node.visit([&](auto&& value) { out << value; });
  std::string text = out.str();
  text.erase(std::remove(text.begin(), text.end(), '"'), text.end());
  text.erase(std::remove(text.begin(), text.end(), '\''), text.end());
  return text;
}

// Sets dotted `key` (e.g. "train.lr") in `table` to a moved `value`.
void set_dotted(toml::table& table, const std::string& key, toml::node&& value) {
  toml::table* current = &table;
  std::size_t start = 0;
  while (true) {
    const std::size_t dot = key.find('.', start);
    const std::string part = key.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (dot == std::string::npos) {
      value.visit([&](auto&& v) { current->insert_or_assign(part, std::move(v)); });
      return;
    }
    if (current->get(part) == nullptr) current->insert(part, toml::table{});
    current = current->get(part)->as_table();
    if (current == nullptr) throw UsageError(fmt::format("grid key '{}': '{}' is not a table", key, part));
    start = dot + 1;
  }
}

struct Expansion {
  std::string suffix;
  std::vector<std::pair<std::string, std::size_t>> grid;  // key, index into its values
  std::int64_t seed = -1;
};

// The most runs one experiment may plan (grids x seeds, over all its entries).
constexpr std::size_t kMaxRuns = 4096;

const std::vector<std::string> kRunKeys = {"family", "name", "description", "model", "data", "train"};

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
    check.fail("seeds", fmt::format("{} seeds, more than the limit of {} runs in one experiment", array->size(), kMaxRuns),
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
  if (node == nullptr) check.fail(key, "missing", fmt::format("add {} = \"b\" (that side's own final value) or a number", key));
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
      throw UsageError(fmt::format("{}: comparisons.{}: expected a table ([comparisons.{}])", config_where(node), key,
                                   key));
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

}  // namespace

namespace {

// One [runs.NAME] entry, read for structure: what it expands to is planned from it.
struct Entry {
  std::string name, base_config, parent, method, paper;
  toml::table grid;
  std::vector<std::int64_t> seeds;
};

// Where the pieces of an experiment come from: a file (re-parsed for every run, so that
// errors keep file:line:col) or an in-memory table (copied; positions are those it has).
struct Source {
  std::string name;                  // the file's path, or what the caller calls the table
  std::string base_dir;              // `config` and `extends` paths resolve against it
  std::function<toml::table()> fresh;
};

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
    if (std::find(experiment.eval.corpora.begin(), experiment.eval.corpora.end(), corpus) == experiment.eval.corpora.end()) {
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
      if (!mirrors) header.fail("figures." + kind, "expected a string: the paper figure it mirrors", "write \"Fig. 3\" or \"\"");
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
  if (names.empty()) throw UsageError(with_hint(fmt::format("{}: no runs", where), "add at least one [runs.NAME] table"));
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
  growth.raw_table("options");
  growth.finish();
  entry.grid = check.raw_table("grid");
  entry.seeds = seeds_read(check, structure);
  if (entry.parent.empty() && !structure.get("seeds")) entry.seeds = experiment_seeds;  // [experiment] seeds
  entry.paper = check.get_string("paper", "");
  check.finish();
  const std::string& parent = entry.parent;
  if (!parent.empty() && !seeds_of.count(parent)) {
    check.fail("parent", fmt::format("'{}' is not a run of this experiment", parent), "name a [runs.NAME] table of this file");
  }
  if (!parent.empty() && entry.method.empty()) {
    check.fail("growth", "a run with a parent needs growth.method", "add growth = { method = \"pattention_grow\" }");
  }
  if (!parent.empty() && !entry.grid.empty()) {
    check.fail("grid", "a grown run cannot have a grid", "put the grid on the ladder's first stage");
  }
  if (!parent.empty() && entry.seeds.empty()) entry.seeds = seeds_of.at(parent);  // children follow their parent's seeds
  if (!parent.empty() && entry.seeds != seeds_of.at(parent)) {
    check.fail("seeds", "a grown run must have its parent's seeds", "drop seeds here: children inherit them");
  }
  return entry;
}

// Expand: the entry's grid (cartesian) and seeds, within a limit: a plan is built whole, in
// memory (and by the service inside a request), so a runaway grid is refused before expanding.
std::vector<Expansion> expand(const toml::table& file, const Entry& entry, std::size_t planned, const std::string& where) {
  double count = std::max<std::size_t>(1, entry.seeds.size());
  for (const auto& [grid_key, values] : entry.grid) {
    if (const toml::array* array = values.as_array()) count *= static_cast<double>(std::max<std::size_t>(1, array->size()));
  }
  if (count + static_cast<double>(planned) > kMaxRuns) {
    throw UsageError(with_hint(fmt::format("{}: runs.{}: its grid and seeds expand to {:.0f} runs, which makes more "
                                           "than the limit of {} in one experiment", where, entry.name, count, kMaxRuns),
                               "split the study into several experiment files, or use fewer values"));
  }
  std::vector<Expansion> expansions{Expansion{}};
  for (const auto& [grid_key, values] : entry.grid) {
    const toml::array* array = values.as_array();
    if (array == nullptr || array->empty()) {
      // `grid` is a copy (no source positions): the position comes from the file's own node.
      const toml::node* original = file["runs"][entry.name]["grid"][grid_key.str()].node();
      throw UsageError(fmt::format("{}: runs.{}.grid.{}: expected a non-empty array of values",
                                   original != nullptr && original->source().begin.line > 0 ? config_where(*original)
                                                                                           : where,
                                   entry.name, grid_key.str()));
    }
    std::vector<Expansion> next;
    for (const Expansion& e : expansions) {
      for (std::size_t i = 0; i < array->size(); ++i) {
        Expansion x = e;
        const std::string full(grid_key.str());
        const std::string tail = full.substr(full.rfind('.') + 1);
        // Strings name themselves ("-softmax"); numbers need their key ("-lr0.001").
        const toml::node& value = *array->get(i);
        x.suffix += value.is_string() ? fmt::format("-{}", value_text(value)) : fmt::format("-{}{}", tail, value_text(value));
        x.grid.emplace_back(std::string(grid_key.str()), i);
        next.push_back(std::move(x));
      }
    }
    expansions = std::move(next);
  }
  if (!entry.seeds.empty()) {
    std::vector<Expansion> next;
    for (const Expansion& e : expansions) {
      for (std::int64_t seed : entry.seeds) {
        Expansion x = e;
        x.suffix += fmt::format("-s{}", seed);
        x.seed = seed;
        next.push_back(std::move(x));
      }
    }
    expansions = std::move(next);
  }
  return expansions;
}

// Merge: one run's config table, built by moves from a fresh copy of the experiment:
// defaults < base config < the entry < grid < seed.
toml::table merge_run(const Source& source, const Entry& entry, const Expansion& x) {
  toml::table fresh = source.fresh();
  toml::table merged;
  if (toml::table* defaults = fresh["defaults"].as_table()) merge_into(merged, std::move(*defaults));
  if (!entry.base_config.empty()) {
    toml::table base = config_read_file((fs::path(source.base_dir) / entry.base_config).string());
    base.erase("name");
    base.erase("description");
    merge_into(merged, std::move(base));
  }
  toml::table& own = *fresh["runs"][entry.name].as_table();
  for (const std::string& key : kRunKeys) {
    if (toml::node* node = own.get(key)) {
      if (node->is_table()) {
        toml::table piece;
        piece.insert(key, toml::table{});
        merge_into(*piece[key].as_table(), std::move(*node->as_table()));
        merge_into(merged, std::move(piece));
      } else {
        node->visit([&](auto&& value) { merged.insert_or_assign(key, std::move(value)); });
      }
    }
  }
  for (const auto& [grid_key, index] : x.grid) {
    toml::array& values = *own["grid"][std::string_view(grid_key)].as_array();
    set_dotted(merged, grid_key, std::move(*values.get(index)));
  }
  if (x.seed >= 0) {
    if (merged.get("train") == nullptr) merged.insert("train", toml::table{});
    merged["train"].as_table()->insert_or_assign("seed", x.seed);
  }
  return merged;
}

// Plan: one run validated, with its training plan, FLOPs and (for a stage) its growth.
ExperimentRun plan_run(const Registry& registry, const Source& source, const Entry& entry, const Expansion& x,
                       toml::table merged, const toml::table& file, const std::map<std::string, const ExperimentRun*>& by_name) {
  ExperimentRun run;
  run.name = entry.name + x.suffix;
  run.group = entry.name;
  run.variant = entry.name + x.suffix.substr(0, x.seed >= 0 ? x.suffix.rfind("-s") : x.suffix.size());
  run.seed = x.seed;
  const std::string where = fmt::format("{}: runs.{}", source.name, entry.name);
  name_check(run.name, "run name", where);
  const ExperimentRun* parent_run = nullptr;
  if (!entry.parent.empty()) {
    run.parent = entry.parent + (x.seed >= 0 ? fmt::format("-s{}", x.seed) : "");
    auto found = by_name.find(run.parent);
    if (found == by_name.end()) {
      throw UsageError(fmt::format("{}: parent run '{}' is not planned (a parent with a grid is ambiguous)", where,
                                   run.parent));
    }
    parent_run = found->second;
    // A grown stage is its parent's family unless it says otherwise.
    if (merged.get("family") == nullptr) merged.insert("family", parent_run->config.model.family);
  }
  merged.insert_or_assign("name", run.name);
  std::ostringstream text;
  text << merged;
  run.config_toml = text.str();
  try {
    run.config = run_config_parse(registry, merged, source.name);
    run.plan = train_plan(run.config);
  } catch (const UsageError& e) {
    // Keys the run never wrote have no position ("<config>:0:0"): say which file and run.
    std::string what = e.what();
    for (const std::string& nowhere : {std::string("<config>:0:0: "), source.name + ":0:0: ", source.name + ": "}) {
      if (what.rfind(nowhere, 0) == 0) what.erase(0, nowhere.size());
    }
    throw UsageError(fmt::format("{} (run '{}'): {}", where, run.name, what));
  }
  run.flops = run.plan.flops_per_step * static_cast<double>(run.plan.total_steps);
  run.paper = entry.paper;
  run.cumulative_flops = run.flops;
  if (parent_run != nullptr) {
    run.growth_method = entry.method;
    if (const toml::table* options = file["runs"][entry.name]["growth"]["options"].as_table()) run.growth_options = *options;
    try {
      registry.growth_method(entry.method).plan(*parent_run->config.model.spec, *run.config.model.spec, run.growth_options);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: cannot grow {} into it: {}", where, parent_run->name, e.what()));
    }
    run.cumulative_flops += parent_run->cumulative_flops;
  }
  return run;
}

Experiment experiment_build(const Registry& registry, const toml::table& file, const Source& source) {
  ConfigTable top(file, "");
  Experiment experiment;
  experiment.path = source.name;
  read_header(top, file, source, experiment);
  top.raw_table("defaults");
  top.take("comparisons");  // read after the runs are planned: they name runs
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
        throw UsageError(with_hint(fmt::format("{}: experiment.eval.blocks evaluates {} with blocks {}, none of which run "
                                               "{} defines in train.mask.blocks",
                                               source.name, corpus, fmt::join(names, ", "), run.name),
                                   "define one in the run's [train.mask.blocks], or change the eval blocks"));
      }
    }
  }
  experiment.comparisons = comparisons_read(file, experiment, source.name);
  return experiment;
}

}  // namespace

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
