// Planning an experiment's runs: each entry's grid and seeds expanded, each run's config
// merged from the files, validated, and costed. See experiment_parts.h.
//
// Source positions: toml++ drops a node's source region when it is copied, so every merged
// run table is built by MOVING nodes out of a fresh parse of the files (one parse per run),
// which keeps file:line:col in every error.
#include "engine/config/experiment_parts.h"

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
using experiment_files::merge_into;

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

const std::vector<std::string> kRunKeys = {"family", "name", "description", "model", "data", "train"};

}  // namespace

// Expand: the entry's grid (cartesian) and seeds, within a limit: a plan is built whole, in
// memory (and by the service inside a request), so a runaway grid is refused before expanding.
std::vector<Expansion> expand(const toml::table& file, const Entry& entry, std::size_t planned,
                              const std::string& where) {
  double count = std::max<std::size_t>(1, entry.seeds.size());
  for (const auto& [grid_key, values] : entry.grid) {
    if (const toml::array* array = values.as_array())
      count *= static_cast<double>(std::max<std::size_t>(1, array->size()));
  }
  if (count + static_cast<double>(planned) > kMaxRuns) {
    throw UsageError(with_hint(fmt::format("{}: runs.{}: its grid and seeds expand to {:.0f} runs, which makes more "
                                           "than the limit of {} in one experiment",
                                           where, entry.name, count, kMaxRuns),
                               "split the study into several experiment files, or use fewer values"));
  }
  std::vector<Expansion> expansions{Expansion{}};
  for (const auto& [grid_key, values] : entry.grid) {
    const toml::array* array = values.as_array();
    if (array == nullptr || array->empty()) {
      // `grid` is a copy (no source positions): the position comes from the file's own node.
      const toml::node* original = file["runs"][entry.name]["grid"][grid_key.str()].node();
      throw UsageError(
          fmt::format("{}: runs.{}.grid.{}: expected a non-empty array of values",
                      original != nullptr && original->source().begin.line > 0 ? config_where(*original) : where,
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
        x.suffix +=
            value.is_string() ? fmt::format("-{}", value_text(value)) : fmt::format("-{}{}", tail, value_text(value));
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
                       toml::table merged, const toml::table& file,
                       const std::map<std::string, const ExperimentRun*>& by_name) {
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
      throw UsageError(
          fmt::format("{}: parent run '{}' is not planned (a parent with a grid is ambiguous)", where, run.parent));
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
    if (const toml::table* options = file["runs"][entry.name]["growth"]["options"].as_table())
      run.growth_options = *options;
    try {
      if (entry.method == kScriptGrowthMethod) {
        // The script by absolute path and content: a changed script is a changed config.
        if (!entry.script.empty()) run.growth_options.insert_or_assign("script", entry.script);
        growth_script_pin(run.growth_options, source.base_dir);
      }
      registry.growth_method(entry.method)
          .plan(*parent_run->config.model.spec, *run.config.model.spec, run.growth_options);
    } catch (const UsageError& e) {
      throw UsageError(fmt::format("{}: cannot grow {} into it: {}", where, parent_run->name, e.what()));
    }
    run.cumulative_flops += parent_run->cumulative_flops;
  }
  return run;
}

}  // namespace tfw::experiment_parts
