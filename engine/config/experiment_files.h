// Internal to the experiment sources (experiment.cpp, experiment_files.cpp): an experiment
// file as files, its `extends` chain applied, and tables merged by moving their nodes (which
// keeps their source positions, experiment.cpp's header says why).
#pragma once

#include <set>
#include <string>
#include <vector>

#include <toml++/toml.h>

namespace tfw::experiment_files {

// Moves every node of `from` into `into`; tables merge key by key, anything else replaces.
void merge_into(toml::table& into, toml::table&& from);

// The keys of `table` in the order its file wrote them: toml++ keeps a table's keys sorted,
// and an experiment's order says what runs first. A table made in memory has no positions,
// and keeps its sorted order.
std::vector<std::string> keys_in_file_order(const toml::table& table);

// The table that `extends` (the value of experiment.extends) names, a path relative to
// `base_dir`, with its own chain applied and its name dropped (the extender's is kept). Errors
// start with `where` and their hint says the path is relative to `relative_to`.
toml::table extends_base(const toml::node& extends, const std::string& base_dir, const std::string& where,
                         const std::string& relative_to, std::set<std::string>& seen);

// The experiment file with its `extends` chain applied (the extending file wins); `seen` holds
// the files read so far (a cycle is refused).
toml::table read_with_extends(const std::string& path, std::set<std::string>& seen);

}  // namespace tfw::experiment_files
