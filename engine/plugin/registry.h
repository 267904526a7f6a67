// The one plugin registry (docs/design/STYLE.md 3). Plugins are shared libraries found in the
// `plugins/` folder next to the executable and in the folders of TFW_PLUGIN_PATH
// (colon-separated). Each is checked for its API version before it may register.
// Libraries are never unloaded: objects they registered live as long as the process.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/plugin/plugin_api.h"

namespace tfw {

struct PluginEntry {
  std::string name;
  std::string kind;  // "model-family" or "growth-method"
  std::string version;
  std::string path;    // the shared library it came from ("" for in-process)
  std::string origin;  // "built-in", "TFW_PLUGIN_PATH" or "in-process"
};

struct PluginRejection {
  std::string path;
  std::string reason;
};

class Registry : public PluginRegistrar {
 public:
  void add_model_family(std::shared_ptr<const ModelFamily> family) override;
  void add_growth_method(std::shared_ptr<const GrowthMethod> method) override;

  // Loads every *.so in `folder`; `origin` labels them. A missing folder is not an error.
  void load_folder(const std::string& folder, const std::string& origin);
  // Loads one library. A library that fails the checks is recorded in rejected().
  void load_file(const std::string& path, const std::string& origin);

  // Throws UsageError naming the known names when `name` is not registered.
  const ModelFamily& family(const std::string& name) const;
  const GrowthMethod& growth_method(const std::string& name) const;

  std::vector<PluginEntry> entries() const;
  const std::vector<PluginRejection>& rejected() const { return rejected_; }

 private:
  struct Family {
    std::shared_ptr<const ModelFamily> family;
    PluginEntry entry;
  };
  struct Growth {
    std::shared_ptr<const GrowthMethod> method;
    PluginEntry entry;
  };
  bool name_taken(const std::string& name, const std::string& kind) const;
  // The entry of a plugin object registering now, or nothing (and a rejection naming it as
  // `what`, e.g. "model family") when its name is taken.
  std::optional<PluginEntry> entry_new(const std::string& name, const std::string& kind, const std::string& version,
                                       const std::string& what);

  std::vector<Family> families_;
  std::vector<Growth> growth_methods_;
  std::vector<PluginRejection> rejected_;
  std::vector<std::string> loaded_folders_;  // canonical paths, each loaded once
  std::string loading_path_;                 // set while a library registers
  std::string loading_origin_;
};

// The folder holding the running executable.
std::string executable_dir();

// The process-wide registry, loaded on first use from <executable_dir>/plugins and
// TFW_PLUGIN_PATH.
Registry& registry();

}  // namespace tfw
