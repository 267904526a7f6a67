// TFW_HOME: the folder that holds the run store, checkpoints, prepared data and tokenizers.
// Resolution: the --home flag, else the TFW_HOME environment variable, else ./tfw-home.
//
// Names that become file names under it (runs, experiments) are checked here, and a process
// can be confined to a folder (TFW_CONFINE, set by the engine service for the jobs it runs):
// then every input path it opens must resolve, symlinks followed, inside that folder.
#pragma once

#include <string>

namespace tfw {

std::string home_resolve(const std::string& flag = "");
std::string home_data_dir(const std::string& home);  // <home>/data

// A run or experiment name becomes a folder and file names: letters, digits, '_', '-', '.',
// '+', '=', at most 128 characters, starting with a letter or digit (so never "..", "/" or
// a hidden file). Throws UsageError naming `what` (e.g. "run name") and `where`
// (e.g. "exp.toml: runs.x") otherwise.
void name_check(const std::string& name, const std::string& what, const std::string& where = "");
bool name_ok(const std::string& name);

// The folder this process is confined to (TFW_CONFINE), or "" when it is not confined. A
// ConfineScope confines the calling thread the same way while it lives (the service plans a
// submission so, with the rules its job will run under).
std::string confine_root();

class ConfineScope {
 public:
  explicit ConfineScope(std::string root);
  ~ConfineScope();
  ConfineScope(const ConfineScope&) = delete;
  ConfineScope& operator=(const ConfineScope&) = delete;

 private:
  std::string previous_;
};

// Throws UsageError when this process is confined and `path` (relative paths against the
// current folder) resolves outside the confinement folder. `what` names the value, e.g.
// "data.corpus".
void confine_check(const std::string& path, const std::string& what);

// Whether `path` resolves (symlinks followed, "..", made absolute) inside `root`.
bool path_inside(const std::string& path, const std::string& root);

}  // namespace tfw
