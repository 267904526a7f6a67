// See experiment_files.h; and `experiment_self_contained` (experiment.h): one file, with its
// extends and run configs inlined, runs in file order.
#include "engine/config/experiment_files.h"

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "engine/core/config_table.h"
#include "engine/core/error.h"
#include "engine/config/experiment.h"

namespace tfw {

namespace fs = std::filesystem;

namespace experiment_files {

void merge_into(toml::table& into, toml::table&& from) {
  for (auto&& [key, node] : from) {
    toml::node* existing = into.get(key);
    if (existing != nullptr && existing->is_table() && node.is_table()) {
      merge_into(*existing->as_table(), std::move(*node.as_table()));
    } else {
      node.visit([&](auto&& value) { into.insert_or_assign(key, std::move(value)); });
    }
  }
}

std::vector<std::string> keys_in_file_order(const toml::table& table) {
  std::vector<std::string> keys;
  for (const auto& [key, node] : table) keys.emplace_back(key.str());
  std::stable_sort(keys.begin(), keys.end(), [&](const std::string& a, const std::string& b) {
    return table.get(a)->source().begin.line < table.get(b)->source().begin.line;
  });
  return keys;
}

toml::table extends_base(const toml::node& extends, const std::string& base_dir, const std::string& where,
                         const std::string& relative_to, std::set<std::string>& seen) {
  auto base_name = extends.value<std::string>();
  if (!base_name) throw UsageError(fmt::format("{}: experiment.extends: expected a file name (string)", where));
  const std::string base_path = (fs::path(base_dir) / *base_name).string();
  if (!fs::exists(base_path)) {
    throw UsageError(with_hint(fmt::format("{}: experiment.extends: '{}' not found", where, base_path),
                               "paths are relative to " + relative_to));
  }
  toml::table base = read_with_extends(base_path, seen);
  if (toml::table* experiment = base["experiment"].as_table()) experiment->erase("name");  // the name is the extender's
  return base;
}

// The experiment file with its `extends` chain applied (the extending file wins).
toml::table read_with_extends(const std::string& path, std::set<std::string>& seen) {
  const std::string canonical = fs::weakly_canonical(path).string();
  if (seen.count(canonical)) throw UsageError(fmt::format("{}: `extends` forms a cycle", path));
  seen.insert(canonical);
  toml::table table = config_read_file(path);
  const toml::node* extends = table["experiment"]["extends"].node();
  if (extends == nullptr) return table;
  toml::table base =
      extends_base(*extends, fs::path(path).parent_path().string(), config_where(*extends), "the extending file", seen);
  merge_into(base, std::move(table));
  return base;
}

}  // namespace experiment_files

using experiment_files::keys_in_file_order;
using experiment_files::merge_into;
using experiment_files::read_with_extends;

std::string experiment_self_contained(const std::string& path) {
  std::set<std::string> seen;
  toml::table file = read_with_extends(path, seen);
  if (toml::table* experiment = file["experiment"].as_table()) {
    experiment->erase("extends");
    if (!experiment->contains("name")) experiment->insert("name", fs::path(path).stem().string());
  } else {
    file.insert("experiment", toml::table{{"name", fs::path(path).stem().string()}});
  }
  // Runs in file order (keys_in_file_order).
  std::vector<std::string> order;
  if (toml::table* runs = file["runs"].as_table()) {
    order = keys_in_file_order(*runs);
    for (auto&& [name, node] : *runs) {
      toml::table* run = node.as_table();
      if (run == nullptr) continue;
      auto config = (*run)["config"].value<std::string>();
      if (!config) continue;
      const std::string config_path = (fs::path(path).parent_path() / *config).string();
      if (!fs::exists(config_path)) {
        throw UsageError(with_hint(fmt::format("{}: runs.{}.config: '{}' not found", path, name.str(), config_path),
                                   "paths are relative to the experiment file"));
      }
      toml::table merged = config_read_file(config_path);
      merged.erase("name");  // a config file's name is not the run's
      merged.erase("description");
      run->erase("config");
      merge_into(merged, std::move(*run));
      *run = std::move(merged);
    }
  }
  toml::table runs;
  if (toml::node* node = file.get("runs"); node && node->is_table()) runs = std::move(*node->as_table());
  file.erase("runs");
  std::ostringstream out;
  out << file << "\n";
  for (const std::string& name : order) {
    toml::table one;
    toml::table wrapper;
    runs.get(name)->visit([&](auto&& value) { one.insert(name, std::move(value)); });
    wrapper.insert("runs", std::move(one));
    out << "\n" << wrapper << "\n";
  }
  return out.str();
}

}  // namespace tfw
