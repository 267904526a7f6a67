// Internal to the experiment sources (experiment.cpp, experiment_files.cpp): an experiment
// file as files, its `extends` chain applied, and tables merged by moving their nodes (which
// keeps their source positions, experiment.cpp's header says why).
#pragma once

#include <set>
#include <string>

#include <toml++/toml.h>

namespace tfw::experiment_files {

// Moves every node of `from` into `into`; tables merge key by key, anything else replaces.
void merge_into(toml::table& into, toml::table&& from);

// The experiment file with its `extends` chain applied (the extending file wins); `seen` holds
// the files read so far (a cycle is refused).
toml::table read_with_extends(const std::string& path, std::set<std::string>& seen);

}  // namespace tfw::experiment_files
